// Timers made from a Clock, so whatever waits (a call's timeout, a render's timeout, a retry's
// pause, a background loop's interval, a pool's waiter) waits on the clock that also decides. On
// SystemClock they are Asio steady timers; on a ManualClock they ring when a test advances the
// clock past them, and nothing waits on real time (docs/overload.md, "Time in tests").
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <functional>
#include <memory>

#include "sluice/common/clock.h"

namespace sluice::asio_glue {

/// One wait at a time on `clock`, completing on `executor`. Thread-safe: Cancel may come from any
/// thread (a render's worker thread ends the race against its timeout).
class Timer {
 public:
  /// `clock` must outlive the timer.
  Timer(const Clock& clock, boost::asio::any_io_executor executor);
  /// Ends a pending wait as Cancel does.
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  /// Calls `done(true)` on the executor once the clock reaches `at`, or `done(false)` if Cancel
  /// (or the destructor) comes first; exactly once. A new wait replaces a pending one, which is
  /// then cancelled.
  void AsyncWaitUntil(TimePoint at, std::function<void(bool reached)> done);
  /// Ends the pending wait, if any, with done(false).
  void Cancel();

  /// Suspends the calling coroutine until the clock reaches `at` (true) or Cancel (false).
  boost::asio::awaitable<bool> WaitUntil(TimePoint at);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

/// Suspends the calling coroutine for `d` on `clock`.
boost::asio::awaitable<void> SleepFor(const Clock& clock, Duration d);

}  // namespace sluice::asio_glue
