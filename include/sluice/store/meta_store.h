// MetaStore: the metadata rows of pastes and the outbox of work owed after a commit ("the
// primary").
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/admission/deadline.h"
#include "sluice/common/result.h"
#include "sluice/store/creator_token.h"
#include "sluice/store/moderation.h"
#include "sluice/store/paste.h"

namespace sluice::store {

/// The reason of an Insert error whose outcome is unknown (see MetaStore::Insert).
inline constexpr std::string_view kOutcomeUnknown = "outcome_unknown";

/// The reason of an Unavailable error met while the primary fails over: the server reached is a
/// standby or read-only (25006), is shutting the session down (57P01..57P03), or the connect found
/// no writable host among several. A 503 with Retry-After, never a 500 or a 404: the same request
/// is expected to succeed on the new primary (docs/scale-out.md, "PostgreSQL with a standby").
inline constexpr std::string_view kPrimaryFailover = "primary_failover";

/// True if the row of a failed Insert may nevertheless have been written: the store said so, or
/// the call timed out without proof that the statement never left (never_sent).
inline bool InsertOutcomeUnknown(const Error& e) {
  return e.reason == kOutcomeUnknown || (e.code == ErrorCode::kDeadlineExceeded && !e.never_sent);
}

/// The reason of a create refused because the storage quota is full (MetaStore::ReserveStorage,
/// and the 507 that answers it).
inline constexpr std::string_view kStorageQuota = "storage_quota";

/// InsufficientStorage, reason kStorageQuota: `in_use` bytes live or held by creates in flight, of
/// `quota`. Retrying helps once pastes expire or are deleted, or the creates in flight end.
Error StorageQuotaReached(uint64_t in_use, uint64_t quota);

/// A holder for MetaStore::HoldLease that no other process of a fleet has: this process's id
/// and 64 random bits (a pid alone repeats across hosts and containers).
std::string NewLeaseHolder();

/// What a create asks the quota for, from its headers (MetaStore::ReserveStorage).
struct StorageRequest {
  /// The paste the bytes are for: its row's insert takes them as live.
  PasteId id;
  /// The declared length.
  uint64_t bytes = 0;
  /// The storage quota (max_storage_bytes); never 0: without a quota nothing is reserved.
  uint64_t quota = 0;
  /// Unix seconds on the caller's clock: reservations whose expiry is at or before it are dropped.
  int64_t now = 0;
  /// Unix seconds after which the reservation no longer counts, if nothing ended it before: what
  /// bounds the room a crashed process's creates hold (their body's time to arrive plus the
  /// create's budget; service::ServiceOptions::reservation_lifetime).
  int64_t expires_at = 0;
};

/// Bytes held against the storage quota for one create, from its admission until its row is
/// inserted (MetaStore::ReserveStorage). Move-only; the bytes go back when it is destroyed, unless
/// Spent() said the row's insert took them. An empty one (default) holds nothing. Not
/// thread-safe; the store that granted it must outlive it.
class StorageReservation {
 public:
  /// The store side of a reservation: implemented by the store that grants them.
  class Ledger {
   public:
    /// Ends the reservation of `id`. `spent`: the insert of the row `id` committed and took the
    /// bytes as live (the ledger forgets it); otherwise the bytes are given back, unless an insert
    /// or the expiry took them already. Never throws: it runs in destructors.
    virtual void Settle(const PasteId& id, bool spent) noexcept = 0;

   protected:
    ~Ledger() = default;
  };

  StorageReservation() = default;
  StorageReservation(Ledger& ledger, PasteId id, uint64_t bytes)
      : ledger_(&ledger), id_(id), bytes_(bytes) {}
  StorageReservation(StorageReservation&& other) noexcept { *this = std::move(other); }
  StorageReservation& operator=(StorageReservation&& other) noexcept;
  StorageReservation(const StorageReservation&) = delete;
  StorageReservation& operator=(const StorageReservation&) = delete;
  ~StorageReservation() { Settle(false); }

  bool held() const { return ledger_ != nullptr; }
  /// The paste the bytes are for; empty when nothing is held.
  const std::optional<PasteId>& id() const { return id_; }
  uint64_t bytes() const { return bytes_; }
  /// The row's insert committed (or was confirmed by a read): its bytes are live now.
  void Spent() { Settle(true); }
  /// Gives the bytes back now.
  void Release() { Settle(false); }

 private:
  void Settle(bool spent) noexcept;

  Ledger* ledger_ = nullptr;
  std::optional<PasteId> id_;
  uint64_t bytes_ = 0;
};

/// Stores paste metadata and the outbox. Implementations are thread-safe. Every write is durable
/// when its call returns success.
class MetaStore {
 public:
  virtual ~MetaStore() = default;

  /// Inserts a new row. Returns Internal if the id exists (a minting collision), Unavailable on a
  /// storage failure. Not retried by the caller: a timed-out insert may have committed.
  ///
  /// An error with reason kOutcomeUnknown (code Unavailable or DeadlineExceeded) says the statement
  /// was sent and its answer lost (connection reset, timeout after the send): the row may or may
  /// not exist, and only a read of it can tell. DeadlineExceeded is unknown too unless never_sent
  /// (the deadline passed before the statement left). Any other error means the row was surely not
  /// written.
  virtual boost::asio::awaitable<Status> Insert(PasteMeta meta, admission::Deadline deadline) = 0;

  /// The largest body this store keeps beside its row (InsertWithBody); 0, the default, for a
  /// store that keeps none, whose caller puts the body in the BlobStore first.
  virtual size_t colocated_body_limit() const { return 0; }

  /// Insert, with the body written in the row's own transaction: both or neither, one commit and
  /// one flush instead of a PUT's and an insert's in a row (the embedded store,
  /// MakeSqliteMetaStore). The body is then read, deleted and listed through the BlobStore that
  /// serves this store's bodies (MakeSqliteMetaBodies). Errors as Insert's; a body larger than
  /// colocated_body_limit() is refused (Internal), as is every body by a store that keeps none.
  virtual boost::asio::awaitable<Status> InsertWithBody(PasteMeta meta,
                                                        std::shared_ptr<const std::string> body,
                                                        admission::Deadline deadline);

  /// Returns the row, tombstones and expired rows included (the caller decides what they mean);
  /// NotFound if there is no row.
  virtual boost::asio::awaitable<Result<PasteMeta>> Get(PasteId id,
                                                        admission::Deadline deadline) = 0;

  /// Marks the row deleted and enqueues removal of its body, in one transaction. Succeeds if the
  /// row is already a tombstone; NotFound if there is no row.
  virtual boost::asio::awaitable<Status> MarkDeleted(PasteId id, int64_t now,
                                                     admission::Deadline deadline) = 0;

  /// Returns up to `limit` outbox entries due at `now`, oldest first.
  virtual boost::asio::awaitable<Result<std::vector<OutboxEntry>>> DueOutbox(
      int64_t now, size_t limit, admission::Deadline deadline) = 0;

  /// Removes a finished outbox entry.
  virtual boost::asio::awaitable<Status> FinishOutbox(int64_t seq,
                                                      admission::Deadline deadline) = 0;

  /// Records a failed attempt and when to try again.
  virtual boost::asio::awaitable<Status> RetryOutboxLater(int64_t seq, int64_t next_attempt_at,
                                                          admission::Deadline deadline) = 0;

  /// Age in seconds of the oldest pending outbox entry at `now`, 0 when empty.
  virtual boost::asio::awaitable<Result<int64_t>> OldestOutboxAge(int64_t now,
                                                                  admission::Deadline deadline) = 0;

  /// Takes the lease `name` for `holder` for `seconds`, or renews it: true when `holder` holds it
  /// now, false while another holder's lease runs. The background jobs that one process of a fleet
  /// runs at a time (the orphan reaper, report retention: src/worker/janitor.cc) run only under
  /// their lease, so N processes on one store neither repeat each other's listings and deletes nor
  /// count them N times. A lease is dated by the store's own clock where it has one
  /// (PostgreSQL's: the one clock a fleet shares), else by `now` (Unix seconds). A store that only
  /// one process can open (the embedded one, behind its data-dir lock) grants every lease.
  virtual boost::asio::awaitable<Result<bool>> HoldLease(std::string name, std::string holder,
                                                         int64_t now, int64_t seconds,
                                                         admission::Deadline deadline) = 0;
  /// The help of sluice_background_lease_held{job}, which every leased job exports.
  static constexpr const char* kLeaseHeldHelp =
      "1 while this process holds the job's lease and runs it (one process of a fleet at a "
      "time), else 0";

  /// Returns up to `limit` ids whose expiry is at or before `now`, tombstones included.
  virtual boost::asio::awaitable<Result<std::vector<PasteId>>> Expired(
      int64_t now, size_t limit, admission::Deadline deadline) = 0;

  /// Removes rows (and their outbox entries) for good, after their bodies are gone. Their open
  /// reports are closed (dated as made, for PurgeReports) and their queue rows go.
  virtual boost::asio::awaitable<Status> Purge(std::vector<PasteId> ids,
                                               admission::Deadline deadline) = 0;

  /// Returns which of `ids` have a row in any state, for the orphan reaper.
  virtual boost::asio::awaitable<Result<std::vector<PasteId>>> Existing(
      std::vector<PasteId> ids, admission::Deadline deadline) = 0;

  /// Up to `limit` rows in id order whose ids are greater than `after` (from the first when
  /// empty), in any state: tombstones and expired rows too, as Get returns them. Keyset paging on
  /// the id's unique index, so a page costs `limit` index steps however many rows there are, and a
  /// walk resumed after the last id it finished neither skips nor repeats a row (`sluice admin
  /// migrate-store`, src/app/migrate_store.cc). Rows written during the walk behind its cursor are
  /// not seen: a second walk finds them.
  virtual boost::asio::awaitable<Result<std::vector<PasteMeta>>> ListPastes(
      std::optional<PasteId> after, size_t limit, admission::Deadline deadline) = 0;

  /// The open reports of the paste `id`, by network; none when it has none or no row. A report
  /// that is no vote toward withholding comes back with `from_creator` set: the stores keep
  /// whether it votes, not why, and AddReport on another store then counts it the same.
  virtual boost::asio::awaitable<Result<std::vector<AbuseReport>>> ReportsOf(
      PasteId id, admission::Deadline deadline) = 0;

  // Moderation: abuse reports, withheld and taken-down pastes, blocked clients and the audit trail
  // of every operator action (src/service/moderation.cc; docs/moderation.md). The review queue is
  // one row per reported paste, kept by the transaction of each report and review, so a report
  // costs a bounded number of index lookups however many are stored, and the queue reads a page
  // of an index.

  /// Records a report unless its network already reported the paste (open, or closed by a
  /// review: then not counted), updates the paste's queue row and the counts, and, when
  /// `policy` allows and the votes reach its threshold, withholds the paste in the same
  /// transaction (the edge purge owed, the networks charged). NotFound if there is no row.
  virtual boost::asio::awaitable<Result<ReportOutcome>> AddReport(AbuseReport report,
                                                                  ReportPolicy policy,
                                                                  admission::Deadline deadline) = 0;

  /// Sets the paste's moderation state with its reason and time; NotFound if there is no row.
  /// kWithheld also enqueues an edge purge (OutboxEntry::kPurgeEdge) in the same transaction;
  /// kNone and kTakenDown close the paste's open reports (they have been reviewed, and their
  /// networks cannot report it again) and take it out of the review queue; kNone also records
  /// `change.keep`, and says when the paste had entered the queue (ModerationOutcome).
  virtual boost::asio::awaitable<Result<ModerationOutcome>> SetModeration(
      PasteId id, ModerationChange change, admission::Deadline deadline) = 0;

  /// Deletes at most `limit` rows that nothing needs any more: reports closed (by a review, or by
  /// the purge of their paste) at or before `closed_before`, and withholding charges older than
  /// `now` - kWithholdWindowSeconds. An open report of a paste that has a row is never deleted; the
  /// paste's own moderation state, reason and time stay. Returns how many rows went.
  virtual boost::asio::awaitable<Result<size_t>> PurgeReports(int64_t closed_before, int64_t now,
                                                              size_t limit,
                                                              admission::Deadline deadline) = 0;

  /// One page of the review queue: pastes with open reports, the most recently reported first
  /// (then by id, descending), at most `limit`, continuing after `after` when given.
  virtual boost::asio::awaitable<Result<ReportPage>> OpenReports(std::optional<ReportCursor> after,
                                                                 size_t limit,
                                                                 admission::Deadline deadline) = 0;

  /// The review queue's counts (one row, never a count over the queue) and its oldest entry's
  /// arrival (one index probe).
  virtual boost::asio::awaitable<Result<ReportCounts>> CountReports(
      admission::Deadline deadline) = 0;

  /// Records a block of a client key or prefix until `block.until`.
  virtual boost::asio::awaitable<Status> AddBlock(ClientBlock block,
                                                  admission::Deadline deadline) = 0;

  /// Blocks still in force at `now`.
  virtual boost::asio::awaitable<Result<std::vector<ClientBlock>>> ActiveBlocks(
      int64_t now, admission::Deadline deadline) = 0;

  // The content blocklist (docs/moderation.md, "Takedowns that stick"): digests of bodies that
  // creates are refused. Every process holds the whole list in memory (service::ContentBlocklist)
  // and reads it again only when its version changed, so a create never asks the store.

  /// Adds `entry` unless its digest is there: true when added, false when it was there (nothing
  /// changed). InsufficientStorage (kBlockedContentsFull) when the list holds `max_entries`.
  virtual boost::asio::awaitable<Result<bool>> BlockContent(BlockedContent entry,
                                                            int64_t max_entries,
                                                            admission::Deadline deadline) = 0;

  /// Removes `sha256`: true when it was there.
  virtual boost::asio::awaitable<Result<bool>> UnblockContent(BodyDigest sha256,
                                                              admission::Deadline deadline) = 0;

  /// Up to `limit` entries in digest order, after `after` when given.
  virtual boost::asio::awaitable<Result<BlockedContentPage>> BlockedContents(
      std::optional<BodyDigest> after, size_t limit, admission::Deadline deadline) = 0;

  /// The list's version and size (one row, kept by every change in its own transaction).
  virtual boost::asio::awaitable<Result<BlockedContentsState>> BlockedContentsVersion(
      admission::Deadline deadline) = 0;

  // The transparency report's counters (include/sluice/store/transparency.h). Besides what
  // these two calls add, AddReport adds (withhold, votes) when it withholds, SetModeration its
  // change's tally and, when it takes the paste out of the review queue, (time_to_action, the
  // bucket of its time since the entry's arrival), AddBlock (block, network), and BlockContent or
  // a takedown's SetModeration (block, content) when it adds a digest: each in the transaction of
  // the action it counts, dated by that action's own time.

  /// Adds each count to its (month, kind, label) counter, all in one transaction: one upsert
  /// each. Counts of 0 are skipped.
  virtual boost::asio::awaitable<Status> AddTransparency(std::vector<TransparencyCount> counts,
                                                         admission::Deadline deadline) = 0;

  /// The counters of `first_month` ("YYYY-MM") and later, newest month first, at most `limit`
  /// rows: a range of the counters' primary key.
  virtual boost::asio::awaitable<Result<std::vector<TransparencyCount>>> TransparencyCounts(
      std::string first_month, size_t limit, admission::Deadline deadline) = 0;
  // Notices (docs/moderation.md, "Notices"): each withholds the pastes it names in its own
  // transaction and is unique by sender and reference.

  /// Stores `notice` (its pastes named, outcomes empty) unless one with its sender and reference
  /// is stored: then returns that one (created false, stored true). Each named paste is withheld
  /// (Moderation::kWithheldNotice, an edge purge enqueued) unless it has no live row
  /// (kNoticeNotFound) or is taken down (kNoticeTakenDown). When none could be withheld nothing
  /// is stored (stored false, the outcomes filled). A store that holds `max_notices` makes room
  /// by deleting its oldest closed notices (no pastes open), in the new notice's transaction;
  /// InsufficientStorage (NoticesFull) when too few are closed.
  virtual boost::asio::awaitable<Result<NoticeOutcome>> AddNotice(Notice notice,
                                                                  int64_t max_notices,
                                                                  admission::Deadline deadline) = 0;

  /// Up to `limit` open notices (a paste still open), the oldest first (the takedown clock's
  /// order), each with its pastes; `limit` 1 is the oldest open notice, one index probe.
  virtual boost::asio::awaitable<Result<std::vector<Notice>>> OpenNotices(
      size_t limit, admission::Deadline deadline) = 0;

  /// Up to `limit` notices, open and closed, each with its pastes, in id order after `after_id`
  /// (0: from the first): keyset paging on the primary key, so a page costs its length however
  /// many are stored (`sluice admin migrate-store` walks them, src/app/migrate_store_notices.cc).
  virtual boost::asio::awaitable<Result<std::vector<Notice>>> Notices(
      int64_t after_id, size_t limit, admission::Deadline deadline) = 0;

  /// Stores `notice` exactly as given (sender, reference, category, times, each paste with its
  /// outcome and open flag, open_pastes; the id is the store's), for a copy from another store:
  /// true when stored now, false when one with its sender and reference is stored (nothing
  /// changed). Unlike AddNotice it classifies and withholds nothing and enqueues nothing: the
  /// pastes' moderation state is copied with their rows. It keeps `max_notices` as AddNotice does
  /// (room made from the oldest closed notices in its transaction; NoticesFull when too few are
  /// closed).
  virtual boost::asio::awaitable<Result<bool>> ImportNotice(Notice notice, int64_t max_notices,
                                                            admission::Deadline deadline) = 0;

  /// The operator acted on paste `id` (a takedown, a restore) at `at`: closes its open rows in
  /// every notice naming it and returns those notices as they were before (for the audit trail
  /// and the time to action), without their pastes.
  virtual boost::asio::awaitable<Result<std::vector<Notice>>> CloseNotices(
      PasteId id, int64_t at, admission::Deadline deadline) = 0;

  /// Appends one operator action to the audit trail.
  virtual boost::asio::awaitable<Status> AddAudit(AuditEntry entry,
                                                  admission::Deadline deadline) = 0;

  /// The last `limit` audit rows, newest first.
  virtual boost::asio::awaitable<Result<std::vector<AuditEntry>>> AuditTrail(
      size_t limit, admission::Deadline deadline) = 0;

  // Burn after reading and storage accounting

  /// Claims one view of a burn (counted) paste: in one transaction (one atomic step across
  /// processes), takes one of its `views_left`, only if it is a burn row, not deleted, not
  /// withheld and not expired at `now`; the claim that takes the last one also marks the row
  /// deleted and enqueues removal of its body. Returns the row as it was before the claim (its
  /// `views_left` counts this claim). NotFound if there is no such row, if it is not a burn row,
  /// or if its views are spent: of many concurrent calls for a row with N views left, exactly N
  /// succeed.
  virtual boost::asio::awaitable<Result<PasteMeta>> Claim(PasteId id, int64_t now,
                                                          admission::Deadline deadline) = 0;

  /// Live bytes: the sum of size_bytes over rows that are not tombstones (expired rows count until
  /// they are purged: their bodies are still on disk). Kept by the insert, delete, claim and purge
  /// transactions themselves, so it is right across processes sharing the store.
  virtual boost::asio::awaitable<Result<uint64_t>> LiveBytes(admission::Deadline deadline) = 0;

  // The storage quota as reservations (docs/overload.md, "Create", step 4a)

  /// Holds `request.bytes` for the create of `request.id` if the live bytes (LiveBytes), plus the
  /// bytes of every reservation in force, plus these stay within `request.quota`; otherwise
  /// InsufficientStorage (StorageQuotaReached). Of many concurrent calls, from every process
  /// sharing the store, only as many succeed as fit. A reservation counts until the object is
  /// destroyed or released, until the Insert or InsertWithBody of the row `request.id` takes its
  /// bytes as live in the insert's own transaction (never counted twice, never dropped between),
  /// or until `request.expires_at`. Unavailable or DeadlineExceeded when the store cannot decide:
  /// then nothing is held (a grant that arrives after its caller gave up is given back). Not
  /// retried: a second call for one id is refused (Internal).
  virtual boost::asio::awaitable<Result<StorageReservation>> ReserveStorage(
      StorageRequest request, admission::Deadline deadline) = 0;

  // Creator tokens (docs/admission.md, "Creator tokens"). Every process holds the live ones in
  // memory (service::CreatorTokens) and reads them again only when their version changed, so a
  // create never asks the store.

  /// Adds `token` if fewer than `max_live` tokens are live at `now` (in the same transaction, so
  /// the cap holds across processes); else InsufficientStorage (kCreatorTokensFull). Internal if
  /// its id or its secret's hash is taken (both random: not expected). Bumps the version.
  virtual boost::asio::awaitable<Status> AddCreatorToken(CreatorToken token, int64_t max_live,
                                                         int64_t now,
                                                         admission::Deadline deadline) = 0;

  /// Revokes token `id` at `now`: true if it was in force, false if it was revoked already.
  /// NotFound if there is no such token. Bumps the version when it changed something.
  virtual boost::asio::awaitable<Result<bool>> RevokeCreatorToken(std::string id, int64_t now,
                                                                  admission::Deadline deadline) = 0;

  /// Every token in id order and the version, read in one snapshot.
  virtual boost::asio::awaitable<Result<CreatorTokenList>> CreatorTokens(
      admission::Deadline deadline) = 0;

  /// The version alone: one row, what each process polls.
  virtual boost::asio::awaitable<Result<int64_t>> CreatorTokensVersion(
      admission::Deadline deadline) = 0;
};

}  // namespace sluice::store
