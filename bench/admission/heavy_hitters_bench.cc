// The heavy-hitters sketch's per-update cost (docs/overload.md, "Abuse or growth"): a key it
// already tracks (the abuser hammering) and a key new to it (a flood of fresh addresses, every
// update taking over the smallest counter), with one shard and with four, one thread and two.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "sluice/admission/heavy_hitters.h"

namespace sluice::admission {
namespace {

HeavyHittersOptions Options(int64_t shards) {
  HeavyHittersOptions o;
  o.shards = static_cast<size_t>(shards);
  return o;
}

const std::vector<std::string>& Keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    k.reserve(1 << 20);
    for (int i = 0; i < (1 << 20); ++i) {
      k.push_back(std::to_string(10 + i % 200) + "." + std::to_string(i / 200 % 250) + "." +
                  std::to_string(i / 50'000) + ".7");
    }
    return k;
  }();
  return keys;
}

// Sixteen keys, all tracked: the increment path.
void BM_HeavyHittersNoteTracked(benchmark::State& state) {
  // Made by thread 0 before the loop's start barrier, so every thread shares one.
  static std::unique_ptr<HeavyHitters> sketch;
  if (state.thread_index() == 0) {
    sketch = std::make_unique<HeavyHitters>(Options(state.range(0)), SystemClock::Instance());
  }
  const auto& keys = Keys();
  size_t i = static_cast<size_t>(state.thread_index()) * 7;
  for (auto _ : state) {
    sketch->Note(keys[i++ % 16], HeavyHitters::Event::kCreate);
  }
  if (state.thread_index() == 0) {
    state.counters["counters"] = double(sketch->counters());
  }
}
BENCHMARK(BM_HeavyHittersNoteTracked)->Arg(1)->Arg(4)->Threads(1)->Threads(2)->UseRealTime();

// A million distinct keys in turn: every update evicts the smallest counter.
void BM_HeavyHittersNoteChurn(benchmark::State& state) {
  // Made by thread 0 before the loop's start barrier, so every thread shares one.
  static std::unique_ptr<HeavyHitters> sketch;
  if (state.thread_index() == 0) {
    sketch = std::make_unique<HeavyHitters>(Options(state.range(0)), SystemClock::Instance());
  }
  const auto& keys = Keys();
  size_t i = static_cast<size_t>(state.thread_index()) * 500'000;
  for (auto _ : state) {
    sketch->Note(keys[i++ & ((1 << 20) - 1)], HeavyHitters::Event::kRefusal);
  }
  if (state.thread_index() == 0) {
    state.counters["counters"] = double(sketch->counters());
  }
}
BENCHMARK(BM_HeavyHittersNoteChurn)->Arg(1)->Arg(4)->Threads(1)->Threads(2)->UseRealTime();

// What a /status or /metrics read costs: merge both generations of every shard, sort, top 10.
void BM_HeavyHittersTop10(benchmark::State& state) {
  HeavyHitters sketch(HeavyHittersOptions{}, SystemClock::Instance());
  const auto& keys = Keys();
  for (size_t i = 0; i < 100'000; ++i) sketch.Note(keys[i], HeavyHitters::Event::kCreate);
  for (auto _ : state) benchmark::DoNotOptimize(sketch.Top(10));
}
BENCHMARK(BM_HeavyHittersTop10);

}  // namespace
}  // namespace sluice::admission
