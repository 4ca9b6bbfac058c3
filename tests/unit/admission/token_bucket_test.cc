#include "sluice/admission/token_bucket.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace sluice::admission {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST(TokenBucketTest, StartsFullAndAdmitsExactlyTheBurst) {
  ManualClock clock;
  TokenBucket bucket({.rate_per_second = 1, .burst = 10}, clock);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(bucket.TryTake().allowed) << i;
  EXPECT_FALSE(bucket.TryTake().allowed);
}

TEST(TokenBucketTest, FractionalRateStillAdmitsTheWholeBurstOneByOne) {
  // 350/s: one token is 2.857... ms, which rounding must not turn into nine tokens out of ten.
  ManualClock clock;
  TokenBucket bucket({.rate_per_second = 350, .burst = 10}, clock);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(bucket.TryTake().allowed) << i;
  EXPECT_FALSE(bucket.TryTake().allowed);
}

TEST(TokenBucketTest, RefillsContinuouslyNotPerWindow) {
  ManualClock clock;
  TokenBucket bucket({.rate_per_second = 4, .burst = 4}, clock);
  EXPECT_TRUE(bucket.TryTake(4).allowed);
  clock.Advance(milliseconds(250));
  EXPECT_NEAR(bucket.Available(), 1.0, 1e-9);
  EXPECT_TRUE(bucket.TryTake().allowed);
  EXPECT_FALSE(bucket.TryTake().allowed);
}

TEST(TokenBucketTest, NeverHoldsMoreThanTheBurst) {
  ManualClock clock;
  TokenBucket bucket({.rate_per_second = 100, .burst = 5}, clock);
  clock.Advance(seconds(3600));
  EXPECT_DOUBLE_EQ(bucket.Available(), 5);
}

TEST(TokenBucketTest, DrainedHoldsOnlyWhatRefillsAfter) {
  ManualClock clock;
  TokenBucket bucket({.rate_per_second = 10, .burst = 10}, clock);
  bucket.Drain();
  EXPECT_DOUBLE_EQ(bucket.Available(), 0);
  EXPECT_FALSE(bucket.TryTake().allowed);
  clock.Advance(milliseconds(300));
  EXPECT_NEAR(bucket.Available(), 3, 1e-9);
  bucket.Drain();  // what refilled before goes too
  clock.Advance(milliseconds(100));
  EXPECT_TRUE(bucket.TryTake().allowed);
  EXPECT_FALSE(bucket.TryTake().allowed);
}

TEST(TokenBucketTest, RetryAfterIsExactlyHowLongUntilTheTokensExist) {
  ManualClock clock;
  TokenBucket bucket({.rate_per_second = 2, .burst = 2}, clock);
  ASSERT_TRUE(bucket.TryTake(2).allowed);
  const TakeDecision refused = bucket.TryTake(1);
  EXPECT_FALSE(refused.allowed);
  EXPECT_FALSE(refused.exceeds_burst);
  EXPECT_EQ(refused.retry_after, milliseconds(500));
  clock.Advance(refused.retry_after - nanoseconds(1000));
  EXPECT_FALSE(bucket.TryTake(1).allowed);
  clock.Advance(nanoseconds(1000));
  EXPECT_TRUE(bucket.TryTake(1).allowed);
}

TEST(TokenBucketTest, WaitingTheAdvertisedRetryAfterAlwaysSucceeds) {
  ManualClock clock;
  TokenBucket bucket({.rate_per_second = 350, .burst = 7}, clock);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const double n = 1 + static_cast<double>(rng() % 7);
    TakeDecision decision = bucket.TryTake(n);
    if (!decision.allowed) {
      clock.Advance(decision.retry_after);
      EXPECT_TRUE(bucket.TryTake(n).allowed) << i;
    }
    clock.Advance(nanoseconds(rng() % 3'000'000));
  }
}

TEST(TokenBucketTest, TakeLargerThanBurstCanNeverSucceedAndSaysSo) {
  ManualClock clock;
  TokenBucket bucket({.rate_per_second = 100'000, .burst = 2'000'000}, clock);
  const TakeDecision decision = bucket.TryTake(2'000'001);
  EXPECT_FALSE(decision.allowed);
  EXPECT_TRUE(decision.exceeds_burst);
  EXPECT_EQ(decision.retry_after, Duration::max());
  EXPECT_DOUBLE_EQ(bucket.Available(), 2'000'000);
}

TEST(TokenBucketTest, RefusedTakeSpendsNothing) {
  ManualClock clock;
  TokenBucket bucket({.rate_per_second = 1, .burst = 10}, clock);
  ASSERT_TRUE(bucket.TryTake(7).allowed);
  EXPECT_FALSE(bucket.TryTake(4).allowed);
  EXPECT_TRUE(bucket.TryTake(3).allowed);
}

TEST(TokenBucketTest, PeekAndAvailableSpendNothing) {
  ManualClock clock;
  TokenBucket bucket({.rate_per_second = 1, .burst = 3}, clock);
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(bucket.Peek(3).allowed);
    EXPECT_DOUBLE_EQ(bucket.Available(), 3);
  }
  ASSERT_TRUE(bucket.TryTake(3).allowed);
  const TakeDecision peek = bucket.Peek(1);
  EXPECT_FALSE(peek.allowed);
  EXPECT_EQ(peek.retry_after, seconds(1));
}

TEST(TokenBucketTest, RetryAfterSecondsRoundsUpToAtLeastOne) {
  EXPECT_EQ((TakeDecision{false, milliseconds(1), false}.RetryAfterSeconds()), 1);
  EXPECT_EQ((TakeDecision{false, milliseconds(1001), false}.RetryAfterSeconds()), 2);
  EXPECT_EQ((TakeDecision{false, seconds(3), false}.RetryAfterSeconds()), 3);
  EXPECT_EQ((TakeDecision{true, Duration::zero(), false}.RetryAfterSeconds()), 0);
  EXPECT_GT((TakeDecision{false, Duration::max(), true}.RetryAfterSeconds()), 1'000'000);
}

TEST(TokenBucketTest, RefundGivesBackButNeverAboveTheBurst) {
  ManualClock clock;
  TokenBucket bucket({.rate_per_second = 1, .burst = 10}, clock);
  ASSERT_TRUE(bucket.TryTake(6).allowed);
  bucket.Refund(6);
  EXPECT_DOUBLE_EQ(bucket.Available(), 10);
  bucket.Refund(6);
  EXPECT_DOUBLE_EQ(bucket.Available(), 10);
}

TEST(TokenBucketTest, PolicyIsReadableAndChangeable) {
  ManualClock clock;
  TokenBucket bucket({.rate_per_second = 350, .burst = 350}, clock);
  EXPECT_DOUBLE_EQ(bucket.policy().rate_per_second, 350);
  bucket.SetPolicy({.rate_per_second = 87.5, .burst = 100});
  EXPECT_DOUBLE_EQ(bucket.policy().rate_per_second, 87.5);
  EXPECT_DOUBLE_EQ(bucket.Available(), 100);
}

TEST(TokenBucketTest, TakeBothSpendsNeitherWhenTheSecondRefuses) {
  ManualClock clock;
  TokenBucket count({.rate_per_second = 1, .burst = 10}, clock);
  TokenBucket bytes({.rate_per_second = 100'000, .burst = 2'000'000}, clock);
  ASSERT_TRUE(bytes.TryTake(1'500'000).allowed);
  const auto result = TokenBucket::TryTakeBoth(count, 1, bytes, 1'000'000);
  EXPECT_FALSE(result.decision.allowed);
  EXPECT_FALSE(result.refused_first);
  EXPECT_EQ(result.decision.retry_after, seconds(5));
  EXPECT_DOUBLE_EQ(count.Available(), 10);  // no count token burned
}

TEST(TokenBucketTest, TakeBothSpendsNeitherWhenTheFirstRefuses) {
  ManualClock clock;
  TokenBucket count({.rate_per_second = 1, .burst = 1}, clock);
  TokenBucket bytes({.rate_per_second = 100, .burst = 100}, clock);
  ASSERT_TRUE(count.TryTake().allowed);
  const auto result = TokenBucket::TryTakeBoth(count, 1, bytes, 50);
  EXPECT_FALSE(result.decision.allowed);
  EXPECT_TRUE(result.refused_first);
  EXPECT_DOUBLE_EQ(bytes.Available(), 100);
}

TEST(TokenBucketTest, TakeBothSpendsBothWhenBothAllow) {
  ManualClock clock;
  TokenBucket count({.rate_per_second = 1, .burst = 10}, clock);
  TokenBucket bytes({.rate_per_second = 100, .burst = 100}, clock);
  EXPECT_TRUE(TokenBucket::TryTakeBoth(count, 1, bytes, 40).decision.allowed);
  EXPECT_DOUBLE_EQ(count.Available(), 9);
  EXPECT_DOUBLE_EQ(bytes.Available(), 60);
}

TEST(TokenBucketTest, CannotAdmitTwiceTheLimitAcrossASecondBoundary) {
  // The fixed-window failure: 10 at 0.999 s and 10 more at 1.001 s. A bucket with burst 10 at
  // 10/s admits the first 10, then about 0 more two milliseconds later.
  ManualClock clock;
  TokenBucket bucket({.rate_per_second = 10, .burst = 10}, clock);
  clock.Advance(milliseconds(999));
  int admitted = 0;
  for (int i = 0; i < 20; ++i) admitted += bucket.TryTake().allowed;
  clock.Advance(milliseconds(2));
  for (int i = 0; i < 20; ++i) admitted += bucket.TryTake().allowed;
  EXPECT_EQ(admitted, 10);
}

// Property: over any window [t_i, t_j] the admitted tokens never exceed burst + rate x window.
void CheckNeverAboveBurstPlusRate(TokenBucketPolicy policy, uint64_t seed) {
  ManualClock clock;
  TokenBucket bucket(policy, clock);
  std::mt19937_64 rng(seed);
  std::vector<double> times;
  std::vector<double> prefix{0};
  const TimePoint start = clock.Now();
  for (int i = 0; i < 3000; ++i) {
    // Bursty arrivals: mostly close together, sometimes a long gap.
    const int64_t gap_ns = (rng() % 10 == 0) ? static_cast<int64_t>(rng() % 2'000'000'000)
                                             : static_cast<int64_t>(rng() % 5'000'000);
    clock.Advance(nanoseconds(gap_ns));
    const double n = 1 + static_cast<double>(rng() % static_cast<uint64_t>(policy.burst));
    if (bucket.TryTake(n).allowed) {
      times.push_back(static_cast<double>((clock.Now() - start).count()) * 1e-9);
      prefix.push_back(prefix.back() + n);
    }
  }
  ASSERT_GT(times.size(), 100u);
  for (size_t i = 0; i < times.size(); ++i) {
    for (size_t j = i; j < times.size(); ++j) {
      const double admitted = prefix[j + 1] - prefix[i];
      const double bound = policy.burst + policy.rate_per_second * (times[j] - times[i]);
      ASSERT_LE(admitted, bound + 1e-6) << "window " << i << ".." << j;
    }
  }
}

TEST(TokenBucketPropertyTest, NeverAdmitsMoreThanBurstPlusRateTimesWindow) {
  CheckNeverAboveBurstPlusRate({.rate_per_second = 1, .burst = 10}, 1);
  CheckNeverAboveBurstPlusRate({.rate_per_second = 350, .burst = 20}, 2);
  CheckNeverAboveBurstPlusRate({.rate_per_second = 0.3, .burst = 3}, 3);
  CheckNeverAboveBurstPlusRate({.rate_per_second = 1000, .burst = 1}, 4);
}

}  // namespace
}  // namespace sluice::admission
