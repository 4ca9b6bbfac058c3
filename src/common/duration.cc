#include "sluice/common/duration.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

namespace sluice {

Result<Duration> ParseDuration(std::string_view text) {
  const auto bad = [&] {
    return MakeError(ErrorCode::kInvalidArgument,
                     "bad duration '" + std::string(text) +
                         "': want a number and a unit (ns, us, ms, s, m, h), e.g. 250ms or 1.5s");
  };
  size_t split = 0;
  while (split < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[split])) || text[split] == '.')) {
    ++split;
  }
  if (split == 0 || split == text.size()) return bad();
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + split, value);
  if (ec != std::errc() || end != text.data() + split) return bad();
  const std::string_view unit = text.substr(split);
  double scale = 0;
  if (unit == "ns") {
    scale = 1;
  } else if (unit == "us") {
    scale = 1e3;
  } else if (unit == "ms") {
    scale = 1e6;
  } else if (unit == "s") {
    scale = 1e9;
  } else if (unit == "m") {
    scale = 60e9;
  } else if (unit == "h") {
    scale = 3600e9;
  } else {
    return bad();
  }
  const double ns = std::round(value * scale);
  // Below Duration's limit (about 292 years) with room, so the cast below cannot overflow.
  if (!(ns < 9e18)) return bad();
  return Duration(static_cast<Duration::rep>(ns));
}

}  // namespace sluice
