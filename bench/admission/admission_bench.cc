// Hot admission operations, single-threaded and with two threads sharing one object (the server
// runs one io_context on N threads). Real clock, so the cost of reading it is included.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "sluice/admission/adaptive_concurrency_limiter.h"
#include "sluice/admission/circuit_breaker.h"
#include "sluice/admission/client_key.h"
#include "sluice/admission/concurrency_limiter.h"
#include "sluice/admission/degradation_ladder.h"
#include "sluice/admission/keyed_limiter.h"
#include "sluice/admission/retry_budget.h"
#include "sluice/admission/singleflight.h"
#include "sluice/admission/token_bucket.h"

namespace sluice::admission {
namespace {

const Clock& RealClock() { return SystemClock::Instance(); }

// Allowed every time, so the benchmark measures the decision, not a refusal path.
TokenBucketPolicy Unlimited() { return {.rate_per_second = 1e12, .burst = 1e12}; }

void BM_TokenBucketTake(benchmark::State& state) {
  static TokenBucket bucket(Unlimited(), RealClock());
  for (auto _ : state) benchmark::DoNotOptimize(bucket.TryTake(1));
}
BENCHMARK(BM_TokenBucketTake)->Threads(1)->Threads(2)->UseRealTime();

void BM_TokenBucketTakeBoth(benchmark::State& state) {
  static TokenBucket count(Unlimited(), RealClock());
  static TokenBucket bytes(Unlimited(), RealClock());
  for (auto _ : state) benchmark::DoNotOptimize(TokenBucket::TryTakeBoth(count, 1, bytes, 4096));
}
BENCHMARK(BM_TokenBucketTakeBoth)->Threads(1)->Threads(2)->UseRealTime();

constexpr int kDistinctKeys = 1'000'000;

const std::vector<std::string>& MillionKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    k.reserve(kDistinctKeys);
    for (int i = 0; i < kDistinctKeys; ++i) {
      k.push_back("10." + std::to_string((i >> 16) & 255) + "." + std::to_string((i >> 8) & 255) +
                  "." + std::to_string(i & 255));
    }
    return k;
  }();
  return keys;
}

KeyedLimiterOptions TwoDimensions(size_t max_keys) {
  KeyedLimiterOptions options;
  options.policies = {Unlimited(), Unlimited()};
  options.max_keys = max_keys;
  return options;
}

// Every key resident (max_keys above 1M): a lookup, a recency splice, two bucket updates.
void BM_KeyedLimiterTake1MKeysResident(benchmark::State& state) {
  static KeyedLimiter limiter(TwoDimensions(2'000'000), RealClock());
  const auto& keys = MillionKeys();
  size_t i = static_cast<size_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    benchmark::DoNotOptimize(limiter.TryTake(keys[i % kDistinctKeys], 1, 4096));
    i += 104'729;  // a prime stride: scattered over the table, no cache-friendly order
  }
}
BENCHMARK(BM_KeyedLimiterTake1MKeysResident)->Threads(1)->Threads(2)->UseRealTime();

// 1M keys through the default 100k-key table: mostly misses, each an eviction and an insert.
// The worst case: a flood of new addresses.
void BM_KeyedLimiterTake1MKeysChurn(benchmark::State& state) {
  static KeyedLimiter limiter(TwoDimensions(100'000), RealClock());
  const auto& keys = MillionKeys();
  size_t i = static_cast<size_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    benchmark::DoNotOptimize(limiter.TryTake(keys[i % kDistinctKeys], 1, 4096));
    i += 104'729;
  }
}
BENCHMARK(BM_KeyedLimiterTake1MKeysChurn)->Threads(1)->Threads(2)->UseRealTime();

void BM_PermitAcquireRelease(benchmark::State& state) {
  static ConcurrencyLimiter limiter({.max_count = 1'000'000, .max_bytes = int64_t{1} << 40},
                                    RealClock());
  for (auto _ : state) {
    AcquireResult result = limiter.TryAcquire(4096);
    benchmark::DoNotOptimize(result.permit);
  }
}
BENCHMARK(BM_PermitAcquireRelease)->Threads(1)->Threads(2)->UseRealTime();

void BM_AdaptivePermitAcquireDone(benchmark::State& state) {
  static AdaptiveConcurrencyLimiter limiter({.initial_limit = 1000, .max_limit = 100'000},
                                            RealClock());
  for (auto _ : state) {
    AcquireResult result = limiter.TryAcquire(4096);
    if (result.ok()) result.permit->Done(Outcome::kSuccess, std::chrono::milliseconds(5));
  }
}
BENCHMARK(BM_AdaptivePermitAcquireDone)->Threads(1)->Threads(2)->UseRealTime();

// A follower joining a fill in progress (a hit), the waiter later called once. Every 256 hits
// the flight completes and a new one starts; that cost is shared across those hits.
void BM_SingleflightHit(benchmark::State& state) {
  static Singleflight<std::string, int> group(-1);
  const std::string key = "paste-" + std::to_string(state.thread_index());
  int64_t sum = 0;
  std::optional<Singleflight<std::string, int>::Flight> leader;
  int n = 0;
  for (auto _ : state) {
    if (!leader) leader = group.Join(key, [&sum](const int& v) { sum += v; });
    auto follower = group.Join(key, [&sum](const int& v) { sum += v; });
    benchmark::DoNotOptimize(follower);
    if (++n % 256 == 0) {
      leader->Complete(1);
      leader.reset();
    }
  }
  if (leader) leader->Complete(1);
  benchmark::DoNotOptimize(sum);
}
BENCHMARK(BM_SingleflightHit)->Threads(1)->Threads(2)->UseRealTime();

void BM_ClientKeyFromForwardedFor(benchmark::State& state) {
  const std::vector<std::string> trusted_list{"10.0.0.0/8", "fd00::/8"};
  const TrustedProxies trusted = *TrustedProxies::Parse(trusted_list);
  const std::vector<std::string_view> xff{"6.6.6.6, 2001:db8:1:2::77, 10.1.2.3"};
  for (auto _ : state) benchmark::DoNotOptimize(ClientKey("10.0.0.1", xff, trusted));
}
BENCHMARK(BM_ClientKeyFromForwardedFor);

void BM_CircuitBreakerPass(benchmark::State& state) {
  static CircuitBreaker breaker({}, RealClock());
  for (auto _ : state) breaker.TryPass().pass->Succeeded();
}
BENCHMARK(BM_CircuitBreakerPass)->Threads(1)->Threads(2)->UseRealTime();

void BM_RetryBudgetRecordRequest(benchmark::State& state) {
  static RetryBudget budget({}, RealClock());
  for (auto _ : state) budget.RecordRequest();
}
BENCHMARK(BM_RetryBudgetRecordRequest)->Threads(1)->Threads(2)->UseRealTime();

void BM_LadderDecide(benchmark::State& state) {
  static DegradationLadder ladder({.slots = 1'000'000}, RealClock());
  for (auto _ : state) {
    DegradationLadder::Decision d =
        ladder.Decide({.client_key = "198.51.100.7", .size_bytes = 4096});
    benchmark::DoNotOptimize(d.rung);
  }
}
BENCHMARK(BM_LadderDecide)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace sluice::admission

BENCHMARK_MAIN();
