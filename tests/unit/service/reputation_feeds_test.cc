// ReputationFeeds (include/sluice/service/reputation_feeds.h): what a create from a listed network
// gets for each action, that a class's budgets are its own (per key and class-wide, on a
// ManualClock), that a refund gives back what a later refusal would otherwise have spent, and the
// counts and gauges a feed leaves.
#include "sluice/service/reputation_feeds.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace sluice::service {
namespace {

using admission::FeedAction;
using admission::FeedActionKind;

admission::Feed MakeFeed(std::string name, FeedAction action, std::string_view netset) {
  auto blocks = admission::ParseNetset(netset);
  EXPECT_TRUE(blocks.ok());
  return admission::Feed{{std::move(name), std::move(action), "/dev/null"},
                         std::make_shared<const admission::PrefixSet>(*blocks),
                         blocks->size()};
}

class ReputationFeedsTest : public ::testing::Test {
 protected:
  ReputationFeedsTest() : feeds_(clock_, metrics_, Rates()) {
    feeds_.Replace(admission::FeedSet(
        {MakeFeed("drop", {FeedActionKind::kRefuse, ""}, "192.0.2.0/24 ; SBL1\n"),
         MakeFeed("cloud", {FeedActionKind::kClass, "datacenter"}, "198.51.100.0/24\n"),
         MakeFeed("tor", {FeedActionKind::kChallenge, "challenge"}, "203.0.113.0/24\n")}));
  }
  static FeedClassRates Rates() {
    FeedClassRates r;
    r.per_key = {1, 2};    // 2 at once, one a second
    r.per_class = {1, 3};  // 3 at once for the whole class
    return r;
  }
  uint64_t Hits(const std::string& feed, const std::string& action) {
    return metrics_.GetCounter("sluice_feed_hits_total", "", {{"feed", feed}, {"action", action}})
        .value();
  }
  double Entries(const std::string& feed) {
    return metrics_.GetGauge("sluice_feed_entries", "", {{"feed", feed}}).value();
  }

  ManualClock clock_;
  MetricsRegistry metrics_;
  ReputationFeeds feeds_;
};

TEST_F(ReputationFeedsTest, AnUnlistedCreatorIsNotJudged) {
  const FeedVerdict v = feeds_.Judge("10.0.0.1");
  EXPECT_FALSE(v.refusal);
  EXPECT_TRUE(v.charged_class.empty());
  EXPECT_EQ(Hits("drop", "refuse") + Hits("cloud", "class:datacenter"), 0u);
}

TEST_F(ReputationFeedsTest, ARefuseFeedRefusesWithItsTextNamingTheFeedNeverTheRange) {
  const FeedVerdict v = feeds_.Judge("192.0.2.9");
  ASSERT_TRUE(v.refusal);
  EXPECT_EQ(v.refusal->code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(v.refusal->reason, "feed_refused");
  EXPECT_NE(v.refusal->message.find("'drop'"), std::string::npos) << v.refusal->message;
  EXPECT_EQ(v.refusal->message.find("192.0.2"), std::string::npos) << v.refusal->message;
  EXPECT_EQ(Hits("drop", "refuse"), 1u);
}

TEST_F(ReputationFeedsTest, TheOperatorsTextReplacesOursWithTheFeedNamed) {
  feeds_.Reconfigure(Rates(), "blocked by {feed}; write to abuse@example.org");
  const FeedVerdict v = feeds_.Judge("192.0.2.9");
  ASSERT_TRUE(v.refusal);
  EXPECT_EQ(v.refusal->message, "blocked by drop; write to abuse@example.org");
}

TEST_F(ReputationFeedsTest, AClassKeyIsLimitedByItsPerKeyBucketWithRetryAfter) {
  EXPECT_EQ(feeds_.Judge("198.51.100.1").charged_class, "datacenter");
  EXPECT_EQ(feeds_.Judge("198.51.100.1").charged_class, "datacenter");
  const FeedVerdict third = feeds_.Judge("198.51.100.1");
  ASSERT_TRUE(third.refusal);
  EXPECT_EQ(third.refusal->code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(third.refusal->reason, "feed_class_key");
  EXPECT_EQ(third.refusal->retry_after_seconds, 1);
  EXPECT_EQ(Hits("cloud", "class:datacenter"), 3u);
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_FALSE(feeds_.Judge("198.51.100.1").refusal);
}

TEST_F(ReputationFeedsTest, AClassWideBucketBindsTheClassAndOnlyIt) {
  // Three keys of the class take its three class-wide tokens; a fourth key, with a full bucket of
  // its own, is refused for the class.
  for (const char* key : {"198.51.100.1", "198.51.100.2", "198.51.100.3"}) {
    EXPECT_FALSE(feeds_.Judge(key).refusal) << key;
  }
  const FeedVerdict fourth = feeds_.Judge("198.51.100.4");
  ASSERT_TRUE(fourth.refusal);
  EXPECT_EQ(fourth.refusal->reason, "feed_class");
  // Another class and the unlisted are untouched: a budget of their own.
  EXPECT_EQ(feeds_.Judge("203.0.113.5").charged_class, "challenge");
  EXPECT_FALSE(feeds_.Judge("10.0.0.1").refusal);
  EXPECT_EQ(Hits("tor", "challenge"), 1u);
}

TEST_F(ReputationFeedsTest, ARefundGivesBackBothBuckets) {
  for (int i = 0; i < 2; ++i) {
    const FeedVerdict v = feeds_.Judge("198.51.100.1");
    ASSERT_FALSE(v.refusal);
    feeds_.Refund(v, "198.51.100.1");
  }
  // Nothing was spent: the key's burst of 2 and the class's 3 are all there.
  EXPECT_FALSE(feeds_.Judge("198.51.100.1").refusal);
  EXPECT_FALSE(feeds_.Judge("198.51.100.1").refusal);
  EXPECT_FALSE(feeds_.Judge("198.51.100.2").refusal);
}

TEST_F(ReputationFeedsTest, EntriesAreAGaugePerFeedAndAFeedNoLongerDeclaredReadsZero) {
  EXPECT_EQ(Entries("drop"), 1);
  feeds_.Replace(admission::FeedSet({MakeFeed("cloud", {FeedActionKind::kClass, "datacenter"},
                                              "198.51.100.0/24\n10.0.0.0/8\n")}));
  EXPECT_EQ(Entries("cloud"), 2);
  EXPECT_EQ(Entries("drop"), 0);
  // And the replaced set decides from now on.
  EXPECT_FALSE(feeds_.Judge("192.0.2.9").refusal);
  EXPECT_EQ(feeds_.Judge("10.1.1.1").charged_class, "datacenter");
}

}  // namespace
}  // namespace sluice::service
