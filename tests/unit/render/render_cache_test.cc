#include "sluice/render/render_cache.h"

#include <gtest/gtest.h>

namespace sluice::render {
namespace {

std::shared_ptr<const Rendering> Bytes(size_t n) {
  return std::make_shared<const Rendering>(Rendering{.html = std::string(n, 'x')});
}

TEST(RenderCacheTest, EvictsLeastRecentlyUsedToStayWithinItsBytes) {
  // Eight entries of 100 bytes and a 3-byte key fill it exactly.
  RenderCache cache(8 * 103);
  for (char id = 'a'; id < 'a' + 8; ++id)
    cache.Put(RenderCache::Key(std::string(1, id), "c"), Bytes(100));
  ASSERT_NE(cache.Get(RenderCache::Key("a", "c")), nullptr);  // a is now the most recent
  cache.Put(RenderCache::Key("i", "c"), Bytes(100));
  EXPECT_NE(cache.Get(RenderCache::Key("a", "c")), nullptr);
  EXPECT_EQ(cache.Get(RenderCache::Key("b", "c")), nullptr);
  EXPECT_NE(cache.Get(RenderCache::Key("i", "c")), nullptr);
  EXPECT_EQ(cache.bytes_used(), 8u * 103);
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

// One rendering may not empty the cache of every other: it may hold at most an eighth of it.
TEST(RenderCacheTest, AnEntryLargerThanItsShareOfTheBudgetIsNotKept) {
  RenderCache cache(8000);
  for (char id = 'a'; id < 'a' + 7; ++id)
    cache.Put(RenderCache::Key(std::string(1, id), ""), Bytes(900));
  cache.Put(RenderCache::Key("huge", ""), Bytes(1001));
  EXPECT_EQ(cache.Get(RenderCache::Key("huge", "")), nullptr);
  for (char id = 'a'; id < 'a' + 7; ++id) {
    EXPECT_NE(cache.Get(RenderCache::Key(std::string(1, id), "")), nullptr) << id;
  }
  cache.Put(RenderCache::Key("fits", ""), Bytes(990));
  EXPECT_NE(cache.Get(RenderCache::Key("fits", "")), nullptr);
}

}  // namespace
}  // namespace sluice::render
