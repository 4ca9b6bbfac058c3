// Janitor: the background work that keeps storage from growing with dead pastes. Four loops, each
// in small batches with a sleep between, so a backlog cannot starve creates or reads. Every
// process of a fleet runs a janitor; report retention and the reaper each run in one process at a
// time, the one holding its lease in the metadata store (MetaStore::HoldLease), so N processes do
// not list the whole bucket N times or delete the same reports N times. The outbox and the sweep
// run everywhere: their removals are idempotent, and the sweep drains faster in parallel
// (src/worker/janitor.cc says by how much).
//  - outbox: removes the bodies of deleted pastes and purges them from the edge, at least once,
//  with exponential backoff + jitter;
//  - expiry sweeper: removes expired rows and their bodies whether or not anyone reads them;
//  - report retention: deletes abuse reports a review closed longer than report_retention ago
//    (and those of pastes long purged); open reports of live pastes are never deleted;
//  - orphan reaper: removes bodies with no row older than an age floor (a create whose insert
//    failed, or a crash between PUT and insert). It deletes only what it can date: a body whose
//    store gives no readable modification time may be a create still in flight, so it is kept and
//    counted (sluice_orphans_undated_total), never taken for old.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/asio/timer.h"
#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/service/paste_cache.h"
#include "sluice/store/blob_store.h"
#include "sluice/store/edge_cache.h"
#include "sluice/store/meta_store.h"

namespace sluice::worker {

struct JanitorOptions {
  /// Pause between outbox polls when it is empty. Default: 1 s.
  std::chrono::milliseconds outbox_interval{1000};
  /// Pause between expiry sweeps when nothing is due. Default: 10 s.
  std::chrono::milliseconds sweep_interval{10000};
  /// Pause between reaper pages (of batch_size bodies) while no orphans turn up. Default: 10 s.
  std::chrono::milliseconds reap_interval{10000};
  /// Rows or objects per batch. Default: 200.
  size_t batch_size = 200;
  /// Expired pastes per sweep: a sweep costs two commits whatever its size, so larger batches
  /// drain a backlog with fewer of them (200 drained 1,465/s beside creates; the aim is ten times
  /// the spec's create peak, 3,500/s: bench/results/growth.md). Default: 1,000.
  size_t sweep_batch_size = 1000;
  /// The largest share of its time a loop spends working while it has a backlog (a full batch
  /// each pass): after a full pass that took T it pauses T * (1 - share) / share, at least
  /// kMinBacklogPause. On the embedded store the passes hold its one writer, so this bounds what
  /// a backlog of expiries takes from creates (bench/results/sweep-steady.md). Default: 0.25.
  double background_share = 0.25;
  /// How long after Start the expiry sweep, the reaper and the report retention begin (the outbox
  /// does not wait: a deleted paste's edge copies go at once). After a restart with the page cache
  /// empty (a reboot) every page those passes read is a disk read, and the creates' own reads wait
  /// behind them (bench/results/cold-start.md); an expired paste is answered as gone whether or
  /// not it is swept yet, so the wait costs only disk space for a minute. Default: 60 s.
  std::chrono::milliseconds background_start_delay{60000};
  /// A body with no row is an orphan only when older than this. Default: 1 h (far above the 2 s
  /// create budget, so a create between its PUT and its insert is never reaped).
  std::chrono::seconds orphan_age_floor{3600};
  /// Longest backoff between outbox attempts. Default: 5 min.
  std::chrono::seconds max_backoff{300};
  /// How long a handled report is kept after its review (store::MetaStore::PurgeReports), swept
  /// every sweep_interval; 0: kept forever. Default: 90 days.
  std::chrono::seconds report_retention{90 * 24 * 3600};
  /// How long a job's lease lasts past each pass (at least three of the job's intervals): the
  /// longest a fleet goes without that job after its holder dies. Default: 30 s.
  std::chrono::seconds lease_duration{30};
};

/// What one reaper pass makes of a page the store listed. Pure: ReapOrphansOnce acts on it.
struct ReapDecision {
  /// Bodies old enough to be orphans, each once, in id order: the reaper looks for their rows and
  /// deletes those that have none.
  std::vector<store::PasteId> candidates;
  /// Bodies kept because the store could not date them (or gave a date before
  /// kEarliestCredibleModification).
  size_t undated = 0;
  /// Bodies younger than the age floor.
  size_t young = 0;
  /// The listing repeated ids, went backwards or did not move past `after`: the pass ends there
  /// and the next one starts from the beginning.
  bool stalled = false;
  /// Where the next pass lists from (empty: the beginning).
  std::string next_cursor;
};

/// 2000-01-01: a modification time before it is not a date but a placeholder (0, Go's zero time
/// 0001-01-01), so it counts as undated.
inline constexpr int64_t kEarliestCredibleModification = 946'684'800;

/// The shortest pause after a full batch: creates and reads get the store between any two.
inline constexpr std::chrono::milliseconds kMinBacklogPause{50};

/// How long a loop pauses after a full pass that took `pass`, so that it works at most `share`
/// (clamped to 0.01-1) of the time while a backlog lasts.
std::chrono::milliseconds PauseAfterFullPass(Duration pass, double share);

/// Decides a reaper pass over `page`, listed after `after` with at most `batch_size` entries;
/// bodies modified at or before `cutoff` (Unix seconds) are old enough.
ReapDecision DecideReap(const std::vector<store::BlobInfo>& page, std::string_view after,
                        int64_t cutoff, size_t batch_size);

/// Runs the loops as coroutines on one executor. Thread-safe to Stop from any thread.
class Janitor {
 public:
  /// `edge` (may be null: no edge in front) is purged of every deleted paste.
  Janitor(store::MetaStore& meta, store::BlobStore& blobs, service::PasteCache& cache,
          const Clock& clock, MetricsRegistry& metrics, JanitorOptions options,
          store::EdgeCache* edge = nullptr);

  /// Starts the loops; they run until Stop().
  void Start(boost::asio::any_io_executor executor);
  void Stop() { stopping_ = true; }

  /// One pass of each loop, for tests: returns how many items each handled.
  boost::asio::awaitable<size_t> DrainOutboxOnce();
  boost::asio::awaitable<size_t> SweepExpiredOnce();
  boost::asio::awaitable<size_t> ReapOrphansOnce();
  boost::asio::awaitable<size_t> SweepReportsOnce();
  /// Sets sluice_outbox_age_seconds from the oldest pending entry.
  boost::asio::awaitable<size_t> MeasureOutboxAgeOnce();

 private:
  boost::asio::awaitable<void> Loop(std::chrono::milliseconds interval,
                                    boost::asio::awaitable<size_t> (Janitor::*pass)(),
                                    std::chrono::milliseconds first_pass_after);
  /// Waits `pause` on the injected clock, in short steps so that Stop() takes effect promptly.
  boost::asio::awaitable<void> Rest(asio_glue::Timer& timer, std::chrono::milliseconds pause);
  /// True at most once per kWarningInterval for `last` (Unix seconds of the last warning): a store
  /// that misbehaves on every pass fills the metrics, not the log.
  bool WarnAgain(int64_t& last) const;
  /// Whether this process runs `job` now: takes or renews its lease (one process of a fleet at a
  /// time), and shows the answer in sluice_background_lease_held. A store that cannot say is
  /// taken for no: the pass would have failed on it anyway.
  boost::asio::awaitable<bool> HoldsLease(size_t job, std::chrono::milliseconds interval,
                                          admission::Deadline deadline);

  store::MetaStore& meta_;
  store::BlobStore& blobs_;
  service::PasteCache& cache_;
  store::EdgeCache* const edge_;
  const Clock& clock_;
  const JanitorOptions options_;
  std::atomic<bool> stopping_{false};
  // Who this janitor is to the leases: the process id and 64 random bits, unique in a fleet.
  const std::string lease_holder_;
  // One per leased job: its name in the store and its gauge.
  struct LeasedJob {
    const char* name;
    Gauge* held;
  };
  std::vector<LeasedJob> leased_jobs_;
  std::string reap_cursor_;
  // The expiry sweep's batch now: halved (not below batch_size) when a batch's bodies did not go
  // in time (a store whose pages are cold: over 5 ms a body at 10 million pastes), grown back by a
  // quarter after each batch that went, up to sweep_batch_size. Touched only by the sweep's loop.
  size_t sweep_batch_ = 0;
  // Touched only by the reaper's loop, one pass at a time.
  int64_t last_stall_warning_ = std::numeric_limits<int64_t>::min();
  int64_t last_undated_warning_ = std::numeric_limits<int64_t>::min();
  Counter& bodies_deleted_;
  Counter& edge_purges_;
  Counter& edge_purge_failures_;
  Counter& outbox_retries_;
  Counter& expired_purged_;
  Counter& reports_purged_;
  Counter& orphans_reaped_;
  Counter& orphans_undated_;
  Counter& reaper_stalls_;
  Gauge& outbox_age_;
};

}  // namespace sluice::worker
