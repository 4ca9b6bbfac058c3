// Multi-threaded stress of every shared component, meant to run under ThreadSanitizer (the `tsan`
// preset). They assert invariants (never above a cap, counts add up), never speed.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <random>
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
#include "sluice/admission/retry_budget.h"
#include "sluice/admission/singleflight.h"
#include "sluice/admission/token_bucket.h"

namespace sluice::admission {
namespace {

using testing::RunThreads;

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kThreads = 4;

void UpdateMax(std::atomic<int64_t>& max, int64_t value) {
  int64_t seen = max.load();
  while (value > seen && !max.compare_exchange_weak(seen, value)) {
  }
}

TEST(TokenBucketStressTest, ConcurrentTakesNeverExceedBurstPlusRateTimesElapsed) {
  ManualClock clock;
  TokenBucket bucket({.rate_per_second = 1000, .burst = 50}, clock);
  std::atomic<int64_t> admitted{0};
  std::atomic<int> started{0};
  std::atomic<bool> done{false};
  std::thread ticker([&] {
    // Time moves only once every taker is running, so the test cannot pass by racing ahead.
    while (started.load() < kThreads) std::this_thread::yield();
    for (int i = 0; i < 2000; ++i) {
      clock.Advance(milliseconds(1));
      std::this_thread::yield();
    }
    done = true;
  });
  RunThreads(kThreads, [&](int) {
    started += 1;
    while (!done.load()) admitted += bucket.TryTake().allowed ? 1 : 0;
  });
  ticker.join();
  EXPECT_LE(admitted.load(), 50 + 1000 * 2);  // 2 s of manual time
  EXPECT_GE(admitted.load(), 50);
}

TEST(TokenBucketStressTest, TakeBothStaysConsistentUnderContention) {
  ManualClock clock;
  TokenBucket count({.rate_per_second = 1, .burst = 500}, clock);
  TokenBucket bytes({.rate_per_second = 1, .burst = 50'000}, clock);
  std::atomic<int64_t> taken_count{0};
  std::atomic<int64_t> taken_bytes{0};
  RunThreads(kThreads, [&](int t) {
    std::mt19937_64 rng(static_cast<uint64_t>(t));
    for (int i = 0; i < 2000; ++i) {
      const double n = static_cast<double>(rng() % 300);
      // Half the threads take in the other order, to shake out lock-order deadlocks.
      const bool ok = t % 2 == 0 ? TokenBucket::TryTakeBoth(count, 1, bytes, n).decision.allowed
                                 : TokenBucket::TryTakeBoth(bytes, n, count, 1).decision.allowed;
      if (ok) {
        taken_count += 1;
        taken_bytes += static_cast<int64_t>(n);
      }
    }
  });
  EXPECT_LE(taken_count.load(), 500);
  EXPECT_LE(taken_bytes.load(), 50'000);
  EXPECT_NEAR(count.Available(), 500 - static_cast<double>(taken_count.load()), 1e-6);
  EXPECT_NEAR(bytes.Available(), 50'000 - static_cast<double>(taken_bytes.load()), 1e-6);
}

TEST(KeyedLimiterStressTest, HotKeysAdmitExactlyTheirBurstWhileOthersInsert) {
  ManualClock clock;
  KeyedLimiterOptions options;
  options.policies = {{.rate_per_second = 1, .burst = 10}};
  options.max_keys = 100'000;
  KeyedLimiter limiter(options, clock);
  std::vector<std::atomic<int>> admitted(10);
  RunThreads(kThreads, [&](int t) {
    for (int i = 0; i < 5000; ++i) {
      if (t < 2) {
        const int hot = i % 10;
        if (limiter.TryTake("hot-" + std::to_string(hot)).allowed()) admitted[hot] += 1;
      } else {
        (void)limiter.TryTake("t" + std::to_string(t) + "-" + std::to_string(i));
        (void)limiter.Peek("hot-" + std::to_string(i % 10));
      }
    }
  });
  for (int hot = 0; hot < 10; ++hot) EXPECT_EQ(admitted[hot].load(), 10) << hot;
  EXPECT_EQ(limiter.size(), 10u + 2 * 5000);
}

TEST(KeyedLimiterStressTest, AFloodFromManyThreadsStaysBounded) {
  ManualClock clock;
  KeyedLimiterOptions options;
  options.max_keys = 1000;
  options.shards = 8;
  KeyedLimiter limiter(options, clock);
  std::atomic<bool> done{false};
  std::atomic<size_t> max_size{0};
  std::thread watcher([&] {
    while (!done.load()) {
      const size_t size = limiter.size();
      if (size > max_size.load()) max_size = size;
    }
  });
  RunThreads(kThreads, [&](int t) {
    for (int i = 0; i < 10'000; ++i) {
      (void)limiter.TryTake("flood-" + std::to_string(t) + "-" + std::to_string(i));
      if (i % 100 == 0) clock.Advance(milliseconds(10));
    }
  });
  done = true;
  watcher.join();
  EXPECT_LE(max_size.load(), 1000u);
  EXPECT_LE(limiter.size(), 1000u);
  EXPECT_EQ(limiter.size() + limiter.expired() + limiter.debtor_evictions(),
            static_cast<uint64_t>(kThreads) * 10'000);
}

// Holders count themselves in after acquiring and out before releasing, so the observed maximum
// is a lower bound on what the limiter really had out: it must stay within the caps.
void StressSlots(SlotLimiter& limiter, int64_t max_count, int64_t max_bytes) {
  std::atomic<int64_t> holding{0};
  std::atomic<int64_t> holding_bytes{0};
  std::atomic<int64_t> max_holding{0};
  std::atomic<int64_t> max_holding_bytes{0};
  std::atomic<int64_t> refusals{0};
  RunThreads(kThreads, [&](int t) {
    std::mt19937_64 rng(static_cast<uint64_t>(t) + 100);
    std::vector<BytesLease> leases;
    for (int i = 0; i < 20'000; ++i) {
      const auto bytes = static_cast<int64_t>(rng() % 3000);
      AcquireResult result = limiter.TryAcquire(bytes);
      if (!result.ok()) {
        refusals += 1;
        continue;
      }
      UpdateMax(max_holding, holding += 1);
      UpdateMax(max_holding_bytes, holding_bytes += bytes);
      const int action = static_cast<int>(rng() % 4);
      holding -= 1;
      if (action == 0) {
        holding_bytes -= bytes;
        result.permit->Done(Outcome::kTimeout);
      } else if (action == 1) {
        leases.push_back(result.permit->HandOffBytes(Outcome::kTimeout));
        if (leases.size() > 3) {
          holding_bytes -= leases.front().bytes();
          leases.erase(leases.begin());
        }
      } else {
        holding_bytes -= bytes;
        result.permit->Done(Outcome::kSuccess, milliseconds(static_cast<int64_t>(rng() % 200)));
      }
    }
    for (BytesLease& lease : leases) holding_bytes -= lease.bytes();
  });
  EXPECT_LE(max_holding.load(), max_count);
  EXPECT_LE(max_holding_bytes.load(), max_bytes);
  EXPECT_GT(refusals.load(), 0);
  const SlotGauges gauges = limiter.Gauges();
  EXPECT_EQ(gauges.in_use, 0);
  EXPECT_EQ(gauges.bytes_in_use, 0);
}

TEST(ConcurrencyLimiterStressTest, NeverAboveCountOrBytesAndDrainsToZero) {
  ManualClock clock;
  ConcurrencyLimiter limiter({.max_count = 3, .max_bytes = 5000}, clock);
  StressSlots(limiter, 3, 5000);
}

TEST(AdaptiveConcurrencyLimiterStressTest, NeverAboveMaxLimitOrBytesAndDrainsToZero) {
  ManualClock clock;
  AdaptiveConcurrencyLimiter limiter({.initial_limit = 3,
                                      .min_limit = 1,
                                      .max_limit = 4,
                                      .target_latency = milliseconds(100),
                                      .backoff_ratio = 0.9,
                                      .max_bytes = 5000},
                                     clock);
  StressSlots(limiter, 4, 5000);
  EXPECT_GE(limiter.limit(), 1);
  EXPECT_LE(limiter.limit(), 4);
}

TEST(RetryBudgetStressTest, ConcurrentWithdrawalsStayWithinRatioPlusFloor) {
  ManualClock clock;
  RetryBudget budget({.ratio = 0.1, .min_retries_per_second = 10}, clock);
  std::atomic<int64_t> withdrawn{0};
  RunThreads(kThreads, [&](int) {
    for (int i = 0; i < 2000; ++i) {
      budget.RecordRequest();
      if (budget.TryWithdrawRetry()) withdrawn += 1;
    }
  });
  // 8,000 requests x 0.1 + 10/s x 10 s, all inside one window of manual time.
  EXPECT_LE(withdrawn.load(), 900);
  EXPECT_GE(withdrawn.load(), 100);
  EXPECT_NEAR(budget.Balance(), 900 - static_cast<double>(withdrawn.load()), 1e-6);
}

TEST(CircuitBreakerStressTest, AtMostOneProbeIsEverOut) {
  ManualClock clock;
  CircuitBreakerOptions options;
  options.refusals_to_open = 1;
  std::atomic<int> callbacks{0};
  options.on_transition = [&](BreakerState, BreakerState) { callbacks += 1; };
  CircuitBreaker breaker(options, clock);
  breaker.TryPass().pass->Refused();
  clock.Advance(seconds(5));
  std::atomic<int> probes_out{0};
  std::atomic<int64_t> max_out{0};
  std::atomic<int> probes{0};
  RunThreads(kThreads, [&](int) {
    for (int i = 0; i < 5000; ++i) {
      CircuitBreaker::Admission admission = breaker.TryPass();
      if (!admission.allowed()) continue;
      ASSERT_TRUE(admission.pass->is_probe());
      UpdateMax(max_out, probes_out += 1);
      probes += 1;
      probes_out -= 1;
      admission.pass->TimedOut();  // neutral: stays half-open, frees the place
    }
  });
  EXPECT_EQ(max_out.load(), 1);
  EXPECT_GT(probes.load(), 1);
  EXPECT_EQ(breaker.state(), BreakerState::kHalfOpen);
  EXPECT_EQ(static_cast<uint64_t>(callbacks.load()), breaker.transitions());
}

TEST(CircuitBreakerStressTest, MixedOutcomesKeepTransitionsAndCallbacksInStep) {
  ManualClock clock;
  CircuitBreakerOptions options;
  options.refusals_to_open = 3;
  options.open_for = milliseconds(1);
  std::atomic<int> callbacks{0};
  options.on_transition = [&](BreakerState, BreakerState) { callbacks += 1; };
  CircuitBreaker breaker(options, clock);
  RunThreads(kThreads, [&](int t) {
    std::mt19937_64 rng(static_cast<uint64_t>(t));
    for (int i = 0; i < 5000; ++i) {
      if (i % 50 == 0) clock.Advance(milliseconds(1));
      CircuitBreaker::Admission admission = breaker.TryPass();
      if (!admission.allowed()) continue;
      switch (rng() % 3) {
        case 0:
          admission.pass->Succeeded();
          break;
        case 1:
          admission.pass->Refused();
          break;
        default:
          break;  // dropped unreported
      }
    }
  });
  EXPECT_GT(breaker.transitions(), 0u);
  EXPECT_EQ(static_cast<uint64_t>(callbacks.load()), breaker.transitions());
}

TEST(SingleflightStressTest, EveryWaiterIsCalledExactlyOnceWithItsKeysValue) {
  Singleflight<int, int> group(-1);
  std::atomic<int64_t> joins{0};
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> wrong{0};
  RunThreads(kThreads, [&](int t) {
    std::mt19937_64 rng(static_cast<uint64_t>(t));
    for (int i = 0; i < 5000; ++i) {
      const int key = static_cast<int>(rng() % 8);
      joins += 1;
      std::optional<Singleflight<int, int>::Flight> flight =
          group.Join(key, [&, key](const int& v) {
            calls += 1;
            if (v != key * 10 && v != -1) wrong += 1;
          });
      if (flight) {
        std::this_thread::yield();  // let others join this fill
        if (rng() % 10 == 0) {
          flight.reset();  // abandoned: waiters get -1
        } else {
          flight->Complete(key * 10);
        }
      }
    }
  });
  EXPECT_EQ(calls.load(), joins.load());
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(static_cast<int64_t>(group.fills() + group.hits()), joins.load());
  EXPECT_EQ(group.in_flight(), 0u);
}

TEST(DegradationLadderStressTest, NeverMoreRendersThanSlotsAndCountsAddUp) {
  ManualClock clock;
  DegradationLadderOptions options;
  options.slots = 3;
  DegradationLadder ladder(options, clock);
  std::atomic<int64_t> rendering{0};
  std::atomic<int64_t> max_rendering{0};
  std::atomic<int64_t> decisions{0};
  RunThreads(kThreads, [&](int t) {
    std::mt19937_64 rng(static_cast<uint64_t>(t));
    for (int i = 0; i < 5000; ++i) {
      const std::string key = "k" + std::to_string(rng() % 100);
      ViewFacts view;
      view.client_key = key;
      view.is_cached = rng() % 10 == 0;
      view.is_plain_text = rng() % 7 == 0;
      view.size_bytes = static_cast<int64_t>(rng() % 400'000);
      DegradationLadder::Decision decision = ladder.Decide(view);
      decisions += 1;
      if (decision.slot) {
        UpdateMax(max_rendering, rendering += 1);
        if (t == 0) clock.Advance(milliseconds(1));
        rendering -= 1;
        if (rng() % 5 == 0) {
          decision.slot->Failed(RungReason::kRenderTimeout);
        } else {
          decision.slot->Done();
        }
      }
      if (i % 500 == 0) {
        EXPECT_LE(ladder.Snapshot().in_use, 3);
      }
    }
  });
  const LadderSnapshot snapshot = ladder.Snapshot();
  EXPECT_LE(max_rendering.load(), 3);
  EXPECT_EQ(snapshot.in_use, 0);
  uint64_t total = snapshot.counts.cached + snapshot.counts.highlighted;
  for (uint64_t shed : snapshot.counts.shed) total += shed;
  EXPECT_EQ(total, static_cast<uint64_t>(decisions.load()));
}

TEST(JitterStressTest, ConcurrentDrawsStayInRange) {
  JitteredRetryAfter retry_after({.seed = 11});
  std::atomic<int> out_of_range{0};
  RunThreads(kThreads, [&](int) {
    for (int i = 0; i < 10'000; ++i) {
      const int s = retry_after.NextSeconds();
      if (s < 5 || s > 15) out_of_range += 1;
    }
  });
  EXPECT_EQ(out_of_range.load(), 0);
}

}  // namespace
}  // namespace sluice::admission
