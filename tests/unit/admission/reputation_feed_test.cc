// Reputation feeds (include/sluice/admission/reputation_feed.h): the `feeds` entry's syntax, and
// which feed lists an address key of either family, in FireHOL's and Spamhaus DROP's formats.
// Nothing here depends on time.
#include "sluice/admission/reputation_feed.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace sluice::admission {
namespace {

Feed MakeFeed(std::string name, FeedAction action, std::string_view netset) {
  Result<std::vector<Cidr>> blocks = ParseNetset(netset);
  EXPECT_TRUE(blocks.ok()) << blocks.error().message;
  return Feed{{std::move(name), std::move(action), "/dev/null"},
              std::make_shared<const PrefixSet>(*blocks),
              blocks->size()};
}

TEST(ParseFeedSpecTest, ReadsEachAction) {
  Result<FeedSpec> refuse = ParseFeedSpec("drop=refuse:/etc/sluice/drop.txt");
  ASSERT_TRUE(refuse.ok()) << refuse.error().message;
  EXPECT_EQ(refuse->name, "drop");
  EXPECT_EQ(refuse->action.kind, FeedActionKind::kRefuse);
  EXPECT_EQ(refuse->action.Name(), "refuse");
  EXPECT_EQ(refuse->path, "/etc/sluice/drop.txt");

  Result<FeedSpec> cls = ParseFeedSpec("cloud=class:datacenter:/var/lib/feeds/a:b.netset");
  ASSERT_TRUE(cls.ok()) << cls.error().message;
  EXPECT_EQ(cls->action.kind, FeedActionKind::kClass);
  EXPECT_EQ(cls->action.budget_class, "datacenter");
  EXPECT_EQ(cls->action.Name(), "class:datacenter");
  EXPECT_EQ(cls->path, "/var/lib/feeds/a:b.netset");  // a colon in the path is the path's

  Result<FeedSpec> challenge = ParseFeedSpec("tor=challenge:tor.ipset");
  ASSERT_TRUE(challenge.ok()) << challenge.error().message;
  EXPECT_EQ(challenge->action.kind, FeedActionKind::kChallenge);
  // Until proof of work is built, a challenge is the class "challenge".
  EXPECT_EQ(challenge->action.budget_class, "challenge");
  EXPECT_EQ(challenge->action.Name(), "challenge");
}

TEST(ParseFeedSpecTest, RefusesWhatIsNotAFeedAndSaysWhy) {
  for (const char* bad : {"drop", "=refuse:/x", "Drop=refuse:/x", "drop=block:/x", "drop=refuse:",
                          "a=class:/x", "a=class:Data:/x", "a=class:dc", "a b=refuse:/x"}) {
    Result<FeedSpec> spec = ParseFeedSpec(bad);
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_EQ(spec.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(spec.error().message.find(bad), std::string::npos) << spec.error().message;
  }
}

// FireHOL writes '#' comments and bare addresses; Spamhaus DROP writes "CIDR ; SBLnnn".
constexpr std::string_view kFirehol =
    "# firehol_level1\n#\n192.0.2.0/24\n198.51.100.7\n2001:db8:aa00::/40\n";
constexpr std::string_view kDrop =
    "; Spamhaus DROP List 2026/12/01\n203.0.113.0/25 ; SBL000001\n2001:db8:ffff::/48 ; SBL2\n";

TEST(FeedSetTest, MatchesKeysOfBothFamiliesInEitherFormat) {
  const FeedSet set({MakeFeed("firehol", {FeedActionKind::kRefuse, ""}, kFirehol),
                     MakeFeed("drop", {FeedActionKind::kClass, "datacenter"}, kDrop)});
  EXPECT_EQ(set.Match("192.0.2.200"), 0);
  EXPECT_EQ(set.Match("198.51.100.7"), 0);
  EXPECT_EQ(set.Match("198.51.100.8"), -1);  // a bare address is one address
  EXPECT_EQ(set.Match("203.0.113.127"), 1);
  EXPECT_EQ(set.Match("203.0.113.128"), -1);
  // IPv6 keys are /64s (ClientKeyOf): listed when the /64's first address is.
  EXPECT_EQ(set.Match("2001:db8:aa12:3456::/64"), 0);
  EXPECT_EQ(set.Match("2001:db8:ffff:1::/64"), 1);
  EXPECT_EQ(set.Match("2001:db8:fffe:1::/64"), -1);
  EXPECT_EQ(set.Match("unix"), -1);
  EXPECT_EQ(set.Match(""), -1);
}

TEST(FeedSetTest, TheFirstFeedInTheOperatorsOrderDecides) {
  const Feed wide = MakeFeed("wide", {FeedActionKind::kClass, "datacenter"}, "10.0.0.0/8\n");
  const Feed narrow = MakeFeed("narrow", {FeedActionKind::kRefuse, ""}, "10.1.0.0/16\n");
  EXPECT_EQ(FeedSet({wide, narrow}).Match("10.1.2.3"), 0);
  EXPECT_EQ(FeedSet({narrow, wide}).Match("10.1.2.3"), 0);
  EXPECT_EQ(FeedSet({narrow, wide}).Match("10.2.2.3"), 1);
  EXPECT_EQ(FeedSet().Match("10.1.2.3"), -1);
}

}  // namespace
}  // namespace sluice::admission
