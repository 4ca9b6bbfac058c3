#include "sluice/worker/janitor.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cmath>
#include <limits>
#include <random>

#include "sluice/asio/spawn.h"
#include "sluice/asio/timer.h"

namespace sluice::worker {

using admission::Deadline;
using boost::asio::awaitable;
namespace asio = boost::asio;

namespace {
// Background calls have no user waiting, but still must not hang forever.
constexpr std::chrono::seconds kBackgroundCallTimeout{30};
// Shortest time between two warnings of one kind from the reaper.
constexpr int64_t kWarningIntervalSeconds = 600;
// The leased jobs, by their index in Janitor::leased_jobs_.
enum LeasedJobIndex : size_t { kReportsLease, kReaperLease };
constexpr const char* kLeaseNames[] = {"report_retention", "orphan_reaper"};
}  // namespace

Janitor::Janitor(store::MetaStore& meta, store::BlobStore& blobs, service::PasteCache& cache,
                 const Clock& clock, MetricsRegistry& metrics, JanitorOptions options,
                 store::EdgeCache* edge)
    : meta_(meta),
      blobs_(blobs),
      cache_(cache),
      edge_(edge),
      clock_(clock),
      options_(options),
      lease_holder_(store::NewLeaseHolder()),
      bodies_deleted_(
          metrics.GetCounter("sluice_outbox_done_total",
                             "Outbox entries completed (bodies of deleted pastes removed)")),
      edge_purges_(metrics.GetCounter("sluice_edge_purges_total",
                                      "Deleted pastes purged from the edge, by result",
                                      {{"result", "ok"}})),
      edge_purge_failures_(metrics.GetCounter("sluice_edge_purges_total",
                                              "Deleted pastes purged from the edge, by result",
                                              {{"result", "failed"}})),
      outbox_retries_(metrics.GetCounter("sluice_outbox_retries_total",
                                         "Outbox attempts that failed and were rescheduled")),
      expired_purged_(metrics.GetCounter("sluice_expired_purged_total",
                                         "Expired pastes whose row and body were removed")),
      reports_purged_(metrics.GetCounter(
          "sluice_reports_purged_total",
          "Abuse reports deleted after report_retention (closed by a review, or of a purged "
          "paste), and withholding charges older than a day")),
      orphans_reaped_(metrics.GetCounter("sluice_orphans_reaped_total",
                                         "Bodies with no row removed by the reaper")),
      orphans_undated_(metrics.GetCounter(
          "sluice_orphans_undated_total",
          "Listed bodies the reaper kept because the store gave no readable modification time "
          "(counted each time they are listed)")),
      reaper_stalls_(metrics.GetCounter(
          "sluice_reaper_stalls_total",
          "Reaper passes ended early because the store's listing failed or did not advance")),
      outbox_age_(
          metrics.GetGauge("sluice_outbox_age_seconds", "Age of the oldest pending outbox entry")) {
  for (const char* name : kLeaseNames) {
    leased_jobs_.push_back(
        {name, &metrics.GetGauge("sluice_background_lease_held", store::MetaStore::kLeaseHeldHelp,
                                 {{"job", name}})});
  }
}

awaitable<bool> Janitor::HoldsLease(size_t job, std::chrono::milliseconds interval,
                                    Deadline deadline) {
  const auto seconds =
      std::max<int64_t>(options_.lease_duration.count(),
                        3 * std::chrono::duration_cast<std::chrono::seconds>(interval).count());
  auto holding = meta_.HoldLease(leased_jobs_[job].name, lease_holder_, clock_.UnixSeconds(),
                                 seconds, deadline);
  Result<bool> held = co_await std::move(holding);
  const bool ours = held.ok() && *held;
  leased_jobs_[job].held->Set(ours ? 1.0 : 0.0);
  co_return ours;
}

awaitable<size_t> Janitor::MeasureOutboxAgeOnce() {
  const Deadline deadline = Deadline::After(clock_, kBackgroundCallTimeout);
  if (auto age = co_await meta_.OldestOutboxAge(clock_.UnixSeconds(), deadline); age.ok()) {
    outbox_age_.Set(static_cast<double>(*age));
  }
  co_return 0;
}

void Janitor::Start(asio::any_io_executor executor) {
  // Its own loop: a drain pass stuck behind a slow bucket must not freeze the gauge that shows it.
  const std::chrono::milliseconds now{0};
  const auto later = options_.background_start_delay;
  asio::co_spawn(executor, Loop(options_.outbox_interval, &Janitor::MeasureOutboxAgeOnce, now),
                 asio_glue::LogIfThrown("janitor: outbox age"));
  asio::co_spawn(executor, Loop(options_.outbox_interval, &Janitor::DrainOutboxOnce, now),
                 asio_glue::LogIfThrown("janitor: outbox"));
  asio::co_spawn(executor, Loop(options_.sweep_interval, &Janitor::SweepExpiredOnce, later),
                 asio_glue::LogIfThrown("janitor: expiry sweep"));
  asio::co_spawn(executor, Loop(options_.reap_interval, &Janitor::ReapOrphansOnce, later),
                 asio_glue::LogIfThrown("janitor: orphan reaper"));
  // Always: with reports kept forever, the withholding charges of the last day still go.
  asio::co_spawn(executor, Loop(options_.sweep_interval, &Janitor::SweepReportsOnce, later),
                 asio_glue::LogIfThrown("janitor: report retention"));
}

std::chrono::milliseconds PauseAfterFullPass(Duration pass, double share) {
  share = std::clamp(share, 0.01, 1.0);
  const double rest_ms = ToSeconds(pass) * 1000.0 * (1.0 - share) / share;
  return std::max(kMinBacklogPause, std::chrono::milliseconds(std::llround(rest_ms)));
}

awaitable<void> Janitor::Rest(asio_glue::Timer& timer, std::chrono::milliseconds pause) {
  for (auto slept = std::chrono::milliseconds(0); slept < pause && !stopping_;) {
    const auto step = std::min(std::chrono::milliseconds(100), pause - slept);
    auto waiting = timer.WaitUntil(clock_.Now() + step);
    (void)co_await std::move(waiting);
    slept += step;
  }
}

awaitable<void> Janitor::Loop(std::chrono::milliseconds interval,
                              awaitable<size_t> (Janitor::*pass)(),
                              std::chrono::milliseconds first_pass_after) {
  // On the injected clock, so a test that advances a ManualClock runs the loops without waiting.
  asio_glue::Timer timer(clock_, co_await asio::this_coro::executor);
  co_await Rest(timer, first_pass_after);
  while (!stopping_) {
    const TimePoint began = clock_.Now();
    const size_t handled = co_await (this->*pass)();
    // A full batch means more is waiting: go again, after a pause in proportion to the pass, so a
    // backlog of any size takes a bounded share of the store from creates and reads.
    const auto pause = handled >= options_.batch_size
                           ? PauseAfterFullPass(clock_.Now() - began, options_.background_share)
                           : interval;
    co_await Rest(timer, pause);
  }
}

awaitable<size_t> Janitor::DrainOutboxOnce() {
  const int64_t now = clock_.UnixSeconds();
  const Deadline deadline = Deadline::After(clock_, kBackgroundCallTimeout);
  auto due = co_await meta_.DueOutbox(now, options_.batch_size, deadline);
  if (!due.ok()) {
    spdlog::warn("outbox: {}", due.error().message);
    co_return 0;
  }
  thread_local std::mt19937_64 rng{std::random_device{}()};
  for (const store::OutboxEntry& entry : *due) {
    // A withheld paste keeps its body for the review (src/service/moderation.cc): only the edge's
    // copies go.
    Status removed = Ok();
    if (entry.kind == store::OutboxEntry::Kind::kDeleteBody) {
      removed = co_await blobs_.Delete(entry.id, deadline);
    }
    if (removed.ok() && edge_ != nullptr) {
      // After the body: an edge refetch between the two finds the paste gone at the origin.
      removed = co_await edge_->Purge(entry.id, deadline);
      (removed.ok() ? edge_purges_ : edge_purge_failures_).Inc();
      if (!removed.ok()) spdlog::warn("outbox: {}", removed.error().message);
    }
    if (removed.ok()) {
      const bool finished = (co_await meta_.FinishOutbox(entry.seq, deadline)).ok();
      if (finished && entry.kind == store::OutboxEntry::Kind::kDeleteBody) bodies_deleted_.Inc();
      continue;
    }
    // Exponential backoff with full jitter: a store that comes back is not met by every entry at
    // once.
    const int64_t cap =
        std::min<int64_t>(options_.max_backoff.count(), int64_t{1} << std::min(entry.attempts, 20));
    const int64_t wait = 1 + std::uniform_int_distribution<int64_t>(0, cap)(rng);
    outbox_retries_.Inc();
    (void)co_await meta_.RetryOutboxLater(entry.seq, now + wait, deadline);
  }
  co_return due->size();
}

awaitable<size_t> Janitor::SweepExpiredOnce() {
  const Deadline deadline = Deadline::After(clock_, kBackgroundCallTimeout);
  // Not leased: every process of a fleet sweeps, each taking the oldest expired batch. On
  // PostgreSQL with a body a file, two processes drained 3,563 pastes/s at 3 million where the
  // lease's one drained 1,831 (bench/results/growth-postgres.md); what they cost is an overlap of
  // batches, at most 2% of a large backlog, removed twice and counted twice.
  if (sweep_batch_ == 0) sweep_batch_ = options_.sweep_batch_size;
  auto expired = co_await meta_.Expired(clock_.UnixSeconds(), sweep_batch_, deadline);
  if (!expired.ok()) {
    spdlog::warn("expiry sweep: {}", expired.error().message);
    co_return 0;
  }
  if (expired->empty()) co_return 0;
  // Bodies first, rows second: a crash in between leaves rows the next sweep finishes, never an
  // orphan body nobody would look for. The whole batch at once (one commit on the embedded
  // store, not one a body); when that fails, one at a time, so that one body the store keeps
  // refusing holds back only its own row.
  std::vector<store::PasteId> gone;
  auto remove = blobs_.DeleteManyBeforePurge(*expired, deadline);
  Status removed = co_await std::move(remove);
  if (removed.ok()) {
    gone = std::move(*expired);
    sweep_batch_ = std::min(options_.sweep_batch_size, sweep_batch_ + sweep_batch_ / 4 + 1);
  } else if (removed.error().code == ErrorCode::kDeadlineExceeded) {
    // A slow store, not a refused body: one body at a time would only be slower. A smaller
    // batch next time, after the usual pause; never below batch_size, which the loop takes
    // for "more is waiting".
    sweep_batch_ = std::max(sweep_batch_ / 2, std::min(options_.batch_size, sweep_batch_));
    spdlog::warn("expiry sweep: {}; the next batch is {} pastes", removed.error().message,
                 sweep_batch_);
    co_return 0;
  } else {
    spdlog::warn("expiry sweep: {}; removing the batch's bodies one by one",
                 removed.error().message);
    for (const store::PasteId& id : *expired) {
      if ((co_await blobs_.Delete(id, deadline)).ok()) gone.push_back(id);
    }
  }
  if (gone.empty()) co_return 0;
  // The call is a statement of its own: g++ 12 double-frees non-trivial temporaries that sit
  // inside a co_await expression.
  auto purge = meta_.Purge(gone, deadline);
  if (Status purged = co_await std::move(purge); !purged.ok()) {
    spdlog::warn("expiry sweep: {}", purged.error().message);
    co_return 0;
  }
  for (const store::PasteId& id : gone) cache_.Erase(id);
  expired_purged_.Inc(gone.size());
  co_return gone.size();
}

awaitable<size_t> Janitor::SweepReportsOnce() {
  const Deadline deadline = Deadline::After(clock_, kBackgroundCallTimeout);
  const int64_t now = clock_.UnixSeconds();
  auto leasing = HoldsLease(kReportsLease, options_.sweep_interval, deadline);
  if (!co_await std::move(leasing)) co_return 0;
  // A retention of 0 keeps closed reports forever: none is old enough.
  const int64_t before = options_.report_retention.count() > 0
                             ? now - options_.report_retention.count()
                             : std::numeric_limits<int64_t>::min();
  // The withholding charges older than a day go with the reports (store::kWithholdWindowSeconds).
  auto purging = meta_.PurgeReports(before, now, options_.batch_size, deadline);
  Result<size_t> gone = co_await std::move(purging);
  if (!gone.ok()) {
    spdlog::warn("report retention: {}", gone.error().message);
    co_return 0;
  }
  reports_purged_.Inc(*gone);
  co_return *gone;
}

ReapDecision DecideReap(const std::vector<store::BlobInfo>& page, std::string_view after,
                        int64_t cutoff, size_t batch_size) {
  ReapDecision d;
  std::string_view last = after;
  for (const store::BlobInfo& info : page) {
    // Ids come in ascending order after `after`. One that does not is a listing that ignores the
    // cursor: acting on the rest would count and delete the same bodies again and again.
    if (info.id.view() <= last) {
      d.stalled = true;
      break;
    }
    last = info.id.view();
    if (!info.modified_at || *info.modified_at < kEarliestCredibleModification) {
      ++d.undated;
    } else if (*info.modified_at <= cutoff) {
      d.candidates.push_back(info.id);
    } else {
      ++d.young;
    }
  }
  // A short page is the end of the store: start over next time. So is a stalled listing, so a
  // store that ignores the cursor is still walked from its beginning rather than not at all.
  if (!d.stalled && page.size() >= batch_size && !page.empty()) d.next_cursor = std::string(last);
  return d;
}

bool Janitor::WarnAgain(int64_t& last) const {
  const int64_t now = clock_.UnixSeconds();
  if (last != std::numeric_limits<int64_t>::min() && now - last < kWarningIntervalSeconds) {
    return false;
  }
  last = now;
  return true;
}

awaitable<size_t> Janitor::ReapOrphansOnce() {
  const Deadline deadline = Deadline::After(clock_, kBackgroundCallTimeout);
  auto leasing = HoldsLease(kReaperLease, options_.reap_interval, deadline);
  if (!co_await std::move(leasing)) co_return 0;
  // One List per pass: the store bounds the requests behind it (src/store/s3/s3_blob_store.cc),
  // so a pass is a bounded amount of work however the store answers.
  auto listing = blobs_.List(reap_cursor_, options_.batch_size, deadline);
  auto page = co_await std::move(listing);
  if (!page.ok()) {
    reaper_stalls_.Inc();
    if (WarnAgain(last_stall_warning_)) {
      spdlog::warn(
          "reaper: listing after '{}' failed, pass ended (sluice_reaper_stalls_total "
          "counts every pass; next warning in {} s at the earliest): {}",
          reap_cursor_, kWarningIntervalSeconds, page.error().message);
    }
    co_return 0;
  }
  const int64_t cutoff = clock_.UnixSeconds() - options_.orphan_age_floor.count();
  ReapDecision decision = DecideReap(*page, reap_cursor_, cutoff, options_.batch_size);
  if (decision.stalled) {
    reaper_stalls_.Inc();
    if (WarnAgain(last_stall_warning_)) {
      spdlog::warn(
          "reaper: the store's listing after '{}' does not advance (an id at or before one "
          "already listed); pass ended, the next starts from the beginning",
          reap_cursor_);
    }
  }
  if (decision.undated > 0) {
    orphans_undated_.Inc(decision.undated);
    if (WarnAgain(last_undated_warning_)) {
      spdlog::warn(
          "reaper: kept {} bodies the store gave no readable modification time for "
          "(sluice_orphans_undated_total counts them on every pass)",
          decision.undated);
    }
  }
  reap_cursor_ = std::move(decision.next_cursor);
  const std::vector<store::PasteId>& old_enough = decision.candidates;
  if (old_enough.empty()) co_return 0;
  auto lookup = meta_.Existing(old_enough, deadline);
  auto existing = co_await std::move(lookup);
  if (!existing.ok()) {
    spdlog::warn("reaper: row lookup failed, nothing reaped: {}", existing.error().message);
    co_return 0;
  }
  size_t reaped = 0;
  for (const store::PasteId& id : old_enough) {
    if (std::find(existing->begin(), existing->end(), id) != existing->end()) continue;
    if ((co_await blobs_.Delete(id, deadline)).ok()) ++reaped;
  }
  if (reaped) spdlog::info("reaper: removed {} orphaned bodies", reaped);
  orphans_reaped_.Inc(reaped);
  // Paced by what it found, not by what it listed: a store full of healthy bodies is walked one
  // page per interval, not in a tight loop that competes with creates for the disk.
  co_return reaped;
}

}  // namespace sluice::worker
