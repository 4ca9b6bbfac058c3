#include "sluice/service/dependency.h"

#include <gtest/gtest.h>

#include <boost/asio/steady_timer.hpp>

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

TEST_F(DependencyTest, TimeoutsDoNotOpenTheBreaker) {
  for (int i = 0; i < 8; ++i) (void)Call({"get", std::chrono::milliseconds(5), true}, Hang());
  EXPECT_EQ(dep_.breaker_state(), admission::BreakerState::kClosed);
}

}  // namespace
}  // namespace sluice::service
