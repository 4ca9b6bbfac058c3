#include "sluice/admission/adaptive_concurrency_limiter.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace sluice::admission {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

AdaptiveConcurrencyOptions Options(int64_t initial = 10) {
  return AdaptiveConcurrencyOptions{.initial_limit = initial,
                                    .min_limit = 2,
                                    .max_limit = 20,
                                    .target_latency = milliseconds(100),
                                    .backoff_ratio = 0.9,
                                    .max_bytes = 1000};
}

std::vector<Permit> AcquireN(SlotLimiter& limiter, int n) {
  std::vector<Permit> permits;
  for (int i = 0; i < n; ++i) {
    AcquireResult result = limiter.TryAcquire(0);
    EXPECT_TRUE(result.ok()) << i;
    if (result.ok()) permits.push_back(std::move(*result.permit));
  }
  return permits;
}

TEST(AdaptiveConcurrencyLimiterTest, RefusesPastTheInitialLimit) {
  ManualClock clock;
  AdaptiveConcurrencyLimiter limiter(Options(), clock);
  std::vector<Permit> held = AcquireN(limiter, 10);
  EXPECT_EQ(limiter.TryAcquire(0).refusal, SlotRefusal::kCount);
  EXPECT_FALSE(limiter.TryAcquire(0).ok());
}

TEST(AdaptiveConcurrencyLimiterTest, GrowsByOnePerFastSuccessWhileBusy) {
  ManualClock clock;
  AdaptiveConcurrencyLimiter limiter(Options(), clock);
  std::vector<Permit> held = AcquireN(limiter, 8);
  clock.Advance(milliseconds(10));
  held[0].Done(Outcome::kSuccess);
  EXPECT_EQ(limiter.limit(), 11);
  held[1].Done(Outcome::kSuccess);
  EXPECT_EQ(limiter.limit(), 12);
}

TEST(AdaptiveConcurrencyLimiterTest, DoesNotGrowALimitItIsNotUsing) {
  ManualClock clock;
  AdaptiveConcurrencyLimiter limiter(Options(), clock);
  for (int i = 0; i < 100; ++i) {
    AcquireResult result = limiter.TryAcquire(0);
    result.permit->Done(Outcome::kSuccess);
  }
  EXPECT_EQ(limiter.limit(), 10);
}

TEST(AdaptiveConcurrencyLimiterTest, NeverGrowsPastMax) {
  ManualClock clock;
  AdaptiveConcurrencyLimiter limiter(Options(), clock);
  for (int round = 0; round < 30; ++round) {
    std::vector<Permit> held = AcquireN(limiter, static_cast<int>(limiter.limit()));
    for (Permit& p : held) p.Done(Outcome::kSuccess);
  }
  EXPECT_EQ(limiter.limit(), 20);
}

TEST(AdaptiveConcurrencyLimiterTest, BacksOffMultiplicativelyOnTimeout) {
  ManualClock clock;
  AdaptiveConcurrencyLimiter limiter(Options(), clock);
  AcquireResult result = limiter.TryAcquire(0);
  result.permit->Done(Outcome::kTimeout);
  EXPECT_EQ(limiter.limit(), 9);
}

TEST(AdaptiveConcurrencyLimiterTest, SlowSuccessAndDropsCountAsOverload) {
  ManualClock clock;
  AdaptiveConcurrencyLimiter limiter(Options(20), clock);
  AcquireResult slow = limiter.TryAcquire(0);
  clock.Advance(milliseconds(101));
  slow.permit->Done(Outcome::kSuccess);
  EXPECT_EQ(limiter.limit(), 18);
  clock.Advance(milliseconds(1));
  AcquireResult dropped = limiter.TryAcquire(0);
  dropped.permit->Done(Outcome::kDropped);
  EXPECT_EQ(limiter.limit(), 16);
}

TEST(AdaptiveConcurrencyLimiterTest, CallerMeasuredLatencyWinsOverTimeHeld) {
  // The permit was held 2 s while a slow client uploaded, but the PUT itself took 10 ms.
  ManualClock clock;
  AdaptiveConcurrencyLimiter limiter(Options(2), clock);
  std::vector<Permit> held = AcquireN(limiter, 2);
  clock.Advance(seconds(2));
  held[0].Done(Outcome::kSuccess, milliseconds(10));
  EXPECT_EQ(limiter.limit(), 3);
}

TEST(AdaptiveConcurrencyLimiterTest, ACohortTimingOutTogetherBacksOffOnce) {
  ManualClock clock;
  AdaptiveConcurrencyLimiter limiter(Options(20), clock);
  std::vector<Permit> cohort = AcquireN(limiter, 20);
  clock.Advance(seconds(1));
  for (Permit& p : cohort) p.Done(Outcome::kTimeout);
  EXPECT_EQ(limiter.limit(), 18);
  // A permit acquired after that decrease can cause the next one.
  clock.Advance(milliseconds(1));
  AcquireResult later = limiter.TryAcquire(0);
  later.permit->Done(Outcome::kTimeout);
  EXPECT_EQ(limiter.limit(), 16);
}

TEST(AdaptiveConcurrencyLimiterTest, NeverShrinksBelowMin) {
  ManualClock clock;
  AdaptiveConcurrencyLimiter limiter(Options(), clock);
  for (int i = 0; i < 100; ++i) {
    clock.Advance(milliseconds(1));
    AcquireResult result = limiter.TryAcquire(0);
    ASSERT_TRUE(result.ok());
    result.permit->Done(Outcome::kTimeout);
  }
  EXPECT_EQ(limiter.limit(), 2);
}

TEST(AdaptiveConcurrencyLimiterTest, UnreportedPermitTeachesNothing) {
  ManualClock clock;
  AdaptiveConcurrencyLimiter limiter(Options(), clock);
  {
    std::vector<Permit> held = AcquireN(limiter, 10);
    clock.Advance(seconds(10));
  }
  EXPECT_EQ(limiter.limit(), 10);
  EXPECT_EQ(limiter.Gauges().in_use, 0);
}

TEST(AdaptiveConcurrencyLimiterTest, KeepsAFixedByteCap) {
  ManualClock clock;
  AdaptiveConcurrencyLimiter limiter(Options(), clock);
  AcquireResult big = limiter.TryAcquire(900);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(limiter.TryAcquire(101).refusal, SlotRefusal::kBytes);
  BytesLease lease = big.permit->HandOffBytes(Outcome::kTimeout);
  EXPECT_EQ(limiter.Gauges().bytes_in_use, 900);
  EXPECT_EQ(limiter.Gauges().in_use, 0);
}

TEST(AdaptiveConcurrencyLimiterTest, UsableWhereverTheStaticOneIs) {
  ManualClock clock;
  std::vector<std::unique_ptr<SlotLimiter>> limiters;
  limiters.push_back(std::make_unique<ConcurrencyLimiter>(
      ConcurrencyLimiterOptions{.max_count = 3, .max_bytes = 1000}, clock));
  limiters.push_back(std::make_unique<AdaptiveConcurrencyLimiter>(Options(3), clock));
  for (auto& limiter : limiters) {
    std::vector<Permit> held = AcquireN(*limiter, 3);
    EXPECT_FALSE(limiter->TryAcquire(0).ok());
    EXPECT_EQ(limiter->Gauges().in_use, 3);
    EXPECT_EQ(limiter->Gauges().limit, 3);
  }
}

}  // namespace
}  // namespace sluice::admission
