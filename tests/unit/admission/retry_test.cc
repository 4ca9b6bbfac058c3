#include <gtest/gtest.h>

#include <deque>
#include <random>

#include "sluice/admission/retry_budget.h"
#include "sluice/admission/retry_rule.h"

namespace sluice::admission {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(RetryBudgetTest, FloorAllowsRetriesWithNoRequests) {
  ManualClock clock;
  RetryBudget budget({.ratio = 0.1, .min_retries_per_second = 10}, clock);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(budget.TryWithdrawRetry()) << i;
  EXPECT_FALSE(budget.TryWithdrawRetry());
}

TEST(RetryBudgetTest, AllowsAboutTenPercentOfRequests) {
  ManualClock clock;
  RetryBudget budget({.ratio = 0.1, .min_retries_per_second = 0}, clock);
  for (int i = 0; i < 1000; ++i) budget.RecordRequest();
  EXPECT_DOUBLE_EQ(budget.Balance(), 100);
  int allowed = 0;
  while (budget.TryWithdrawRetry()) ++allowed;
  EXPECT_EQ(allowed, 100);
  EXPECT_DOUBLE_EQ(budget.Balance(), 0);
}

TEST(RetryBudgetTest, RequestsAndRetriesSlideOutOfTheWindow) {
  ManualClock clock;
  RetryBudget budget({.ratio = 0.1, .min_retries_per_second = 0}, clock);
  for (int i = 0; i < 100; ++i) budget.RecordRequest();
  clock.Advance(seconds(9));
  EXPECT_DOUBLE_EQ(budget.Balance(), 10);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(budget.TryWithdrawRetry());
  EXPECT_FALSE(budget.TryWithdrawRetry());
  clock.Advance(seconds(1));  // the requests are 10 s old: gone
  EXPECT_DOUBLE_EQ(budget.Balance(), -10);
  EXPECT_FALSE(budget.TryWithdrawRetry());
  clock.Advance(seconds(10));  // and so are the retries
  EXPECT_DOUBLE_EQ(budget.Balance(), 0);
}

// Property: whenever a retry is allowed, the retries in the window (it included) do not exceed
// ratio x requests in the window + floor x window. Checked against an independent model.
TEST(RetryBudgetPropertyTest, NeverAllowsMoreThanRatioPlusFloor) {
  ManualClock clock;
  const RetryBudgetOptions options{
      .ratio = 0.1, .min_retries_per_second = 2, .window = seconds(10), .buckets = 10};
  RetryBudget budget(options, clock);
  std::mt19937_64 rng(5);
  struct Event {
    int64_t bucket;
    bool retry;
  };
  std::deque<Event> events;
  int64_t withdrawn = 0;
  int64_t refused = 0;
  for (int step = 0; step < 100'000; ++step) {
    clock.Advance(milliseconds(rng() % 3));
    const int64_t bucket = clock.Now().time_since_epoch() / seconds(1);
    while (!events.empty() && events.front().bucket <= bucket - 10) events.pop_front();
    // Bursts of failures: some seconds want many retries, most want few.
    const bool storm = (bucket / 7) % 3 == 0;
    if (rng() % (storm ? 2 : 20) == 0) {
      if (!budget.TryWithdrawRetry()) {
        ++refused;
        continue;
      }
      events.push_back({bucket, true});
      ++withdrawn;
      int64_t requests = 0;
      int64_t retries = 0;
      for (const Event& e : events) (e.retry ? retries : requests) += 1;
      ASSERT_LE(static_cast<double>(retries), 0.1 * static_cast<double>(requests) + 2 * 10 + 1e-9)
          << "step " << step;
    } else {
      budget.RecordRequest();
      events.push_back({bucket, false});
    }
  }
  EXPECT_GT(withdrawn, 1000);
  EXPECT_GT(refused, 1000);
}

class RetryRuleTest : public ::testing::Test {
 protected:
  RetryContext Context() {
    RetryContext context;
    context.attempts = 1;
    context.idempotent = true;
    context.error = &connect_refused_;
    context.deadline = Deadline::After(clock_, milliseconds(300));
    context.clock = &clock_;
    context.attempt_needs = milliseconds(20) + milliseconds(30);
    context.budget = &budget_;
    return context;
  }

  ManualClock clock_;
  RetryBudget budget_{{.ratio = 0.1, .min_retries_per_second = 0.1}, clock_};  // one retry
  Error connect_refused_{
      ErrorCode::kUnavailable, "connect refused", "", std::nullopt, true, std::nullopt};
  Error timed_out_{ErrorCode::kDeadlineExceeded, "timeout", "", std::nullopt, false, std::nullopt};
};

TEST_F(RetryRuleTest, RetriesAPreSendConnectFailureOnce) {
  EXPECT_EQ(ShouldRetry(Context()), RetryVerdict::kRetry);
  RetryContext second = Context();
  second.attempts = 2;
  EXPECT_EQ(ShouldRetry(second), RetryVerdict::kAttemptsExhausted);
}

TEST_F(RetryRuleTest, NeverRetriesATimeout) {
  RetryContext context = Context();
  context.error = &timed_out_;
  EXPECT_EQ(ShouldRetry(context), RetryVerdict::kMaybeSent);
  // Even one claiming never_sent: a deadline means we stopped waiting, not that nothing left.
  Error odd = timed_out_;
  odd.never_sent = true;
  context.error = &odd;
  EXPECT_EQ(ShouldRetry(context), RetryVerdict::kMaybeSent);
}

TEST_F(RetryRuleTest, NeverRetriesAFailureThatMayHaveBeenSent) {
  RetryContext context = Context();
  Error reset{ErrorCode::kUnavailable, "reset after send", "", std::nullopt, false, std::nullopt};
  context.error = &reset;
  EXPECT_EQ(ShouldRetry(context), RetryVerdict::kMaybeSent);
}

TEST_F(RetryRuleTest, NeverRetriesANonIdempotentCall) {
  RetryContext create = Context();
  create.idempotent = false;
  EXPECT_EQ(ShouldRetry(create), RetryVerdict::kNotIdempotent);
}

TEST_F(RetryRuleTest, NeedsRoomForTheWholeSecondAttempt) {
  RetryContext context = Context();
  clock_.Advance(milliseconds(250));  // exactly 50 ms left: enough
  EXPECT_EQ(ShouldRetry(context), RetryVerdict::kRetry);
  context = Context();
  clock_.Advance(milliseconds(251));  // 49 ms left, the attempt needs 50
  EXPECT_EQ(ShouldRetry(context), RetryVerdict::kNoTimeLeft);
}

TEST_F(RetryRuleTest, SpendsTheBudgetOnlyWhenItRetries) {
  RetryContext create = Context();
  create.idempotent = false;
  for (int i = 0; i < 10; ++i) EXPECT_NE(ShouldRetry(create), RetryVerdict::kRetry);
  EXPECT_EQ(ShouldRetry(Context()), RetryVerdict::kRetry);  // the one retry was still there
  EXPECT_EQ(ShouldRetry(Context()), RetryVerdict::kBudgetExhausted);
}

TEST_F(RetryRuleTest, WorksWithoutABudget) {
  RetryContext context = Context();
  context.budget = nullptr;
  EXPECT_EQ(ShouldRetry(context), RetryVerdict::kRetry);
}

TEST(RetryVerdictTest, NamesAreDistinct) {
  EXPECT_STREQ(RetryVerdictName(RetryVerdict::kRetry), "retry");
  EXPECT_STREQ(RetryVerdictName(RetryVerdict::kBudgetExhausted), "budget_exhausted");
  EXPECT_STREQ(RetryVerdictName(RetryVerdict::kNoTimeLeft), "no_time_left");
}

}  // namespace
}  // namespace sluice::admission
