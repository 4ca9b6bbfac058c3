#include "polite_wait.h"

#include <algorithm>
#include <random>
#include <string>

namespace sluice::app {

namespace {
/// Jitter added to a Retry-After, as a fraction of it.
constexpr double kRetryAfterJitter = 0.2;
}  // namespace

std::optional<Duration> ParseMaxWait(std::string_view text) {
  if (auto d = ParseDuration(text); d.ok()) return *d;
  if (text.empty() || text.find_first_not_of("0123456789.") != std::string_view::npos) {
    return std::nullopt;
  }
  auto d = ParseDuration(std::string(text) + "s");
  if (!d.ok()) return std::nullopt;
  return *d;
}

std::optional<Duration> PoliteWait(int retry_after_seconds, Duration waited, Duration max_wait,
                                   admission::Jitter& jitter) {
  const Duration asked = std::chrono::seconds(std::max(1, retry_after_seconds));
  const Duration left = max_wait - waited;
  if (asked > left) return std::nullopt;
  const Duration jittered =
      asked + jitter.Between(Duration::zero(),
                             std::chrono::duration_cast<Duration>(asked * kRetryAfterJitter));
  return std::min(jittered, left);
}

admission::Jitter FreshJitter() {
  std::random_device device;
  return admission::Jitter((static_cast<uint64_t>(device()) << 32) ^ device());
}

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace sluice::app
