#include "sluice/service/moderation.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "../../support/faulty_stores.h"
#include "../../support/run_sync.h"
#include "sluice/service/paste_service.h"
#include "sluice/store/backends.h"

namespace sluice::service {
namespace {

using testing::FaultyMetaStore;
using testing::RunSync;

store::ClientBlock BlockOf(std::string prefix, int64_t until) {
  return store::ClientBlock{std::move(prefix), "test", 0, until};
}

TEST(BlocklistTest, MatchesKeysAddressesAndPrefixesUntilTheyEnd) {
  Blocklist blocks;
  EXPECT_FALSE(blocks.Find("203.0.113.9", 50));
  blocks.Add(BlockOf("203.0.113.0/24", 100));
  blocks.Add(BlockOf("2001:db8::/48", 100));
  blocks.Add(BlockOf("198.51.100.7", 100));
  EXPECT_TRUE(blocks.Find("203.0.113.9", 50));
  EXPECT_FALSE(blocks.Find("203.0.113.9", 100)) << "a block ends at its until";
  EXPECT_FALSE(blocks.Find("203.0.114.1", 50));
  EXPECT_TRUE(blocks.Find("2001:db8:0:5::/64", 50)) << "an IPv6 key is its /64";
  EXPECT_FALSE(blocks.Find("2001:db9::/64", 50));
  EXPECT_TRUE(blocks.Find("198.51.100.7", 50));
  EXPECT_FALSE(blocks.Find("198.51.100.8", 50));
  blocks.Replace({BlockOf("192.0.2.1", 100)});
  EXPECT_FALSE(blocks.Find("203.0.113.9", 50));
  EXPECT_TRUE(blocks.Find("192.0.2.1", 50));
  EXPECT_TRUE(Blocklist::Check("10.0.0.0/8").ok());
  EXPECT_FALSE(Blocklist::Check("junk").ok());
  EXPECT_FALSE(Blocklist::Check("").ok());
}

class ModerationTest : public ::testing::Test {
 protected:
  static AdmissionOptions Limits() {
    AdmissionOptions o;
    o.ip_create_count = o.global_create_count = {1e6, 1e6};
    o.ip_create_bytes = o.global_create_bytes = {1e12, 1e12};
    o.ip_read = {1e6, 1e6};
    o.ip_report = {0.001, 3};
    return o;
  }

  struct Client final : ClientKeySource {
    explicit Client(std::string k) : key(std::move(k)) {}
    std::string Key() const override { return key; }
    std::string key;
  };

  store::PasteId Create(std::string body, std::string key = "192.0.2.1") {
    auto ticket = RunSync(service_.AdmitCreate(key, {body.size(), false}));
    EXPECT_TRUE(ticket.ok());
    auto created = RunSync(service_.Create(std::move(*ticket), std::move(body), ""), clock_);
    EXPECT_TRUE(created.ok());
    return created->id;
  }
  Result<CachedPaste> Read(const store::PasteId& id) {
    return RunSync(service_.Read(Client("192.0.2.1"), id.view()));
  }
  Result<ReportReceipt> Report(const store::PasteId& id, std::string key) {
    return RunSync(moderation_.Report(std::move(key), id.view(), "spam", "note"));
  }

  ManualClock clock_;
  MetricsRegistry metrics_;
  std::unique_ptr<store::MetaStore> meta_impl_ = store::MakeMemoryMetaStore();
  std::unique_ptr<store::BlobStore> blobs_ = store::MakeMemoryBlobStore(&clock_);
  FaultyMetaStore meta_{*meta_impl_};
  PasteCache cache_{1 << 20};
  AdmissionControl admission_{Limits(), clock_, metrics_};
  Blocklist blocks_;
  PasteService service_{meta_,    *blobs_,          cache_,  admission_, clock_,
                        metrics_, ServiceOptions{}, nullptr, &blocks_};
  ModerationService moderation_{
      meta_, *blobs_, cache_, admission_, blocks_, clock_, ModerationOptions{}};
};

TEST_F(ModerationTest, TheThirdDistinctNetworkWithholdsEvenACachedPaste) {
  const store::PasteId id = Create("text");
  ASSERT_TRUE(Read(id).ok());  // now in the process cache
  EXPECT_TRUE(Report(id, "10.0.1.1")->counted);
  EXPECT_FALSE(Report(id, "10.0.1.1")->counted);
  EXPECT_FALSE(Report(id, "10.0.2.1")->withheld);
  ASSERT_TRUE(Read(id).ok());
  auto third = Report(id, "10.0.3.1");
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(third->withheld);
  auto read = Read(id);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().code, ErrorCode::kWithheld);
  EXPECT_EQ(read.error().reason, "under_review");
  auto due = RunSync(meta_impl_->DueOutbox(clock_.UnixSeconds(), 10, admission::Deadline::Never()));
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ((*due)[0].kind, store::OutboxEntry::Kind::kPurgeEdge);

  ASSERT_TRUE(RunSync(moderation_.Dismiss(id.view(), "fine")).ok());
  auto again = Read(id);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again->body, "text");
  auto audit = RunSync(moderation_.Audit(10));
  ASSERT_EQ(audit->size(), 2u);
  EXPECT_EQ((*audit)[0].action, "dismiss");
  EXPECT_EQ((*audit)[1].action, "withhold");
}

// A notice (docs/moderation.md, "Notices") withholds even a cached paste with its own reason, is
// published once, warns once past 75% of its deadline, and the takedown is audited with it.
TEST_F(ModerationTest, ANoticeWithholdsWarnsOnceAndIsAuditedWithTheTakedown) {
  struct Recorder final : OperatorEventSink {
    void Publish(OperatorEvent e) noexcept override { events.push_back(std::move(e)); }
    size_t Count(std::string_view kind) const {
      return std::count_if(events.begin(), events.end(),
                           [&](const OperatorEvent& e) { return e.kind == kind; });
    }
    std::vector<OperatorEvent> events;
  } told;
  moderation_.TellOperator(&told);
  const store::PasteId id = Create("a phishing page");
  ASSERT_TRUE(Read(id).ok());  // now in the process cache
  NoticeRequest request{"abuse@hoster.example", "CASE-9", "phishing", {id.str()}, std::nullopt};
  auto receipt = RunSync(moderation_.AddNotice(request));
  ASSERT_TRUE(receipt.ok()) << receipt.error().message;
  EXPECT_TRUE(receipt->created);
  auto read = Read(id);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().reason, "withheld_notice");
  EXPECT_EQ(told.Count("notice"), 1u);
  EXPECT_TRUE(RunSync(moderation_.AddNotice(request)).ok());
  EXPECT_EQ(told.Count("notice"), 1u) << "the same reference again is no new notice";

  // takedown_deadline is an hour: the warning comes past 45 minutes, once.
  clock_.Advance(std::chrono::minutes(44));
  RunSync(moderation_.WarnOfDeadlines());
  EXPECT_EQ(told.Count("deadline_warning"), 0u);
  clock_.Advance(std::chrono::minutes(2));
  RunSync(moderation_.WarnOfDeadlines());
  RunSync(moderation_.WarnOfDeadlines());
  ASSERT_EQ(told.Count("deadline_warning"), 1u);
  EXPECT_EQ(told.events.back().paste_id, id.str());

  ASSERT_TRUE(RunSync(moderation_.Takedown(id.view(), "phishing")).ok());
  auto audit = RunSync(moderation_.Audit(10));
  ASSERT_FALSE(audit->empty());
  EXPECT_EQ((*audit)[0].action, "takedown");
  EXPECT_NE((*audit)[0].detail.find("notice CASE-9 from abuse@hoster.example"), std::string::npos)
      << (*audit)[0].detail;
  EXPECT_TRUE(RunSync(moderation_.OpenNotices(10))->empty());
  moderation_.TellOperator(nullptr);
}

// Two processes on one store (a fleet): the deadline warning reaches the operator once, from the
// process that holds the lease, and the other takes over when the holder stops renewing it.
TEST_F(ModerationTest, OneProcessOfAFleetWarnsOfADeadlineAndAnotherTakesOver) {
  struct Recorder final : OperatorEventSink {
    void Publish(OperatorEvent e) noexcept override {
      if (e.kind == "deadline_warning") warnings.push_back(std::move(e));
    }
    std::vector<OperatorEvent> warnings;
  } first_told, second_told;
  MetricsRegistry first_metrics, second_metrics;
  ModerationService first(meta_, *blobs_, cache_, admission_, blocks_, clock_, ModerationOptions{},
                          nullptr, nullptr, &first_metrics);
  ModerationService second(meta_, *blobs_, cache_, admission_, blocks_, clock_, ModerationOptions{},
                           nullptr, nullptr, &second_metrics);
  first.TellOperator(&first_told);
  second.TellOperator(&second_told);
  const auto lease_held = [](MetricsRegistry& m) {
    return m.GetGauge("sluice_background_lease_held", "", {{"job", "deadline_warnings"}}).value();
  };
  const store::PasteId id = Create("a phishing page");
  NoticeRequest request{"abuse@hoster.example", "CASE-10", "phishing", {id.str()}, std::nullopt};
  ASSERT_TRUE(RunSync(first.AddNotice(request)).ok());

  clock_.Advance(std::chrono::minutes(46));
  RunSync(first.WarnOfDeadlines());
  RunSync(second.WarnOfDeadlines());
  EXPECT_EQ(first_told.warnings.size(), 1u);
  EXPECT_EQ(second_told.warnings.size(), 0u) << "the second process warned as well";
  EXPECT_EQ(lease_held(first_metrics), 1.0);
  EXPECT_EQ(lease_held(second_metrics), 0.0);

  // The first process stops; past its lease the second takes the warnings over.
  clock_.Advance(std::chrono::minutes(2));
  RunSync(second.WarnOfDeadlines());
  EXPECT_EQ(second_told.warnings.size(), 1u);
  EXPECT_EQ(lease_held(second_metrics), 1.0);
  first.TellOperator(nullptr);
  second.TellOperator(nullptr);
}

// Reporters are counted by network (IPv4 /24, IPv6 /48), so the keys of one subscriber are one
// reporter however many there are, and reports from the creator's own network never count.
TEST_F(ModerationTest, ManyKeysOfOneNetworkOrTheCreatorsNeverWithhold) {
  const store::PasteId v4 = Create("one /24");
  for (const char* key : {"10.9.9.1", "10.9.9.2", "10.9.9.3", "10.9.9.4"}) {
    auto r = Report(v4, key);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_FALSE(r->withheld) << key;
  }
  const store::PasteId v6 = Create("one /48");
  for (const char* key : {"2001:db8:7:1::/64", "2001:db8:7:2::/64", "2001:db8:7:ffff::/64"}) {
    auto r = Report(v6, key);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_FALSE(r->withheld) << key;
  }
  EXPECT_TRUE(Read(v4).ok());
  EXPECT_TRUE(Read(v6).ok());
  // Created from 192.0.2.1: its /24 reports, and two others are not three.
  const store::PasteId own = Create("the creator's", "192.0.2.1");
  EXPECT_FALSE(Report(own, "192.0.2.200")->withheld);
  EXPECT_FALSE(Report(own, "10.1.1.1")->withheld);
  EXPECT_FALSE(Report(own, "10.1.2.1")->withheld);
  EXPECT_TRUE(Read(own).ok());
  EXPECT_TRUE(Report(own, "10.1.3.1")->withheld);
}

TEST_F(ModerationTest, AfterADismissalTheSameNetworksCannotWithholdAgainAndKeepHoldsForGood) {
  const store::PasteId id = Create("reviewed");
  for (const char* key : {"10.2.1.1", "10.2.2.1", "10.2.3.1"}) ASSERT_TRUE(Report(id, key).ok());
  ASSERT_FALSE(Read(id).ok());
  ASSERT_TRUE(RunSync(moderation_.Dismiss(id.view(), "fine")).ok());
  for (const char* key : {"10.2.1.9", "10.2.2.9", "10.2.3.9"}) {
    auto r = Report(id, key);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->counted) << key << ": its network reported the paste before the review";
  }
  EXPECT_TRUE(Read(id).ok());
  // Reviewed "keep": new networks queue it for review, and it stays served.
  ASSERT_TRUE(RunSync(moderation_.Dismiss(id.view(), "fine for good", true)).ok());
  for (const char* key : {"10.3.1.1", "10.3.2.1", "10.3.3.1", "10.3.4.1"}) {
    auto r = Report(id, key);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->counted);
    EXPECT_FALSE(r->withheld);
  }
  EXPECT_TRUE(Read(id).ok());
  EXPECT_EQ(moderation_.PendingReports(), 1);
  auto page = RunSync(moderation_.OpenReports(std::nullopt, 10));
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->pastes.size(), 1u);
  EXPECT_TRUE(page->pastes[0].keep);
  EXPECT_EQ(page->pastes[0].votes, 4);
}

// Past this process's withhold rate a paste with enough votes stays served, and a counter says
// so; the global report bucket refuses before any store call.
TEST_F(ModerationTest, TheWithholdRateDefersAndTheGlobalBucketRefusesBeforeTheStore) {
  ModerationOptions options;
  options.withhold_rate = {1.0 / 3600, 1};
  options.global_report_rate = {0.001, 7};
  MetricsRegistry metrics;
  ModerationService moderation(meta_, *blobs_, cache_, admission_, blocks_, clock_, options,
                               nullptr, nullptr, &metrics);
  const store::PasteId first = Create("first");
  const store::PasteId second = Create("second");
  for (const char* key : {"10.4.1.1", "10.4.2.1", "10.4.3.1"}) {
    ASSERT_TRUE(RunSync(moderation.Report(key, first.view(), "spam", "")).ok());
  }
  EXPECT_FALSE(Read(first).ok());
  for (const char* key : {"10.5.1.1", "10.5.2.1", "10.5.3.1"}) {
    auto r = RunSync(moderation.Report(key, second.view(), "spam", ""));
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->withheld);
  }
  EXPECT_TRUE(Read(second).ok()) << "the withhold rate is spent: queued, still served";
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("sluice_report_withholds_total{result=\"withheld\"} 1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_report_withholds_total{result=\"deferred\"} 1"), std::string::npos)
      << text;
  // Six reports spent the global burst of seven; the eighth is refused, the store never asked.
  ASSERT_TRUE(RunSync(moderation.Report("10.6.1.1", second.view(), "spam", "")).ok());
  const int calls = meta_.calls.load();
  auto refused = RunSync(moderation.Report("10.6.2.1", second.view(), "spam", ""));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(refused.error().reason, "report_global_rate");
  EXPECT_TRUE(refused.error().retry_after_seconds);
  EXPECT_EQ(meta_.calls.load(), calls);
}

TEST_F(ModerationTest, ReportsOfOneClientAreRateLimitedBeforeAnyStoreCall) {
  const store::PasteId id = Create("text");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Report(id, "10.0.0.9").ok());
  const int calls = meta_.calls.load();
  auto refused = Report(id, "10.0.0.9");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(refused.error().reason, "report_rate");
  EXPECT_TRUE(refused.error().retry_after_seconds);
  EXPECT_EQ(meta_.calls.load(), calls);
}

TEST_F(ModerationTest, BadReportsAreRefusedAndAStoreFailureIsUnavailable) {
  const store::PasteId id = Create("text");
  EXPECT_EQ(RunSync(moderation_.Report("10.0.0.1", id.view(), "boring", "")).error().reason,
            "bad_reason");
  EXPECT_EQ(RunSync(moderation_.Report("10.0.0.1", id.view(), "spam", std::string(1001, 'n')))
                .error()
                .reason,
            "note_too_long");
  EXPECT_EQ(RunSync(moderation_.Report("10.0.0.1", "AAAAAAAAAAAA", "spam", "")).error().code,
            ErrorCode::kNotFound);
  meta_.fail = true;
  auto down = Report(id, "10.0.0.2");
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(down.error().retry_after_seconds);
}

TEST_F(ModerationTest, TakedownIs451ForGoodAndOwesTheBodysDeletion) {
  const store::PasteId id = Create("text");
  ASSERT_TRUE(Read(id).ok());
  ASSERT_TRUE(RunSync(moderation_.Takedown(id.view(), "malware")).ok());
  auto read = Read(id);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().code, ErrorCode::kWithheld);
  EXPECT_EQ(read.error().reason, "taken_down");
  auto due = RunSync(meta_impl_->DueOutbox(clock_.UnixSeconds(), 10, admission::Deadline::Never()));
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ((*due)[0].kind, store::OutboxEntry::Kind::kDeleteBody);
  EXPECT_EQ(RunSync(moderation_.Dismiss(id.view(), "")).error().reason, "taken_down");
  EXPECT_EQ(Read(id).error().reason, "taken_down");
}

// The transparency report (docs/moderation.md, "Transparency"): each action counts itself in
// the store, the report reads the counters, and a flood of requests costs one store read per
// kTransparencyFreshness.
TEST_F(ModerationTest, TheTransparencyReportCountsEachActionOnceAndReadsOncePerFreshness) {
  const store::PasteId restored = Create("restored");
  const store::PasteId dismissed = Create("dismissed");
  const store::PasteId taken = Create("taken");
  for (const char* key : {"10.0.1.1", "10.0.2.1", "10.0.3.1"})
    ASSERT_TRUE(Report(restored, key).ok());
  ASSERT_TRUE(Report(dismissed, "10.0.4.1").ok());
  clock_.Advance(std::chrono::minutes(3));
  ASSERT_TRUE(RunSync(moderation_.Dismiss(restored.view(), "fine")).ok());
  ASSERT_TRUE(RunSync(moderation_.Dismiss(dismissed.view(), "fine")).ok());
  ASSERT_TRUE(RunSync(moderation_.Takedown(taken.view(), "illegal")).ok());
  ASSERT_TRUE(RunSync(moderation_.Block("203.0.113.0/24", std::chrono::hours(1), "spam")).ok());

  auto report = RunSync(moderation_.Transparency());
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_EQ((*report)->months.size(), 12u);
  const MonthFigures& now = (*report)->months.front();
  EXPECT_EQ(now.month, store::TransparencyMonth(clock_.UnixSeconds()));
  EXPECT_EQ(now.withholds, (std::map<std::string, int64_t>{{"votes", 1}}));
  EXPECT_EQ(now.restores, 1);
  EXPECT_EQ(now.dismissals, 1);
  EXPECT_EQ(now.takedowns, 1);
  EXPECT_EQ(now.blocks, (std::map<std::string, int64_t>{{"network", 1}}));
  // Two entries left the queue three minutes after they arrived; the takedown had none.
  EXPECT_EQ(now.timed_actions, 2);
  EXPECT_EQ(now.median->at_most_seconds, 300);

  // Fresh for kTransparencyFreshness: the same report, no store call, even after an action.
  ASSERT_TRUE(RunSync(moderation_.Takedown(dismissed.view(), "changed my mind")).ok());
  const int calls = meta_.calls.load();
  for (int i = 0; i < 100; ++i) {
    auto again = RunSync(moderation_.Transparency());
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->get(), report->get());
  }
  EXPECT_EQ(meta_.calls.load(), calls);
  clock_.Advance(ModerationService::kTransparencyFreshness);
  auto later = RunSync(moderation_.Transparency());
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(meta_.calls.load(), calls + 1);
  EXPECT_EQ((*later)->months.front().takedowns, 2);

  // The store down: the last report, stale, rather than nothing.
  clock_.Advance(ModerationService::kTransparencyFreshness);
  meta_.fail = true;
  auto stale = RunSync(moderation_.Transparency());
  meta_.fail = false;
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(stale->get(), later->get());
}

// Refused re-uploads are counted in memory and added to the store in batches; a batch that
// provably did not reach the store waits for the next flush, and none is added twice.
TEST_F(ModerationTest, RefusedReuploadsReachTheCountersInBatches) {
  ContentBlocklist list;
  ModerationService moderation{
      meta_,   *blobs_, cache_,  admission_, blocks_, clock_, ModerationOptions{},
      nullptr, nullptr, nullptr, &list};
  for (int i = 0; i < 3; ++i) list.CountRefused();
  meta_.fail = true;
  EXPECT_FALSE(RunSync(moderation.FlushTransparency(std::chrono::seconds(1))).ok());
  meta_.fail = false;
  list.CountRefused();
  ASSERT_TRUE(RunSync(moderation.FlushTransparency(std::chrono::seconds(1))).ok());
  ASSERT_TRUE(RunSync(moderation.FlushTransparency(std::chrono::seconds(1))).ok());
  auto rows = RunSync(meta_impl_->TransparencyCounts("1970-01", 100, admission::Deadline::Never()));
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows,
            (std::vector<store::TransparencyCount>{
                {store::TransparencyMonth(clock_.UnixSeconds()), "reupload_blocked", "", 4}}));
}

// The quota's live bytes are re-read only every storage_refresh (the clock here never moves): a
// takedown must give its paste's bytes back at once, as a delete does, or a quota filled by the
// paste taken down keeps refusing creates until the next refresh.
// The value of the series `series` (name and labels, as rendered) in `text`; -1 when absent.
double SeriesValue(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

// The takedown clock (docs/moderation.md): the oldest open entry's age is computed when scraped
// from its stored arrival, the arrival is read again at most once per kScrapeFreshness, and each
// action that closes an entry is timed from that arrival, by action.
TEST_F(ModerationTest, TheTakedownClockAgesFromTheStoredArrivalAndTimesEachAction) {
  ModerationOptions options;
  options.takedown_deadline = std::chrono::hours(4);
  MetricsRegistry metrics;
  ModerationService moderation(meta_, *blobs_, cache_, admission_, blocks_, clock_, options,
                               nullptr, nullptr, &metrics);
  const std::string age = "sluice_moderation_oldest_open_age_seconds{kind=\"report\"}";
  const auto timed = [](const char* action, const char* part) {
    return fmt::format(
        "sluice_moderation_time_to_action_seconds_{}{{action=\"{}\",kind=\"report\"}}", part,
        action);
  };
  const auto scrape = [&] {
    RunSync(moderation.RefreshForScrape());
    return "\n" + metrics.Render();
  };
  std::string text = scrape();
  EXPECT_EQ(SeriesValue(text, "sluice_moderation_takedown_deadline_seconds"), 14400);
  EXPECT_EQ(SeriesValue(text, age), 0) << "nothing waits";
  EXPECT_EQ(SeriesValue(text, timed("takedown", "count")), 0) << "declared before any action";

  const store::PasteId old = Create("old");
  const store::PasteId held = Create("held");
  const store::PasteId fine = Create("fine");
  ASSERT_TRUE(RunSync(moderation.Report("10.7.1.1", old.view(), "spam", "")).ok());
  clock_.Advance(std::chrono::minutes(30));
  for (const char* key : {"10.8.1.1", "10.8.2.1", "10.8.3.1"}) {
    ASSERT_TRUE(RunSync(moderation.Report(key, held.view(), "spam", "")).ok());
  }
  ASSERT_FALSE(Read(held).ok()) << "withheld by three networks";
  clock_.Advance(std::chrono::minutes(15));
  ASSERT_TRUE(RunSync(moderation.Report("10.9.1.1", fine.view(), "spam", "")).ok());
  clock_.Advance(std::chrono::minutes(5));
  text = scrape();
  EXPECT_EQ(SeriesValue(text, age), 3000) << "the oldest entry arrived 50 minutes ago";

  // A scrape storm reads the store once per kScrapeFreshness (two calls: the queue's counts and
  // the oldest open notice); the age still grows at each scrape.
  const int calls = meta_.calls.load();
  clock_.Advance(ModerationService::kScrapeFreshness / 2);
  RunSync(moderation.RefreshForScrape());
  RunSync(moderation.RefreshForScrape());
  EXPECT_EQ(meta_.calls.load(), calls);
  clock_.Advance(std::chrono::seconds(60));
  text = scrape();
  EXPECT_EQ(meta_.calls.load(), calls + 2);
  EXPECT_EQ(SeriesValue(text, age), 3060);

  // Each action is timed from its entry's arrival; the oldest is then the next one.
  ASSERT_TRUE(RunSync(moderation.Takedown(old.view(), "malware")).ok());         // 51 min after
  ASSERT_TRUE(RunSync(moderation.Dismiss(held.view(), "fine after all")).ok());  // 21 min
  clock_.Advance(std::chrono::hours(2));
  text = scrape();
  EXPECT_EQ(SeriesValue(text, age), 7200 + 360) << "the entry reported 45 minutes in";
  ASSERT_TRUE(RunSync(moderation.Dismiss(fine.view(), "fine")).ok());  // 2 h 6 min
  text = scrape();
  EXPECT_EQ(SeriesValue(text, age), 0);
  EXPECT_EQ(SeriesValue(text, timed("takedown", "sum")), 3060);
  EXPECT_EQ(SeriesValue(text, timed("takedown", "count")), 1);
  EXPECT_EQ(SeriesValue(text, timed("restore", "sum")), 3060 - 1800)
      << "a withheld paste served again is a restore";
  EXPECT_EQ(SeriesValue(text, timed("dismiss", "sum")), 7200 + 360);
  EXPECT_EQ(SeriesValue(text, timed("dismiss", "count")), 1);
  EXPECT_EQ(SeriesValue(text,
                        "sluice_moderation_time_to_action_seconds_bucket{action=\"takedown\","
                        "kind=\"report\",le=\"3600\"}"),
            1);
  EXPECT_EQ(SeriesValue(text,
                        "sluice_moderation_time_to_action_seconds_bucket{action=\"takedown\","
                        "kind=\"report\",le=\"2700\"}"),
            0);
}

TEST_F(ModerationTest, ATakedownFreesItsBytesForTheQuotaAtOnce) {
  ServiceOptions options;
  options.max_storage_bytes = 10;
  PasteService quota(meta_, *blobs_, cache_, admission_, clock_, metrics_, options);
  ModerationService moderation(meta_, *blobs_, cache_, admission_, blocks_, clock_,
                               ModerationOptions{}, nullptr, &quota);
  auto admit = [&](uint64_t n) { return RunSync(quota.AdmitCreate("10.0.0.1", {n, false})); };
  auto create = [&](std::string body) {
    auto ticket = admit(body.size());
    EXPECT_TRUE(ticket.ok()) << ticket.error().message;
    auto created = RunSync(quota.Create(std::move(*ticket), std::move(body), ""), clock_);
    EXPECT_TRUE(created.ok()) << created.error().message;
    return created->id;
  };
  const store::PasteId small = create("abc");
  create("1234567");
  auto full = admit(1);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().reason, "storage_quota");

  ASSERT_TRUE(RunSync(moderation.Takedown(small.view(), "spam")).ok());
  EXPECT_EQ(quota.Storage().live_bytes, 7u);
  EXPECT_TRUE(admit(3).ok()) << "the taken-down paste's bytes are free without a refresh";
  EXPECT_FALSE(admit(4).ok());
  // Taken down again: the tombstone's bytes were given back once, and are not twice.
  ASSERT_TRUE(RunSync(moderation.Takedown(small.view(), "spam")).ok());
  EXPECT_EQ(quota.Storage().live_bytes, 7u);
}

TEST_F(ModerationTest, ABlockedClientCannotCreateButReads) {
  const store::PasteId id = Create("text", "203.0.113.5");
  auto block = RunSync(moderation_.Block("203.0.113.0/24", std::chrono::hours(1), "spam run"));
  ASSERT_TRUE(block.ok());
  auto refused = RunSync(service_.AdmitCreate("203.0.113.5", {4, false}));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(refused.error().reason, "blocked");
  EXPECT_TRUE(RunSync(service_.Read(Client("203.0.113.5"), id.view())).ok());
  EXPECT_TRUE(RunSync(service_.AdmitCreate("192.0.2.7", {4, false})).ok());
  // Another process learns of it from the store.
  Blocklist elsewhere;
  ModerationService other{
      meta_, *blobs_, cache_, admission_, elsewhere, clock_, ModerationOptions{}};
  ASSERT_TRUE(RunSync(other.LoadBlocks()).ok());
  EXPECT_TRUE(elsewhere.Find("203.0.113.5", clock_.UnixSeconds()));
  clock_.Advance(std::chrono::hours(2));
  EXPECT_TRUE(RunSync(service_.AdmitCreate("203.0.113.5", {4, false})).ok());
  EXPECT_EQ(RunSync(moderation_.Block("junk", std::chrono::hours(1), "")).error().reason,
            "bad_prefix");
}

}  // namespace
}  // namespace sluice::service
