#include "sluice/service/moderation.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <cmath>

#include "sluice/asio/spawn.h"
#include "sluice/asio/timer.h"
#include "sluice/service/body_check.h"
#include "sluice/service/paste_service.h"
#include "sluice/service/text.h"

namespace sluice::service {

using admission::Deadline;
using boost::asio::awaitable;

namespace {

Error NotFound() {
  return MakeError(ErrorCode::kNotFound,
                   "no paste with this id (it may have expired or been deleted)", "not_found");
}

Error Invalid(std::string message, std::string reason) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message), std::move(reason));
}

// A client key names an IPv6 client by its /64 ("2001:db8:1:2::/64"): its address part is what a
// CIDR block is matched against.
std::optional<admission::IpAddress> AddressOfKey(std::string_view key) {
  if (const size_t slash = key.find('/'); slash != std::string_view::npos) {
    key = key.substr(0, slash);
  }
  return admission::IpAddress::Parse(key);
}

}  // namespace

std::optional<Blocklist::Entry> Blocklist::Make(store::ClientBlock block) {
  const std::string prefixes[] = {block.prefix};
  auto range = admission::TrustedProxies::Parse(prefixes);
  if (!range.ok()) return std::nullopt;
  return Entry{std::move(block), std::move(*range)};
}

Status Blocklist::Check(std::string_view prefix) {
  const std::string prefixes[] = {std::string(prefix)};
  if (prefix.empty() || !admission::TrustedProxies::Parse(prefixes).ok()) {
    return Invalid(fmt::format("'{}' is not an address or a CIDR block (203.0.113.7, "
                               "198.51.100.0/24, 2001:db8::/48)",
                               prefix),
                   "bad_prefix");
  }
  return Ok();
}

std::optional<store::ClientBlock> Blocklist::Find(std::string_view client_key, int64_t now) const {
  if (size_.load(std::memory_order_acquire) == 0) return std::nullopt;
  const auto address = AddressOfKey(client_key);
  std::lock_guard lock(mu_);
  for (const Entry& e : entries_) {
    if (e.block.until <= now) continue;
    if (e.block.prefix == client_key || (address && e.range.Contains(*address))) return e.block;
  }
  return std::nullopt;
}

void Blocklist::Replace(std::vector<store::ClientBlock> blocks) {
  std::vector<Entry> entries;
  for (store::ClientBlock& b : blocks) {
    if (auto e = Make(std::move(b))) entries.push_back(std::move(*e));
  }
  std::lock_guard lock(mu_);
  entries_ = std::move(entries);
  size_.store(entries_.size(), std::memory_order_release);
}

void Blocklist::Add(store::ClientBlock block) {
  auto e = Make(std::move(block));
  if (!e) return;
  std::lock_guard lock(mu_);
  entries_.push_back(std::move(*e));
  size_.store(entries_.size(), std::memory_order_release);
}

namespace {

constexpr const char* kReportsHelp =
    "Abuse reports that reached the store by outcome: counted (a network's first of the paste), "
    "repeat (its network had reported the paste: nothing changed), unstored (counted on the "
    "paste's queue row past max_open_reports: no note, no vote), and refused before any store "
    "call by the global report rate (global_rate)";
constexpr const char* kWithholdsHelp =
    "Pastes that reached report_hide_threshold votes: withheld (451 until reviewed), or deferred "
    "(still served and queued: this process's report_withholds_per_hour was spent)";

constexpr const char* kTimeToActionHelp =
    "Seconds from a review-queue entry's arrival (its first open report) to the operator's action "
    "that closed it: takedown, dismiss (reports closed, the paste was served), restore (served "
    "again after a withholding)";

// From a minute to a week: a deadline of an hour sits in the middle, and the buckets either side
// of every usual deadline (1 h, 4 h, 24 h) say how many made it.
std::vector<double> TimeToActionBuckets() {
  return {60, 300, 900, 1800, 2700, 3600, 7200, 14400, 28800, 43200, 86400, 259200, 604800};
}

MetricsRegistry& OrOwn(MetricsRegistry* given, std::unique_ptr<MetricsRegistry>& own) {
  if (given != nullptr) return *given;
  own = std::make_unique<MetricsRegistry>();
  return *own;
}

}  // namespace

ModerationService::ModerationService(store::MetaStore& meta, store::BlobStore& blobs,
                                     PasteCache& cache, AdmissionControl& admission,
                                     Blocklist& blocks, const Clock& clock,
                                     ModerationOptions options, store::SharedState* shared,
                                     PasteService* storage, MetricsRegistry* metrics,
                                     ContentBlocklist* blocked_contents)
    : meta_(meta),
      blobs_(blobs),
      cache_(cache),
      admission_(admission),
      blocks_(blocks),
      clock_(clock),
      built_(options),
      options_(options),
      shared_(shared),
      storage_(storage),
      metrics_(OrOwn(metrics, own_metrics_)),
      global_reports_(options.global_report_rate, clock),
      withholds_(options.withhold_rate, clock),
      reports_counted_(
          metrics_.GetCounter("sluice_reports_total", kReportsHelp, {{"outcome", "counted"}})),
      reports_repeated_(
          metrics_.GetCounter("sluice_reports_total", kReportsHelp, {{"outcome", "repeat"}})),
      reports_unstored_(
          metrics_.GetCounter("sluice_reports_total", kReportsHelp, {{"outcome", "unstored"}})),
      reports_refused_(
          metrics_.GetCounter("sluice_reports_total", kReportsHelp, {{"outcome", "global_rate"}})),
      withheld_(metrics_.GetCounter("sluice_report_withholds_total", kWithholdsHelp,
                                    {{"result", "withheld"}})),
      withholds_deferred_(metrics_.GetCounter("sluice_report_withholds_total", kWithholdsHelp,
                                              {{"result", "deferred"}})),
      blocked_contents_(blocked_contents),
      warnings_lease_held_(metrics_.GetGauge("sluice_background_lease_held",
                                             store::MetaStore::kLeaseHeldHelp,
                                             {{"job", std::string(kWarningsLease)}})),
      gauges_(metrics_) {
  // The age is computed when scraped, from the stored arrival: it grows between store reads
  // (RefreshForScrape keeps the arrival itself at most kScrapeFreshness old).
  gauges_.Add("sluice_moderation_oldest_open_age_seconds",
              "Age of the oldest open entry of the review queue by kind (report: a paste's first "
              "open report), from its stored arrival; 0 when none waits",
              {{"kind", "report"}}, [this] {
                const std::optional<int64_t> at = OldestOpenReportAt();
                if (!at) return 0.0;
                return static_cast<double>(std::max<int64_t>(0, clock_.UnixSeconds() - *at));
              });
  gauges_.Add("sluice_moderation_oldest_open_age_seconds",
              "Age of the oldest open entry of the review queue by kind (notice: a notice with a "
              "paste not yet acted on), from its stored arrival; 0 when none waits",
              {{"kind", "notice"}}, [this] {
                const std::optional<int64_t> at = OldestOpenNoticeAt();
                if (!at) return 0.0;
                return static_cast<double>(std::max<int64_t>(0, clock_.UnixSeconds() - *at));
              });
  gauges_.Add(
      "sluice_moderation_takedown_deadline_seconds",
      "takedown_deadline: how long a report or notice may wait for the operator's action "
      "(the alert rule fires at a share of it)",
      {}, [deadline = built_.takedown_deadline] { return static_cast<double>(deadline.count()); });
  for (const char* action : {"takedown", "dismiss", "restore"}) {
    // Declared at start, so that the series exist (at 0) before the first action.
    metrics_.GetHistogram("sluice_moderation_time_to_action_seconds", kTimeToActionHelp,
                          {{"action", action}, {"kind", "report"}}, TimeToActionBuckets());
  }
  for (const char* action : {"takedown", "restore"}) {
    metrics_.GetHistogram("sluice_moderation_time_to_action_seconds", kTimeToActionHelp,
                          {{"action", action}, {"kind", "notice"}}, TimeToActionBuckets());
  }
}

const std::vector<std::string_view>& ModerationService::Reasons() {
  static const std::vector<std::string_view> kReasons(store::kReportReasons.begin(),
                                                      store::kReportReasons.end());
  return kReasons;
}

void ModerationService::Reconfigure(const ModerationOptions& next) {
  ModerationOptions kept = next;
  kept.budget = built_.budget;
  kept.blocks_refresh = built_.blocks_refresh;
  kept.shared_meta_ttl = built_.shared_meta_ttl;
  kept.max_blocked_contents = built_.max_blocked_contents;
  options_.Store(kept);
  global_reports_.SetPolicy(next.global_report_rate);
  withholds_.SetPolicy(next.withhold_rate);
}

Status ModerationService::AdmitGlobally() {
  const admission::TakeDecision taken = global_reports_.TryTake();
  if (taken.allowed) return Ok();
  reports_refused_.Inc();
  const int retry = std::clamp(taken.RetryAfterSeconds(), 1, 3600);
  Error e =
      MakeError(ErrorCode::kResourceExhausted,
                fmt::format("this server takes no more reports for now; retry after {} s", retry),
                "report_global_rate");
  e.retry_after_seconds = retry;
  const admission::TokenBucketPolicy policy = global_reports_.policy();
  e.limit = LimitInfo{"report_global_rate", policy.burst, policy.burst / policy.rate_per_second,
                      std::floor(std::max(0.0, global_reports_.Available())), retry};
  return e;
}

void ModerationService::Count(const store::ReportOutcome& outcome) {
  if (!outcome.counted) {
    reports_repeated_.Inc();
    return;
  }
  reports_counted_.Inc();
  if (outcome.stored) return;
  reports_unstored_.Inc();
  const int64_t now = clock_.UnixSeconds();
  int64_t last = unstored_logged_at_.load(std::memory_order_relaxed);
  if (now - last >= 60 && unstored_logged_at_.compare_exchange_strong(last, now)) {
    spdlog::warn(
        "moderation: max_open_reports ({}) reached: reports are counted on their pastes' queue "
        "rows without their notes and withhold nothing until the queue is reviewed (this line "
        "once a minute at most; sluice_reports_total{{outcome=\"unstored\"}} counts them)",
        options_.Load()->max_open_reports);
  }
}

Error ModerationService::WithRetryAfter(Error e) {
  if ((e.code == ErrorCode::kUnavailable || e.code == ErrorCode::kDeadlineExceeded) &&
      !e.retry_after_seconds) {
    e.retry_after_seconds = admission_.JitteredRetryAfterSeconds();
  }
  // A store that answers nonsense is a dependency's wrong answer, never our 500.
  if (e.code == ErrorCode::kInternal) {
    e.code = ErrorCode::kUnavailable;
    e.retry_after_seconds = admission_.JitteredRetryAfterSeconds();
  }
  return e;
}

awaitable<Result<store::PasteMeta>> ModerationService::Find(std::string_view id_text,
                                                            Deadline deadline) {
  const auto id = store::PasteId::Parse(id_text);
  if (!id) co_return NotFound();
  Result<store::PasteMeta> meta = co_await meta_.Get(*id, deadline);
  if (!meta.ok()) {
    if (meta.error().code == ErrorCode::kNotFound) co_return NotFound();
    co_return WithRetryAfter(meta.error());
  }
  co_return meta;
}

std::optional<Error> ModerationService::ReadOnly() const {
  return storage_ ? storage_->ReadOnlyRefusal() : std::nullopt;
}

awaitable<Result<ReportReceipt>> ModerationService::Report(std::string client_key,
                                                           std::string_view id_text,
                                                           std::string reason, std::string note) {
  if (std::optional<Error> closed = ReadOnly()) co_return std::move(*closed);
  const std::shared_ptr<const ModerationOptions> options = options_.Load();
  if (store::ReportReasonBit(reason) == 0) {
    co_return Invalid("reason must be one of spam, malware, illegal, personal_data, other",
                      "bad_reason");
  }
  if (note.size() > options->max_note_bytes) {
    co_return Invalid(fmt::format("a note may be at most {} bytes", options->max_note_bytes),
                      "note_too_long");
  }
  if (!note.empty() && CheckPasteText(note) != TextProblem::kNone) {
    co_return Invalid("the note must be UTF-8 text without NUL", "bad_note");
  }
  const auto id = store::PasteId::Parse(id_text);
  if (!id) co_return NotFound();
  // Before any store call: a flood of reports, from one key or from many, costs the primary
  // nothing past these two buckets.
  if (Status admitted = admission_.AdmitReport(client_key); !admitted.ok()) {
    co_return admitted.error();
  }
  if (Status admitted = AdmitGlobally(); !admitted.ok()) co_return admitted.error();
  const Deadline deadline = Deadline::After(clock_, built_.budget);
  auto finding = Find(id_text, deadline);
  Result<store::PasteMeta> meta = co_await std::move(finding);
  if (!meta.ok()) co_return meta.error();
  const int64_t now = clock_.UnixSeconds();
  if (meta->moderation == store::Moderation::kTakenDown ||
      (meta->deleted && meta->moderation == store::Moderation::kNone) || meta->expires_at <= now) {
    co_return NotFound();
  }
  store::AbuseReport report{*id, admission::ClientNetwork(client_key, options->networks), reason,
                            std::move(note), now};
  report.from_creator =
      meta->creator_network && admission::InPackedNetwork(client_key, *meta->creator_network);
  const store::ReportPolicy policy{options->hide_threshold, options->withholds_per_network,
                                   options->max_open_reports, withholds_.Available() >= 1};
  auto adding = meta_.AddReport(std::move(report), policy, deadline);
  Result<store::ReportOutcome> outcome = co_await std::move(adding);
  if (!outcome.ok()) co_return WithRetryAfter(outcome.error());
  Count(*outcome);
  ReportReceipt receipt{outcome->counted,
                        meta->moderation != store::Moderation::kNone || outcome->withheld};
  spdlog::info("report {}: reason {} from {} ({}; {} open, {} votes{})", id->view(), reason,
               client_key,
               !outcome->counted  ? "its network's repeat, not counted"
               : !outcome->stored ? "counted, not stored: max_open_reports"
               : outcome->vote    ? "counted, a vote"
                                  : "counted, no vote",
               outcome->open_reports, outcome->votes, outcome->kept ? ", kept by a review" : "");
  if (outcome->withhold_deferred) {
    withholds_deferred_.Inc();
    spdlog::warn(
        "report {}: {} votes, but this process's withhold rate is spent: queued, still served",
        id->view(), outcome->votes);
  }
  if (operator_events_ != nullptr && outcome->counted) {
    operator_events_->Publish(
        OperatorEvent{"report",
                      id->str(),
                      now,
                      fmt::format("report of {}: {} ({} open, {} votes)", id->view(), reason,
                                  outcome->open_reports, outcome->votes),
                      {{"reason", reason},
                       {"network", admission::ClientNetwork(client_key, options->networks)},
                       {"open_reports", std::to_string(outcome->open_reports)},
                       {"votes", std::to_string(outcome->votes)}}});
  }
  if (outcome->withheld) {
    withholds_.TryTake();
    withheld_.Inc();
    if (operator_events_ != nullptr) {
      operator_events_->Publish(
          OperatorEvent{"withhold",
                        id->str(),
                        now,
                        fmt::format("{} withheld (451) until reviewed: reported from {} networks",
                                    id->view(), outcome->charged.size()),
                        {{"networks", fmt::format("{}", fmt::join(outcome->charged, ", "))}}});
    }
    auto forgetting = ForgetCached(*meta, store::Moderation::kWithheld, deadline);
    co_await std::move(forgetting);
    auto recording = Record("withhold", id->str(),
                            fmt::format("reported from {} networks: {}", outcome->charged.size(),
                                        fmt::join(outcome->charged, ", ")),
                            deadline);
    co_await std::move(recording);
  }
  if (outcome->counted) {
    auto counting = RefreshPending();
    co_await std::move(counting);
  }
  co_return receipt;
}

awaitable<Result<store::ModerationOutcome>> ModerationService::Moderate(
    store::PasteMeta meta, store::ModerationChange change, Deadline deadline) {
  const store::Moderation state = change.state;
  auto setting = meta_.SetModeration(meta.id, std::move(change), deadline);
  Result<store::ModerationOutcome> set = co_await std::move(setting);
  if (!set.ok()) co_return WithRetryAfter(set.error());
  auto forgetting = ForgetCached(std::move(meta), state, deadline);
  co_await std::move(forgetting);
  co_return set;
}

void ModerationService::ObserveTimeToAction(std::string_view action,
                                            const store::ModerationOutcome& outcome, int64_t at) {
  if (!outcome.queued_since) return;  // nothing was open: no clock ran
  ObserveWait(action, "report", at - *outcome.queued_since);
}

void ModerationService::ObserveWait(std::string_view action, std::string_view kind,
                                    int64_t seconds) {
  metrics_
      .GetHistogram("sluice_moderation_time_to_action_seconds", kTimeToActionHelp,
                    {{"action", std::string(action)}, {"kind", std::string(kind)}},
                    TimeToActionBuckets())
      .Observe(static_cast<double>(std::max<int64_t>(0, seconds)));
}

awaitable<void> ModerationService::ForgetCached(store::PasteMeta meta, store::Moderation state,
                                                Deadline deadline) {
  // As a delete does (src/service/paste_service_delete.cc): this process's cache keeps a
  // tombstone, so a racing fill cannot put the old row back, and reads go to the row, which says
  // 451; the shared cache gets the new row and tells every process to drop its copy.
  cache_.MarkDeleted(meta.id);
  if (!shared_) co_return;
  meta.moderation = state;
  const int64_t left = meta.expires_at - clock_.UnixSeconds();
  const auto ttl =
      std::chrono::seconds(std::clamp<int64_t>(left, 1, built_.shared_meta_ttl.count()));
  auto telling = shared_->Invalidate(meta, ttl, deadline);
  if (Status told = co_await std::move(telling); !told.ok()) {
    spdlog::warn("moderation {}: shared cache not invalidated: {}", meta.id.view(),
                 told.error().message);
  }
}

awaitable<void> ModerationService::Record(std::string action, std::string target,
                                          std::string detail, Deadline deadline) {
  spdlog::info("audit: action={} target={} detail={}", action, target, detail);
  auto adding = meta_.AddAudit(store::AuditEntry{clock_.UnixSeconds(), std::move(action),
                                                 std::move(target), std::move(detail)},
                               deadline);
  if (Status added = co_await std::move(adding); !added.ok()) {
    // The action itself stands; the log line above is its record.
    spdlog::error("audit: row not stored: {}", added.error().message);
  }
}

awaitable<Result<store::ReportPage>> ModerationService::OpenReports(
    std::optional<store::ReportCursor> after, size_t limit) {
  auto listing = meta_.OpenReports(after, limit, Deadline::After(clock_, built_.budget));
  Result<store::ReportPage> out = co_await std::move(listing);
  if (!out.ok()) co_return WithRetryAfter(out.error());
  // The page's reader wants the queue's length as of now (one row of the store's counts).
  auto counting = RefreshPending();
  co_await std::move(counting);
  co_return out;
}

awaitable<Result<PasteReview>> ModerationService::Show(std::string_view id_text) {
  const Deadline deadline = Deadline::After(clock_, built_.budget);
  auto finding = Find(id_text, deadline);
  Result<store::PasteMeta> meta = co_await std::move(finding);
  if (!meta.ok()) co_return meta.error();
  PasteReview review{*meta, std::nullopt};
  Result<std::string> body = co_await blobs_.Get(meta->id, deadline);
  if (body.ok()) {
    review.text = std::move(*body);
  } else if (body.error().code != ErrorCode::kNotFound) {
    co_return WithRetryAfter(body.error());
  }
  co_return review;
}

awaitable<Status> ModerationService::Takedown(std::string_view id_text, std::string reason) {
  if (std::optional<Error> closed = ReadOnly()) co_return std::move(*closed);
  const Deadline deadline = Deadline::After(clock_, built_.budget);
  auto finding = Find(id_text, deadline);
  Result<store::PasteMeta> meta = co_await std::move(finding);
  if (!meta.ok()) co_return meta.error();
  if (reason.empty()) reason = "taken down by the operator";
  store::ModerationChange change{store::Moderation::kTakenDown, reason, clock_.UnixSeconds()};
  change.tally.push_back(store::TransparencyCount{store::TransparencyMonth(change.at),
                                                  std::string(store::kTallyTakedown), "", 1});
  // The takedown records what its paste's body hashes to, so those bytes are refused from then on
  // (docs/moderation.md, "Takedowns that stick"). A row from before checksums (or written with
  // verify_bodies off) has none: its body, still there, is hashed now.
  std::optional<store::BodyDigest> digest = meta->body_sha256;
  if (!digest && !meta->deleted) {
    Result<std::string> body = co_await blobs_.Get(meta->id, deadline);
    if (body.ok()) digest = DigestBody(*body);
  }
  if (digest && blocked_contents_ != nullptr) {
    change.block_content = store::BlockedContent{*digest, change.at, meta->id.str(), reason};
    change.max_blocked_contents = built_.max_blocked_contents;
  }
  // The state first: from then on the row says 451 even while the body is still on its way out.
  auto moderating = Moderate(*meta, change, deadline);
  Result<store::ModerationOutcome> moderated = co_await std::move(moderating);
  if (!moderated.ok()) co_return moderated.error();
  ObserveTimeToAction("takedown", *moderated, change.at);
  auto closing = CloseNoticesOf(*meta, "takedown", change.at, deadline);
  reason += co_await std::move(closing);
  if (change.block_content) {
    // This process refuses the bytes at once; the others at their next refresh.
    if (static_cast<int64_t>(blocked_contents_->size()) < built_.max_blocked_contents) {
      blocked_contents_->Add(*digest);
    }
    reason += " (sha256 " + ContentBlocklist::Hex(*digest) + " blocked)";
  }
  // The body goes through the outbox as a delete's does; the janitor purges the edge after it.
  auto deleting = meta_.MarkDeleted(meta->id, clock_.UnixSeconds(), deadline);
  if (Status s = co_await std::move(deleting); !s.ok()) co_return WithRetryAfter(s.error());
  // The store counted the bytes out in the same transaction (store::MetaStore::LiveBytes); this
  // process's figure follows now, as after a delete, so a quota filled by the paste taken down
  // lets the next create in. A tombstone (deleted, or burned, already) was counted out then.
  if (storage_ != nullptr && !meta->deleted) storage_->CountFreed(meta->size_bytes);
  auto recording = Record("takedown", meta->id.str(), reason, deadline);
  co_await std::move(recording);
  auto counting = RefreshPending();
  co_await std::move(counting);
  co_return Ok();
}

awaitable<Status> ModerationService::Dismiss(std::string_view id_text, std::string note,
                                             bool keep) {
  if (std::optional<Error> closed = ReadOnly()) co_return std::move(*closed);
  const Deadline deadline = Deadline::After(clock_, built_.budget);
  auto finding = Find(id_text, deadline);
  Result<store::PasteMeta> meta = co_await std::move(finding);
  if (!meta.ok()) co_return meta.error();
  if (meta->moderation == store::Moderation::kTakenDown) {
    co_return Invalid("this paste was taken down; its body is gone and it stays down",
                      "taken_down");
  }
  if (note.empty()) note = "reports dismissed";
  const int64_t now = clock_.UnixSeconds();
  // A withheld paste served again is a restore; reports closed on a paste still served, a
  // dismissal.
  // (Withheld by votes or by a notice: taken down returned above.)
  const bool restore = meta->moderation != store::Moderation::kNone;
  store::ModerationChange change{store::Moderation::kNone, note, now, keep};
  change.tally.push_back(store::TransparencyCount{
      store::TransparencyMonth(now),
      std::string(restore ? store::kTallyRestore : store::kTallyDismiss), "", 1});
  auto moderating = Moderate(*meta, std::move(change), deadline);
  Result<store::ModerationOutcome> moderated = co_await std::move(moderating);
  if (!moderated.ok()) co_return moderated.error();
  ObserveTimeToAction(restore ? "restore" : "dismiss", *moderated, now);
  auto closing = CloseNoticesOf(*meta, "restore", now, deadline);
  const std::string notices = co_await std::move(closing);
  auto recording =
      Record("dismiss", meta->id.str(),
             fmt::format("{} (was {}{}){}", note, store::ModerationName(meta->moderation),
                         keep ? "; reviewed: keep, later reports only queue it" : "", notices),
             deadline);
  co_await std::move(recording);
  auto counting = RefreshPending();
  co_await std::move(counting);
  co_return Ok();
}

awaitable<Result<store::ClientBlock>> ModerationService::Block(std::string prefix,
                                                               std::chrono::seconds duration,
                                                               std::string reason) {
  if (std::optional<Error> closed = ReadOnly()) co_return std::move(*closed);
  if (Status valid = Blocklist::Check(prefix); !valid.ok()) co_return valid.error();
  if (duration <= std::chrono::seconds::zero() || duration > std::chrono::hours(24 * 366)) {
    co_return Invalid("a block lasts from 1 s to 366 days", "bad_duration");
  }
  if (reason.empty()) reason = "blocked by the operator";
  const Deadline deadline = Deadline::After(clock_, built_.budget);
  const int64_t now = clock_.UnixSeconds();
  store::ClientBlock block{prefix, reason, now, now + duration.count()};
  auto adding = meta_.AddBlock(block, deadline);
  if (Status added = co_await std::move(adding); !added.ok()) {
    co_return WithRetryAfter(added.error());
  }
  blocks_.Add(block);
  auto recording = Record(
      "block", prefix, fmt::format("{} for {} s (until {})", reason, duration.count(), block.until),
      deadline);
  co_await std::move(recording);
  co_return block;
}

awaitable<Result<std::vector<store::AuditEntry>>> ModerationService::Audit(size_t limit) {
  auto reading = meta_.AuditTrail(limit, Deadline::After(clock_, built_.budget));
  Result<std::vector<store::AuditEntry>> out = co_await std::move(reading);
  if (!out.ok()) co_return WithRetryAfter(out.error());
  co_return out;
}

namespace {

Error BadDigest() {
  return Invalid("sha256 must be 64 hex digits (the SHA-256 of the body)", "bad_sha256");
}

// Entries read in one statement while the list is read again: bounded work per call.
constexpr size_t kBlockedContentsPage = 10'000;

}  // namespace

awaitable<Result<ContentBlockReceipt>> ModerationService::BlockContent(std::string_view sha256,
                                                                       std::string reason) {
  if (std::optional<Error> closed = ReadOnly()) co_return std::move(*closed);
  const auto digest = ContentBlocklist::ParseHex(sha256);
  if (!digest) co_return BadDigest();
  if (reason.empty()) reason = "blocked by the operator";
  const Deadline deadline = Deadline::After(clock_, built_.budget);
  const std::string hex = ContentBlocklist::Hex(*digest);
  auto adding =
      meta_.BlockContent(store::BlockedContent{*digest, clock_.UnixSeconds(), "admin", reason},
                         built_.max_blocked_contents, deadline);
  Result<bool> added = co_await std::move(adding);
  if (!added.ok()) {
    if (added.error().reason == store::kBlockedContentsFull) {
      Error e = added.error();
      e.message = fmt::format(
          "the content blocklist holds max_blocked_contents ({}) entries; unblock some first",
          built_.max_blocked_contents);
      co_return e;
    }
    co_return WithRetryAfter(added.error());
  }
  if (blocked_contents_ != nullptr) blocked_contents_->Add(*digest);
  if (*added) {
    auto recording = Record("block_content", hex, reason, deadline);
    co_await std::move(recording);
  }
  co_return ContentBlockReceipt{hex, *added};
}

awaitable<Result<bool>> ModerationService::UnblockContent(std::string_view sha256) {
  if (std::optional<Error> closed = ReadOnly()) co_return std::move(*closed);
  const auto digest = ContentBlocklist::ParseHex(sha256);
  if (!digest) co_return BadDigest();
  const Deadline deadline = Deadline::After(clock_, built_.budget);
  auto removing = meta_.UnblockContent(*digest, deadline);
  Result<bool> removed = co_await std::move(removing);
  if (!removed.ok()) co_return WithRetryAfter(removed.error());
  if (blocked_contents_ != nullptr) blocked_contents_->Remove(*digest);
  if (*removed) {
    auto recording = Record("unblock_content", ContentBlocklist::Hex(*digest), "", deadline);
    co_await std::move(recording);
  }
  co_return *removed;
}

awaitable<Result<store::BlockedContentPage>> ModerationService::BlockedContents(
    std::optional<std::string_view> after, size_t limit) {
  std::optional<store::BodyDigest> from;
  if (after) {
    from = ContentBlocklist::ParseHex(*after);
    if (!from) co_return BadDigest();
  }
  auto listing = meta_.BlockedContents(from, limit, Deadline::After(clock_, built_.budget));
  Result<store::BlockedContentPage> page = co_await std::move(listing);
  if (!page.ok()) co_return WithRetryAfter(page.error());
  co_return page;
}

awaitable<Status> ModerationService::LoadBlockedContents() {
  if (blocked_contents_ == nullptr) co_return Ok();
  auto versioning = meta_.BlockedContentsVersion(Deadline::After(clock_, built_.budget));
  Result<store::BlockedContentsState> state = co_await std::move(versioning);
  if (!state.ok()) co_return state.error();
  if (state->version == blocked_contents_->version()) co_return Ok();
  // Read whole, page by page (each page one bounded statement), then swapped in at once: a create
  // never sees half a list. Operators change the list rarely; every change costs each process one
  // such read (docs/moderation.md).
  std::vector<store::BodyDigest> digests;
  digests.reserve(static_cast<size_t>(std::max<int64_t>(0, state->entries)));
  std::optional<store::BodyDigest> after;
  do {
    auto listing =
        meta_.BlockedContents(after, kBlockedContentsPage, Deadline::After(clock_, built_.budget));
    Result<store::BlockedContentPage> page = co_await std::move(listing);
    if (!page.ok()) co_return page.error();
    for (const store::BlockedContent& e : page->entries) digests.push_back(e.sha256);
    after = page->next;
  } while (after);
  blocked_contents_->Replace(std::move(digests), state->version);
  co_return Ok();
}

awaitable<Status> ModerationService::LoadBlocks() {
  auto reading = meta_.ActiveBlocks(clock_.UnixSeconds(), Deadline::After(clock_, built_.budget));
  Result<std::vector<store::ClientBlock>> blocks = co_await std::move(reading);
  if (!blocks.ok()) co_return blocks.error();
  blocks_.Replace(std::move(*blocks));
  co_return Ok();
}

awaitable<void> ModerationService::RefreshPending() {
  // One row that every report and review keeps (store::ReportCounts), never a count of the queue.
  auto reading = meta_.CountReports(Deadline::After(clock_, built_.budget));
  Result<store::ReportCounts> counts = co_await std::move(reading);
  if (!counts.ok()) {
    spdlog::warn("moderation: pending reports not counted: {}", counts.error().message);
    co_return;
  }
  pending_.store(counts->pending, std::memory_order_relaxed);
  open_reports_.store(counts->open_reports, std::memory_order_relaxed);
  oldest_report_at_.store(counts->oldest_at.value_or(kNoneQueued), std::memory_order_relaxed);
  // The oldest open notice: one probe of its index (store::MetaStore::OpenNotices).
  auto reading_notices = meta_.OpenNotices(1, Deadline::After(clock_, built_.budget));
  Result<std::vector<store::Notice>> oldest = co_await std::move(reading_notices);
  if (!oldest.ok()) {
    spdlog::warn("moderation: oldest open notice not read: {}", oldest.error().message);
    co_return;
  }
  oldest_notice_at_.store(oldest->empty() ? kNoneQueued : oldest->front().received_at,
                          std::memory_order_relaxed);
}

std::optional<int64_t> ModerationService::OldestOpenNoticeAt() const {
  const int64_t at = oldest_notice_at_.load(std::memory_order_relaxed);
  if (at == kNoneQueued) return std::nullopt;
  return at;
}

std::optional<int64_t> ModerationService::OldestOpenReportAt() const {
  const int64_t at = oldest_report_at_.load(std::memory_order_relaxed);
  if (at == kNoneQueued) return std::nullopt;
  return at;
}

awaitable<void> ModerationService::RefreshForScrape() {
  const int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.Now().time_since_epoch()).count();
  int64_t last = counted_at_ns_.load(std::memory_order_relaxed);
  if (last != std::numeric_limits<int64_t>::min() &&
      now - last < std::chrono::nanoseconds(kScrapeFreshness).count()) {
    co_return;
  }
  // One scrape of a storm reads; the others answer with what the last read found.
  if (!counted_at_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) co_return;
  auto counting = RefreshPending();
  co_await std::move(counting);
}

void ModerationService::Start(boost::asio::any_io_executor executor) {
  boost::asio::co_spawn(executor, RefreshLoop(), asio_glue::LogIfThrown("moderation: blocks"));
}

awaitable<void> ModerationService::RefreshLoop() {
  asio_glue::Timer timer(clock_, co_await boost::asio::this_coro::executor);
  while (!stopping_) {
    auto loading = LoadBlocks();
    if (Status loaded = co_await std::move(loading); !loaded.ok()) {
      // The blocks already known stay in force.
      spdlog::warn("moderation: blocks not reloaded: {}", loaded.error().message);
    }
    auto reading = LoadBlockedContents();
    if (Status read = co_await std::move(reading); !read.ok()) {
      // The digests already known stay blocked.
      spdlog::warn("moderation: content blocklist not reloaded: {}", read.error().message);
    }
    auto counting = RefreshPending();
    co_await std::move(counting);
    auto flushing = FlushTransparency(built_.budget);
    if (Status flushed = co_await std::move(flushing); !flushed.ok()) {
      // The refusals wait in memory for the next flush.
      spdlog::warn("moderation: transparency counts not stored: {}", flushed.error().message);
    }
    auto warning = WarnOfDeadlines();
    co_await std::move(warning);
    const auto step = std::chrono::milliseconds(100);
    for (auto slept = std::chrono::milliseconds(0); slept < built_.blocks_refresh && !stopping_;
         slept += step) {
      auto waiting = timer.WaitUntil(clock_.Now() + step);
      (void)co_await std::move(waiting);
    }
  }
}

}  // namespace sluice::service
