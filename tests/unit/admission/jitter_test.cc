#include "sluice/admission/jitter.h"

#include <gtest/gtest.h>

#include <set>

namespace sluice::admission {
namespace {

using std::chrono::milliseconds;

TEST(JitteredRetryAfterTest, StaysWithinFiveToFifteenAndUsesAllOfIt) {
  JitteredRetryAfter retry_after({.seed = 1});
  std::set<int> seen;
  for (int i = 0; i < 2000; ++i) {
    const int s = retry_after.NextSeconds();
    ASSERT_GE(s, 5);
    ASSERT_LE(s, 15);
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 11u);
}

TEST(JitteredRetryAfterTest, RoughlyUniform) {
  JitteredRetryAfter retry_after({.min_seconds = 1, .max_seconds = 4, .seed = 9});
  int counts[5] = {};
  for (int i = 0; i < 40'000; ++i) ++counts[retry_after.NextSeconds()];
  for (int s = 1; s <= 4; ++s) {
    EXPECT_GT(counts[s], 9'000) << s;
    EXPECT_LT(counts[s], 11'000) << s;
  }
}

TEST(JitteredRetryAfterTest, SameSeedSameSequence) {
  JitteredRetryAfter a({.seed = 42});
  JitteredRetryAfter b({.seed = 42});
  JitteredRetryAfter c({.seed = 43});
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const int x = a.NextSeconds();
    EXPECT_EQ(x, b.NextSeconds());
    differs |= x != c.NextSeconds();
  }
  EXPECT_TRUE(differs);
}

TEST(JitteredRetryAfterTest, DegenerateRangeIsConstant) {
  JitteredRetryAfter retry_after({.min_seconds = 7, .max_seconds = 7, .seed = 3});
  for (int i = 0; i < 10; ++i) EXPECT_EQ(retry_after.NextSeconds(), 7);
}

TEST(JitterTest, DurationsStayInRange) {
  Jitter jitter(5);
  for (int i = 0; i < 1000; ++i) {
    const Duration d = jitter.Between(milliseconds(10), milliseconds(50));
    ASSERT_GE(d, milliseconds(10));
    ASSERT_LE(d, milliseconds(50));
  }
}

}  // namespace
}  // namespace sluice::admission
