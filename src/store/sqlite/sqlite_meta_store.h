// MetaStore on SQLite in WAL mode: one writer connection behind a group committer (one transaction
// and one WAL fsync per batch), a pool of reader connections that WAL lets run beside it, and
// checkpoints on a thread of their own (sqlite::WalCheckpointer).
//
// The embedded store keeps small bodies here too, each in its paste's row (columns `body` and
// `body_codec`, migration 22), and a create writes both as one row (InsertWithBody): one commit
// and one flush per batch of creates, no orphan if the process dies, and one page for a later
// read to fetch (docs/architecture.md, "Durability"). Bodies written before migration 22 are in
// `inline_bodies`, found by the row's number (`body_n`, migration 8); bodies from before that,
// and bodies written apart from a row, are in `bodies`, by id.
// MakeSqliteMetaBodies serves both as a BlobStore.
//
// Private to sluice_store_sqlite. The class is one object in several files, by concern:
// sqlite_meta_store.cc (opening, the committer's batch, the bodies as a BlobStore),
// sqlite_meta_schema.cc (migrations), sqlite_meta_reads.cc (reads on the reader pool),
// sqlite_meta_writes.cc (a paste's writes: insert, claim, delete, outbox, purge) and
// sqlite_meta_moderation.cc (reports, withholding, blocks, audit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "../storage_ledger.h"
#include "sluice/store/backends.h"
#include "sluice/store/body_codec.h"
#include "sluice/store/group_commit.h"
#include "sluice/store/meta_store.h"
#include "sqlite_db.h"

namespace sluice::store::sqlite {

using boost::asio::awaitable;

/// Registers what the migrations call and applies those this database lacks, each once, in
/// order, in its own transaction. Throws if the database is newer than this binary.
void MigrateMetaSchema(Db& db);

/// The metadata store's error for a failed statement, naming what was being done.
Error StorageError(Db& db, std::string_view what);

Error NoSuchPaste();

// Columns in order: created_at, expires_at, size_bytes, token_hash, deleted, body_sha256, burn,
// moderation, creator_network, encrypted, views_left, parent (Get and the claim's RETURNING select
// them so).
#define SLUICE_ROW_COLUMNS                                                                   \
  "created_at, expires_at, size_bytes, token_hash, deleted, body_sha256, burn, moderation, " \
  "creator_network, encrypted, views_left, parent"
PasteMeta RowToMeta(const PasteId& id, Statement& s);

Moderation ModerationOf(int64_t v);

// The writes the committer runs, one savepoint each.
struct InsertOp {
  PasteMeta meta;
  admission::Deadline deadline;
  // With InsertWithBody: written in the row itself, so both or neither; in the form to store.
  EncodedBody body;
};
struct BodyPutOp {
  PasteId id;
  std::shared_ptr<const std::string> body;
  admission::Deadline deadline;
  int64_t written_at;
};
struct BodyDeleteOp {
  std::vector<PasteId> ids;  // one transaction for them all (BlobStore::DeleteMany)
};
struct MarkDeletedOp {
  PasteId id;
  int64_t now;
};
struct FinishOutboxOp {
  int64_t seq;
};
struct RetryOutboxOp {
  int64_t seq;
  int64_t next_attempt_at;
};
struct PurgeOp {
  std::vector<PasteId> ids;
};
struct ClaimOp {
  PasteId id;
  int64_t now;
  // Written on the committer thread before the op's completion, read by the caller after it.
  std::shared_ptr<std::optional<PasteMeta>> claimed;
};
struct AddReportOp {
  AbuseReport report;
  ReportPolicy policy;
  // Filled on the committer thread; read by the caller once its Submit has completed.
  std::shared_ptr<ReportOutcome> outcome;
};
struct SetModerationOp {
  PasteId id;
  ModerationChange change;
  // Written on the committer thread before the op's completion, read by the caller after it; null
  // for a change made inside another op (a report's withholding).
  std::shared_ptr<ModerationOutcome> outcome{};
};
struct PurgeReportsOp {
  int64_t closed_before;
  int64_t now;
  size_t limit;
  // Written on the committer thread before the op's completion, read by the caller after it.
  std::shared_ptr<size_t> deleted;
};
struct AddBlockOp {
  ClientBlock block;
};
struct AddAuditOp {
  AuditEntry entry;
};
struct BlockContentOp {
  BlockedContent entry;
  int64_t max_entries;
  // Written on the committer thread before the op's completion, read by the caller after it.
  std::shared_ptr<bool> added;
};
struct UnblockContentOp {
  BodyDigest sha256;
  std::shared_ptr<bool> removed;
};
struct AddCreatorTokenOp {
  CreatorToken token;
  int64_t max_live;
  int64_t now;
};
struct AddTransparencyOp {
  std::vector<TransparencyCount> counts;
};
struct RevokeCreatorTokenOp {
  std::string id;
  int64_t now;
  // Written on the committer thread before the op's completion, read by the caller after it.
  std::shared_ptr<bool> revoked;
};
struct AddNoticeOp {
  Notice notice;
  int64_t max_notices;
  // Written on the committer thread before the op's completion, read by the caller after it.
  std::shared_ptr<NoticeOutcome> outcome;
};
struct ImportNoticeOp {
  Notice notice;
  int64_t max_notices;
  // Written on the committer thread before the op's completion, read by the caller after it.
  std::shared_ptr<bool> stored;
};
struct CloseNoticesOp {
  PasteId id;
  int64_t at;
  // Written on the committer thread before the op's completion, read by the caller after it.
  std::shared_ptr<std::vector<Notice>> closed;
};
using WriteOp = std::variant<InsertOp, MarkDeletedOp, FinishOutboxOp, RetryOutboxOp, PurgeOp,
                             ClaimOp, AddReportOp, SetModerationOp, PurgeReportsOp, AddBlockOp,
                             AddAuditOp, BodyPutOp, BodyDeleteOp, BlockContentOp, UnblockContentOp,
                             AddCreatorTokenOp, RevokeCreatorTokenOp, AddTransparencyOp,
                             AddNoticeOp, ImportNoticeOp, CloseNoticesOp>;

class SqliteMetaStore final : public MetaStore {
 public:
  SqliteMetaStore(const std::filesystem::path& path, BlockingPools pools,
                  size_t colocated_body_limit, MetricsRegistry* metrics);

  // A paste's row (sqlite_meta_reads.cc, sqlite_meta_writes.cc)

  awaitable<Status> Insert(PasteMeta meta, admission::Deadline deadline) override {
    return committer_->Submit(InsertOp{meta, deadline, {}});
  }

  size_t colocated_body_limit() const override { return colocated_body_limit_; }

  awaitable<Status> InsertWithBody(PasteMeta meta, std::shared_ptr<const std::string> body,
                                   admission::Deadline deadline) override {
    if (!body || body->size() > colocated_body_limit_)
      return MetaStore::InsertWithBody(meta, std::move(body), deadline);
    // Compressed here, on the caller's thread: the committer is the one thread every create
    // queues behind, and a smaller body is less for it to write.
    return committer_->Submit(InsertOp{meta, deadline, EncodeBody(std::move(body))});
  }

  awaitable<Result<PasteMeta>> Get(PasteId id, admission::Deadline deadline) override;

  awaitable<Status> MarkDeleted(PasteId id, int64_t now, admission::Deadline) override {
    return committer_->Submit(MarkDeletedOp{id, now});
  }

  // The bodies table as a BlobStore (SqliteMetaBodies, sqlite_meta_store.cc).

  awaitable<Status> PutBody(PasteId id, std::shared_ptr<const std::string> body,
                            admission::Deadline deadline) {
    return committer_->Submit(
        BodyPutOp{id, std::move(body), deadline, SystemClock::Instance().UnixSeconds()});
  }
  awaitable<Result<std::string>> GetBody(PasteId id, admission::Deadline deadline);
  awaitable<Status> DeleteBodies(std::vector<PasteId> ids) {
    return committer_->Submit(BodyDeleteOp{std::move(ids)});
  }
  awaitable<Result<std::vector<BlobInfo>>> ListBodies(std::string after, size_t limit,
                                                      admission::Deadline deadline);

  // The outbox and the sweep

  awaitable<Result<std::vector<OutboxEntry>>> DueOutbox(int64_t now, size_t limit,
                                                        admission::Deadline deadline) override;

  awaitable<Status> FinishOutbox(int64_t seq, admission::Deadline) override {
    return committer_->Submit(FinishOutboxOp{seq});
  }

  awaitable<Status> RetryOutboxLater(int64_t seq, int64_t next_attempt_at,
                                     admission::Deadline) override {
    return committer_->Submit(RetryOutboxOp{seq, next_attempt_at});
  }

  awaitable<Result<int64_t>> OldestOutboxAge(int64_t now, admission::Deadline deadline) override;

  // One process opens meta.db (src/app/data_dir_lock.h): it holds every lease.
  awaitable<Result<bool>> HoldLease(std::string, std::string, int64_t, int64_t,
                                    admission::Deadline) override {
    co_return true;
  }

  awaitable<Result<std::vector<PasteId>>> Expired(int64_t now, size_t limit,
                                                  admission::Deadline deadline) override;

  awaitable<Status> Purge(std::vector<PasteId> ids, admission::Deadline) override {
    return committer_->Submit(PurgeOp{std::move(ids)});
  }

  awaitable<Result<std::vector<PasteId>>> Existing(std::vector<PasteId> ids,
                                                   admission::Deadline deadline) override;

  awaitable<Result<std::vector<PasteMeta>>> ListPastes(std::optional<PasteId> after, size_t limit,
                                                       admission::Deadline deadline) override;

  // Moderation (sqlite_meta_moderation.cc): writes through the committer, like every write (the
  // report buckets bound them); reads on the moderation pool, never the one paste reads wait for.

  awaitable<Result<ReportOutcome>> AddReport(AbuseReport report, ReportPolicy policy,
                                             admission::Deadline) override;
  awaitable<Result<ModerationOutcome>> SetModeration(PasteId id, ModerationChange change,
                                                     admission::Deadline) override;
  awaitable<Result<size_t>> PurgeReports(int64_t closed_before, int64_t now, size_t limit,
                                         admission::Deadline) override;
  awaitable<Result<ReportPage>> OpenReports(std::optional<ReportCursor> after, size_t limit,
                                            admission::Deadline deadline) override;
  awaitable<Result<ReportCounts>> CountReports(admission::Deadline deadline) override;
  awaitable<Status> AddBlock(ClientBlock block, admission::Deadline) override {
    return committer_->Submit(AddBlockOp{std::move(block)});
  }
  awaitable<Result<std::vector<AbuseReport>>> ReportsOf(PasteId id,
                                                        admission::Deadline deadline) override;
  awaitable<Result<std::vector<ClientBlock>>> ActiveBlocks(int64_t now,
                                                           admission::Deadline deadline) override;
  awaitable<Status> AddAudit(AuditEntry entry, admission::Deadline) override {
    return committer_->Submit(AddAuditOp{std::move(entry)});
  }
  awaitable<Result<bool>> BlockContent(BlockedContent entry, int64_t max_entries,
                                       admission::Deadline) override;
  awaitable<Result<bool>> UnblockContent(BodyDigest sha256, admission::Deadline) override;
  awaitable<Result<BlockedContentPage>> BlockedContents(std::optional<BodyDigest> after,
                                                        size_t limit,
                                                        admission::Deadline deadline) override;
  awaitable<Result<BlockedContentsState>> BlockedContentsVersion(
      admission::Deadline deadline) override;
  awaitable<Result<std::vector<AuditEntry>>> AuditTrail(size_t limit,
                                                        admission::Deadline deadline) override;
  awaitable<Status> AddTransparency(std::vector<TransparencyCount> counts,
                                    admission::Deadline) override {
    return committer_->Submit(AddTransparencyOp{std::move(counts)});
  }
  awaitable<Result<std::vector<TransparencyCount>>> TransparencyCounts(
      std::string first_month, size_t limit, admission::Deadline deadline) override;
  awaitable<Result<NoticeOutcome>> AddNotice(Notice notice, int64_t max_notices,
                                             admission::Deadline) override;
  awaitable<Result<std::vector<Notice>>> Notices(int64_t after_id, size_t limit,
                                                 admission::Deadline deadline) override;
  awaitable<Result<bool>> ImportNotice(Notice notice, int64_t max_notices,
                                       admission::Deadline) override;
  awaitable<Result<std::vector<Notice>>> OpenNotices(size_t limit,
                                                     admission::Deadline deadline) override;
  awaitable<Result<std::vector<Notice>>> CloseNotices(PasteId id, int64_t at,
                                                      admission::Deadline) override;
  awaitable<Status> AddCreatorToken(CreatorToken token, int64_t max_live, int64_t now,
                                    admission::Deadline) override {
    return committer_->Submit(AddCreatorTokenOp{std::move(token), max_live, now});
  }
  awaitable<Result<bool>> RevokeCreatorToken(std::string id, int64_t now,
                                             admission::Deadline) override;
  awaitable<Result<CreatorTokenList>> CreatorTokens(admission::Deadline deadline) override;
  awaitable<Result<int64_t>> CreatorTokensVersion(admission::Deadline deadline) override;

  // Burn after reading and storage accounting

  awaitable<Result<PasteMeta>> Claim(PasteId id, int64_t now, admission::Deadline) override;
  awaitable<Result<uint64_t>> LiveBytes(admission::Deadline deadline) override;

  // In the process (LocalStorageLedger): this object is the only writer of its file, so the
  // commits it makes are every change to the live bytes.
  awaitable<Result<StorageReservation>> ReserveStorage(StorageRequest request,
                                                       admission::Deadline) override {
    co_return ledger_.Reserve(request);
  }

 private:
  static constexpr size_t kMaxBatch = 512;

  // The live bytes as the counter table holds them, read once when the store opens.
  static int64_t ReadLiveBytes(Db& db);

  boost::asio::thread_pool& moderation_pool() const {
    return pools_.moderation != nullptr ? *pools_.moderation : *pools_.cleanup;
  }

  // Runs on the committer thread only. Each op runs inside its own savepoint, so one op's failure
  // (an id collision) fails that op alone; a failed COMMIT fails the whole batch.
  void Commit(std::vector<GroupCommitter<WriteOp>::Item>& batch);
  static Status Done(Db& db, Statement& s, std::string_view what);

  // A paste's writes (sqlite_meta_writes.cc)
  Status Apply(Db& db, const InsertOp& op);
  Status Apply(Db& db, const BodyPutOp& op);
  Status Apply(Db& db, const BodyDeleteOp& op);
  Status Apply(Db& db, const ClaimOp& op);
  Status Apply(Db& db, const MarkDeletedOp& op);
  Status Apply(Db& db, const FinishOutboxOp& op);
  Status Apply(Db& db, const RetryOutboxOp& op);
  Status Apply(Db& db, const PurgeOp& op);
  static Status DeleteInlineBody(Db& db, int64_t n);
  Status CountLive(Db& db, int64_t delta);
  Status Enqueue(Db& db, const PasteId& id, int64_t now);

  // Moderation's writes (sqlite_meta_moderation.cc)
  Status Apply(Db& db, const AddReportOp& op);
  Status Withhold(Db& db, const AbuseReport& r, const ReportPolicy& policy, ReportOutcome& out);
  Status Apply(Db& db, const SetModerationOp& op);
  Status Apply(Db& db, const PurgeReportsOp& op);
  Status Apply(Db& db, const AddBlockOp& op);
  Status Apply(Db& db, const AddAuditOp& op);
  Status Apply(Db& db, const BlockContentOp& op);
  Status Apply(Db& db, const UnblockContentOp& op);
  Status Apply(Db& db, const AddCreatorTokenOp& op);
  Status Apply(Db& db, const RevokeCreatorTokenOp& op);
  Status Apply(Db& db, const AddTransparencyOp& op);
  // Adds `count` to its transparency counter (one upsert), inside the calling op's savepoint.
  static Status Tally(Db& db, const TransparencyCount& count);
  static Status Tally(Db& db, int64_t at, std::string_view kind, std::string_view label);
  Status Apply(Db& db, const AddNoticeOp& op);
  Status Apply(Db& db, const ImportNoticeOp& op);
  Status Apply(Db& db, const CloseNoticesOp& op);
  // The notice `id` (sender, reference, ...; `with_pastes`: its pastes too), or NotFound.
  static Result<Notice> ReadNotice(Db& db, int64_t id, bool with_pastes);
  // The notices whose ids `ids` (its parameters bound) lists, each with its pastes.
  static Result<std::vector<Notice>> ReadNotices(Db& db, Statement& ids, std::string_view what);
  // The id of the notice of `sender` and `reference`, 0 when there is none.
  static Result<int64_t> FindNotice(Db& db, const std::string& sender,
                                    const std::string& reference);
  // Deletes the oldest closed notices a store holding `max_notices` needs to take one more,
  // inside the calling op's savepoint; NoticesFull (nothing deleted) when too few are closed.
  static Status MakeRoomForNotice(Db& db, int64_t max_notices);
  // Inserts `n` and its pastes as they are (outcomes and open flags), setting n.id.
  static Status InsertNoticeRows(Db& db, Notice& n);
  // Closes `paste` in every notice naming it (an action on it, or its purge), inside the calling
  // op's savepoint; `closed` (when given) gets those notices as they were, without their pastes.
  static Status CloseNoticeRows(Db& db, const PasteId& paste, std::vector<Notice>* closed);
  // Inserts `entry` unless its digest is there or the list holds `max_entries` (`full` says
  // which); bumps the version when it did.
  static Status InsertBlockedContent(Db& db, const BlockedContent& entry, int64_t max_entries,
                                     bool& added, bool& full);
  static Status CountCharges(Db& db, std::string_view network, int64_t now, int64_t& charged);
  static Status ReadCounts(Db& db, ReportCounts& counts);
  static Status AddToCounts(Db& db, int64_t pending, int64_t open_reports);
  // `queued_since` (may be null) gets the arrival of the queue row it removes.
  static Status CloseReports(Db& db, const PasteId& id, std::optional<int64_t> at,
                             std::optional<int64_t>* queued_since = nullptr);

  // Voters looked at beyond the threshold when some of them may have no budget left.
  static constexpr int64_t kSpareVoters = 64;

  const std::filesystem::path path_;
  const BlockingPools pools_;
  const size_t colocated_body_limit_;
  std::unique_ptr<Db> writer_;
  sqlite::Readers readers_{path_, "metadata store"};
  std::unique_ptr<sqlite::WalCheckpointer> checkpointer_;
  LocalStorageLedger ledger_;
  int64_t op_live_delta_ = 0;  // the committer thread's only
  // Last: its thread uses everything above, and stops first.
  std::unique_ptr<GroupCommitter<WriteOp>> committer_;
};

}  // namespace sluice::store::sqlite
