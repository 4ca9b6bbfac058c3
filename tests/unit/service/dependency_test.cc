#include "sluice/service/dependency.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>

#include "../../support/run_sync.h"

namespace sluice::service {
namespace {

using admission::Deadline;
using boost::asio::awaitable;
using testing::RunSync;

// Outcomes are checked, never how long anything took; the real clock only drives timers.
class DependencyTest : public ::testing::Test {
 protected:
  const Clock& clock_ = SystemClock::Instance();
  MetricsRegistry metrics_;
  admission::RetryBudget budget_{admission::RetryBudgetOptions{}, clock_};
  Dependency dep_{"meta", clock_, metrics_, budget_, admission::CircuitBreakerOptions{}};
  int calls_ = 0;

  std::function<awaitable<Result<int>>(Deadline)> Answer(Result<int> answer) {
    return [this, answer](Deadline) -> awaitable<Result<int>> {
      ++calls_;
      co_return answer;
    };
  }
  std::function<awaitable<Result<int>>(Deadline)> Hang() {
    return [this](Deadline) -> awaitable<Result<int>> {
      ++calls_;
      boost::asio::steady_timer forever(co_await boost::asio::this_coro::executor);
      forever.expires_after(std::chrono::milliseconds(300));  // far past the call's timeout
      co_await forever.async_wait(boost::asio::use_awaitable);
      co_return 7;
    };
  }
  static Error Refused() {
    Error e = MakeError(ErrorCode::kUnavailable, "connect refused", "connection_refused");
    e.never_sent = true;
    return e;
  }
  Result<int> Call(CallPolicy policy, std::function<awaitable<Result<int>>(Deadline)> attempt,
                   Duration budget = std::chrono::seconds(2)) {
    return RunSync(dep_.Call<int>(policy, Deadline::After(clock_, budget), std::move(attempt)));
  }
};

TEST_F(DependencyTest, AnswersAreReturnedAsTheyCame) {
  EXPECT_EQ(*Call({"get", std::chrono::seconds(1), true}, Answer(41)), 41);
  auto missing = Call({"get", std::chrono::seconds(1), true},
                      Answer(MakeError(ErrorCode::kNotFound, "no", "not_found")));
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(calls_, 2);
}

TEST_F(DependencyTest, ASlowCallIsAbandonedAtItsTimeoutAndNeverRetried) {
  auto r = Call({"get", std::chrono::milliseconds(20), true}, Hang());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kDeadlineExceeded);
  EXPECT_EQ(calls_, 1);
}

TEST_F(DependencyTest, TheRequestDeadlineCapsTheCallTimeout) {
  auto r = Call({"get", std::chrono::seconds(60), true}, Hang(), std::chrono::milliseconds(20));
  EXPECT_EQ(r.error().code, ErrorCode::kDeadlineExceeded);
}

TEST_F(DependencyTest, ARefusedIdempotentCallIsRetriedOnceOnly) {
  auto r = Call({"get", std::chrono::milliseconds(100), true}, Answer(Refused()));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(calls_, 2);
}

TEST_F(DependencyTest, ARefusedCreateCallIsNeverRetried) {
  auto r = Call({"insert", std::chrono::milliseconds(100), false}, Answer(Refused()));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(calls_, 1);
}

TEST_F(DependencyTest, AnErrorAfterSendingIsNotRetried) {
  auto r = Call({"get", std::chrono::milliseconds(100), true},
                Answer(MakeError(ErrorCode::kUnavailable, "reset", "injected_error")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(calls_, 1);
}

TEST_F(DependencyTest, RefusalsOpenTheBreakerAndThenNothingReachesTheStore) {
  for (int i = 0; i < 5; ++i)
    (void)Call({"insert", std::chrono::milliseconds(100), false}, Answer(Refused()));
  EXPECT_EQ(dep_.breaker_state(), admission::BreakerState::kOpen);
  const int before = calls_;
  auto r = Call({"get", std::chrono::milliseconds(100), true}, Answer(1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().reason, "breaker_open");
  ASSERT_TRUE(r.error().retry_after_seconds.has_value());
  EXPECT_EQ(calls_, before);
}

// A breaker opened by a primary failing over says so: the 503 is the failover's, not an outage's.
TEST_F(DependencyTest, ABreakerOpenedByAFailoverAnswersPrimaryFailover) {
  Error failover = Refused();
  failover.reason = std::string(store::kPrimaryFailover);
  for (int i = 0; i < 5; ++i)
    (void)Call({"insert", std::chrono::milliseconds(100), false}, Answer(failover));
  EXPECT_EQ(dep_.breaker_state(), admission::BreakerState::kOpen);
  auto r = Call({"get", std::chrono::milliseconds(100), true}, Answer(1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(r.error().reason, store::kPrimaryFailover);
  ASSERT_TRUE(r.error().retry_after_seconds.has_value());
}

TEST_F(DependencyTest, TimeoutsDoNotOpenTheBreaker) {
  for (int i = 0; i < 8; ++i) (void)Call({"get", std::chrono::milliseconds(5), true}, Hang());
  EXPECT_EQ(dep_.breaker_state(), admission::BreakerState::kClosed);
}

// A server stopped at once (SIGTERM right after start) destroys its loop with calls in flight. The
// caller of each must then be freed with the loop, not kept alive by the race it waits on: the race
// holds the caller's completion, and the caller's frame holds the race. `alive` is held by the
// caller's frame only; it expires once that frame is destroyed.
class DependencyShutdownTest : public DependencyTest {
 protected:
  // Spawns a caller of `attempt` on `io`, which stops the loop first when `stop_first`.
  std::weak_ptr<int> SpawnCaller(boost::asio::io_context& io,
                                 std::function<awaitable<Result<int>>(Deadline)> attempt,
                                 bool stop_first) {
    auto alive = std::make_shared<int>(0);
    std::weak_ptr<int> watch = alive;
    boost::asio::co_spawn(
        io,
        [this, &io, alive = std::move(alive), attempt = std::move(attempt),
         stop_first]() mutable -> awaitable<void> {
          auto held = std::move(alive);
          if (stop_first) io.stop();
          auto call =
              dep_.Call<int>({"get", std::chrono::seconds(60), true},
                             Deadline::After(clock_, std::chrono::seconds(60)), std::move(attempt));
          (void)co_await std::move(call);
        },
        boost::asio::detached);
    return watch;
  }
};

TEST_F(DependencyShutdownTest, ACallWhoseAttemptNeverStartedIsFreedWithItsLoop) {
  // The loop stops while the caller waits and before the attempt's coroutine, posted to its
  // strand, first runs: the stop-at-once window.
  std::weak_ptr<int> caller;
  {
    boost::asio::io_context io;
    caller = SpawnCaller(io, Hang(), /*stop_first=*/true);
    io.run();
    EXPECT_EQ(calls_, 0) << "the attempt started: the test missed the window it is about";
    EXPECT_FALSE(caller.expired());  // the caller is waiting
  }
  EXPECT_TRUE(caller.expired()) << "the caller's frame outlived its loop: it leaked";
}

TEST_F(DependencyShutdownTest, ACallWhoseAttemptNeverAnswersIsFreedWithItsLoop) {
  std::weak_ptr<int> caller;
  {
    boost::asio::io_context io;
    caller = SpawnCaller(io, Hang(), /*stop_first=*/false);
    while (calls_ == 0 && io.run_one() > 0) {
    }
    ASSERT_EQ(calls_, 1);  // the attempt waits on its timer, which the loop's end cancels
    EXPECT_FALSE(caller.expired());
  }
  EXPECT_TRUE(caller.expired()) << "the caller's frame outlived its loop: it leaked";
}

}  // namespace
}  // namespace sluice::service
