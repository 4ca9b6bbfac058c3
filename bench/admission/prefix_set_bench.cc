// A reputation feed's cost (include/sluice/admission/prefix_set.h) at a million prefixes: a
// create's lookup, against the reference of the same run, a hash lookup of the address (what
// the per-key limiter does for every create); the netset's parse and the set's build (a reload);
// and the set's memory, as counters.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "sluice/admission/prefix_set.h"

namespace sluice::admission {
namespace {

constexpr int kV4Prefixes = 900'000;
constexpr int kV6Prefixes = 100'000;

// A netset of kV4Prefixes IPv4 blocks (/16 to /32, most of them /24, as in FireHOL's and
// Spamhaus's lists) and kV6Prefixes IPv6 ones (/32 to /64).
const std::string& Netset() {
  static const std::string text = [] {
    std::mt19937 random(1);
    auto next = [&random](uint32_t below) { return static_cast<unsigned>(random() % below); };
    std::string out = "# a million prefixes\n";
    out.reserve(24u * (kV4Prefixes + kV6Prefixes));
    char line[64];
    for (int i = 0; i < kV4Prefixes; ++i) {
      const uint32_t a = random();
      const int bits = 16 + static_cast<int>(random() % 17);
      std::snprintf(line, sizeof line, "%u.%u.%u.%u/%d\n", a >> 24, (a >> 16) & 255, (a >> 8) & 255,
                    a & 255, random() % 4 == 0 ? bits : 24);
      out += line;
    }
    for (int i = 0; i < kV6Prefixes; ++i) {
      std::snprintf(line, sizeof line, "2%03x:%x:%x:%x::/%d\n", next(4096), next(65536),
                    next(65536), next(65536), 32 + static_cast<int>(next(33)));
      out += line;
    }
    return out;
  }();
  return text;
}

const std::vector<Cidr>& Blocks() {
  static const std::vector<Cidr> blocks = *ParseNetset(Netset());
  return blocks;
}

const PrefixSet& Set() {
  static const PrefixSet set(Blocks());
  return set;
}

std::vector<IpAddress> Probes(bool v4) {
  std::mt19937 random(2);
  std::vector<IpAddress> out(1 << 16);
  for (IpAddress& a : out) {
    if (v4) {
      a = *IpAddress::Parse("0.0.0.0");
      for (int i = 12; i < 16; ++i) a.bytes[i] = static_cast<uint8_t>(random());
    } else {
      a.bytes[0] = 0x20;
      for (int i = 1; i < 16; ++i) a.bytes[i] = static_cast<uint8_t>(random());
    }
  }
  return out;
}

void BM_PrefixSetContains(benchmark::State& state) {
  const PrefixSet& set = Set();
  const std::vector<IpAddress> probes = Probes(state.range(0) == 4);
  size_t i = 0;
  int64_t hits = 0;
  for (auto _ : state) {
    hits += set.Contains(probes[i++ & 0xffff]) ? 1 : 0;
  }
  benchmark::DoNotOptimize(hits);
  state.counters["ranges"] = double(set.ranges());
  state.counters["MiB"] = double(set.MemoryBytes()) / (1 << 20);
  state.counters["hit_share"] = double(hits) / double(state.iterations());
}
BENCHMARK(BM_PrefixSetContains)->Arg(4)->Arg(6);

// The reference: a hash set of as many 64-bit keys, looked up with the same probes.
void BM_HashLookupReference(benchmark::State& state) {
  static const std::unordered_set<uint64_t> keys = [] {
    std::unordered_set<uint64_t> k;
    std::mt19937_64 random(3);
    for (int i = 0; i < kV4Prefixes + kV6Prefixes; ++i) k.insert(random());
    return k;
  }();
  const std::vector<IpAddress> probes = Probes(true);
  size_t i = 0;
  int64_t hits = 0;
  for (auto _ : state) {
    uint64_t key = 0;
    for (int b = 8; b < 16; ++b) key = (key << 8) | probes[i & 0xffff].bytes[b];
    ++i;
    hits += static_cast<int64_t>(keys.count(key));
  }
  benchmark::DoNotOptimize(hits);
}
BENCHMARK(BM_HashLookupReference);

// A reload's two halves, once each per iteration.
void BM_ParseNetsetMillion(benchmark::State& state) {
  const std::string& text = Netset();
  for (auto _ : state) {
    benchmark::DoNotOptimize(ParseNetset(text));
  }
  state.counters["MB"] = double(text.size()) / 1e6;
}
BENCHMARK(BM_ParseNetsetMillion)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_BuildPrefixSetMillion(benchmark::State& state) {
  const std::vector<Cidr>& blocks = Blocks();
  for (auto _ : state) {
    benchmark::DoNotOptimize(PrefixSet(blocks));
  }
}
BENCHMARK(BM_BuildPrefixSetMillion)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace sluice::admission
