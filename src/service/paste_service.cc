// PasteService (include/sluice/service/paste_service.h): its metrics, its live options, and what
// every use case shares. The use cases are files of their own: paste_service_create.cc,
// paste_service_read.cc (reads and burn-after-reading claims), paste_service_delete.cc and
// paste_service_storage.cc (the storage quota).
#include "sluice/service/paste_service.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "sluice/asio/completion.h"
#include "sluice/asio/spawn.h"
#include "sluice/asio/timer.h"
#include "sluice/service/body_check.h"
#include "sluice/service/envelope.h"
#include "sluice/service/ids.h"
#include "sluice/service/text.h"

namespace sluice::service {

using admission::Deadline;
using boost::asio::awaitable;

namespace {

constexpr const char* kMismatchHelp =
    "Bodies from the blob store that did not match their row, by what differed (answered 503 "
    "body_mismatch, never served or cached)";
constexpr const char* kUnknownHelp =
    "Creates whose insert answer was lost, by what the check by id found (confirmed: 201; "
    "unknown: 503 outcome_unknown)";

}  // namespace

PasteService::PasteService(store::MetaStore& meta, store::BlobStore& blobs, PasteCache& cache,
                           AdmissionControl& admission, const Clock& clock,
                           MetricsRegistry& metrics, ServiceOptions options,
                           store::SharedState* shared, const Blocklist* blocks, AbuseWatch* abuse,
                           const ContentBlocklist* blocked_contents)
    : meta_(meta),
      blobs_(blobs),
      cache_(cache),
      admission_(admission),
      clock_(clock),
      options_(options),
      shared_(shared),
      blocks_(blocks),
      abuse_(abuse),
      blocked_contents_(blocked_contents),
      cache_hits_(metrics.GetCounter("sluice_paste_cache_total", "Paste cache lookups by outcome",
                                     {{"outcome", "hit"}})),
      cache_misses_(metrics.GetCounter("sluice_paste_cache_total", "Paste cache lookups by outcome",
                                       {{"outcome", "miss"}})),
      fills_shared_(
          metrics.GetCounter("sluice_fills_shared_total",
                             "Cache misses that joined a fill already in flight (singleflight)")),
      shared_hits_(metrics.GetCounter(
          "sluice_shared_meta_cache_total",
          "Shared metadata cache calls by outcome (error: slow or unreachable, served anyway)",
          {{"outcome", "hit"}})),
      shared_misses_(metrics.GetCounter(
          "sluice_shared_meta_cache_total",
          "Shared metadata cache calls by outcome (error: slow or unreachable, served anyway)",
          {{"outcome", "miss"}})),
      shared_errors_(metrics.GetCounter(
          "sluice_shared_meta_cache_total",
          "Shared metadata cache calls by outcome (error: slow or unreachable, served anyway)",
          {{"outcome", "error"}})),
      size_mismatches_(
          metrics.GetCounter("sluice_body_mismatches_total", kMismatchHelp, {{"kind", "size"}})),
      checksum_mismatches_(metrics.GetCounter("sluice_body_mismatches_total", kMismatchHelp,
                                              {{"kind", "checksum"}})),
      undecodable_mismatches_(metrics.GetCounter("sluice_body_mismatches_total", kMismatchHelp,
                                                 {{"kind", "undecodable"}})),
      confirmed_inserts_(metrics.GetCounter("sluice_insert_outcome_unknown_total", kUnknownHelp,
                                            {{"outcome", "confirmed"}})),
      unknown_inserts_(metrics.GetCounter("sluice_insert_outcome_unknown_total", kUnknownHelp,
                                          {{"outcome", "unknown"}})),
      claims_won_(metrics.GetCounter("sluice_burn_claims_total",
                                     "Claims of burn-after-reading pastes by outcome (won: the "
                                     "one reader got the text; gone: claimed before, or expired)",
                                     {{"outcome", "won"}})),
      claims_gone_(metrics.GetCounter("sluice_burn_claims_total",
                                      "Claims of burn-after-reading pastes by outcome (won: the "
                                      "one reader got the text; gone: claimed before, or expired)",
                                      {{"outcome", "gone"}})),
      // What the body store is billed for: the alert rules weigh it per day against a plan
      // (deploy/prometheus/sluice.rules.yml, docs/operations.md).
      put_bytes_(metrics.GetCounter("sluice_blob_put_bytes_total",
                                    "Paste body bytes the body store accepted")),
      blocked_content_refusals_(metrics.GetCounter(
          "sluice_creates_refused_total",
          "Creates refused after their body was read, before anything was stored, by reason "
          "(blocked_content: the body's SHA-256 is in the content blocklist, 451)",
          {{"reason", "blocked_content"}})),
      fills_(
          Result<CachedPaste>(MakeError(ErrorCode::kInternal, "fill abandoned", "fill_abandoned"))),
      created_bytes_(metrics.GetCounter("sluice_storage_created_bytes_total",
                                        "Bytes of pastes created by this process")),
      quota_refusals_(metrics.GetCounter(
          "sluice_storage_quota_refusals_total",
          "Creates refused 507 storage_quota: live bytes, plus the bytes reserved by creates in "
          "flight, plus the declared length over the quota")),
      read_only_refusals_(metrics.GetCounter(
          "sluice_read_only_refusals_total",
          "Writes (creates, forks, deletes, claims, reports, moderation) refused 503 read_only "
          "during the read-only window")),
      storage_gauges_(metrics) {
  storage_gauges_.Add("sluice_read_only",
                      "1 while the read-only window is open (read_only, or PUT /admin/read-only): "
                      "writes answer 503 read_only, reads go on",
                      {}, [this] { return options_.Load()->read_only ? 1.0 : 0.0; });
  storage_gauges_.Add("sluice_storage_live_bytes",
                      "Bytes of live pastes (not deleted, not yet purged) in the metadata store, "
                      "as this process last saw them",
                      {}, [this] { return static_cast<double>(Storage().live_bytes); });
  storage_gauges_.Add("sluice_storage_quota_bytes",
                      "The storage quota, max_storage_bytes (0: none)", {},
                      [this] { return static_cast<double>(options_.Load()->max_storage_bytes); });
  storage_gauges_.Add("sluice_storage_created_bytes_24h",
                      "Bytes of pastes created by this process in the last 24 hours (sum over "
                      "processes for the site)",
                      {}, [this] { return static_cast<double>(CreatedLastDay()); });
  if (shared_) {
    // Captures the cache, not the service: the store's thread may deliver a message while the
    // service is being torn down, and the cache outlives both.
    PasteCache* local = &cache_;
    shared_->SubscribeInvalidations([local](const store::PasteId& id) { local->MarkDeleted(id); });
  }
}

void PasteService::Reconfigure(const ServiceOptions& next) {
  std::lock_guard lock(reconfigure_mu_);
  ServiceOptions o = *options_.Load();
  o.max_paste_bytes = next.max_paste_bytes;
  o.default_ttl = next.default_ttl;
  o.max_ttl = next.max_ttl;
  o.create_budget = next.create_budget;
  o.read_budget = next.read_budget;
  o.delete_budget = next.delete_budget;
  o.max_storage_bytes = next.max_storage_bytes;
  o.reservation_lifetime = next.reservation_lifetime;
  o.put_timeout = next.put_timeout;
  o.insert_timeout = next.insert_timeout;
  o.cache_timeout = next.cache_timeout;
  // A row stored without a checksum is checked by its size alone (CheckBody), so turning the
  // checks on serves the pastes made while they were off.
  o.verify_bodies = next.verify_bodies;
  // A new allow-list is built beside the old one and swapped in with the rest: a create in flight
  // keeps the snapshot it took (docs/admission.md, "Who may create").
  o.create_access = next.create_access;
  o.create_access_text = next.create_access_text;
  o.read_only = next.read_only;
  o.read_only_retry_after = next.read_only_retry_after;
  options_.Store(std::move(o));
}

void PasteService::SetReadOnly(bool on) {
  std::lock_guard lock(reconfigure_mu_);
  ServiceOptions o = *options_.Load();
  o.read_only = on;
  options_.Store(std::move(o));
}

std::optional<Error> PasteService::ReadOnlyRefusal() const {
  const std::shared_ptr<const ServiceOptions> options = options_.Load();
  if (!options->read_only) return std::nullopt;
  read_only_refusals_.Inc();
  Error e = MakeError(ErrorCode::kUnavailable,
                      "this server is read-only for a short while (its store is moving); reading "
                      "works, and nothing was changed: try again later",
                      "read_only");
  e.retry_after_seconds = options->read_only_retry_after.count();
  return e;
}

Error PasteService::WithRetryAfter(Error e) {
  if ((e.code == ErrorCode::kUnavailable || e.code == ErrorCode::kDeadlineExceeded) &&
      !e.retry_after_seconds) {
    e.retry_after_seconds = admission_.JitteredRetryAfterSeconds();
  }
  return e;
}

bool PasteService::IsLive(const store::PasteMeta& meta) const {
  return !meta.deleted && meta.expires_at > clock_.UnixSeconds();
}

}  // namespace sluice::service
