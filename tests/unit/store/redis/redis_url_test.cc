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

TEST(RedisUrlTest, SentinelsAndTheMasterName) {
  auto o =
      ParseRedisUrl("rediss+sentinel://sluice:pw@s1.internal:26380,s2.internal,10.0.0.3:1/main");
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_TRUE(o->tls);
  EXPECT_EQ(o->user, "sluice");
  EXPECT_EQ(o->password, "pw");
  ASSERT_EQ(o->sentinels.size(), 3u);
  EXPECT_EQ(o->sentinels[0].host, "s1.internal");
  EXPECT_EQ(o->sentinels[0].port, 26380);
  EXPECT_EQ(o->sentinels[1].host, "s2.internal");
  EXPECT_EQ(o->sentinels[1].port, 26379);
  EXPECT_EQ(o->sentinels[2].host, "10.0.0.3");
  EXPECT_EQ(o->sentinel_master, "main");
  EXPECT_EQ(RedactedRedisUrl(*o),
            "rediss+sentinel://sluice:***@s1.internal:26380,s2.internal:26379,10.0.0.3:1/main");
  auto plain = ParseRedisUrl("redis+sentinel://127.0.0.1:5000/mymaster");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tls);
  EXPECT_EQ(plain->sentinels.size(), 1u);
  // A plain URL names no sentinels: the client connects to its host as before.
  EXPECT_TRUE(ParseRedisUrl("redis://h:1")->sentinels.empty());
}

TEST(RedisUrlTest, SentinelUrlsNeedAMasterAndGoodHosts) {
  for (const char* bad :
       {"redis+sentinel://u:hunter2@h:1", "redis+sentinel://u:hunter2@h:1/",
        "redis+sentinel://u:hunter2@h:1,,h:2/m", "redis+sentinel://u:hunter2@h:0/m",
        "redis+sentinel://u:hunter2@h:1/m/x", "redis+sentinel://u:hunter2@/m"}) {
    auto o = ParseRedisUrl(bad);
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.error().message.find("hunt"), std::string::npos) << o.error().message;
  }
}

}  // namespace
}  // namespace sluice::store
