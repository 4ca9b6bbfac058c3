// Time sources. Everything that decides by time takes a Clock& so tests can drive it by hand.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace sluice {

using Duration = std::chrono::nanoseconds;
using TimePoint = std::chrono::steady_clock::time_point;

/// A monotonic clock for limits and deadlines, plus wall time for expiry dates.
/// Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  /// Monotonic time: never goes back, unrelated to the calendar.
  virtual TimePoint Now() const = 0;
  /// Seconds since the Unix epoch, for expiry dates that must survive a restart.
  virtual int64_t UnixSeconds() const = 0;
};

/// The real clocks of the machine.
class SystemClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  int64_t UnixSeconds() const override {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  /// One shared instance; the clock has no state.
  static SystemClock& Instance() {
    static SystemClock clock;
    return clock;
  }
};

/// A clock that moves only when told to. Thread-safe, so stress tests can share one.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t unix_seconds = 1'700'000'000) : unix_seconds_(unix_seconds) {}
  TimePoint Now() const override { return TimePoint(Duration(now_ns_.load())); }
  int64_t UnixSeconds() const override { return unix_seconds_ + now_ns_.load() / 1'000'000'000; }
  void Advance(Duration d) { now_ns_.fetch_add(d.count()); }

 private:
  const int64_t unix_seconds_;
  std::atomic<int64_t> now_ns_{0};
};

}  // namespace sluice
