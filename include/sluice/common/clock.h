// Time sources. Everything that decides by time takes a Clock& so tests can drive it by hand, and
// everything that waits makes its timers from the same Clock (include/sluice/asio/timer.h), so a
// ManualClock drives the waits too: docs/overload.md, "Time in tests".
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

namespace sluice {

class ManualClock;

using Duration = std::chrono::nanoseconds;

/// A duration in seconds, for rates and other arithmetic in floating point.
inline double ToSeconds(Duration d) { return static_cast<double>(d.count()) * 1e-9; }
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
  /// Non-null when time moves only by hand: waits then ring on its alarms instead of the machine's
  /// timers. Kept free of Asio so the admission library (built without Boost for the TSan run)
  /// can include this header; include/sluice/asio/timer.h makes timers of either kind.
  virtual const ManualClock* manual() const { return nullptr; }
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
///
/// It also keeps alarms, the waits of timers made from it (include/sluice/asio/timer.h): an alarm
/// rings when Advance moves time to or past it, on the thread that called Advance. The alarm
/// methods are const because every holder of a clock only reads its time; the alarms are not time.
class ManualClock final : public Clock {
 public:
  using AlarmId = uint64_t;

  explicit ManualClock(int64_t unix_seconds = 1'700'000'000) : unix_seconds_(unix_seconds) {}
  TimePoint Now() const override { return TimePoint(Duration(now_ns_.load())); }
  int64_t UnixSeconds() const override { return unix_seconds_ + now_ns_.load() / 1'000'000'000; }
  const ManualClock* manual() const override { return this; }

  /// Moves time forward, then rings every alarm now due, earliest first, outside the lock (a
  /// ringing alarm may set or cancel others).
  void Advance(Duration d) {
    now_ns_.fetch_add(d.count());
    for (;;) {
      std::function<void()> ring;
      {
        std::lock_guard lock(alarms_mu_);
        auto it = alarms_.begin();
        if (it == alarms_.end() || it->first.first > Now()) return;
        ring = std::move(it->second);
        alarms_.erase(it);
      }
      ring();
    }
  }

  /// Calls `ring` once Now() reaches `at`: at once, on this thread, if it already has; otherwise
  /// from the Advance that gets there. Returns the id CancelAlarm takes.
  AlarmId SetAlarm(TimePoint at, std::function<void()> ring) const {
    AlarmId id = 0;
    {
      std::lock_guard lock(alarms_mu_);
      id = ++last_alarm_;
      if (at > Now()) {
        alarms_.emplace(std::make_pair(at, id), std::move(ring));
        return id;
      }
    }
    ring();
    return id;
  }

  /// Drops an alarm that has not rung. False if it already rang (or is ringing) or was dropped.
  bool CancelAlarm(AlarmId id) const {
    std::lock_guard lock(alarms_mu_);
    for (auto it = alarms_.begin(); it != alarms_.end(); ++it) {
      if (it->first.second == id) {
        alarms_.erase(it);
        return true;
      }
    }
    return false;
  }

  /// Alarms waiting to ring: tests see that nothing still waits, or that something does.
  size_t PendingAlarms() const {
    std::lock_guard lock(alarms_mu_);
    return alarms_.size();
  }

  /// When the earliest pending alarm rings, if any: lets a test advance exactly to it.
  std::optional<TimePoint> NextAlarm() const {
    std::lock_guard lock(alarms_mu_);
    if (alarms_.empty()) return std::nullopt;
    return alarms_.begin()->first.first;
  }

 private:
  const int64_t unix_seconds_;
  std::atomic<int64_t> now_ns_{0};
  mutable std::mutex alarms_mu_;
  // Ordered by time, then by when they were set, so alarms due together ring in order.
  mutable std::map<std::pair<TimePoint, AlarmId>, std::function<void()>> alarms_;
  mutable AlarmId last_alarm_ = 0;
};

}  // namespace sluice
