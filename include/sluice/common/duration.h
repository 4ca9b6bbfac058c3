// Durations as people write them in settings and flags: "250ms", "1.5s", "500us". Shared by the
// settings of `sluice serve`, `sluice plan --latency`, `sluice paste` and the fault plans, so it
// lives here rather than in any one module.
#pragma once

#include <string_view>

#include "sluice/common/clock.h"
#include "sluice/common/result.h"

namespace sluice {

/// Parses a number (decimals allowed) followed by one unit: ns, us, ms, s, m or h, e.g. "5s",
/// "250ms", "1.5s", "500us", "2m", "1h". Kept to the nanosecond, rounded to the nearest one.
/// kInvalidArgument, with a message quoting the text and the units, for anything else: a missing
/// or unknown unit, a sign, spaces, exponents, or a value too large for a Duration.
Result<Duration> ParseDuration(std::string_view text);

}  // namespace sluice
