#include "sluice/render/render_cache.h"

#include <gtest/gtest.h>

namespace sluice::render {
namespace {

std::shared_ptr<const std::string> Bytes(size_t n) {
  return std::make_shared<const std::string>(n, 'x');
}

TEST(RenderCacheTest, EvictsLeastRecentlyUsedToStayWithinItsBytes) {
  RenderCache cache(300);
  cache.Put(RenderCache::Key("a", "c"), Bytes(100));
  cache.Put(RenderCache::Key("b", "c"), Bytes(100));
  ASSERT_NE(cache.Get(RenderCache::Key("a", "c")), nullptr);  // a is now the most recent
  cache.Put(RenderCache::Key("c", "c"), Bytes(100));
  EXPECT_NE(cache.Get(RenderCache::Key("a", "c")), nullptr);
  EXPECT_EQ(cache.Get(RenderCache::Key("b", "c")), nullptr);
  EXPECT_NE(cache.Get(RenderCache::Key("c", "c")), nullptr);
  EXPECT_LE(cache.bytes_used(), 300u);
}

TEST(RenderCacheTest, KeyedByLanguageAndOffWhenZero) {
  RenderCache cache(1000);
  cache.Put(RenderCache::Key("a", "python"), Bytes(10));
  EXPECT_EQ(cache.Get(RenderCache::Key("a", "ruby")), nullptr);
  cache.Erase(RenderCache::Key("a", "python"));
  EXPECT_EQ(cache.Get(RenderCache::Key("a", "python")), nullptr);
  EXPECT_EQ(cache.bytes_used(), 0u);

  RenderCache off(0);
  off.Put(RenderCache::Key("a", "python"), Bytes(1));
  EXPECT_EQ(off.Get(RenderCache::Key("a", "python")), nullptr);
}

TEST(RenderCacheTest, AnEntryLargerThanTheBudgetIsNotKept) {
  RenderCache cache(100);
  cache.Put(RenderCache::Key("small", ""), Bytes(10));
  cache.Put(RenderCache::Key("huge", ""), Bytes(1000));
  EXPECT_EQ(cache.Get(RenderCache::Key("huge", "")), nullptr);
  EXPECT_NE(cache.Get(RenderCache::Key("small", "")), nullptr);
}

}  // namespace
}  // namespace sluice::render
