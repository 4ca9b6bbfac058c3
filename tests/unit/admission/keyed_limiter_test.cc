#include "sluice/admission/keyed_limiter.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::admission {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

KeyedLimiterOptions CreateLimits(size_t max_keys = 1000, size_t shards = 4) {
  KeyedLimiterOptions options;
  options.policies = {{.rate_per_second = 1, .burst = 10},
                      {.rate_per_second = 100'000, .burst = 2'000'000}};
  options.max_keys = max_keys;
  options.shards = shards;
  return options;
}

TEST(KeyedLimiterTest, KeysHaveIndependentBuckets) {
  ManualClock clock;
  KeyedLimiter limiter(CreateLimits(), clock);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(limiter.TryTake("1.2.3.4").allowed());
  EXPECT_FALSE(limiter.TryTake("1.2.3.4").allowed());
  EXPECT_TRUE(limiter.TryTake("5.6.7.8").allowed());
}

TEST(KeyedLimiterTest, RefusalNamesTheDimensionAndSpendsNeither) {
  ManualClock clock;
  KeyedLimiter limiter(CreateLimits(), clock);
  ASSERT_TRUE(limiter.TryTake("k", 1, 1'500'000).allowed());
  const KeyedDecision refused = limiter.TryTake("k", 1, 1'000'000);
  EXPECT_FALSE(refused.allowed());
  EXPECT_EQ(refused.refused_dimension, 1);
  EXPECT_EQ(refused.decision.retry_after, seconds(5));
  const KeyedBudget budget = limiter.Peek("k");
  EXPECT_DOUBLE_EQ(budget.available[0], 9);  // the byte refusal burned no count token
  EXPECT_DOUBLE_EQ(budget.available[1], 500'000);
}

TEST(KeyedLimiterTest, CountRefusalIsDimensionZeroWithRetryAfter) {
  ManualClock clock;
  KeyedLimiter limiter(CreateLimits(), clock);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(limiter.TryTake("k", 1, 10).allowed());
  const KeyedDecision refused = limiter.TryTake("k", 1, 10);
  EXPECT_EQ(refused.refused_dimension, 0);
  EXPECT_EQ(refused.decision.retry_after, seconds(1));
  clock.Advance(seconds(1));
  EXPECT_TRUE(limiter.TryTake("k", 1, 10).allowed());
}

TEST(KeyedLimiterTest, PeekSpendsNothingAndAddsNoKey) {
  ManualClock clock;
  KeyedLimiter limiter(CreateLimits(), clock);
  const KeyedBudget unknown = limiter.Peek("never-seen");
  EXPECT_DOUBLE_EQ(unknown.available[0], 10);
  EXPECT_DOUBLE_EQ(unknown.available[1], 2'000'000);
  EXPECT_EQ(limiter.size(), 0u);
  ASSERT_TRUE(limiter.TryTake("k", 3, 0).allowed());
  EXPECT_DOUBLE_EQ(limiter.Peek("k").available[0], 7);
  EXPECT_DOUBLE_EQ(limiter.Peek("k").available[0], 7);
}

TEST(KeyedLimiterTest, RefundRestoresATakeRefusedElsewhere) {
  ManualClock clock;
  KeyedLimiter limiter(CreateLimits(), clock);
  ASSERT_TRUE(limiter.TryTake("k", 1, 1000).allowed());
  limiter.Refund("k", 1, 1000);
  EXPECT_DOUBLE_EQ(limiter.Peek("k").available[0], 10);
  EXPECT_DOUBLE_EQ(limiter.Peek("k").available[1], 2'000'000);
  limiter.Refund("absent", 1, 1);  // nothing to do, nothing added
  EXPECT_EQ(limiter.size(), 1u);
}

TEST(KeyedLimiterTest, SinglePolicyIgnoresTheSecondAmount) {
  ManualClock clock;
  KeyedLimiterOptions options;
  options.policies = {{.rate_per_second = 50, .burst = 50}};
  KeyedLimiter limiter(options, clock);
  EXPECT_TRUE(limiter.TryTake("k", 1, 1e12).allowed());
}

TEST(KeyedLimiterTest, AFloodOfNewKeysCannotGrowPastMaxKeys) {
  ManualClock clock;
  KeyedLimiter limiter(CreateLimits(/*max_keys=*/200, /*shards=*/4), clock);
  for (int i = 0; i < 20'000; ++i) {
    (void)limiter.TryTake("flood-" + std::to_string(i));
    ASSERT_LE(limiter.size(), 200u);
  }
  EXPECT_GE(limiter.debtor_evictions() + limiter.expired(), 20'000u - 200u);
}

TEST(KeyedLimiterTest, IdleKeysExpireOnceRefilled) {
  ManualClock clock;
  KeyedLimiter limiter(CreateLimits(/*max_keys=*/1000, /*shards=*/1), clock);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(limiter.TryTake("old-" + std::to_string(i)).allowed());
  EXPECT_EQ(limiter.size(), 100u);
  clock.Advance(seconds(1));  // each old key took 1 at 1/s: refilled now
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(limiter.TryTake("new-" + std::to_string(i)).allowed());
  // Each insert forgets up to two refilled keys: all 100 old ones are gone after 50 inserts.
  EXPECT_EQ(limiter.size(), 60u);
  EXPECT_EQ(limiter.expired(), 100u);
  EXPECT_EQ(limiter.debtor_evictions(), 0u);
}

TEST(KeyedLimiterTest, KeysStillOwingTokensDoNotExpire) {
  ManualClock clock;
  KeyedLimiter limiter(CreateLimits(/*max_keys=*/1000, /*shards=*/1), clock);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(limiter.TryTake("debtor").allowed());
  clock.Advance(seconds(5));  // half refilled
  for (int i = 0; i < 10; ++i) (void)limiter.TryTake("other-" + std::to_string(i));
  EXPECT_DOUBLE_EQ(limiter.Peek("debtor").available[0], 5);
}

TEST(KeyedLimiterTest, FullTableEvictsARefilledKeyBeforeADebtor) {
  ManualClock clock;
  KeyedLimiter limiter(CreateLimits(/*max_keys=*/2, /*shards=*/1), clock);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(limiter.TryTake("debtor").allowed());  // oldest
  ASSERT_TRUE(limiter.TryTake("light").allowed());
  clock.Advance(seconds(1));  // "light" is full again, "debtor" is at 1
  // The opportunistic sweep only looks at the coldest key (a debtor); the eviction scan finds
  // "light" behind it.
  ASSERT_TRUE(limiter.TryTake("newcomer").allowed());
  EXPECT_EQ(limiter.debtor_evictions(), 0u);
  EXPECT_DOUBLE_EQ(limiter.Peek("debtor").available[0], 1);
}

TEST(KeyedLimiterTest, BusyKeyKeepsItsDebtThroughAFloodBetweenItsRequests) {
  ManualClock clock;
  KeyedLimiter limiter(CreateLimits(/*max_keys=*/100, /*shards=*/1), clock);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(limiter.TryTake("abuser").allowed());
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 90; ++i) (void)limiter.TryTake("flood-" + std::to_string(round * 90 + i));
    // The abuser keeps hammering; every request (refused ones too) keeps its key warm.
    EXPECT_FALSE(limiter.TryTake("abuser").allowed()) << round;
  }
}

TEST(KeyedLimiterTest, DebtorPushedOutByAFloodReturnsWithAFullBucket) {
  // The documented trade-off: past max_keys of fresh keys between two requests, a debt is
  // forgotten. Counted so an operator sees it.
  ManualClock clock;
  KeyedLimiter limiter(CreateLimits(/*max_keys=*/100, /*shards=*/1), clock);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(limiter.TryTake("quiet-debtor").allowed());
  for (int i = 0; i < 200; ++i) {
    for (int j = 0; j < 10; ++j) (void)limiter.TryTake("flood-" + std::to_string(i));
  }
  EXPECT_GT(limiter.debtor_evictions(), 0u);
  EXPECT_DOUBLE_EQ(limiter.Peek("quiet-debtor").available[0], 10);
}

TEST(KeyedLimiterTest, KeysDoNotCollideAcrossShards) {
  ManualClock clock;
  KeyedLimiter limiter(CreateLimits(/*max_keys=*/100'000, /*shards=*/16), clock);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(limiter.TryTake("k" + std::to_string(i), 10, 0).allowed());
  }
  for (int i = 0; i < 1000; ++i) {
    ASSERT_FALSE(limiter.TryTake("k" + std::to_string(i), 1, 0).allowed());
  }
  EXPECT_EQ(limiter.size(), 1000u);
}

}  // namespace
}  // namespace sluice::admission
