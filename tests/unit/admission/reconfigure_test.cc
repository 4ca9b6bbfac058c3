// The setters a configuration reload uses (docs/operations.md, "Reload"): a bucket keeps its tokens
// when its rate changes, a lowered cap lets what is in flight finish and admits nothing new until
// under it, and a Swappable's readers keep the value they took. The stress tests at the end run
// readers against a reloading thread, for ThreadSanitizer (the `tsan` preset).
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "run_threads.h"
#include "sluice/admission/adaptive_concurrency_limiter.h"
#include "sluice/admission/circuit_breaker.h"
#include "sluice/admission/concurrency_limiter.h"
#include "sluice/admission/degradation_ladder.h"
#include "sluice/admission/jitter.h"
#include "sluice/admission/keyed_limiter.h"
#include "sluice/admission/keyed_slots.h"
#include "sluice/admission/retry_budget.h"
#include "sluice/admission/token_bucket.h"
#include "sluice/common/swappable.h"

namespace sluice::admission {
namespace {

using testing::RunThreads;

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(KeyedLimiterReconfigureTest, KeepsTokensRefilledAtTheOldRateThenCappedAtTheNewBurst) {
  ManualClock clock;
  KeyedLimiter limiter(KeyedLimiterOptions{{TokenBucketPolicy{1, 10}}, 100, 4}, clock);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(limiter.TryTake("a").allowed());
  clock.Advance(seconds(2));  // 2 + 2 refilled at the old 1/s = 4
  limiter.SetPolicies({TokenBucketPolicy{10, 100}});
  EXPECT_DOUBLE_EQ(limiter.Peek("a").available[0], 4);  // no fresh burst for a reload
  EXPECT_DOUBLE_EQ(limiter.Peek("new").available[0], 100);
  clock.Advance(seconds(1));
  EXPECT_DOUBLE_EQ(limiter.Peek("a").available[0], 14);  // now at the new rate
  EXPECT_EQ(limiter.policies().front().rate_per_second, 10);

  limiter.SetPolicies({TokenBucketPolicy{1, 3}});  // lowered: capped at the new burst
  EXPECT_DOUBLE_EQ(limiter.Peek("a").available[0], 3);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.TryTake("a").allowed());
  const KeyedDecision refused = limiter.TryTake("a");
  EXPECT_FALSE(refused.allowed());
  EXPECT_EQ(refused.decision.RetryAfterSeconds(), 1);
}

TEST(KeyedLimiterReconfigureTest, ChangesBothDimensionsOfAPair) {
  ManualClock clock;
  KeyedLimiter limiter(
      KeyedLimiterOptions{{TokenBucketPolicy{1, 10}, TokenBucketPolicy{100, 1000}}, 100, 2}, clock);
  ASSERT_TRUE(limiter.TryTake("a", 1, 1000).allowed());
  limiter.SetPolicies({TokenBucketPolicy{1, 10}, TokenBucketPolicy{100, 5000}});
  EXPECT_FALSE(limiter.TryTake("a", 1, 2000).allowed());  // kept its (empty) byte bucket
  clock.Advance(seconds(20));
  EXPECT_TRUE(limiter.TryTake("a", 1, 2000).allowed());  // 2000 bytes refilled, burst now 5000
  EXPECT_EQ(limiter.policies()[1].burst, 5000);
}

TEST(TokenBucketReconfigureTest, SetPolicyKeepsTokensAndRefillsAtTheNewRate) {
  ManualClock clock;
  TokenBucket bucket({1, 10}, clock);
  ASSERT_TRUE(bucket.TryTake(10).allowed);
  bucket.SetPolicy({5, 20});
  EXPECT_DOUBLE_EQ(bucket.Available(), 0);
  clock.Advance(seconds(1));
  EXPECT_DOUBLE_EQ(bucket.Available(), 5);
}

TEST(ConcurrencyLimiterReconfigureTest, LoweredBelowInFlightLetsThemFinishAndAdmitsNoneUntilUnder) {
  ManualClock clock;
  ConcurrencyLimiter limiter({4, 1000}, clock);
  std::vector<Permit> held;
  for (int i = 0; i < 4; ++i) held.push_back(std::move(*limiter.TryAcquire(10).permit));
  limiter.SetLimits({2, 1000});
  EXPECT_EQ(limiter.Gauges().limit, 2);
  EXPECT_EQ(limiter.Gauges().in_use, 4);  // nothing in flight was dropped
  EXPECT_FALSE(limiter.TryAcquire(10).ok());
  held.pop_back();
  held.pop_back();
  EXPECT_FALSE(limiter.TryAcquire(10).ok());  // 2 in flight: at the cap, not under it
  held.pop_back();
  auto again = limiter.TryAcquire(10);
  EXPECT_TRUE(again.ok());

  limiter.SetLimits({10, 15});  // the byte cap changes too
  const AcquireResult too_big = limiter.TryAcquire(10);
  EXPECT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.refusal, SlotRefusal::kBytes);
  EXPECT_EQ(limiter.Gauges().max_bytes, 15);
}

TEST(AdaptiveConcurrencyLimiterReconfigureTest, ANewCeilingClampsTheLearnedLimit) {
  ManualClock clock;
  AdaptiveConcurrencyOptions o;
  o.initial_limit = 20;
  o.max_limit = 50;
  AdaptiveConcurrencyLimiter limiter(o, clock);
  limiter.SetBounds(5, 100, milliseconds(100));
  EXPECT_EQ(limiter.limit(), 5);
  EXPECT_EQ(limiter.Gauges().max_bytes, 100);
  std::vector<Permit> held;
  for (int i = 0; i < 5; ++i) held.push_back(std::move(*limiter.TryAcquire(1).permit));
  EXPECT_FALSE(limiter.TryAcquire(1).ok());
  // Successes under the new target grow it back only up to the new ceiling.
  for (int round = 0; round < 20; ++round) {
    for (auto& p : held) p.Done(Outcome::kSuccess, milliseconds(10));
    held.clear();
    for (int i = 0; i < 5; ++i) {
      auto r = limiter.TryAcquire(1);
      if (r.ok()) held.push_back(std::move(*r.permit));
    }
  }
  EXPECT_EQ(limiter.limit(), 5);
  limiter.SetBounds(50, 100, milliseconds(100));
  EXPECT_EQ(limiter.limit(), 5);  // raising the ceiling does not raise what was learned
}

TEST(KeyedSlotsReconfigureTest, AKeyAboveTheNewShareKeepsItsUnitsAndGetsNoneUntilUnder) {
  KeyedSlots slots(3);
  std::vector<KeyedSlots::Slot> held;
  for (int i = 0; i < 3; ++i) held.push_back(std::move(*slots.TryAcquire("a")));
  slots.SetMaxPerKey(1);
  EXPECT_EQ(slots.InFlight("a"), 3);
  EXPECT_FALSE(slots.TryAcquire("a").has_value());
  held.pop_back();
  held.pop_back();
  EXPECT_FALSE(slots.TryAcquire("a").has_value());
  held.pop_back();
  EXPECT_TRUE(slots.TryAcquire("a").has_value());
  EXPECT_EQ(slots.max_per_key(), 1);
}

TEST(JitteredRetryAfterReconfigureTest, ANewBandIsUsedAtOnce) {
  JitteredRetryAfter retry({5, 15, 42});
  retry.SetBand(30, 31);
  for (int i = 0; i < 100; ++i) {
    const int s = retry.NextSeconds();
    EXPECT_GE(s, 30);
    EXPECT_LE(s, 31);
  }
}

TEST(SwappableTest, AReaderKeepsTheValueItTookAcrossAStore) {
  Swappable<std::string> value(std::string("old"));
  const std::shared_ptr<const std::string> taken = value.Load();
  value.Store("new");
  EXPECT_EQ(*taken, "old");
  EXPECT_EQ(*value.Load(), "new");
}

CircuitBreakerOptions Breaker(int refusals, Duration open_for) {
  CircuitBreakerOptions options;
  options.refusals_to_open = refusals;
  options.open_for = open_for;
  return options;
}

void Refuse(CircuitBreaker& breaker) {
  CircuitBreaker::Admission admission = breaker.TryPass();
  ASSERT_TRUE(admission.allowed());
  admission.pass->Refused();
}

TEST(CircuitBreakerReconfigureTest, AnOpenBreakerStaysOpenUntilTheNewOpenForHasPassed) {
  ManualClock clock;
  CircuitBreaker breaker(Breaker(2, seconds(5)), clock);
  Refuse(breaker);
  Refuse(breaker);
  ASSERT_EQ(breaker.state(), BreakerState::kOpen);
  breaker.SetThresholds(2, seconds(10), milliseconds(250));  // longer: counted from when it opened
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
  clock.Advance(seconds(6));
  CircuitBreaker::Admission refused = breaker.TryPass();
  EXPECT_FALSE(refused.allowed());
  EXPECT_EQ(refused.retry_after, seconds(4));
  breaker.SetThresholds(2, seconds(1),
                        milliseconds(250));  // shorter: it has been open for longer than that
  CircuitBreaker::Admission probe = breaker.TryPass();
  ASSERT_TRUE(probe.allowed());
  EXPECT_TRUE(probe.pass->is_probe());
  EXPECT_EQ(breaker.state(), BreakerState::kHalfOpen);
}

TEST(CircuitBreakerReconfigureTest, AClosedBreakerKeepsItsRunOfRefusalsAgainstTheNewCount) {
  ManualClock clock;
  CircuitBreaker breaker(Breaker(5, seconds(5)), clock);
  for (int i = 0; i < 3; ++i) Refuse(breaker);
  breaker.SetThresholds(3, seconds(5), milliseconds(250));
  // Already at the new count, but a reload is not a refusal: the next refusal opens it.
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
  EXPECT_EQ(breaker.transitions(), 0u);
  Refuse(breaker);
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);

  CircuitBreaker raised(Breaker(2, seconds(5)), clock);
  Refuse(raised);
  raised.SetThresholds(4, seconds(5), milliseconds(250));
  for (int i = 0; i < 2; ++i) Refuse(raised);
  EXPECT_EQ(raised.state(), BreakerState::kClosed);  // 3 in a row, under the new 4
  Refuse(raised);
  EXPECT_EQ(raised.state(), BreakerState::kOpen);
}

TEST(RetryBudgetReconfigureTest, KeepsWhatItCountedAndWeighsItAtTheNewRatio) {
  ManualClock clock;
  RetryBudgetOptions options;
  options.ratio = 0.1;
  options.min_retries_per_second = 0;
  RetryBudget budget(options, clock);
  for (int i = 0; i < 100; ++i) budget.RecordRequest();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(budget.TryWithdrawRetry());
  EXPECT_NEAR(budget.Balance(), 6, 1e-9);
  budget.SetRatio(0.5);
  EXPECT_NEAR(budget.Balance(), 46, 1e-9);  // the same 100 requests and 4 retries
  EXPECT_DOUBLE_EQ(budget.options().ratio, 0.5);
  budget.SetRatio(0.02);
  EXPECT_NEAR(budget.Balance(), -2, 1e-9);  // the retries spent still count
  EXPECT_FALSE(budget.TryWithdrawRetry());
  clock.Advance(seconds(11));  // they age out of the window with the requests
  EXPECT_NEAR(budget.Balance(), 0, 1e-9);
}

TEST(DegradationLadderReconfigureTest, FewerSlotsThanInFlightShedNewViewsUntilUnder) {
  ManualClock clock;
  DegradationLadderOptions options;
  options.slots = 3;
  options.initial_service_time = milliseconds(10);
  DegradationLadder ladder(options, clock);
  DegradationLadder::Decision a = ladder.Decide({.client_key = "a"});
  DegradationLadder::Decision b = ladder.Decide({.client_key = "b"});
  ASSERT_TRUE(a.slot && b.slot);
  options.slots = 1;
  ladder.SetLimits(options);
  EXPECT_EQ(ladder.Snapshot().slots, 1);
  EXPECT_EQ(ladder.Snapshot().in_use, 2);  // both renders go on
  DegradationLadder::Decision c = ladder.Decide({.client_key = "c"});
  EXPECT_FALSE(c.slot);
  EXPECT_EQ(c.cause, ShedCause::kSlotsFull);
  a.slot->Done();
  EXPECT_FALSE(ladder.Decide({.client_key = "d"}).slot);  // 1 in flight, not under 1
  b.slot->Done();
  EXPECT_TRUE(ladder.Decide({.client_key = "e"}).slot);
}

TEST(DegradationLadderReconfigureTest, KeepsTheMeasuredServiceTime) {
  ManualClock clock;
  DegradationLadderOptions options;
  options.slots = 2;
  options.initial_service_time = milliseconds(10);
  DegradationLadder ladder(options, clock);
  DegradationLadder::Decision view = ladder.Decide({.client_key = "a"});
  ASSERT_TRUE(view.slot);
  clock.Advance(milliseconds(110));
  view.slot->Done();  // 10 ms + 0.1 x (110 ms - 10 ms) = 20 ms
  const double measured = std::chrono::duration<double>(ladder.Snapshot().service_time).count();
  EXPECT_NEAR(measured, 0.020, 1e-6);
  options.slots = 4;
  options.initial_service_time = seconds(1);  // for a new ladder only
  ladder.SetLimits(options);
  const LadderSnapshot after = ladder.Snapshot();
  EXPECT_NEAR(std::chrono::duration<double>(after.service_time).count(), measured, 1e-9);
  EXPECT_NEAR(after.sustainable_rate, 4 / measured, 1e-6);
}

// Readers take and give back while one thread reloads: the caps hold at every moment against the
// largest of the limits ever configured, and everything drains to zero.
TEST(ReconfigureStressTest, ConcurrencyLimiterAndKeyedSlotsUnderAReloadingThread) {
  ManualClock clock;
  ConcurrencyLimiter limiter({8, 800}, clock);
  KeyedSlots shares(4);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> worst_count{0};
  std::atomic<int64_t> worst_bytes{0};
  RunThreads(5, [&](int id) {
    if (id == 0) {
      for (int i = 0; i < 2000; ++i) {
        const int64_t n = 1 + i % 8;
        limiter.SetLimits({n, n * 100});
        shares.SetMaxPerKey(1 + i % 4);
      }
      stop = true;
      return;
    }
    const std::string key = "k" + std::to_string(id % 2);
    while (!stop.load()) {
      auto share = shares.TryAcquire(key);
      AcquireResult r = limiter.TryAcquire(50);
      const auto gauges = limiter.Gauges();
      int64_t seen = worst_count.load();
      while (gauges.in_use > seen && !worst_count.compare_exchange_weak(seen, gauges.in_use)) {
      }
      seen = worst_bytes.load();
      while (gauges.bytes_in_use > seen &&
             !worst_bytes.compare_exchange_weak(seen, gauges.bytes_in_use)) {
      }
      if (r.ok()) r.permit->Done(Outcome::kSuccess);
    }
  });
  EXPECT_LE(worst_count.load(), 8);
  EXPECT_LE(worst_bytes.load(), 800);
  EXPECT_EQ(limiter.Gauges().in_use, 0);
  EXPECT_EQ(limiter.Gauges().bytes_in_use, 0);
  EXPECT_EQ(shares.keys(), 0u);
}

// Takes race SetPolicies: each take is judged by one whole set of policies, so across every
// reload a key never gets more than the largest burst plus what the largest rate refilled.
TEST(ReconfigureStressTest, KeyedLimiterTakesAgainstAReloadingThread) {
  ManualClock clock;
  KeyedLimiter limiter(KeyedLimiterOptions{{TokenBucketPolicy{1, 10}}, 1000, 4}, clock);
  std::atomic<bool> stop{false};
  // "hot" gets its bucket (full at burst 10) before any reload: a key first seen after one starts
  // full at that policy's burst, up to 14, which is a new key's due, not a refill.
  std::atomic<int64_t> allowed{limiter.TryTake("hot").allowed() ? 1 : 0};
  RunThreads(4, [&](int id) {
    if (id == 0) {
      for (int i = 0; i < 500; ++i) {
        limiter.SetPolicies({TokenBucketPolicy{1.0 + i % 3, 10.0 + i % 5}});
        clock.Advance(milliseconds(1));
      }
      stop = true;
      return;
    }
    while (!stop.load()) {
      if (limiter.TryTake("hot").allowed()) allowed.fetch_add(1);
      limiter.TryTake("k" + std::to_string(id));
      limiter.Peek("hot");
    }
  });
  // 500 ms at a rate of at most 3/s is at most 1.5 tokens on top of the first burst of 10: a
  // reload never refills a bucket nor hands out a fresh burst.
  EXPECT_LE(allowed.load(), 10 + 2);
}

TEST(ReconfigureStressTest, SwappableReadersSeeWholeValues) {
  struct Pair {
    int64_t a;
    int64_t b;
  };
  Swappable<Pair> value(Pair{0, 0});
  std::atomic<bool> stop{false};
  std::atomic<int64_t> torn{0};
  RunThreads(4, [&](int id) {
    if (id == 0) {
      for (int64_t i = 1; i <= 5000; ++i) value.Store(Pair{i, -i});
      stop = true;
      return;
    }
    while (!stop.load()) {
      const auto p = value.Load();
      if (p->a != -p->b) torn.fetch_add(1);
    }
  });
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(value.Load()->a, 5000);
}

// Calls race the setters of the breaker, the retry budget and the ladder: the ladder never has more
// renders in flight than the largest cap ever set and drains to zero; the budget never lets more
// retries through than the largest ratio allows of the requests counted.
TEST(ReconfigureStressTest, BreakerBudgetAndLadderAgainstAReloadingThread) {
  ManualClock clock;
  CircuitBreaker breaker(Breaker(3, milliseconds(1)), clock);
  RetryBudgetOptions budget_options;
  budget_options.ratio = 0.1;
  budget_options.min_retries_per_second = 0;
  RetryBudget budget(budget_options, clock);
  DegradationLadderOptions ladder_options;
  ladder_options.slots = 4;
  DegradationLadder ladder(ladder_options, clock);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> requests{0};
  std::atomic<int64_t> retries{0};
  std::atomic<int> worst_in_use{0};
  RunThreads(5, [&](int id) {
    if (id == 0) {
      // Until the readers have made calls enough to meet every setting, however the threads are
      // scheduled; the clock stops at 2 s, inside the budget's 10 s window.
      for (int i = 0; i < 2000 || requests.load() < 20000; ++i) {
        breaker.SetThresholds(1 + i % 4, milliseconds(i % 3), milliseconds(i % 2));
        budget.SetRatio(0.5 * (i % 2));
        DegradationLadderOptions next = ladder_options;
        next.slots = 1 + i % 4;
        next.target_utilization = 0.5 + 0.5 * (i % 2);
        next.large_paste_bytes = 100 * (i % 3);
        ladder.SetLimits(next);
        if (i < 2000) clock.Advance(milliseconds(1));
      }
      stop = true;
      return;
    }
    const std::string key = "k" + std::to_string(id);
    for (int n = 0; !stop.load(); ++n) {
      CircuitBreaker::Admission admission = breaker.TryPass();
      if (admission.allowed()) {
        // Refusals in runs of four, the largest threshold the reloader sets: one reader alone
        // opens the breaker, however the threads are scheduled (one refusal in three, spread
        // across readers, left it closed in 9 of 30 runs on a busy machine).
        if (n % 8 < 4) {
          admission.pass->Refused();
        } else {
          admission.pass->Succeeded();
        }
      }
      budget.RecordRequest();
      requests.fetch_add(1);
      if (budget.TryWithdrawRetry()) retries.fetch_add(1);
      DegradationLadder::Decision view = ladder.Decide({.client_key = key, .size_bytes = n % 200});
      const int in_use = ladder.Snapshot().in_use;
      int seen = worst_in_use.load();
      while (in_use > seen && !worst_in_use.compare_exchange_weak(seen, in_use)) {
      }
      if (view.slot) view.slot->Done();
    }
  });
  EXPECT_LE(worst_in_use.load(), 4);
  EXPECT_EQ(ladder.Snapshot().in_use, 0);
  // Within the 2 s the clock moved, nothing aged out of the 10 s window.
  EXPECT_LE(static_cast<double>(retries.load()), 0.5 * static_cast<double>(requests.load()));
  EXPECT_GT(breaker.transitions(), 0u);
}

}  // namespace
}  // namespace sluice::admission
