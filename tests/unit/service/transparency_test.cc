#include "sluice/service/transparency.h"

#include <gtest/gtest.h>

namespace sluice::service {
namespace {

TEST(TransparencyMonth, IsTheUtcMonthOfTheTime) {
  EXPECT_EQ(store::TransparencyMonth(1764547199), "2025-11");  // 2025-11-30T23:59:59Z
  EXPECT_EQ(store::TransparencyMonth(1764547200), "2025-12");  // 2025-12-01T00:00:00Z
  EXPECT_EQ(store::TransparencyMonth(0), "1970-01");
}

TEST(LastMonths, CountBackAcrossAYearNewestFirst) {
  const std::vector<std::string> months = LastMonths(1767225600, 3);  // 2026-01-01T00:00:00Z
  EXPECT_EQ(months, (std::vector<std::string>{"2026-01", "2025-12", "2025-11"}));
  EXPECT_EQ(LastMonths(1767225600, 12).back(), "2025-02");
}

TEST(TimeToActionBucket, IsTheFirstBoundThatHoldsTheTime) {
  EXPECT_EQ(store::TimeToActionBucket(-5), "60");
  EXPECT_EQ(store::TimeToActionBucket(60), "60");
  EXPECT_EQ(store::TimeToActionBucket(61), "120");
  EXPECT_EQ(store::TimeToActionBucket(3600), "3600");
  EXPECT_EQ(store::TimeToActionBucket(1209600), "1209600");
  EXPECT_EQ(store::TimeToActionBucket(1209601), "inf");
  // The error the docs state: each bound at most 2.5 times the one before.
  for (size_t i = 1; i < store::kTimeToActionBounds.size(); ++i) {
    EXPECT_LE(store::kTimeToActionBounds[i] * 2, store::kTimeToActionBounds[i - 1] * 5);
  }
}

TEST(TimeToActionQuantile, ReadsTheBucketOfTheRank) {
  // 10 actions: 4 within a minute, 5 within 15 minutes, 1 past two weeks.
  const std::map<std::string, int64_t> buckets = {{"60", 4}, {"900", 5}, {"inf", 1}};
  const auto median = TimeToActionQuantile(buckets, 0.5);
  ASSERT_TRUE(median);
  EXPECT_EQ(median->at_most_seconds, 900);  // the 5th smallest
  EXPECT_FALSE(median->beyond);
  const auto p95 = TimeToActionQuantile(buckets, 0.95);
  ASSERT_TRUE(p95);
  EXPECT_TRUE(p95->beyond);  // the 10th
  EXPECT_EQ(TimeToActionQuantile({{"60", 4}}, 0.95)->at_most_seconds, 60);
  EXPECT_FALSE(TimeToActionQuantile({}, 0.5));
  EXPECT_FALSE(TimeToActionQuantile({{"not-a-bound", 3}}, 0.5));
}

TEST(SummarizeTransparency, PutsEachCounterInItsMonthAndKeepsEmptyMonths) {
  const std::vector<store::TransparencyCount> rows = {
      {"2025-12", "withhold", "votes", 3},
      {"2025-12", "withhold", "notice", 1},
      {"2025-12", "takedown", "", 2},
      {"2025-12", "restore", "", 1},
      {"2025-12", "dismiss", "", 4},
      {"2025-12", "time_to_action", "300", 2},
      {"2025-12", "time_to_action", "3600", 1},
      {"2025-12", "reupload_blocked", "", 7},
      {"2025-12", "block", "network", 1},
      {"2025-12", "block", "content", 2},
      {"2025-12", "notice_category", "copyright", 2},
      {"2025-12", "notice_sender", "registrar", 2},
      {"2025-10", "takedown", "", 9},  // a month not asked for
      {"2025-12", "something_new", "", 5},
  };
  const TransparencyReport report = SummarizeTransparency(rows, {"2025-12", "2025-11"}, 42);
  ASSERT_EQ(report.months.size(), 2u);
  EXPECT_EQ(report.read_at, 42);
  const MonthFigures& d = report.months[0];
  EXPECT_EQ(d.month, "2025-12");
  EXPECT_EQ(d.withholds, (std::map<std::string, int64_t>{{"notice", 1}, {"votes", 3}}));
  EXPECT_EQ(d.takedowns, 2);
  EXPECT_EQ(d.restores, 1);
  EXPECT_EQ(d.dismissals, 4);
  EXPECT_EQ(d.timed_actions, 3);
  EXPECT_EQ(d.median->at_most_seconds, 300);
  EXPECT_EQ(d.p95->at_most_seconds, 3600);
  EXPECT_EQ(d.reuploads_blocked, 7);
  EXPECT_EQ(d.blocks, (std::map<std::string, int64_t>{{"content", 2}, {"network", 1}}));
  EXPECT_EQ(d.notices, 2);
  EXPECT_EQ(d.notices_by_category.at("copyright"), 2);
  EXPECT_EQ(d.notices_by_sender.at("registrar"), 2);
  const MonthFigures& n = report.months[1];
  EXPECT_EQ(n.month, "2025-11");
  EXPECT_EQ(n.takedowns, 0);
  EXPECT_FALSE(n.median);
}

}  // namespace
}  // namespace sluice::service
