// The cache URL (include/sluice/store/shared_state.h): schemes, credentials, and that neither an
// error message nor the URL shown in logs ever holds the password.
#include <gtest/gtest.h>

#include "sluice/store/shared_state.h"

namespace sluice::store {
namespace {

TEST(RedisUrlTest, PlainHostAndPort) {
  auto o = ParseRedisUrl("redis://cache.internal:6380/");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->host, "cache.internal");
  EXPECT_EQ(o->port, 6380);
  EXPECT_FALSE(o->tls);
  EXPECT_TRUE(o->password.empty());
  EXPECT_EQ(ParseRedisUrl("redis://h")->port, 6379);
}

TEST(RedisUrlTest, TlsUserAndPassword) {
  auto o = ParseRedisUrl("rediss://sluice:s3cr%40t:x@cache.internal:6380");
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->tls);
  EXPECT_EQ(o->user, "sluice");
  EXPECT_EQ(o->password, "s3cr@t:x");
  EXPECT_EQ(o->host, "cache.internal");
  EXPECT_EQ(RedactedRedisUrl(*o), "rediss://sluice:***@cache.internal:6380");
}

TEST(RedisUrlTest, PasswordAloneIsTheDefaultUser) {
  auto with_colon = ParseRedisUrl("redis://:pw@h:1");
  ASSERT_TRUE(with_colon.ok());
  EXPECT_EQ(with_colon->user, "");
  EXPECT_EQ(with_colon->password, "pw");
  EXPECT_EQ(RedactedRedisUrl(*with_colon), "redis://:***@h:1");
}

TEST(RedisUrlTest, AUserAloneTakesItsPasswordFromElsewhere) {
  auto o = ParseRedisUrl("rediss://alice@h:1");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->user, "alice");
  EXPECT_EQ(o->password, "");
  EXPECT_EQ(RedactedRedisUrl(*o), "rediss://alice@h:1");
}

TEST(RedisUrlTest, ErrorsNeverShowThePassword) {
  for (const char* bad : {"redis://u:hunter2@h:99999", "redis://u:hunter2@:1",
                          "rediss://u:hunter2@h:x", "redis://u:hunt%zzer2@h:1"}) {
    auto o = ParseRedisUrl(bad);
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(o.error().message.find("hunt"), std::string::npos) << o.error().message;
  }
  EXPECT_FALSE(ParseRedisUrl("http://h:1").ok());
  EXPECT_FALSE(ParseRedisUrl("redis://").ok());
}

}  // namespace
}  // namespace sluice::store
