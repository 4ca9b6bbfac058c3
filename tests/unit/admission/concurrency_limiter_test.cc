#include "sluice/admission/concurrency_limiter.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace sluice::admission {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(ConcurrencyLimiterTest, AdmitsUpToTheCountThenRefusesWithCount) {
  ManualClock clock;
  ConcurrencyLimiter limiter({.max_count = 3, .max_bytes = 32 * kMiB}, clock);
  std::vector<Permit> held;
  for (int i = 0; i < 3; ++i) {
    AcquireResult result = limiter.TryAcquire(1000);
    ASSERT_TRUE(result.ok());
    held.push_back(std::move(*result.permit));
  }
  const AcquireResult refused = limiter.TryAcquire(1000);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.refusal, SlotRefusal::kCount);
  EXPECT_EQ(limiter.Gauges().refused_count, 1u);
}

TEST(ConcurrencyLimiterTest, RefusesOnBytesWhenSlotsAreFree) {
  ManualClock clock;
  ConcurrencyLimiter limiter({.max_count = 50, .max_bytes = 2 * kMiB}, clock);
  AcquireResult first = limiter.TryAcquire(kMiB + 1);
  ASSERT_TRUE(first.ok());
  const AcquireResult refused = limiter.TryAcquire(kMiB);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.refusal, SlotRefusal::kBytes);
  EXPECT_EQ(limiter.Gauges().refused_bytes, 1u);
  EXPECT_TRUE(limiter.TryAcquire(kMiB - 1).ok());
}

TEST(ConcurrencyLimiterTest, MoreBytesThanTheCapAreAlwaysRefused) {
  ManualClock clock;
  ConcurrencyLimiter limiter({.max_count = 50, .max_bytes = kMiB}, clock);
  EXPECT_EQ(limiter.TryAcquire(kMiB + 1).refusal, SlotRefusal::kBytes);
  EXPECT_TRUE(limiter.TryAcquire(kMiB).ok());
}

TEST(ConcurrencyLimiterTest, PermitReleasesSlotAndBytesOnDestruction) {
  ManualClock clock;
  ConcurrencyLimiter limiter({.max_count = 1, .max_bytes = kMiB}, clock);
  {
    AcquireResult result = limiter.TryAcquire(500);
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(limiter.Gauges().in_use, 1);
    EXPECT_EQ(limiter.Gauges().bytes_in_use, 500);
    EXPECT_FALSE(limiter.TryAcquire(0).ok());
  }
  EXPECT_EQ(limiter.Gauges().in_use, 0);
  EXPECT_EQ(limiter.Gauges().bytes_in_use, 0);
  EXPECT_TRUE(limiter.TryAcquire(0).ok());
}

TEST(ConcurrencyLimiterTest, DoneReleasesOnceAndMovedFromPermitsReleaseNothing) {
  ManualClock clock;
  ConcurrencyLimiter limiter({.max_count = 2, .max_bytes = kMiB}, clock);
  AcquireResult a = limiter.TryAcquire(100);
  AcquireResult b = limiter.TryAcquire(100);
  Permit moved = std::move(*a.permit);
  EXPECT_TRUE(a.permit->released());
  a.permit.reset();  // destroying the moved-from permit must not release
  EXPECT_EQ(limiter.Gauges().in_use, 2);
  moved.Done(Outcome::kSuccess);
  moved.Done(Outcome::kSuccess);
  EXPECT_EQ(limiter.Gauges().in_use, 1);
  EXPECT_EQ(limiter.Gauges().bytes_in_use, 100);
  // Move-assigning over a live permit releases the old one.
  *b.permit = std::move(moved);
  EXPECT_EQ(limiter.Gauges().in_use, 0);
  EXPECT_EQ(limiter.Gauges().bytes_in_use, 0);
}

TEST(ConcurrencyLimiterTest, HandedOffBytesStayCountedUntilTheWorkEnds) {
  ManualClock clock;
  ConcurrencyLimiter limiter({.max_count = 1, .max_bytes = kMiB}, clock);
  AcquireResult result = limiter.TryAcquire(kMiB);
  ASSERT_TRUE(result.ok());
  // The request timed out and is answered; its PUT is still running.
  BytesLease lease = result.permit->HandOffBytes(Outcome::kTimeout);
  EXPECT_EQ(lease.bytes(), kMiB);
  EXPECT_EQ(limiter.Gauges().in_use, 0);
  EXPECT_EQ(limiter.Gauges().bytes_in_use, kMiB);
  EXPECT_EQ(limiter.TryAcquire(1).refusal, SlotRefusal::kBytes);
  EXPECT_TRUE(limiter.TryAcquire(0).ok());
  result.permit.reset();  // nothing left to release
  EXPECT_EQ(limiter.Gauges().bytes_in_use, kMiB);
  BytesLease moved = std::move(lease);
  lease.Release();
  EXPECT_EQ(limiter.Gauges().bytes_in_use, kMiB);
  moved.Release();
  EXPECT_EQ(limiter.Gauges().bytes_in_use, 0);
}

TEST(ConcurrencyLimiterTest, GaugesReportTheCaps) {
  ManualClock clock;
  ConcurrencyLimiter limiter({}, clock);
  const SlotGauges gauges = limiter.Gauges();
  EXPECT_EQ(gauges.limit, 50);
  EXPECT_EQ(gauges.max_bytes, 32 * kMiB);
}

TEST(ConcurrencyLimiterTest, PermitRemembersWhenItWasAcquired) {
  ManualClock clock;
  clock.Advance(std::chrono::seconds(3));
  ConcurrencyLimiter limiter({}, clock);
  AcquireResult result = limiter.TryAcquire(0);
  EXPECT_EQ(result.permit->acquired_at(), clock.Now());
}

// Property: whatever the order of acquires, releases and hand-offs, the count and bytes in use
// never exceed the caps and always equal what the live permits and leases hold.
TEST(ConcurrencyLimiterPropertyTest, NeverExceedsCountOrBytesAndCountsAddUp) {
  ManualClock clock;
  const ConcurrencyLimiterOptions options{.max_count = 7, .max_bytes = 10'000};
  ConcurrencyLimiter limiter(options, clock);
  std::mt19937_64 rng(42);
  std::vector<Permit> permits;
  std::vector<BytesLease> leases;
  int refusals = 0;
  for (int step = 0; step < 20'000; ++step) {
    const int action = static_cast<int>(rng() % 10);
    if (action < 5) {
      AcquireResult result = limiter.TryAcquire(static_cast<int64_t>(rng() % 4000));
      if (result.ok()) {
        permits.push_back(std::move(*result.permit));
      } else {
        ++refusals;
      }
    } else if (action < 8 && !permits.empty()) {
      permits.erase(permits.begin() + static_cast<std::ptrdiff_t>(rng() % permits.size()));
    } else if (action == 8 && !permits.empty()) {
      const size_t i = rng() % permits.size();
      leases.push_back(permits[i].HandOffBytes(Outcome::kTimeout));
      permits.erase(permits.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (!leases.empty()) {
      leases.erase(leases.begin() + static_cast<std::ptrdiff_t>(rng() % leases.size()));
    }
    int64_t bytes = 0;
    for (const Permit& p : permits) bytes += p.bytes();
    for (const BytesLease& l : leases) bytes += l.bytes();
    const SlotGauges gauges = limiter.Gauges();
    ASSERT_LE(gauges.in_use, options.max_count);
    ASSERT_LE(gauges.bytes_in_use, options.max_bytes);
    ASSERT_EQ(gauges.in_use, static_cast<int64_t>(permits.size()));
    ASSERT_EQ(gauges.bytes_in_use, bytes);
  }
  EXPECT_GT(refusals, 0);
}

}  // namespace
}  // namespace sluice::admission
