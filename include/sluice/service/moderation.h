// ModerationService: abuse reports, the withholding of a reported paste, and the operator's review
// (takedown, dismissal, blocks), each operator action written to the audit trail
// (docs/moderation.md). It knows the stores through their interfaces; nothing of HTTP.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/admission/client_key.h"
#include "sluice/admission/network.h"
#include "sluice/admission/token_bucket.h"
#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/common/result.h"
#include "sluice/common/swappable.h"
#include "sluice/service/admission_control.h"
#include "sluice/service/content_blocklist.h"
#include "sluice/service/notice.h"
#include "sluice/service/operator_events.h"
#include "sluice/service/paste_cache.h"
#include "sluice/service/transparency.h"
#include "sluice/store/blob_store.h"
#include "sluice/store/meta_store.h"
#include "sluice/store/shared_state.h"

namespace sluice::service {

class PasteService;

/// The blocks in force, held in memory so a create asks no store. Thread-safe.
class Blocklist {
 public:
  /// The block that covers `client_key` at `now`: the same key, or a CIDR block containing its
  /// address (an IPv6 key "2001:db8:1:2::/64" by its /64).
  std::optional<store::ClientBlock> Find(std::string_view client_key, int64_t now) const;
  void Replace(std::vector<store::ClientBlock> blocks);
  void Add(store::ClientBlock block);
  /// InvalidArgument unless `prefix` is an address or a CIDR block.
  static Status Check(std::string_view prefix);

 private:
  struct Entry {
    store::ClientBlock block;
    admission::TrustedProxies range;
  };
  static std::optional<Entry> Make(store::ClientBlock block);
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  std::atomic<size_t> size_{0};  // lets a create skip the lock when nobody is blocked
};

struct ModerationOptions {
  /// Distinct networks (not the creator's, each with withholding budget left) whose open reports
  /// withhold a paste until review; 0: never withheld automatically (docs/moderation.md).
  /// Default: 3.
  int64_t hide_threshold = 3;
  /// What makes a reporter's network. Default: IPv4 /24, IPv6 /48.
  admission::NetworkPrefixes networks{};
  /// Withholdings one network may take part in per 24 h; past it its reports queue the paste but
  /// are no votes. Default: 5.
  int64_t withholds_per_network = 5;
  /// This process's rate of withholdings: past it a paste with enough votes stays served and
  /// queued (sluice_report_withholds_total{result="deferred"}). Default: 30 an hour, 30 at once.
  admission::TokenBucketPolicy withhold_rate{30.0 / 3600, 30};
  /// All reports this process takes, before any store call, beside each key's own bucket
  /// (AdmissionControl::AdmitReport). Kept here rather than in AdmissionControl: reports are this
  /// service's, and the bucket answers with the service's own reason (report_global_rate).
  /// Default: 2 a second, 50 at once.
  admission::TokenBucketPolicy global_report_rate{2, 50};
  /// Open reports stored at most (store::ReportPolicy::max_open_reports). Default: 100,000.
  int64_t max_open_reports = 100'000;
  /// Longest note of a report, in bytes. Default: 1000.
  size_t max_note_bytes = 1000;
  /// Budget of one moderation call (a report, an operator action). Default: 2 s.
  Duration budget = std::chrono::seconds(2);
  /// How often the blocks are read again from the store, so a block made through another process
  /// reaches this one. Default: 10 s.
  std::chrono::milliseconds blocks_refresh{10'000};
  /// Longest a withheld row stays in the shared metadata cache. Default: 60 s.
  std::chrono::seconds shared_meta_ttl{60};
  /// Entries the content blocklist holds at most, over all processes sharing the store (each
  /// holds them all in memory, 32 bytes each); past it a takedown stands without recording its
  /// digest and an operator's block is refused (docs/moderation.md). Default: 1,000,000.
  int64_t max_blocked_contents = 1'000'000;
  /// What the operator promises: how long a report or notice may wait for action
  /// (docs/moderation.md, "The takedown clock"). Exported as
  /// sluice_moderation_takedown_deadline_seconds, which the alert rule in deploy/prometheus
  /// compares the oldest open entry's age with. Default: 1 h.
  std::chrono::seconds takedown_deadline = std::chrono::hours(1);
  /// Notices stored at most, over all processes sharing the store; past it a notice is refused
  /// (507 notices_full) and the operator is told to clear old ones (docs/moderation.md,
  /// "Notices"). Default: 100,000.
  int64_t max_notices = 100'000;
  /// The share of its deadline (a notice's own, else takedown_deadline) after which an open notice
  /// or the oldest open report is published as a "deadline_warning", once per item; the same
  /// share as the SluiceTakedownDeadline alert's (deploy/prometheus/sluice.rules.yml).
  /// Default: 0.75.
  double deadline_warning_share = 0.75;
};

/// What ModerationService::AddNotice did.
struct NoticeReceipt {
  /// False when the sender's reference was stored already (`notice` is that one, unchanged).
  bool created = false;
  /// False when no paste it named could be withheld: nothing was stored, and `notice.pastes`
  /// says why for each.
  bool stored = false;
  store::Notice notice;
};

/// What an operator's content block did (ModerationService::BlockContent).
struct ContentBlockReceipt {
  std::string sha256;
  /// False when the digest was blocked already: nothing changed.
  bool added = false;
};

struct ReportReceipt {
  /// False when this client's network had reported the paste already: nothing more was counted.
  bool counted = false;
  /// True when the paste is withheld pending review (by this report or earlier).
  bool withheld = false;
};

/// A paste as the operator reviews it: its row (moderation state included) and its text, when
/// the body is still there.
struct PasteReview {
  store::PasteMeta meta;
  std::optional<std::string> text;
};

class ModerationService {
 public:
  /// Everything passed must outlive the service; `shared` may be null (no shared cache).
  /// `storage` (may be null) is told of the bytes a takedown frees, so the storage quota sees
  /// them go at once rather than at its next refresh.
  /// `metrics` (may be null: a registry of its own) gets the service's counters.
  ModerationService(store::MetaStore& meta, store::BlobStore& blobs, PasteCache& cache,
                    AdmissionControl& admission, Blocklist& blocks, const Clock& clock,
                    ModerationOptions options, store::SharedState* shared = nullptr,
                    PasteService* storage = nullptr, MetricsRegistry* metrics = nullptr,
                    ContentBlocklist* blocked_contents = nullptr);

  /// The reasons a report may give.
  static const std::vector<std::string_view>& Reasons();

  /// One client's report: InvalidArgument (bad_reason, note_too_long), NotFound (no live paste),
  /// ResourceExhausted (report_rate, report_global_rate), Unavailable (the store). Counted once
  /// per network (ModerationOptions::networks); withholds the paste when hide_threshold networks
  /// with budget left, not the creator's, have reported it and the withhold rate allows.
  boost::asio::awaitable<Result<ReportReceipt>> Report(std::string client_key,
                                                       std::string_view id_text, std::string reason,
                                                       std::string note);

  // The operator's side. Each action logs an audit line and appends an audit row.
  /// One page of the review queue, newest first, after `after` when given; PendingReports is
  /// read again with it.
  boost::asio::awaitable<Result<store::ReportPage>> OpenReports(
      std::optional<store::ReportCursor> after, size_t limit);
  boost::asio::awaitable<Result<PasteReview>> Show(std::string_view id_text);
  /// 451 from then on, the body deleted through the outbox (as a delete), the edge purged.
  boost::asio::awaitable<Status> Takedown(std::string_view id_text, std::string reason);
  /// Closes the paste's reports and serves it again; InvalidArgument for a taken-down paste. The
  /// networks that reported it cannot report it again; with `keep`, later reports only queue it.
  boost::asio::awaitable<Status> Dismiss(std::string_view id_text, std::string note,
                                         bool keep = false);
  boost::asio::awaitable<Result<store::ClientBlock>> Block(std::string prefix,
                                                           std::chrono::seconds duration,
                                                           std::string reason);
  boost::asio::awaitable<Result<std::vector<store::AuditEntry>>> Audit(size_t limit);

  // The content blocklist (docs/moderation.md, "Takedowns that stick"). A takedown adds its
  // paste's digest; these are the operator's own changes, each audited.
  /// Blocks the body whose SHA-256 is `sha256` (64 hex digits, else InvalidArgument bad_sha256);
  /// InsufficientStorage (blocked_contents_full) past max_blocked_contents.
  boost::asio::awaitable<Result<ContentBlockReceipt>> BlockContent(std::string_view sha256,
                                                                   std::string reason);
  /// True when it was blocked; InvalidArgument (bad_sha256) for anything but 64 hex digits.
  boost::asio::awaitable<Result<bool>> UnblockContent(std::string_view sha256);
  /// One page of the list in digest order, after `after` (64 hex digits) when given.
  boost::asio::awaitable<Result<store::BlockedContentPage>> BlockedContents(
      std::optional<std::string_view> after, size_t limit);
  /// Reads the list again from the store if its version changed since this process last read it.
  boost::asio::awaitable<Status> LoadBlockedContents();

  // Notices (docs/moderation.md, "Notices").
  /// Stores the notice and withholds its pastes at once (451 withheld_notice on every read),
  /// idempotent by sender and reference. InvalidArgument for a request CheckNoticeRequest
  /// refuses; InsufficientStorage (notices_full) past max_notices. A paste that does not exist or
  /// is down already is answered for itself; a notice naming no paste that could be withheld
  /// stores nothing (NoticeReceipt::stored).
  boost::asio::awaitable<Result<NoticeReceipt>> AddNotice(NoticeRequest request);
  /// Up to `limit` open notices, the oldest first, each with its pastes.
  boost::asio::awaitable<Result<std::vector<store::Notice>>> OpenNotices(size_t limit);
  /// Publishes a "deadline_warning" for each open notice, and the oldest open report, past
  /// deadline_warning_share of its deadline, once per item. One process of a fleet warns at a
  /// time, under the store's lease "deadline_warnings" (MetaStore::HoldLease), so the operator is
  /// told once, not once per process; a process that takes the lease over (its holder stopped)
  /// warns again of what is still open past its share. RefreshLoop runs it every blocks_refresh;
  /// nothing else needs to.
  boost::asio::awaitable<void> WarnOfDeadlines();
  /// takedown_deadline: a notice's deadline when its sender gave none, and what the review page
  /// marks entries late against.
  std::chrono::seconds TakedownDeadline() const { return built_.takedown_deadline; }
  /// The arrival of the oldest open notice, as last read with PendingReports; none when none.
  std::optional<int64_t> OldestOpenNoticeAt() const;

  /// Reads the blocks in force from the store into the block list.
  boost::asio::awaitable<Status> LoadBlocks();

  /// Pastes with open reports, as last read from the store's counts (one row): after every
  /// report, takedown and dismissal here, and every blocks_refresh for those made through other
  /// processes. 0 until first read.
  int64_t PendingReports() const { return pending_.load(std::memory_order_relaxed); }
  /// Open reports stored, as last read with PendingReports.
  int64_t OpenReportRows() const { return open_reports_.load(std::memory_order_relaxed); }
  /// Reads the counts again; a failure keeps the last ones.
  boost::asio::awaitable<void> RefreshPending();
  /// The arrival (Unix seconds) of the review queue's oldest open entry, as last read with
  /// PendingReports; none when the queue was empty.
  std::optional<int64_t> OldestOpenReportAt() const;
  /// Before a scrape of /metrics: reads the counts and the oldest arrival again unless they were
  /// read less than kScrapeFreshness ago, so that the age exported is that of the stored entry
  /// (one closed through another process is seen at the next scrape) while a scrape storm costs
  /// one store read per kScrapeFreshness.
  boost::asio::awaitable<void> RefreshForScrape();
  static constexpr std::chrono::milliseconds kScrapeFreshness{1000};
  /// Reloads the blocks, and the content blocklist when its version changed, every
  /// blocks_refresh until Stop(): the bound on how long a change made through another process
  /// takes to reach this one.
  void Start(boost::asio::any_io_executor executor);
  void Stop() { stopping_ = true; }
  /// New options for reports from now on (docs/operations.md, "Reload"): a paste already withheld
  /// stays so, one whose votes already reach a lowered threshold is withheld at its next report,
  /// and the two buckets keep their tokens up to their new bursts. budget, blocks_refresh and
  /// shared_meta_ttl stay as built.
  void Reconfigure(const ModerationOptions& next);
  // The transparency report (docs/moderation.md, "Transparency"). The actions above count
  // themselves in their own store transaction (store::ModerationChange::tally and the store's own
  // counts); what is counted elsewhere comes through these.

  /// The report of the last kTransparencyMonths months (newest first), from the store's counters:
  /// read again when the last read is kTransparencyFreshness old, by one caller at a time while
  /// the others get the last report, so a flood of requests costs one bounded read (at most
  /// store::kMaxTransparencyRows rows) per kTransparencyFreshness. Unavailable when the store
  /// cannot be read and no report was read before; a stale one otherwise.
  boost::asio::awaitable<Result<std::shared_ptr<const TransparencyReport>>> Transparency();
  static constexpr int kTransparencyMonths = 12;
  static constexpr std::chrono::seconds kTransparencyFreshness{5};
  /// Adds `count` to the counter (`kind`, `label`) of the month the clock is in, in a store call of
  /// its own: for events that no moderation change of this service carries (the notice intake's
  /// store::kTallyNoticeCategory and kTallyNoticeSender, when it stores its notice by other means).
  boost::asio::awaitable<Status> RecordTransparency(std::string_view kind, std::string label,
                                                    int64_t count = 1);
  /// Adds the creates refused blocked_content since the last flush (ContentBlocklist counts them
  /// in memory) to this month's counter in one store call; on failure they wait for the next
  /// flush. Called every blocks_refresh by the refresh loop, and at shutdown, after the drain.
  boost::asio::awaitable<Status> FlushTransparency(Duration budget);

  /// Where each counted report and each withholding is published (docs/moderation.md, "Push");
  /// null (the default): nowhere. Set before Start; `sink` must outlive the service.
  void TellOperator(OperatorEventSink* sink) { operator_events_ = sink; }

 private:
  boost::asio::awaitable<Result<store::PasteMeta>> Find(std::string_view id_text,
                                                        admission::Deadline deadline);
  /// Sets the state and makes every cache let go of the old row, as a delete does.
  boost::asio::awaitable<Result<store::ModerationOutcome>> Moderate(store::PasteMeta meta,
                                                                    store::ModerationChange change,
                                                                    admission::Deadline deadline);
  /// Observes `seconds` from an entry's arrival to `action` in the time-to-action histogram of
  /// `kind` ("report" or "notice").
  void ObserveWait(std::string_view action, std::string_view kind, int64_t seconds);
  /// The time to action of an entry the operator's `action` (takedown, dismiss, restore) took
  /// out of the queue, observed when the store said when it had arrived.
  void ObserveTimeToAction(std::string_view action, const store::ModerationOutcome& outcome,
                           int64_t at);
  /// The operator acted on `meta` (`action`: takedown, restore): closes the notices naming it,
  /// observes their time to action (kind="notice") and returns what the audit row adds: the
  /// notices' references, or nothing.
  boost::asio::awaitable<std::string> CloseNoticesOf(const store::PasteMeta& meta,
                                                     std::string_view action, int64_t at,
                                                     admission::Deadline deadline);

  /// Every cache lets go of `meta`, now in `state`.
  boost::asio::awaitable<void> ForgetCached(store::PasteMeta meta, store::Moderation state,
                                            admission::Deadline deadline);
  /// The global report bucket: ResourceExhausted (report_global_rate) when it is empty.
  Status AdmitGlobally();
  /// What happened to a report that reached the store, for the metrics and the log.
  void Count(const store::ReportOutcome& outcome);
  boost::asio::awaitable<void> Record(std::string action, std::string target, std::string detail,
                                      admission::Deadline deadline);
  boost::asio::awaitable<void> RefreshLoop();
  Error WithRetryAfter(Error e);
  /// The read-only window's refusal (PasteService::ReadOnlyRefusal), or nothing: a report, a
  /// takedown, a dismissal, a block or a change of the content blocklist made in the window is a
  /// change the cutover's copy could miss, so each is refused first, the operator's own too.
  std::optional<Error> ReadOnly() const;

  store::MetaStore& meta_;
  store::BlobStore& blobs_;
  PasteCache& cache_;
  AdmissionControl& admission_;
  Blocklist& blocks_;
  const Clock& clock_;
  const ModerationOptions built_;  // budget, blocks_refresh and shared_meta_ttl come from here
  Swappable<ModerationOptions> options_;
  store::SharedState* const shared_;
  PasteService* const storage_;
  std::unique_ptr<MetricsRegistry> own_metrics_;  // when none is given
  MetricsRegistry& metrics_;
  admission::TokenBucket global_reports_;
  admission::TokenBucket withholds_;
  Counter& reports_counted_;
  Counter& reports_repeated_;
  Counter& reports_unstored_;
  Counter& reports_refused_;
  Counter& withheld_;
  Counter& withholds_deferred_;
  ContentBlocklist* const blocked_contents_;
  std::atomic<int64_t> unstored_logged_at_{0};  // Unix seconds: one log line a minute at most
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> pending_{0};
  OperatorEventSink* operator_events_ = nullptr;
  std::atomic<int64_t> open_reports_{0};
  static constexpr int64_t kNoneQueued = -1;
  std::atomic<int64_t> oldest_report_at_{kNoneQueued};
  std::atomic<int64_t> oldest_notice_at_{kNoneQueued};
  // What WarnOfDeadlines has warned of: notice ids still open, and the arrival of the oldest
  // report entry last warned of. Only RefreshLoop touches them.
  std::vector<int64_t> warned_notices_;
  const std::string lease_holder_ = store::NewLeaseHolder();
  Gauge& warnings_lease_held_;
  static constexpr size_t kNoticeWarningScan = 1000;
  static constexpr std::string_view kWarningsLease = "deadline_warnings";
  int64_t warned_report_at_ = kNoneQueued;
  // Clock::Now() in nanoseconds of the last counts read begun: RefreshForScrape's cache.
  std::atomic<int64_t> counted_at_ns_{std::numeric_limits<int64_t>::min()};
  // The last transparency report read and when (Clock::Now() in nanoseconds), and whether a read
  // is under way: Transparency()'s cache.
  std::mutex transparency_mu_;
  std::shared_ptr<const TransparencyReport> transparency_;
  int64_t transparency_read_ns_ = 0;
  bool transparency_reading_ = false;
  // Last: removed before anything its callbacks read goes.
  GaugeCallbacks gauges_;
};

}  // namespace sluice::service
