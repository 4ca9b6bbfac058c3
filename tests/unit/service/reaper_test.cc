// The orphan reaper (src/worker/janitor.cc): it deletes only bodies it can date as older than the
// floor and that have no row, walks a listing that misbehaves (repeats itself, goes backwards,
// ignores the cursor) without looping or counting a body twice, and keeps what it cannot date.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "../../support/run_sync.h"
#include "sluice/store/backends.h"
#include "sluice/worker/janitor.h"

namespace sluice::worker {
namespace {

using store::BlobInfo;
using store::PasteId;
using testing::RunSync;

constexpr int64_t kNow = 1'700'000'000;
constexpr int64_t kFloor = 3600;
constexpr int64_t kCutoff = kNow - kFloor;

PasteId Id(std::string_view text) { return *PasteId::Parse(text); }

std::vector<std::string> Strings(const std::vector<PasteId>& ids) {
  std::vector<std::string> out;
  for (const PasteId& id : ids) out.push_back(id.str());
  return out;
}

TEST(ReapDecision, OnlyDatedBodiesOlderThanTheFloorAreCandidates) {
  const std::vector<BlobInfo> page = {
      {Id("aaaaaaaaaaa1"), kCutoff - 1},   // old
      {Id("aaaaaaaaaaa2"), kCutoff},       // exactly at the floor: old
      {Id("aaaaaaaaaaa3"), kCutoff + 1},   // young
      {Id("aaaaaaaaaaa4"), std::nullopt},  // undated: a create in flight looks like this
      {Id("aaaaaaaaaaa5"), 0},             // a placeholder, not a date
      {Id("aaaaaaaaaaa6"), -62135596800},  // Go's zero time, 0001-01-01
      {Id("aaaaaaaaaaa7"), kNow + 86400},  // in the future: young
  };
  const ReapDecision d = DecideReap(page, "", kCutoff, 200);
  EXPECT_EQ(Strings(d.candidates), (std::vector<std::string>{"aaaaaaaaaaa1", "aaaaaaaaaaa2"}));
  EXPECT_EQ(d.undated, 3u);
  EXPECT_EQ(d.young, 2u);
  EXPECT_FALSE(d.stalled);
  EXPECT_EQ(d.next_cursor, "");  // a short page: the end, start over next time
}

TEST(ReapDecision, AFullPageMovesTheCursorToItsLastId) {
  const std::vector<BlobInfo> page = {{Id("aaaaaaaaaaa1"), kCutoff}, {Id("aaaaaaaaaaa2"), kCutoff}};
  const ReapDecision d = DecideReap(page, "", kCutoff, 2);
  EXPECT_EQ(d.next_cursor, "aaaaaaaaaaa2");
  EXPECT_FALSE(d.stalled);
}

TEST(ReapDecision, RepeatedIdsStallThePassAndAreCountedOnce) {
  const std::vector<BlobInfo> page = {{Id("aaaaaaaaaaa1"), kCutoff},
                                      {Id("aaaaaaaaaaa2"), kCutoff},
                                      {Id("aaaaaaaaaaa2"), kCutoff},
                                      {Id("aaaaaaaaaaa3"), kCutoff}};
  const ReapDecision d = DecideReap(page, "", kCutoff, 4);
  EXPECT_TRUE(d.stalled);
  EXPECT_EQ(Strings(d.candidates), (std::vector<std::string>{"aaaaaaaaaaa1", "aaaaaaaaaaa2"}));
  EXPECT_EQ(d.next_cursor, "");
}

TEST(ReapDecision, AListingThatIgnoresTheCursorStalls) {
  const std::vector<BlobInfo> page = {{Id("aaaaaaaaaaa1"), kCutoff}, {Id("aaaaaaaaaaa2"), kCutoff}};
  const ReapDecision d = DecideReap(page, "aaaaaaaaaaa2", kCutoff, 2);
  EXPECT_TRUE(d.stalled);
  EXPECT_TRUE(d.candidates.empty());
  EXPECT_EQ(d.next_cursor, "");
}

// A BlobStore whose listing is scripted: `pages` answers the Lists in turn (the last one again
// once they run out), whatever cursor is asked for. Deletes are recorded.
class ScriptedBlobStore final : public store::BlobStore {
 public:
  std::vector<std::vector<BlobInfo>> pages;
  std::vector<std::string> list_afters;
  std::vector<std::string> deleted;

  boost::asio::awaitable<Status> Put(PasteId, std::shared_ptr<const std::string>,
                                     admission::Deadline) override {
    co_return Ok();
  }
  boost::asio::awaitable<Result<std::string>> Get(PasteId, admission::Deadline) override {
    co_return MakeError(ErrorCode::kNotFound, "no", "not_found");
  }
  boost::asio::awaitable<Status> Delete(PasteId id, admission::Deadline) override {
    deleted.push_back(id.str());
    co_return Ok();
  }
  boost::asio::awaitable<Result<std::vector<BlobInfo>>> List(std::string after, size_t,
                                                             admission::Deadline) override {
    list_afters.push_back(after);
    const size_t at = std::min(list_afters.size() - 1, pages.size() - 1);
    co_return pages[at];
  }
};

class ReaperTest : public ::testing::Test {
 protected:
  std::unique_ptr<store::MetaStore> meta_ = store::MakeMemoryMetaStore();
  ScriptedBlobStore blobs_;
  service::PasteCache cache_{1 << 20};
  ManualClock clock_{kNow};
  MetricsRegistry metrics_;

  JanitorOptions Options(size_t batch) {
    JanitorOptions o;
    o.batch_size = batch;
    o.orphan_age_floor = std::chrono::seconds(kFloor);
    return o;
  }
  void Row(std::string_view id) {
    store::PasteMeta meta{Id(id), kNow - 2 * kFloor, kNow + 86400, 1, {}, false, {}};
    ASSERT_TRUE(RunSync(meta_->Insert(meta, admission::Deadline::Never())).ok());
  }
  uint64_t CounterValue(const std::string& name) { return metrics_.GetCounter(name, "").value(); }
};

TEST_F(ReaperTest, DeletesOldBodiesWithoutRowsAndKeepsTheRest) {
  Row("aaaaaaaaaaa2");
  blobs_.pages = {{{Id("aaaaaaaaaaa1"), kCutoff - 10},
                   {Id("aaaaaaaaaaa2"), kCutoff - 10},  // has a row
                   {Id("aaaaaaaaaaa3"), std::nullopt},  // undated
                   {Id("aaaaaaaaaaa4"), kNow - 5}}};    // seconds old
  Janitor janitor(*meta_, blobs_, cache_, clock_, metrics_, Options(200));
  EXPECT_EQ(RunSync(janitor.ReapOrphansOnce()), 1u);
  EXPECT_EQ(blobs_.deleted, (std::vector<std::string>{"aaaaaaaaaaa1"}));
  EXPECT_EQ(CounterValue("sluice_orphans_reaped_total"), 1u);
  EXPECT_EQ(CounterValue("sluice_orphans_undated_total"), 1u);
  EXPECT_EQ(CounterValue("sluice_reaper_stalls_total"), 0u);
}

TEST_F(ReaperTest, AListingThatRepeatsItselfIsReapedOnceAndEndsThePass) {
  // The same full page whatever the cursor: the first pass reaps it, the second sees it does not
  // advance, warns and starts over; nothing is deleted or counted twice in one pass.
  const std::vector<BlobInfo> page = {{Id("aaaaaaaaaaa1"), kCutoff - 10},
                                      {Id("aaaaaaaaaaa1"), kCutoff - 10},
                                      {Id("aaaaaaaaaaa2"), kCutoff - 10}};
  blobs_.pages = {page};
  Janitor janitor(*meta_, blobs_, cache_, clock_, metrics_, Options(3));
  EXPECT_EQ(RunSync(janitor.ReapOrphansOnce()), 1u);
  EXPECT_EQ(blobs_.deleted, (std::vector<std::string>{"aaaaaaaaaaa1"}));
  EXPECT_EQ(CounterValue("sluice_orphans_reaped_total"), 1u);
  EXPECT_EQ(CounterValue("sluice_reaper_stalls_total"), 1u);
  EXPECT_EQ(RunSync(janitor.ReapOrphansOnce()), 1u);
  EXPECT_EQ(blobs_.list_afters, (std::vector<std::string>{"", ""}));  // started over
}

TEST_F(ReaperTest, AFullPageIsFollowedFromItsLastId) {
  blobs_.pages = {{{Id("aaaaaaaaaaa1"), kNow}, {Id("aaaaaaaaaaa2"), kNow}},
                  {{Id("aaaaaaaaaaa3"), kNow}},
                  {{Id("aaaaaaaaaaa1"), kNow}}};
  Janitor janitor(*meta_, blobs_, cache_, clock_, metrics_, Options(2));
  for (int i = 0; i < 3; ++i) RunSync(janitor.ReapOrphansOnce());
  EXPECT_EQ(blobs_.list_afters, (std::vector<std::string>{"", "aaaaaaaaaaa2", ""}));
  EXPECT_TRUE(blobs_.deleted.empty());
  EXPECT_EQ(CounterValue("sluice_reaper_stalls_total"), 0u);
}

// Report retention on the injected clock: a report a review closed goes report_retention after
// the review, in batches; an open report of a live paste stays however old.
TEST_F(ReaperTest, HandledReportsGoAfterTheRetentionOpenOnesStay) {
  Row("rep000000001");
  Row("rep000000002");
  const admission::Deadline never = admission::Deadline::Never();
  const store::ReportPolicy review_only{.hide_threshold = 0};
  for (const char* network : {"192.0.1.0/24", "192.0.2.0/24", "192.0.3.0/24"}) {
    ASSERT_TRUE(RunSync(meta_->AddReport({Id("rep000000001"), network, "spam", "", kNow},
                                         review_only, never))
                    .ok());
  }
  ASSERT_TRUE(RunSync(meta_->AddReport({Id("rep000000002"), "192.0.1.0/24", "spam", "", kNow},
                                       review_only, never))
                  .ok());
  ASSERT_TRUE(
      RunSync(meta_->SetModeration(
                  Id("rep000000001"),
                  store::ModerationChange{store::Moderation::kNone, "fine", kNow + 10}, never))
          .ok());
  JanitorOptions options = Options(2);
  options.report_retention = std::chrono::hours(24);
  Janitor janitor(*meta_, blobs_, cache_, clock_, metrics_, options);
  clock_.Advance(std::chrono::hours(24));  // 10 s short of the retention
  EXPECT_EQ(RunSync(janitor.SweepReportsOnce()), 0u);
  clock_.Advance(std::chrono::seconds(10));
  EXPECT_EQ(RunSync(janitor.SweepReportsOnce()), 2u) << "a batch at a time";
  EXPECT_EQ(RunSync(janitor.SweepReportsOnce()), 1u);
  EXPECT_EQ(RunSync(janitor.SweepReportsOnce()), 0u);
  EXPECT_EQ(CounterValue("sluice_reports_purged_total"), 3u);
  clock_.Advance(std::chrono::hours(24 * 365));
  EXPECT_EQ(RunSync(janitor.SweepReportsOnce()), 0u);
  auto open = RunSync(meta_->OpenReports(std::nullopt, 10, never));
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->pastes.size(), 1u);
  EXPECT_EQ(open->pastes[0].id, Id("rep000000002"));
}

}  // namespace
}  // namespace sluice::worker
