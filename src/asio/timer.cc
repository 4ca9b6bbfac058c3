#include "sluice/asio/timer.h"

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <mutex>
#include <optional>

#include "sluice/asio/completion.h"

namespace sluice::asio_glue {

namespace {

// One wait on a ManualClock: whichever of the alarm and Cancel claims it first completes it.
struct ManualWait {
  ManualWait(asio::any_io_executor ex, std::function<void(bool)> d)
      : executor(ex), work(asio::make_work_guard(ex)), done(std::move(d)) {}
  void Complete(bool reached) {
    if (claimed.exchange(true)) return;
    // Posted, never called inline: the alarm rings on the thread that advanced the clock, and the
    // waiter must resume on its own executor.
    asio::post(executor, [done = std::move(done), reached] { done(reached); });
    work.reset();
  }
  asio::any_io_executor executor;
  // A pending wait is outstanding work, as a steady timer's is.
  asio::executor_work_guard<asio::any_io_executor> work;
  std::function<void(bool)> done;
  std::atomic<bool> claimed{false};
  ManualClock::AlarmId alarm = 0;
};

}  // namespace

struct Timer::State {
  State(const Clock& c, asio::any_io_executor ex) : clock(c), executor(std::move(ex)) {
    if (clock.manual() == nullptr) steady.emplace(executor);
  }
  const Clock& clock;
  const asio::any_io_executor executor;
  // Serialises every use of `steady` (an Asio timer is not safe to touch from two threads) and of
  // `pending`.
  std::mutex mu;
  std::optional<asio::steady_timer> steady;
  std::shared_ptr<ManualWait> pending;

  void CancelLocked() {
    if (steady) {
      steady->cancel();
      return;
    }
    if (!pending) return;
    std::shared_ptr<ManualWait> wait = std::move(pending);
    // Dropped before completing, so a later Advance cannot ring it; if it is ringing now, the
    // claim decides which outcome the waiter sees.
    clock.manual()->CancelAlarm(wait->alarm);
    wait->Complete(false);
  }
};

Timer::Timer(const Clock& clock, asio::any_io_executor executor)
    : state_(std::make_shared<State>(clock, std::move(executor))) {}

Timer::~Timer() { Cancel(); }

void Timer::AsyncWaitUntil(TimePoint at, std::function<void(bool reached)> done) {
  std::lock_guard lock(state_->mu);
  if (state_->steady) {
    state_->steady->expires_at(at);  // cancels a pending wait
    state_->steady->async_wait(
        [done = std::move(done)](const boost::system::error_code& ec) { done(!ec); });
    return;
  }
  state_->CancelLocked();
  auto wait = std::make_shared<ManualWait>(state_->executor, std::move(done));
  state_->pending = wait;
  // The alarm holds the wait, not the timer: a timer destroyed first has cancelled it.
  wait->alarm = state_->clock.manual()->SetAlarm(at, [wait] { wait->Complete(true); });
}

void Timer::Cancel() {
  std::lock_guard lock(state_->mu);
  state_->CancelLocked();
}

asio::awaitable<bool> Timer::WaitUntil(TimePoint at) {
  // Not a coroutine: see RunBlocking in include/sluice/asio/completion.h.
  return AwaitCompletion<bool>([this, at](Completion<bool> completion) {
    auto shared = std::make_shared<Completion<bool>>(std::move(completion));
    AsyncWaitUntil(at, [shared](bool reached) { (*shared)(reached); });
  });
}

asio::awaitable<void> SleepFor(const Clock& clock, Duration d) {
  Timer timer(clock, co_await asio::this_coro::executor);
  auto waiting = timer.WaitUntil(clock.Now() + d);
  (void)co_await std::move(waiting);
}

}  // namespace sluice::asio_glue
