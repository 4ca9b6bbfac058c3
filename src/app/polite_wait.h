// The client side of the retry rule that `sluice paste`, `get` and `delete` share
// (docs/overload.md, "Retries, breakers, timeouts"): a 429 or 503 that names a Retry-After was
// refused before anything happened, so it is waited out and sent again, at least what the server
// asked plus up to 20% jitter (so refused clients do not come back as one wave), and only while
// the total wait stays within --max-wait.
#pragma once

#include <optional>
#include <string_view>

#include "sluice/admission/jitter.h"
#include "sluice/common/duration.h"

namespace sluice::app {

/// --max-wait: "60s", "250ms" (ParseDuration), or a bare number of seconds ("0", "10", "1.5").
std::optional<Duration> ParseMaxWait(std::string_view text);

/// The pause before sending again after a refusal that asked for `retry_after_seconds` (floored
/// at one second, so "Retry-After: 0" cannot make a busy loop), with `waited` spent of
/// `max_wait`: the asked time plus jitter, trimmed to what is left but never below what was
/// asked. Nothing when what was asked is past what is left.
std::optional<Duration> PoliteWait(int retry_after_seconds, Duration waited, Duration max_wait,
                                   admission::Jitter& jitter);

/// A Jitter seeded from the system's random device: each run of the CLI draws its own.
admission::Jitter FreshJitter();

double Seconds(Duration d);

}  // namespace sluice::app
