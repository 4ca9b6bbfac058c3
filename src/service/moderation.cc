#include "sluice/service/moderation.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>

#include "sluice/asio/spawn.h"
#include "sluice/asio/timer.h"
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

ModerationService::ModerationService(store::MetaStore& meta, store::BlobStore& blobs,
                                     PasteCache& cache, AdmissionControl& admission,
                                     Blocklist& blocks, const Clock& clock,
                                     ModerationOptions options, store::SharedState* shared,
                                     PasteService* storage)
    : meta_(meta),
      blobs_(blobs),
      cache_(cache),
      admission_(admission),
      blocks_(blocks),
      clock_(clock),
      options_(options),
      shared_(shared),
      storage_(storage),
      hide_threshold_(options.hide_threshold) {}

const std::vector<std::string_view>& ModerationService::Reasons() {
  static const std::vector<std::string_view> kReasons = {"spam", "malware", "illegal",
                                                         "personal_data", "other"};
  return kReasons;
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

awaitable<Result<ReportReceipt>> ModerationService::Report(std::string client_key,
                                                           std::string_view id_text,
                                                           std::string reason, std::string note) {
  const auto& reasons = Reasons();
  if (std::find(reasons.begin(), reasons.end(), reason) == reasons.end()) {
    co_return Invalid("reason must be one of spam, malware, illegal, personal_data, other",
                      "bad_reason");
  }
  if (note.size() > options_.max_note_bytes) {
    co_return Invalid(fmt::format("a note may be at most {} bytes", options_.max_note_bytes),
                      "note_too_long");
  }
  if (!note.empty() && CheckPasteText(note) != TextProblem::kNone) {
    co_return Invalid("the note must be UTF-8 text without NUL", "bad_note");
  }
  const auto id = store::PasteId::Parse(id_text);
  if (!id) co_return NotFound();
  // Before any store call: a flood of reports costs the primary nothing.
  if (Status admitted = admission_.AdmitReport(client_key); !admitted.ok()) {
    co_return admitted.error();
  }
  const Deadline deadline = Deadline::After(clock_, options_.budget);
  auto finding = Find(id_text, deadline);
  Result<store::PasteMeta> meta = co_await std::move(finding);
  if (!meta.ok()) co_return meta.error();
  const int64_t now = clock_.UnixSeconds();
  if (meta->moderation == store::Moderation::kTakenDown ||
      (meta->deleted && meta->moderation == store::Moderation::kNone) || meta->expires_at <= now) {
    co_return NotFound();
  }
  auto adding = meta_.AddReport(store::AbuseReport{*id, client_key, std::string(reason), note, now},
                                deadline);
  Result<store::ReportOutcome> outcome = co_await std::move(adding);
  if (!outcome.ok()) co_return WithRetryAfter(outcome.error());
  ReportReceipt receipt{outcome->counted, meta->moderation == store::Moderation::kWithheld};
  if (outcome->counted) {
    auto counting = RefreshPending();
    co_await std::move(counting);
  }
  spdlog::info("report {}: reason {} from {} ({}; {} open)", id->view(), reason, client_key,
               outcome->counted ? "counted" : "repeat, not counted", outcome->open_reports);
  const int64_t hide_threshold = hide_threshold_.load(std::memory_order_relaxed);
  if (!receipt.withheld && hide_threshold > 0 && outcome->open_reports >= hide_threshold) {
    const std::string why = fmt::format("reported by {} clients", outcome->open_reports);
    auto withholding = Moderate(*meta, store::Moderation::kWithheld, why, deadline);
    if (Status withheld = co_await std::move(withholding); !withheld.ok()) {
      // The report stands; the next one tries again.
      spdlog::error("report {}: not withheld: {}", id->view(), withheld.error().message);
    } else {
      receipt.withheld = true;
      auto recording = Record("withhold", id->str(), why, deadline);
      co_await std::move(recording);
    }
  }
  co_return receipt;
}

awaitable<Status> ModerationService::Moderate(store::PasteMeta meta, store::Moderation state,
                                              std::string reason, Deadline deadline) {
  auto setting = meta_.SetModeration(meta.id, state, reason, clock_.UnixSeconds(), deadline);
  if (Status set = co_await std::move(setting); !set.ok()) co_return WithRetryAfter(set.error());
  // As a delete does (src/service/paste_service.cc): this process's cache keeps a tombstone, so
  // a racing fill cannot put the old row back, and reads go to the row, which says 451; the
  // shared cache gets the new row and tells every process to drop its copy.
  cache_.MarkDeleted(meta.id);
  if (shared_) {
    meta.moderation = state;
    const int64_t left = meta.expires_at - clock_.UnixSeconds();
    const auto ttl =
        std::chrono::seconds(std::clamp<int64_t>(left, 1, options_.shared_meta_ttl.count()));
    auto telling = shared_->Invalidate(meta, ttl, deadline);
    if (Status told = co_await std::move(telling); !told.ok()) {
      spdlog::warn("moderation {}: shared cache not invalidated: {}", meta.id.view(),
                   told.error().message);
    }
  }
  co_return Ok();
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

awaitable<Result<std::vector<store::ReportSummary>>> ModerationService::OpenReports(size_t limit) {
  auto listing = meta_.OpenReports(limit, Deadline::After(clock_, options_.budget));
  Result<std::vector<store::ReportSummary>> out = co_await std::move(listing);
  if (!out.ok()) co_return WithRetryAfter(out.error());
  co_return out;
}

awaitable<Result<PasteReview>> ModerationService::Show(std::string_view id_text) {
  const Deadline deadline = Deadline::After(clock_, options_.budget);
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
  const Deadline deadline = Deadline::After(clock_, options_.budget);
  auto finding = Find(id_text, deadline);
  Result<store::PasteMeta> meta = co_await std::move(finding);
  if (!meta.ok()) co_return meta.error();
  if (reason.empty()) reason = "taken down by the operator";
  // The state first: from then on the row says 451 even while the body is still on its way out.
  auto moderating = Moderate(*meta, store::Moderation::kTakenDown, reason, deadline);
  if (Status s = co_await std::move(moderating); !s.ok()) co_return s;
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

awaitable<Status> ModerationService::Dismiss(std::string_view id_text, std::string note) {
  const Deadline deadline = Deadline::After(clock_, options_.budget);
  auto finding = Find(id_text, deadline);
  Result<store::PasteMeta> meta = co_await std::move(finding);
  if (!meta.ok()) co_return meta.error();
  if (meta->moderation == store::Moderation::kTakenDown) {
    co_return Invalid("this paste was taken down; its body is gone and it stays down",
                      "taken_down");
  }
  if (note.empty()) note = "reports dismissed";
  auto moderating = Moderate(*meta, store::Moderation::kNone, note, deadline);
  if (Status s = co_await std::move(moderating); !s.ok()) co_return s;
  auto recording =
      Record("dismiss", meta->id.str(),
             fmt::format("{} (was {})", note, store::ModerationName(meta->moderation)), deadline);
  co_await std::move(recording);
  auto counting = RefreshPending();
  co_await std::move(counting);
  co_return Ok();
}

awaitable<Result<store::ClientBlock>> ModerationService::Block(std::string prefix,
                                                               std::chrono::seconds duration,
                                                               std::string reason) {
  if (Status valid = Blocklist::Check(prefix); !valid.ok()) co_return valid.error();
  if (duration <= std::chrono::seconds::zero() || duration > std::chrono::hours(24 * 366)) {
    co_return Invalid("a block lasts from 1 s to 366 days", "bad_duration");
  }
  if (reason.empty()) reason = "blocked by the operator";
  const Deadline deadline = Deadline::After(clock_, options_.budget);
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
  auto reading = meta_.AuditTrail(limit, Deadline::After(clock_, options_.budget));
  Result<std::vector<store::AuditEntry>> out = co_await std::move(reading);
  if (!out.ok()) co_return WithRetryAfter(out.error());
  co_return out;
}

awaitable<Status> ModerationService::LoadBlocks() {
  auto reading = meta_.ActiveBlocks(clock_.UnixSeconds(), Deadline::After(clock_, options_.budget));
  Result<std::vector<store::ClientBlock>> blocks = co_await std::move(reading);
  if (!blocks.ok()) co_return blocks.error();
  blocks_.Replace(std::move(*blocks));
  co_return Ok();
}

awaitable<void> ModerationService::RefreshPending() {
  // The review queue's own query, bounded: cheap next to the report or action that triggers it.
  auto listing = meta_.OpenReports(kPendingCountLimit, Deadline::After(clock_, options_.budget));
  Result<std::vector<store::ReportSummary>> open = co_await std::move(listing);
  if (!open.ok()) {
    spdlog::warn("moderation: pending reports not counted: {}", open.error().message);
    co_return;
  }
  pending_.store(static_cast<int64_t>(open->size()), std::memory_order_relaxed);
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
    auto counting = RefreshPending();
    co_await std::move(counting);
    const auto step = std::chrono::milliseconds(100);
    for (auto slept = std::chrono::milliseconds(0); slept < options_.blocks_refresh && !stopping_;
         slept += step) {
      auto waiting = timer.WaitUntil(clock_.Now() + step);
      (void)co_await std::move(waiting);
    }
  }
}

}  // namespace sluice::service
