// The heavy-hitters sketch and the keyed limiter's use histogram: abuse told apart from growth
// (docs/overload.md, "Abuse or growth"). Time moves by hand; nothing here asserts speed.
#include "sluice/admission/heavy_hitters.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sluice/admission/client_key.h"
#include "sluice/admission/keyed_limiter.h"

namespace sluice::admission {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Event = HeavyHitters::Event;

const std::vector<double> kShareBounds = {0.1, 0.25, 0.5, 0.75, 0.9, 1.0};

std::vector<std::string> KeysOf(const std::vector<HeavyHitter>& top) {
  std::vector<std::string> keys;
  for (const auto& h : top) keys.push_back(h.key);
  return keys;
}

// 1,000 honest clients make three creates each within their budget; three abusive clients in one
// /24 try twenty a second for a minute and are mostly refused. The sketch must name the three
// (and their /24), and the limiter's histogram must show two humps: everyone near nothing, three
// keys at their budget.
TEST(HeavyHittersTest, ThreeAbusersAmongAThousandHonestKeysAreTheTopThree) {
  ManualClock clock;
  HeavyHitters keys(HeavyHittersOptions{}, clock);
  HeavyHitters prefixes(HeavyHittersOptions{}, clock);
  KeyedLimiterOptions limits;
  limits.policies = {{.rate_per_second = 1, .burst = 10}};
  limits.hold_recent_users = true;
  KeyedLimiter limiter(limits, clock);

  std::vector<std::string> honest;
  for (int i = 0; i < 1000; ++i) {
    honest.push_back("10." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ".1");
  }
  const std::vector<std::string> abusers = {"203.0.113.7", "203.0.113.8", "203.0.113.9"};
  // Which of the 1,199 steps each honest create falls on: spread over the minute, seeded.
  std::mt19937 rng(14);
  std::uniform_int_distribution<int> step_of(0, 1198);
  std::vector<std::vector<int>> honest_at(1199);
  for (int i = 0; i < 1000; ++i) {
    for (int n = 0; n < 3; ++n) honest_at[static_cast<size_t>(step_of(rng))].push_back(i);
  }
  auto attempt = [&](const std::string& key) {
    const bool allowed = limiter.TryTake(key).allowed();
    const Event e = allowed ? Event::kCreate : Event::kRefusal;
    keys.Note(key, e);
    prefixes.Note(ClientPrefix(key), e);
    return allowed;
  };
  int honest_refused = 0;
  for (int step = 0; step < 1199; ++step) {  // 59.95 s of 50 ms steps, all in one window
    for (const std::string& a : abusers) attempt(a);
    for (int i : honest_at[static_cast<size_t>(step)]) {
      if (!attempt(honest[static_cast<size_t>(i)])) ++honest_refused;
    }
    clock.Advance(milliseconds(50));
  }
  clock.Advance(milliseconds(40));
  ASSERT_EQ(honest_refused, 0) << "the honest keys must stay within their budget";

  const auto top = keys.Top(10);
  ASSERT_GE(top.size(), 3u);
  std::vector<std::string> first3 = KeysOf({top.begin(), top.begin() + 3});
  std::sort(first3.begin(), first3.end());
  EXPECT_EQ(first3, abusers);
  for (size_t i = 0; i < 3; ++i) {
    // Each abuser had its burst and about one a second: ~69 creates, the rest refused.
    EXPECT_GE(top[i].creates, 60u);
    EXPECT_LE(top[i].creates, 70u);
    EXPECT_GE(top[i].refusals, 1100u);
  }
  for (size_t i = 3; i < top.size(); ++i) EXPECT_LE(top[i].creates + top[i].refusals, 3u);
  const auto top_prefixes = prefixes.Top(10);
  ASSERT_FALSE(top_prefixes.empty());
  EXPECT_EQ(top_prefixes.front().key, "203.0.113.0/24");

  // Bimodal: a thousand keys below a tenth of their budget, three at it, nothing in between.
  const std::vector<uint64_t> hist = limiter.UseHistogram(kShareBounds);
  ASSERT_EQ(hist.size(), kShareBounds.size() + 1);
  EXPECT_EQ(hist[0], 1000u);
  EXPECT_EQ(hist[5], 3u);  // (0.9, 1.0]
  EXPECT_EQ(hist[1] + hist[2] + hist[3] + hist[4] + hist[6], 0u);
}

// Growth looks different: the same thousand keys, no abuser, and everyone is in the lowest bucket.
TEST(HeavyHittersTest, ManyKeysUnderBudgetLookLikeGrowth) {
  ManualClock clock;
  KeyedLimiterOptions limits;
  limits.policies = {{.rate_per_second = 1, .burst = 10}};
  KeyedLimiter limiter(limits, clock);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(limiter.TryTake("k" + std::to_string(i)).allowed());
    if (i % 2 == 0) {
      ASSERT_TRUE(limiter.TryTake("k" + std::to_string(i)).allowed());
    }
  }
  const auto hist = limiter.UseHistogram(kShareBounds);
  EXPECT_EQ(hist[0], 1000u);
  EXPECT_EQ(hist[5] + hist[6], 0u);
}

TEST(HeavyHittersTest, MemoryStaysBoundedUnderAMillionDistinctKeys) {
  ManualClock clock;
  HeavyHittersOptions options;
  options.capacity = 64;
  HeavyHitters sketch(options, clock);
  for (int i = 0; i < 1'000'000; ++i) {
    sketch.Note("key-" + std::to_string(i), Event::kCreate);
    // One key among them does one event in twenty: well above N/k per generation.
    if (i % 20 == 0) sketch.Note("the-heavy-one", Event::kRefusal);
    if (i % 100'000 == 0) clock.Advance(seconds(10));  // crosses a generation on the way
  }
  EXPECT_LE(sketch.counters(), 2 * options.capacity);
  const auto top = sketch.Top(1);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top.front().key, "the-heavy-one");
}

TEST(HeavyHittersTest, CountsFadeOverTheWindowAndThenVanish) {
  ManualClock clock;
  HeavyHitters sketch(HeavyHittersOptions{}, clock);
  for (int i = 0; i < 100; ++i) sketch.Note("a", Event::kCreate);
  clock.Advance(seconds(30));
  ASSERT_EQ(sketch.Top(5).size(), 1u);
  EXPECT_EQ(sketch.Top(5).front().creates, 100u);  // still the current generation
  clock.Advance(seconds(60));                      // 90 s: the previous one, half within
  ASSERT_EQ(sketch.Top(5).size(), 1u);
  EXPECT_EQ(sketch.Top(5).front().creates, 50u);
  clock.Advance(seconds(40));  // 130 s: two windows on, nothing recent
  EXPECT_TRUE(sketch.Top(5).empty());
  EXPECT_EQ(sketch.counters(), 0u);
}

TEST(HeavyHittersTest, ANewcomerInheritsTheSmallestCountAsItsError) {
  ManualClock clock;
  HeavyHittersOptions options;
  options.capacity = 2;
  options.shards = 1;
  HeavyHitters sketch(options, clock);
  for (int i = 0; i < 5; ++i) sketch.Note("a", Event::kCreate);
  for (int i = 0; i < 3; ++i) sketch.Note("b", Event::kRefusal);
  sketch.Note("c", Event::kCreate);  // takes b's counter (the smallest, 3)
  const auto top = sketch.Top(5);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].key, "a");
  EXPECT_EQ(top[0].creates, 5u);
  EXPECT_EQ(top[1].key, "c");
  EXPECT_EQ(top[1].creates, 1u);
  EXPECT_EQ(top[1].refusals, 0u);
  EXPECT_EQ(top[1].error, 3u);
}

TEST(HeavyHittersTest, UseHistogramForgetsTheOldWindowAndCountsRefunds) {
  ManualClock clock;
  KeyedLimiterOptions limits;
  limits.policies = {{.rate_per_second = 1, .burst = 10}};  // at most 70 in a minute
  KeyedLimiter limiter(limits, clock);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(limiter.TryTake("a").allowed());
  limiter.Refund("a", 3);  // 7 left: 0.1 of 70
  auto hist = limiter.UseHistogram(kShareBounds);
  EXPECT_EQ(hist[0], 1u);
  limiter.NoteUse("b", 35);  // half of it, counted without a take
  hist = limiter.UseHistogram(kShareBounds);
  EXPECT_EQ(hist[2], 1u);
  clock.Advance(seconds(121));
  hist = limiter.UseHistogram(kShareBounds);
  for (uint64_t n : hist) EXPECT_EQ(n, 0u);
}

TEST(HeavyHittersTest, PrefixesAreTheSlash24AndTheSlash48) {
  EXPECT_EQ(ClientPrefix("203.0.113.77"), "203.0.113.0/24");
  EXPECT_EQ(ClientPrefix("2001:db8:1:2::/64"), "2001:db8:1::/48");
  EXPECT_EQ(ClientPrefix("/run/sluice.sock"), "/run/sluice.sock");
}

// Under ThreadSanitizer (label admission): many threads note at once and read the top meanwhile.
TEST(HeavyHittersTest, ManyThreadsNoteAndReadAtOnce) {
  ManualClock clock;
  HeavyHittersOptions options;
  options.capacity = 64;
  HeavyHitters sketch(options, clock);
  constexpr int kThreads = 6;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::uniform_int_distribution<int> cold(0, 5000);
      for (int i = 0; i < 20'000; ++i) {
        sketch.Note("cold-" + std::to_string(cold(rng)), Event::kCreate);
        if (i % 2 == 0) sketch.Note("hot-" + std::to_string(t), Event::kRefusal);
        if (t == 0 && i % 1000 == 0) {
          (void)sketch.Top(10);
          clock.Advance(milliseconds(500));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(sketch.counters(), 2 * options.capacity);
  std::set<std::string> top;
  for (const auto& h : sketch.Top(kThreads)) top.insert(h.key);
  for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(top.count("hot-" + std::to_string(t))) << t;
}

}  // namespace
}  // namespace sluice::admission
