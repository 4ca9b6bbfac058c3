// MetaStore on SQLite in WAL mode: one writer connection behind a group committer (one transaction
// and one WAL fsync per batch), a pool of reader connections that WAL lets run beside it, and
// checkpoints on a thread of their own (sqlite::WalCheckpointer).
//
// The embedded store keeps small bodies here too, in the table `inline_bodies`, and a create writes
// its body and its row in one transaction (InsertWithBody): one commit and one flush per batch of
// creates instead of two in a row, and no orphan if the process dies between them
// (docs/architecture.md, "Durability"). The row finds its body by number (`body_n`, migration 8);
// bodies from before that, and bodies written apart from a row, are in `bodies`, by id.
// MakeSqliteMetaBodies serves both as a BlobStore.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <variant>

#include "../storage_ledger.h"
#include "bodies_table.h"
#include "sluice/admission/network.h"
#include "sluice/asio/completion.h"
#include "sluice/store/backends.h"
#include "sluice/store/body_codec.h"
#include "sluice/store/group_commit.h"
#include "sqlite_db.h"

namespace sluice::store {
namespace {

using boost::asio::awaitable;
using sqlite::Db;
using sqlite::Statement;

// Each entry is applied once, in order, inside one transaction; a database stamped with a later
// version than this binary knows refuses to open rather than guess.
constexpr const char* kMigrations[] = {
    // 1: pastes, their tombstones, and the outbox of body removals owed after a delete.
    R"sql(
    CREATE TABLE pastes (
      id TEXT PRIMARY KEY,
      created_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      size_bytes INTEGER NOT NULL,
      token_hash BLOB NOT NULL,
      deleted INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    CREATE INDEX pastes_by_expiry ON pastes (expires_at);
    CREATE TABLE outbox (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      paste_id TEXT NOT NULL,
      kind TEXT NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0,
      enqueued_at INTEGER NOT NULL,
      next_attempt_at INTEGER NOT NULL
    );
    CREATE INDEX outbox_by_due ON outbox (next_attempt_at);
    )sql",
    // 2: the SHA-256 of each body, recorded at create and checked on every read. Rows from before
    // have none (NULL) and are checked by size alone.
    R"sql(
    ALTER TABLE pastes ADD COLUMN body_sha256 BLOB;
    )sql",
    // 3: moderation (docs/moderation.md): a paste's state with its reason and time, abuse
    // reports (one per client key and paste), blocked clients and the audit trail.
    R"sql(
    ALTER TABLE pastes ADD COLUMN moderation INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE pastes ADD COLUMN moderation_reason TEXT;
    ALTER TABLE pastes ADD COLUMN moderated_at INTEGER;
    CREATE TABLE reports (
      paste_id TEXT NOT NULL,
      client_key TEXT NOT NULL,
      reason TEXT NOT NULL,
      note TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      open INTEGER NOT NULL DEFAULT 1,
      PRIMARY KEY (paste_id, client_key)
    ) WITHOUT ROWID;
    CREATE INDEX reports_open ON reports (open, created_at);
    CREATE TABLE blocks (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      prefix TEXT NOT NULL,
      reason TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      until INTEGER NOT NULL
    );
    CREATE TABLE audit (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      at INTEGER NOT NULL,
      action TEXT NOT NULL,
      target TEXT NOT NULL,
      detail TEXT NOT NULL
    );
    )sql",
    // 4: burn after reading (MetaStore::Claim).
    R"sql(
    ALTER TABLE pastes ADD COLUMN burn INTEGER NOT NULL DEFAULT 0;
    )sql",
    // 5: storage_usage, the live bytes (MetaStore::LiveBytes), kept by every transaction that adds
    // or
    // removes a live row. One row: the embedded store has one writer, so it is never contended.
    R"sql(
    CREATE TABLE storage_usage (slot INTEGER PRIMARY KEY, live_bytes INTEGER NOT NULL);
    INSERT INTO storage_usage (slot, live_bytes)
      SELECT 0, COALESCE(SUM(size_bytes), 0) FROM pastes WHERE deleted = 0;
    )sql",
    // 6: when a report was closed by its review, so handled reports can be deleted after
    // report_retention (MetaStore::PurgeReports). Reports closed before this step take their
    // paste's last review time, or their own when the paste is gone.
    R"sql(
    ALTER TABLE reports ADD COLUMN closed_at INTEGER;
    UPDATE reports SET closed_at = COALESCE(
        (SELECT p.moderated_at FROM pastes p WHERE p.id = reports.paste_id), created_at)
      WHERE open = 0;
    CREATE INDEX reports_closed ON reports (closed_at) WHERE open = 0;
    )sql",
    // 7: small bodies beside their rows, written in the row's transaction (InsertWithBody); the
    // same table as bodies.db's (sqlite_blob_store.cc).
    R"sql(
    CREATE TABLE bodies (id TEXT PRIMARY KEY, written_at INTEGER NOT NULL, body BLOB NOT NULL);
    )sql",
    // 8: a create's body in `inline_bodies`, found through its row's `body_n`. Besides its body's
    // pages and its row, a create used to write two pages at random places: a leaf of the bodies'
    // id index and one of the expiry index (one second's entries ordered by random id), each
    // written to the WAL at commit and again by the checkpoint. Keyed by a number that only grows
    // (AUTOINCREMENT: never reused, so a row can never point at a later paste's body), the bodies
    // append and need no id index, and the expiry index, ordered by that number within a second,
    // appends too (bench/results/wal-pages.md). Bodies from before, and bodies written apart from
    // their row (MakeSqliteMetaBodies' Put), stay in `bodies`, read by id.
    R"sql(
    CREATE TABLE inline_bodies (
      n INTEGER PRIMARY KEY AUTOINCREMENT,
      written_at INTEGER NOT NULL,
      body BLOB NOT NULL
    );
    ALTER TABLE pastes ADD COLUMN body_n INTEGER;
    DROP INDEX pastes_by_expiry;
    CREATE INDEX pastes_by_expiry ON pastes (expires_at, body_n);
    )sql",
    // 9: the form each inline body is stored in (include/sluice/store/body_codec.h): 0 as
    // received, 1 LZ4-compressed. The bodies written before are as received.
    R"sql(
    ALTER TABLE inline_bodies ADD COLUMN codec INTEGER NOT NULL DEFAULT 0;
    )sql",
    // 10: moderation at a bounded cost per report (docs/moderation.md). Reports are counted once
    // per network and paste (`paste_reports`, keyed so); each reported paste has one queue row
    // with its counts, reasons (a bit each, store::kReportReasons) and newest note, kept by the
    // report's own transaction, and the queue is read newest first from its index; the counts of
    // the whole queue are one row. A paste records its creator's network (packed, 8 bytes:
    // admission::PackNetwork; none on older rows) and the review's "keep"; each withholding
    // charges the networks that caused it (`withhold_charges`, a day's worth kept). The reports
    // stored so far move over, counted by the network of their key (IPv4 /24, IPv6 /48); reports
    // of pastes already purged are closed.
    R"sql(
    ALTER TABLE pastes ADD COLUMN creator_network INTEGER;
    ALTER TABLE pastes ADD COLUMN review_keep INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE paste_reports (
      paste_id TEXT NOT NULL,
      network TEXT NOT NULL,
      reason TEXT NOT NULL,
      note TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      open INTEGER NOT NULL,
      vote INTEGER NOT NULL,
      closed_at INTEGER,
      PRIMARY KEY (paste_id, network)
    ) WITHOUT ROWID;
    CREATE INDEX paste_reports_closed ON paste_reports (closed_at) WHERE open = 0;
    CREATE INDEX paste_reports_votes ON paste_reports (paste_id, network) WHERE open = 1 AND vote = 1;
    CREATE TABLE report_queue (
      paste_id TEXT PRIMARY KEY,
      reports INTEGER NOT NULL,
      notes INTEGER NOT NULL,
      votes INTEGER NOT NULL,
      reasons INTEGER NOT NULL,
      latest_at INTEGER NOT NULL,
      latest_note TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX report_queue_by_latest ON report_queue (latest_at DESC, paste_id DESC);
    CREATE TABLE report_counts (
      slot INTEGER PRIMARY KEY,
      pending INTEGER NOT NULL,
      open_reports INTEGER NOT NULL
    );
    CREATE TABLE withhold_charges (
      network TEXT NOT NULL,
      at INTEGER NOT NULL,
      paste_id TEXT NOT NULL,
      PRIMARY KEY (network, at, paste_id)
    ) WITHOUT ROWID;
    CREATE INDEX withhold_charges_by_age ON withhold_charges (at);
    INSERT OR IGNORE INTO paste_reports
        (paste_id, network, reason, note, created_at, open, vote, closed_at)
      SELECT r.paste_id, sluice_report_network(r.client_key), r.reason, r.note, r.created_at,
             r.open = 1 AND p.id IS NOT NULL, r.open = 1 AND p.id IS NOT NULL,
             CASE WHEN r.open = 0 THEN r.closed_at WHEN p.id IS NULL THEN r.created_at END
      FROM reports r LEFT JOIN pastes p ON p.id = r.paste_id
      ORDER BY r.open DESC, r.created_at DESC;
    INSERT INTO report_queue (paste_id, reports, notes, votes, reasons, latest_at, latest_note)
      SELECT paste_id, COUNT(*), COUNT(*), SUM(vote),
             SUM(DISTINCT CASE reason WHEN 'spam' THEN 1 WHEN 'malware' THEN 2
                 WHEN 'illegal' THEN 4 WHEN 'personal_data' THEN 8 ELSE 16 END),
             MAX(created_at), ''
      FROM paste_reports WHERE open = 1 GROUP BY paste_id;
    UPDATE report_queue SET latest_note = COALESCE((SELECT n.note FROM paste_reports n
        WHERE n.paste_id = report_queue.paste_id AND n.open = 1
        ORDER BY n.created_at DESC LIMIT 1), '');
    INSERT INTO report_counts (slot, pending, open_reports)
      SELECT 0, (SELECT COUNT(*) FROM report_queue),
             (SELECT COUNT(*) FROM paste_reports WHERE open = 1);
    DROP TABLE reports;
    )sql",
    // 11: end-to-end encrypted pastes (docs/encryption.md): the body is an envelope, served as it
    // is and never rendered.
    R"sql(
    ALTER TABLE pastes ADD COLUMN encrypted INTEGER NOT NULL DEFAULT 0;
    )sql",
    // 12: expiry after N views (MetaStore::Claim): a burn row's views still to give. Every burn
    // row before this was burn after reading, one view.
    R"sql(
    ALTER TABLE pastes ADD COLUMN views_left INTEGER NOT NULL DEFAULT 1;
    )sql",
    // 13: the paste a fork was made from (PasteMeta::parent), for its view and its diff.
    R"sql(
    ALTER TABLE pastes ADD COLUMN parent TEXT;
    )sql",
    // 14: the outbox by paste. Each purged row deletes its outbox entries by paste id, and without
    // this index that was a scan of the whole outbox per row: a sweep of 1,000 rows beside an
    // outbox of 100,000 (a blob store down for an hour) read 100 million entries. PostgreSQL has
    // had it from its first migration (outbox_by_paste). tests/integration/test_query_plans.py
    // holds every statement of this file to an index.
    R"sql(
    CREATE INDEX outbox_by_paste ON outbox (paste_id);
    )sql",
};

// The reporter network of a client key stored before migration 10, at the default prefixes: the
// SQL of that migration calls it as sluice_report_network(key).
void ReportNetworkOfKey(sqlite3_context* context, int, sqlite3_value** argv) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  const std::string network = admission::ClientNetwork(
      text ? std::string_view(text, static_cast<size_t>(sqlite3_value_bytes(argv[0])))
           : std::string_view(),
      admission::NetworkPrefixes{});
  sqlite3_result_text(context, network.data(), static_cast<int>(network.size()), SQLITE_TRANSIENT);
}

Error StorageError(Db& db, std::string_view what) {
  Error e =
      MakeError(ErrorCode::kUnavailable,
                fmt::format("metadata store: {}: {}", what, db.LastError()), "storage_unavailable");
  return e;
}

// Columns in order: created_at, expires_at, size_bytes, token_hash, deleted, body_sha256, burn,
// moderation, creator_network, encrypted, views_left, parent (Get and the claim's RETURNING select
// them so).
#define SLUICE_ROW_COLUMNS                                                                   \
  "created_at, expires_at, size_bytes, token_hash, deleted, body_sha256, burn, moderation, " \
  "creator_network, encrypted, views_left, parent"
PasteMeta RowToMeta(const PasteId& id, Statement& s) {
  PasteMeta m{id, s.Int(0), s.Int(1), static_cast<uint64_t>(s.Int(2)), {}, s.Int(4) != 0, {}};
  m.burn = s.Int(6) != 0;
  auto hash = s.Blob(3);
  std::copy_n(hash.begin(), std::min(hash.size(), m.token_hash.size()), m.token_hash.begin());
  // Anything but 32 bytes (NULL on rows from before checksums) is no checksum, never a wrong one.
  auto digest = s.Blob(5);
  if (digest.size() == BodyDigest().size()) {
    m.body_sha256.emplace();
    std::copy_n(digest.begin(), digest.size(), m.body_sha256->begin());
  }
  const int64_t moderation = s.Int(7);
  if (moderation >= 0 && moderation <= 2) m.moderation = static_cast<Moderation>(moderation);
  if (auto network = s.OptionalInt(8)) m.creator_network = static_cast<uint64_t>(*network);
  m.encrypted = s.Int(9) != 0;
  m.views_left = static_cast<uint32_t>(std::clamp<int64_t>(s.Int(10), 0, UINT32_MAX));
  if (const std::string_view parent = s.Text(11); !parent.empty())
    m.parent = PasteId::Parse(parent);
  return m;
}

Moderation ModerationOf(int64_t v) {
  return v >= 0 && v <= 2 ? static_cast<Moderation>(v) : Moderation::kNone;
}

struct InsertOp {
  PasteMeta meta;
  admission::Deadline deadline;
  // With InsertWithBody: written in the row's savepoint, so both or neither; in the form to store.
  EncodedBody body;
  int64_t written_at = 0;
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
using WriteOp = std::variant<InsertOp, MarkDeletedOp, FinishOutboxOp, RetryOutboxOp, PurgeOp,
                             ClaimOp, AddReportOp, SetModerationOp, PurgeReportsOp, AddBlockOp,
                             AddAuditOp, BodyPutOp, BodyDeleteOp>;

Error NoSuchPaste() { return MakeError(ErrorCode::kNotFound, "no such paste", "not_found"); }

class SqliteMetaStore final : public MetaStore {
 public:
  SqliteMetaStore(const std::filesystem::path& path, BlockingPools pools,
                  size_t colocated_body_limit, MetricsRegistry* metrics)
      : path_(path),
        pools_(pools),
        colocated_body_limit_(colocated_body_limit),
        writer_(sqlite::OpenDurable(path)) {
    sqlite3_create_function_v2(writer_->raw(), "sluice_report_network", 1,
                               SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr, &ReportNetworkOfKey,
                               nullptr, nullptr, nullptr);
    Migrate(*writer_);
    ledger_.Committed(ReadLiveBytes(*writer_), {});
    checkpointer_ =
        std::make_unique<sqlite::WalCheckpointer>(*writer_, path, "metadata store", "ckpt-meta");
    committer_ = std::make_unique<GroupCommitter<WriteOp>>(
        "commit-meta", kMaxBatch,
        [this](std::vector<GroupCommitter<WriteOp>::Item>& batch) { Commit(batch); },
        CommitMetrics::In(metrics, "meta"));
  }

  awaitable<Status> Insert(PasteMeta meta, admission::Deadline deadline) override {
    return committer_->Submit(InsertOp{meta, deadline, {}, 0});
  }

  size_t colocated_body_limit() const override { return colocated_body_limit_; }

  awaitable<Status> InsertWithBody(PasteMeta meta, std::shared_ptr<const std::string> body,
                                   admission::Deadline deadline) override {
    if (!body || body->size() > colocated_body_limit_)
      return MetaStore::InsertWithBody(meta, std::move(body), deadline);
    // Compressed here, on the caller's thread: the committer is the one thread every create
    // queues behind, and a smaller body is less for it to write.
    return committer_->Submit(InsertOp{meta, deadline, EncodeBody(std::move(body)),
                                       SystemClock::Instance().UnixSeconds()});
  }

  // The bodies table as a BlobStore (SqliteMetaBodies, below).

  awaitable<Status> PutBody(PasteId id, std::shared_ptr<const std::string> body,
                            admission::Deadline deadline) {
    return committer_->Submit(
        BodyPutOp{id, std::move(body), deadline, SystemClock::Instance().UnixSeconds()});
  }

  awaitable<Result<std::string>> GetBody(PasteId id, admission::Deadline deadline) {
    return asio_glue::RunBlocking(*pools_.read, [this, id, deadline]() -> Result<std::string> {
      return readers_.Read(deadline, [&](Db& db) -> Result<std::string> {
        Statement& s = db.Prepare(
            "SELECT b.body, b.codec, p.size_bytes FROM pastes p JOIN inline_bodies b "
            "ON b.n = p.body_n WHERE p.id = ?");
        s.Bind(1, id.view());
        const int rc = s.Step();
        // The row's size bounds what a damaged header may make the decoder allocate.
        if (rc == SQLITE_ROW) return DecodeBody(s.Blob(0), s.Int(1), static_cast<size_t>(s.Int(2)));
        if (rc != SQLITE_DONE) return StorageError(db, "get body");
        return sqlite::ReadBodyRow(db, id, &StorageError);  // from before inline_bodies, or apart
      });
    });
  }

  awaitable<Status> DeleteBodies(std::vector<PasteId> ids) {
    return committer_->Submit(BodyDeleteOp{std::move(ids)});
  }

  awaitable<Result<std::vector<BlobInfo>>> ListBodies(std::string after, size_t limit,
                                                      admission::Deadline deadline) {
    return asio_glue::RunBlocking(
        *pools_.cleanup,
        [this, after = std::move(after), limit, deadline]() -> Result<std::vector<BlobInfo>> {
          return readers_.Read(deadline, [&](Db& db) -> Result<std::vector<BlobInfo>> {
            auto apart = sqlite::ListBodyRows(db, after, limit, &StorageError);
            if (!apart.ok()) return apart;
            auto with_rows = sqlite::ListBodiesWith(
                db,
                "SELECT p.id, b.written_at FROM pastes p JOIN inline_bodies b ON b.n = p.body_n "
                "WHERE p.id > ? ORDER BY p.id LIMIT ?",
                after, limit, &StorageError);
            if (!with_rows.ok()) return with_rows;
            return MergeListings(std::move(*with_rows), std::move(*apart), limit);
          });
        });
  }

  awaitable<Result<PasteMeta>> Get(PasteId id, admission::Deadline deadline) override {
    return asio_glue::RunBlocking(*pools_.read, [this, id, deadline]() -> Result<PasteMeta> {
      return readers_.Read(deadline, [&](Db& db) -> Result<PasteMeta> {
        Statement& s = db.Prepare("SELECT " SLUICE_ROW_COLUMNS " FROM pastes WHERE id = ?");
        s.Bind(1, id.view());
        const int rc = s.Step();
        if (rc == SQLITE_ROW) return RowToMeta(id, s);
        if (rc == SQLITE_DONE) return MakeError(ErrorCode::kNotFound, "no such paste", "not_found");
        return StorageError(db, "get");
      });
    });
  }

  awaitable<Status> MarkDeleted(PasteId id, int64_t now, admission::Deadline) override {
    return committer_->Submit(MarkDeletedOp{id, now});
  }

  awaitable<Result<std::vector<OutboxEntry>>> DueOutbox(int64_t now, size_t limit,
                                                        admission::Deadline deadline) override {
    return asio_glue::RunBlocking(
        *pools_.cleanup, [this, now, limit, deadline]() -> Result<std::vector<OutboxEntry>> {
          return readers_.Read(deadline, [&](Db& db) -> Result<std::vector<OutboxEntry>> {
            Statement& s = db.Prepare(
                "SELECT seq, paste_id, attempts, next_attempt_at, kind FROM outbox "
                "WHERE next_attempt_at <= ? ORDER BY next_attempt_at, seq LIMIT ?");
            s.Bind(1, now).Bind(2, static_cast<int64_t>(limit));
            std::vector<OutboxEntry> out;
            int rc;
            while ((rc = s.Step()) == SQLITE_ROW) {
              auto id = PasteId::Parse(s.Text(1));
              if (!id) continue;  // unreachable: only parsed ids are ever written
              const auto kind = s.Text(4) == "purge_edge" ? OutboxEntry::Kind::kPurgeEdge
                                                          : OutboxEntry::Kind::kDeleteBody;
              out.push_back(OutboxEntry{s.Int(0), *id, kind, static_cast<int>(s.Int(2)), s.Int(3)});
            }
            if (rc != SQLITE_DONE) return StorageError(db, "outbox");
            return out;
          });
        });
  }

  awaitable<Status> FinishOutbox(int64_t seq, admission::Deadline) override {
    return committer_->Submit(FinishOutboxOp{seq});
  }

  awaitable<Status> RetryOutboxLater(int64_t seq, int64_t next_attempt_at,
                                     admission::Deadline) override {
    return committer_->Submit(RetryOutboxOp{seq, next_attempt_at});
  }

  awaitable<Result<int64_t>> OldestOutboxAge(int64_t now, admission::Deadline deadline) override {
    return asio_glue::RunBlocking(*pools_.cleanup, [this, now, deadline]() -> Result<int64_t> {
      return readers_.Read(deadline, [&](Db& db) -> Result<int64_t> {
        Statement& s = db.Prepare("SELECT MIN(enqueued_at) FROM outbox");
        if (s.Step() != SQLITE_ROW) return StorageError(db, "outbox age");
        if (s.Text(0).empty()) return int64_t{0};
        return std::max<int64_t>(0, now - s.Int(0));
      });
    });
  }

  // One process opens meta.db (src/app/data_dir_lock.h): it holds every lease.
  awaitable<Result<bool>> HoldLease(std::string, std::string, int64_t, int64_t,
                                    admission::Deadline) override {
    co_return true;
  }

  awaitable<Result<std::vector<PasteId>>> Expired(int64_t now, size_t limit,
                                                  admission::Deadline deadline) override {
    return asio_glue::RunBlocking(
        *pools_.cleanup, [this, now, limit, deadline]() -> Result<std::vector<PasteId>> {
          return readers_.Read(deadline, [&](Db& db) -> Result<std::vector<PasteId>> {
            Statement& s = db.Prepare(
                "SELECT id FROM pastes WHERE expires_at <= ? ORDER BY expires_at LIMIT ?");
            s.Bind(1, now).Bind(2, static_cast<int64_t>(limit));
            std::vector<PasteId> out;
            int rc;
            while ((rc = s.Step()) == SQLITE_ROW) {
              if (auto id = PasteId::Parse(s.Text(0))) out.push_back(*id);
            }
            if (rc != SQLITE_DONE) return StorageError(db, "expired");
            return out;
          });
        });
  }

  awaitable<Status> Purge(std::vector<PasteId> ids, admission::Deadline) override {
    return committer_->Submit(PurgeOp{std::move(ids)});
  }

  awaitable<Result<std::vector<PasteId>>> Existing(std::vector<PasteId> ids,
                                                   admission::Deadline deadline) override {
    return asio_glue::RunBlocking(
        *pools_.cleanup, [this, ids = std::move(ids), deadline]() -> Result<std::vector<PasteId>> {
          return readers_.Read(deadline, [&](Db& db) -> Result<std::vector<PasteId>> {
            Statement& s = db.Prepare("SELECT 1 FROM pastes WHERE id = ?");
            std::vector<PasteId> out;
            for (const PasteId& id : ids) {
              s.Reset();
              s.Bind(1, id.view());
              const int rc = s.Step();
              if (rc == SQLITE_ROW)
                out.push_back(id);
              else if (rc != SQLITE_DONE)
                return StorageError(db, "exists");
            }
            return out;
          });
        });
  }

  // Moderation: writes through the committer, like every write (the report buckets bound them);
  // reads on the moderation pool, never the one paste reads wait for.

  awaitable<Result<ReportOutcome>> AddReport(AbuseReport report, ReportPolicy policy,
                                             admission::Deadline) override {
    auto outcome = std::make_shared<ReportOutcome>();
    auto submitting = committer_->Submit(AddReportOp{std::move(report), policy, outcome});
    const Status s = co_await std::move(submitting);
    if (!s.ok()) co_return s.error();
    co_return *outcome;
  }

  awaitable<Status> SetModeration(PasteId id, ModerationChange change,
                                  admission::Deadline) override {
    return committer_->Submit(SetModerationOp{id, std::move(change)});
  }

  awaitable<Result<size_t>> PurgeReports(int64_t closed_before, int64_t now, size_t limit,
                                         admission::Deadline) override {
    auto deleted = std::make_shared<size_t>(0);
    // Built outside the co_await: g++ 12 mishandles non-trivial temporaries inside one.
    auto submitting = committer_->Submit(PurgeReportsOp{closed_before, now, limit, deleted});
    const Status s = co_await std::move(submitting);
    if (!s.ok()) co_return s.error();
    co_return *deleted;
  }

  awaitable<Result<ReportPage>> OpenReports(std::optional<ReportCursor> after, size_t limit,
                                            admission::Deadline deadline) override {
    return asio_glue::RunBlocking(
        moderation_pool(), [this, after, limit, deadline]() -> Result<ReportPage> {
          return readers_.Read(deadline, [&](Db& db) -> Result<ReportPage> {
            // One range of the queue's index, a row lookup per paste listed: the cost of a page
            // is its length, however long the queue. The index is descending in both columns
            // (ties by id, descending) so that the cursor is one row-value comparison the index
            // serves, here and in PostgreSQL. No cursor starts above every id (base62 is
            // below '~').
            Statement& s = db.Prepare(
                "SELECT q.paste_id, q.reports, q.notes, q.votes, q.reasons, q.latest_at, "
                "q.latest_note, COALESCE(p.moderation, 0), COALESCE(p.review_keep, 0) "
                "FROM report_queue q LEFT JOIN pastes p ON p.id = q.paste_id "
                "WHERE (q.latest_at, q.paste_id) < (?, ?) "
                "ORDER BY q.latest_at DESC, q.paste_id DESC LIMIT ?");
            s.Bind(1, after ? after->latest_at : std::numeric_limits<int64_t>::max());
            s.Bind(2, after ? after->id.view() : std::string_view("~"));
            s.Bind(3, static_cast<int64_t>(limit) + 1);
            ReportPage page;
            int rc;
            while ((rc = s.Step()) == SQLITE_ROW) {
              auto id = PasteId::Parse(s.Text(0));
              if (!id) continue;  // unreachable: only parsed ids are ever written
              if (page.pastes.size() == limit) {
                page.next = ReportCursor{page.pastes.back().latest_at, page.pastes.back().id};
                break;
              }
              ReportSummary r{*id};
              r.reports = s.Int(1);
              r.networks = s.Int(2);
              r.votes = s.Int(3);
              r.reasons = ReportReasonNames(s.Int(4));
              r.latest_at = s.Int(5);
              r.latest_note = std::string(s.Text(6));
              r.moderation = ModerationOf(s.Int(7));
              r.keep = s.Int(8) != 0;
              page.pastes.push_back(std::move(r));
            }
            if (rc != SQLITE_DONE && rc != SQLITE_ROW) return StorageError(db, "open reports");
            return page;
          });
        });
  }

  awaitable<Result<ReportCounts>> CountReports(admission::Deadline deadline) override {
    return asio_glue::RunBlocking(moderation_pool(), [this, deadline]() -> Result<ReportCounts> {
      return readers_.Read(deadline, [&](Db& db) -> Result<ReportCounts> {
        ReportCounts counts;
        if (Status read = ReadCounts(db, counts); !read.ok()) return read.error();
        return counts;
      });
    });
  }

  awaitable<Status> AddBlock(ClientBlock block, admission::Deadline) override {
    return committer_->Submit(AddBlockOp{std::move(block)});
  }

  awaitable<Result<std::vector<ClientBlock>>> ActiveBlocks(int64_t now,
                                                           admission::Deadline deadline) override {
    return asio_glue::RunBlocking(
        moderation_pool(), [this, now, deadline]() -> Result<std::vector<ClientBlock>> {
          return readers_.Read(deadline, [&](Db& db) -> Result<std::vector<ClientBlock>> {
            Statement& s = db.Prepare(
                "SELECT prefix, reason, created_at, until FROM blocks WHERE until > ? "
                "ORDER BY seq");
            s.Bind(1, now);
            std::vector<ClientBlock> out;
            int rc;
            while ((rc = s.Step()) == SQLITE_ROW) {
              out.push_back(
                  ClientBlock{std::string(s.Text(0)), std::string(s.Text(1)), s.Int(2), s.Int(3)});
            }
            if (rc != SQLITE_DONE) return StorageError(db, "blocks");
            return out;
          });
        });
  }

  awaitable<Status> AddAudit(AuditEntry entry, admission::Deadline) override {
    return committer_->Submit(AddAuditOp{std::move(entry)});
  }

  awaitable<Result<std::vector<AuditEntry>>> AuditTrail(size_t limit,
                                                        admission::Deadline deadline) override {
    return asio_glue::RunBlocking(
        moderation_pool(), [this, limit, deadline]() -> Result<std::vector<AuditEntry>> {
          return readers_.Read(deadline, [&](Db& db) -> Result<std::vector<AuditEntry>> {
            Statement& s = db.Prepare(
                "SELECT at, action, target, detail FROM audit ORDER BY seq DESC LIMIT ?");
            s.Bind(1, static_cast<int64_t>(limit));
            std::vector<AuditEntry> out;
            int rc;
            while ((rc = s.Step()) == SQLITE_ROW) {
              out.push_back(AuditEntry{s.Int(0), std::string(s.Text(1)), std::string(s.Text(2)),
                                       std::string(s.Text(3))});
            }
            if (rc != SQLITE_DONE) return StorageError(db, "audit");
            return out;
          });
        });
  }

  // Burn after reading and storage accounting

  awaitable<Result<PasteMeta>> Claim(PasteId id, int64_t now, admission::Deadline) override {
    auto claimed = std::make_shared<std::optional<PasteMeta>>();
    // Built outside the co_await: g++ 12 mishandles non-trivial temporaries inside one.
    auto submitting = committer_->Submit(ClaimOp{id, now, claimed});
    Status done = co_await std::move(submitting);
    if (!done.ok()) co_return done.error();
    if (!*claimed) co_return NoSuchPaste();
    co_return std::move(**claimed);
  }

  awaitable<Result<uint64_t>> LiveBytes(admission::Deadline deadline) override {
    return asio_glue::RunBlocking(*pools_.cleanup, [this, deadline]() -> Result<uint64_t> {
      return readers_.Read(deadline, [&](Db& db) -> Result<uint64_t> {
        Statement& s = db.Prepare("SELECT COALESCE(SUM(live_bytes), 0) FROM storage_usage");
        if (s.Step() != SQLITE_ROW) return StorageError(db, "live bytes");
        return static_cast<uint64_t>(std::max<int64_t>(0, s.Int(0)));
      });
    });
  }

  // In the process (LocalStorageLedger): this object is the only writer of its file, so the
  // commits it makes are every change to the live bytes.
  awaitable<Result<StorageReservation>> ReserveStorage(StorageRequest request,
                                                       admission::Deadline) override {
    co_return ledger_.Reserve(request);
  }

 private:
  static constexpr size_t kMaxBatch = 512;

  // The live bytes as the counter table holds them, read once when the store opens.
  static int64_t ReadLiveBytes(Db& db) {
    Statement& s = db.Prepare("SELECT COALESCE(SUM(live_bytes), 0) FROM storage_usage");
    if (s.Step() != SQLITE_ROW) throw std::runtime_error("metadata store: " + db.LastError());
    const int64_t live = s.Int(0);
    s.Reset();
    return live;
  }

  static void Migrate(Db& db) {
    db.Exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
    Statement& read = db.Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version");
    read.Step();
    const int64_t current = read.Int(0);
    read.Reset();
    const int64_t known = static_cast<int64_t>(std::size(kMigrations));
    if (current > known) {
      throw std::runtime_error(fmt::format(
          "metadata schema version {} is newer than this binary knows ({})", current, known));
    }
    for (int64_t v = current; v < known; ++v) {
      db.Exec("BEGIN IMMEDIATE");
      try {
        // Read again under the write lock: another process opening the same file may have applied
        // this step since, and ALTER TABLE is not idempotent.
        read.Step();
        const int64_t now_at = read.Int(0);
        read.Reset();
        if (now_at > v) {
          db.Exec("COMMIT");
          continue;
        }
        db.Exec(kMigrations[v]);
        db.Exec(fmt::format("INSERT INTO schema_version (version) VALUES ({})", v + 1).c_str());
        db.Exec("COMMIT");
      } catch (...) {
        db.TryExec("ROLLBACK");
        throw;
      }
      spdlog::info("metadata schema migrated to version {}", v + 1);
    }
  }

  boost::asio::thread_pool& moderation_pool() const {
    return pools_.moderation != nullptr ? *pools_.moderation : *pools_.cleanup;
  }

  // Runs on the committer thread only. Each op runs inside its own savepoint, so one op's failure
  // (an id collision) fails that op alone; a failed COMMIT fails the whole batch.
  void Commit(std::vector<GroupCommitter<WriteOp>::Item>& batch) {
    Db& db = *writer_;
    if (db.TryExec("BEGIN IMMEDIATE") != SQLITE_OK) {
      const Error e = StorageError(db, "begin");
      for (auto& item : batch) item.status = e;
      return;
    }
    // Prepared once rather than parsed per op (TryExec): a few microseconds per create.
    const auto run = [&db](const char* sql) { db.Prepare(sql).Step(); };
    // What the batch does to the storage quota, told to the ledger once it has committed.
    int64_t live_delta = 0;
    std::vector<PasteId> inserted;
    for (auto& item : batch) {
      run("SAVEPOINT op");
      op_live_delta_ = 0;
      item.status = std::visit([&](auto& op) { return Apply(db, op); }, item.op);
      if (!item.status.ok()) {
        run("ROLLBACK TO op");
      } else {
        live_delta += op_live_delta_;
        if (const auto* insert = std::get_if<InsertOp>(&item.op))
          inserted.push_back(insert->meta.id);
      }
      run("RELEASE op");
    }
    db.ResetAll();
    if (db.TryExec("COMMIT") != SQLITE_OK) {
      const Error e = StorageError(db, "commit");
      db.TryExec("ROLLBACK");
      for (auto& item : batch) item.status = e;
      return;
    }
    ledger_.Committed(live_delta, inserted);
    checkpointer_->AfterCommit(db);
  }

  static Status Done(Db& db, Statement& s, std::string_view what) {
    const int rc = s.Step();
    if (rc == SQLITE_DONE || rc == SQLITE_ROW) return Ok();
    if (rc == SQLITE_CONSTRAINT) {
      return MakeError(ErrorCode::kInternal,
                       fmt::format("metadata store: {}: {}", what, db.LastError()), "id_collision");
    }
    return StorageError(db, what);
  }

  Status Apply(Db& db, const InsertOp& op) {
    // The embedded statement timeout (docs/overload.md, "Retries, breakers, timeouts"): an insert
    // whose caller already gave up (and answered 500) must not publish the paste afterwards.
    if (op.deadline.Expired(SystemClock::Instance())) {
      Error e = MakeError(ErrorCode::kDeadlineExceeded, "insert abandoned before it ran",
                          "deadline_exceeded");
      e.never_sent = true;  // surely not written (MetaStore::Insert)
      return e;
    }
    try {
      // The body first, for its number; an id collision below rolls it back with the op.
      std::optional<int64_t> body_n;
      if (op.body.bytes) {
        Statement& body =
            db.Prepare("INSERT INTO inline_bodies (written_at, body, codec) VALUES (?, ?, ?)");
        body.Bind(1, op.written_at)
            .BindUnowned(2, *op.body.bytes)
            .Bind(3, static_cast<int64_t>(op.body.codec));
        if (Status written = Done(db, body, "write body"); !written.ok()) return written;
        body_n = sqlite3_last_insert_rowid(db.raw());
      }
      Statement& s = db.Prepare(
          "INSERT INTO pastes (id, created_at, expires_at, size_bytes, token_hash, deleted, "
          "body_sha256, burn, body_n, creator_network, encrypted, views_left, parent) "
          "VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?)");
      const PasteMeta& m = op.meta;
      s.Bind(1, m.id.view()).Bind(2, m.created_at).Bind(3, m.expires_at);
      s.Bind(4, static_cast<int64_t>(m.size_bytes))
          .Bind(5, std::span<const unsigned char>(m.token_hash));
      // Left unbound, the checksum is NULL (Prepare clears the bindings).
      if (m.body_sha256) s.Bind(6, std::span<const unsigned char>(*m.body_sha256));
      s.Bind(7, int64_t{m.burn ? 1 : 0});
      if (body_n) s.Bind(8, *body_n);
      if (m.creator_network) s.Bind(9, static_cast<int64_t>(*m.creator_network));
      s.Bind(10, int64_t{m.encrypted ? 1 : 0});
      s.Bind(11, static_cast<int64_t>(m.burn ? m.views_left : 1));
      if (m.parent) s.Bind(12, m.parent->view());
      if (Status inserted = Done(db, s, "insert"); !inserted.ok()) return inserted;
      return CountLive(db, static_cast<int64_t>(m.size_bytes));
    } catch (const std::exception& e) {
      return MakeError(ErrorCode::kUnavailable, e.what(), "storage_unavailable");
    }
  }

  Status Apply(Db& db, const BodyPutOp& op) {
    if (op.deadline.Expired(SystemClock::Instance())) {
      // Abandoned by its caller while queued: writing it now would only make an orphan.
      return MakeError(ErrorCode::kDeadlineExceeded, "write abandoned before it ran",
                       "deadline_exceeded");
    }
    return sqlite::WriteBodyRow(db, op.id, *op.body, op.written_at, &StorageError);
  }

  // The row stays (a tombstone, until purged) and forgets its body's number.
  Status Apply(Db& db, const BodyDeleteOp& op) {
    for (const PasteId& id : op.ids) {
      Statement& number =
          db.Prepare("SELECT body_n FROM pastes WHERE id = ? AND body_n IS NOT NULL");
      number.Bind(1, id.view());
      const int found = number.Step();
      if (found == SQLITE_ROW) {
        const int64_t n = number.Int(0);
        number.Reset();
        if (Status s = DeleteInlineBody(db, n); !s.ok()) return s;
        Statement& forget = db.Prepare("UPDATE pastes SET body_n = NULL WHERE id = ?");
        forget.Bind(1, id.view());
        if (Status s = Done(db, forget, "delete body"); !s.ok()) return s;
      } else if (found != SQLITE_DONE) {
        return StorageError(db, "delete body");
      }
      if (Status s = sqlite::DeleteBodyRow(db, id, &StorageError); !s.ok()) return s;
    }
    return Ok();
  }

  static Status DeleteInlineBody(Db& db, int64_t n) {
    Statement& s = db.Prepare("DELETE FROM inline_bodies WHERE n = ?");
    s.Bind(1, n);
    return Done(db, s, "delete body");
  }

  // Adds `delta` to the live bytes, inside the op's savepoint (and to the op's share of the
  // batch's change, for the ledger).
  Status CountLive(Db& db, int64_t delta) {
    if (delta == 0) return Ok();
    Statement& count =
        db.Prepare("UPDATE storage_usage SET live_bytes = live_bytes + ? WHERE slot = 0");
    count.Bind(1, delta);
    Status counted = Done(db, count, "storage usage");
    if (counted.ok()) op_live_delta_ += delta;
    return counted;
  }

  Status Enqueue(Db& db, const PasteId& id, int64_t now) {
    Statement& enqueue = db.Prepare(
        "INSERT INTO outbox (paste_id, kind, attempts, enqueued_at, next_attempt_at) "
        "VALUES (?, 'delete_body', 0, ?, ?)");
    enqueue.Bind(1, id.view()).Bind(2, now).Bind(3, now);
    return Done(db, enqueue, "enqueue");
  }

  // One writer runs every op, so the UPDATE's condition is the claim: each op takes one view of a
  // live row, the one that takes the last marks it deleted (the SET's right-hand sides read the
  // row before the update), and every later one finds it marked and changes nothing. A withheld
  // or taken-down row is never claimed: moderation answers 451 for it, and burning it would
  // destroy what the operator is reviewing.
  Status Apply(Db& db, const ClaimOp& op) {
    try {
      Statement& mark = db.Prepare(
          "UPDATE pastes SET views_left = views_left - 1, deleted = (views_left <= 1) "
          "WHERE id = ? AND burn = 1 AND deleted = 0 AND moderation = 0 AND expires_at > ? AND "
          "views_left >= 1 RETURNING " SLUICE_ROW_COLUMNS);
      mark.Bind(1, op.id.view()).Bind(2, op.now);
      const int rc = mark.Step();
      if (rc == SQLITE_DONE) return Ok();  // nothing to claim: *op.claimed stays empty
      if (rc != SQLITE_ROW) return StorageError(db, "claim");
      PasteMeta before = RowToMeta(op.id, mark);
      // RETURNING shows the row after the update.
      const bool last = before.deleted;
      before.deleted = false;
      ++before.views_left;
      mark.Reset();
      if (!last) {
        *op.claimed = std::move(before);
        return Ok();
      }
      if (Status s = Enqueue(db, op.id, op.now); !s.ok()) return s;
      if (Status s = CountLive(db, -static_cast<int64_t>(before.size_bytes)); !s.ok()) return s;
      *op.claimed = std::move(before);
      return Ok();
    } catch (const std::exception& e) {
      return MakeError(ErrorCode::kUnavailable, e.what(), "storage_unavailable");
    }
  }

  Status Apply(Db& db, const MarkDeletedOp& op) {
    try {
      Statement& mark = db.Prepare(
          "UPDATE pastes SET deleted = 1 WHERE id = ? AND deleted = 0 RETURNING size_bytes");
      mark.Bind(1, op.id.view());
      const int rc = mark.Step();
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) return StorageError(db, "mark deleted");
      const int64_t freed = rc == SQLITE_ROW ? mark.Int(0) : 0;
      mark.Reset();
      if (rc == SQLITE_DONE) {
        Statement& exists = db.Prepare("SELECT 1 FROM pastes WHERE id = ?");
        exists.Bind(1, op.id.view());
        return exists.Step() == SQLITE_ROW ? Ok()  // already a tombstone: deleting twice is success
                                           : Status(NoSuchPaste());
      }
      if (Status s = Enqueue(db, op.id, op.now); !s.ok()) return s;
      return CountLive(db, -freed);
    } catch (const std::exception& e) {
      return MakeError(ErrorCode::kUnavailable, e.what(), "storage_unavailable");
    }
  }

  Status Apply(Db& db, const FinishOutboxOp& op) {
    Statement& s = db.Prepare("DELETE FROM outbox WHERE seq = ?");
    s.Bind(1, op.seq);
    return Done(db, s, "finish outbox");
  }

  Status Apply(Db& db, const RetryOutboxOp& op) {
    Statement& s =
        db.Prepare("UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ? WHERE seq = ?");
    s.Bind(1, op.next_attempt_at).Bind(2, op.seq);
    return Done(db, s, "retry outbox");
  }

  Status Apply(Db& db, const PurgeOp& op) {
    // A purged tombstone was counted out when it was marked; an expired live row is counted out
    // now. Its inline body goes with it: nothing else could ever find it again.
    Statement& row = db.Prepare(
        "DELETE FROM pastes WHERE id = ? RETURNING CASE WHEN deleted = 0 THEN size_bytes ELSE 0 "
        "END, body_n");
    Statement& owed = db.Prepare("DELETE FROM outbox WHERE paste_id = ?");
    for (const PasteId& id : op.ids) {
      // Its open reports need no review any more: closed as made, so that report_retention
      // dates them from then (PurgeReports), and out of the queue.
      if (Status s = CloseReports(db, id, std::nullopt); !s.ok()) return s;
      row.Reset();
      row.Bind(1, id.view());
      const int rc = row.Step();
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) return StorageError(db, "purge");
      const int64_t freed = rc == SQLITE_ROW ? row.Int(0) : 0;
      const std::optional<int64_t> body_n = rc == SQLITE_ROW ? row.OptionalInt(1) : std::nullopt;
      row.Reset();
      if (body_n) {
        if (Status s = DeleteInlineBody(db, *body_n); !s.ok()) return s;
      }
      if (Status s = CountLive(db, -freed); !s.ok()) return s;
      owed.Reset();
      owed.Bind(1, id.view());
      if (Status s = Done(db, owed, "purge outbox"); !s.ok()) return s;
    }
    return Ok();
  }

  // A report: a bounded number of index lookups whatever is stored (the paste's row, the counts
  // row, its network's row and charges, the queue row), plus, when it withholds, the paste's
  // voters up to threshold + kSpareVoters and their charges.
  Status Apply(Db& db, const AddReportOp& op) {
    const AbuseReport& r = op.report;
    const ReportPolicy& policy = op.policy;
    ReportOutcome& out = *op.outcome;
    Statement& paste = db.Prepare("SELECT moderation, review_keep FROM pastes WHERE id = ?");
    paste.Bind(1, r.id.view());
    const int found = paste.Step();
    if (found == SQLITE_DONE) return NoSuchPaste();
    if (found != SQLITE_ROW) return StorageError(db, "report");
    const int64_t moderation = paste.Int(0);
    out.kept = paste.Int(1) != 0;
    paste.Reset();
    ReportCounts counts;
    if (Status s = ReadCounts(db, counts); !s.ok()) return s;
    Statement& queued = db.Prepare("SELECT reports, votes FROM report_queue WHERE paste_id = ?");
    queued.Bind(1, r.id.view());
    const int in_queue = queued.Step();
    if (in_queue != SQLITE_ROW && in_queue != SQLITE_DONE) return StorageError(db, "report");
    if (in_queue == SQLITE_ROW) {
      out.open_reports = queued.Int(0);
      out.votes = queued.Int(1);
    }
    queued.Reset();

    out.stored = counts.open_reports < policy.max_open_reports;
    if (out.stored) {
      int64_t charged = 0;
      if (Status s = CountCharges(db, r.network, r.at, charged); !s.ok()) return s;
      out.vote = !r.from_creator && charged < policy.withholds_per_network;
      Statement& insert = db.Prepare(
          "INSERT OR IGNORE INTO paste_reports (paste_id, network, reason, note, created_at, "
          "open, vote) VALUES (?, ?, ?, ?, ?, 1, ?)");
      insert.Bind(1, r.id.view()).Bind(2, r.network).Bind(3, r.reason).Bind(4, r.note);
      insert.Bind(5, r.at).Bind(6, int64_t{out.vote ? 1 : 0});
      if (Status s = Done(db, insert, "report"); !s.ok()) return s;
      if (sqlite3_changes(db.raw()) == 0) {
        out.vote = false;  // reported by this network already: nothing changes
        return Ok();
      }
      if (Status s = AddToCounts(db, 0, 1); !s.ok()) return s;
    }
    out.counted = true;
    Statement& upsert = db.Prepare(
        "INSERT INTO report_queue (paste_id, reports, notes, votes, reasons, latest_at, "
        "latest_note) VALUES (?, 1, ?, ?, ?, ?, ?) ON CONFLICT (paste_id) DO UPDATE SET "
        "reports = reports + 1, notes = notes + excluded.notes, votes = votes + excluded.votes, "
        "reasons = reasons | excluded.reasons, latest_at = MAX(latest_at, excluded.latest_at), "
        "latest_note = CASE WHEN excluded.notes = 1 AND excluded.latest_at >= latest_at "
        "THEN excluded.latest_note ELSE latest_note END RETURNING reports, votes");
    upsert.Bind(1, r.id.view()).Bind(2, int64_t{out.stored ? 1 : 0});
    upsert.Bind(3, int64_t{out.vote ? 1 : 0}).Bind(4, ReportReasonBit(r.reason)).Bind(5, r.at);
    upsert.Bind(6, out.stored ? std::string_view(r.note) : std::string_view(""));
    if (upsert.Step() != SQLITE_ROW) return StorageError(db, "report queue");
    out.open_reports = upsert.Int(0);
    out.votes = upsert.Int(1);
    upsert.Reset();
    if (in_queue == SQLITE_DONE) {
      if (Status s = AddToCounts(db, 1, 0); !s.ok()) return s;
    }
    if (policy.hide_threshold <= 0 || moderation != static_cast<int64_t>(Moderation::kNone) ||
        out.kept || out.votes < policy.hide_threshold) {
      return Ok();
    }
    if (!policy.may_withhold) {
      out.withhold_deferred = true;
      return Ok();
    }
    return Withhold(db, r, policy, out);
  }

  // The paste has enough votes: withholds it if `threshold` of its voters still have withholding
  // budget, charging them; voters found without budget stop voting, so no later report examines
  // them again.
  Status Withhold(Db& db, const AbuseReport& r, const ReportPolicy& policy, ReportOutcome& out) {
    Statement& voters = db.Prepare(
        "SELECT network FROM paste_reports WHERE paste_id = ? AND open = 1 AND vote = 1 LIMIT ?");
    voters.Bind(1, r.id.view()).Bind(2, policy.hide_threshold + kSpareVoters);
    std::vector<std::string> candidates;
    int rc;
    while ((rc = voters.Step()) == SQLITE_ROW) candidates.emplace_back(voters.Text(0));
    if (rc != SQLITE_DONE) return StorageError(db, "voters");
    voters.Reset();
    std::vector<std::string> chosen;
    int64_t spent = 0;
    for (std::string& network : candidates) {
      if (static_cast<int64_t>(chosen.size()) >= policy.hide_threshold) break;
      int64_t charged = 0;
      if (Status s = CountCharges(db, network, r.at, charged); !s.ok()) return s;
      if (charged < policy.withholds_per_network) {
        chosen.push_back(std::move(network));
        continue;
      }
      Statement& unvote =
          db.Prepare("UPDATE paste_reports SET vote = 0 WHERE paste_id = ? AND network = ?");
      unvote.Bind(1, r.id.view()).Bind(2, network);
      if (Status s = Done(db, unvote, "voters"); !s.ok()) return s;
      ++spent;
    }
    if (spent > 0) {
      Statement& recount =
          db.Prepare("UPDATE report_queue SET votes = votes - ? WHERE paste_id = ?");
      recount.Bind(1, spent).Bind(2, r.id.view());
      if (Status s = Done(db, recount, "voters"); !s.ok()) return s;
      out.votes -= spent;
    }
    if (static_cast<int64_t>(chosen.size()) < policy.hide_threshold) return Ok();
    Statement& charge = db.Prepare(
        "INSERT OR IGNORE INTO withhold_charges (network, at, paste_id) VALUES (?, ?, ?)");
    for (const std::string& network : chosen) {
      charge.Reset();
      charge.Bind(1, network).Bind(2, r.at).Bind(3, r.id.view());
      if (Status s = Done(db, charge, "charge"); !s.ok()) return s;
    }
    const SetModerationOp withhold{
        r.id, ModerationChange{Moderation::kWithheld,
                               fmt::format("reported from {} networks", chosen.size()), r.at}};
    if (Status s = Apply(db, withhold); !s.ok()) return s;
    out.withheld = true;
    out.charged = std::move(chosen);
    return Ok();
  }

  // Voters looked at beyond the threshold when some of them may have no budget left.
  static constexpr int64_t kSpareVoters = 64;

  static Status CountCharges(Db& db, std::string_view network, int64_t now, int64_t& charged) {
    Statement& s = db.Prepare("SELECT COUNT(*) FROM withhold_charges WHERE network = ? AND at > ?");
    s.Bind(1, network).Bind(2, now - kWithholdWindowSeconds);
    if (s.Step() != SQLITE_ROW) return StorageError(db, "charges");
    charged = s.Int(0);
    s.Reset();
    return Ok();
  }

  static Status ReadCounts(Db& db, ReportCounts& counts) {
    Statement& s = db.Prepare("SELECT pending, open_reports FROM report_counts WHERE slot = 0");
    const int rc = s.Step();
    if (rc == SQLITE_ROW) counts = ReportCounts{s.Int(0), s.Int(1)};
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return StorageError(db, "report counts");
    s.Reset();
    return Ok();
  }

  static Status AddToCounts(Db& db, int64_t pending, int64_t open_reports) {
    if (pending == 0 && open_reports == 0) return Ok();
    Statement& s = db.Prepare(
        "UPDATE report_counts SET pending = pending + ?, open_reports = open_reports + ? "
        "WHERE slot = 0");
    s.Bind(1, pending).Bind(2, open_reports);
    return Done(db, s, "report counts");
  }

  // Closes the paste's open reports (at `at`; those of a purged paste at their own time) and
  // takes it out of the queue. Its reports' rows stay until PurgeReports: a network that reported
  // it cannot report it again.
  static Status CloseReports(Db& db, const PasteId& id, std::optional<int64_t> at) {
    Statement& close = db.Prepare(
        "UPDATE paste_reports SET open = 0, closed_at = COALESCE(?, created_at) "
        "WHERE paste_id = ? AND open = 1");
    if (at) close.Bind(1, *at);
    close.Bind(2, id.view());
    if (Status s = Done(db, close, "close reports"); !s.ok()) return s;
    const int64_t closed = sqlite3_changes(db.raw());
    Statement& dequeue = db.Prepare("DELETE FROM report_queue WHERE paste_id = ?");
    dequeue.Bind(1, id.view());
    if (Status s = Done(db, dequeue, "close reports"); !s.ok()) return s;
    return AddToCounts(db, -sqlite3_changes(db.raw()), -closed);
  }

  Status Apply(Db& db, const SetModerationOp& op) {
    const ModerationChange& c = op.change;
    Statement& mark = db.Prepare(
        "UPDATE pastes SET moderation = ?1, moderation_reason = ?2, moderated_at = ?3, "
        "review_keep = CASE WHEN ?1 = 0 THEN ?4 ELSE review_keep END WHERE id = ?5");
    mark.Bind(1, static_cast<int64_t>(c.state)).Bind(2, c.reason).Bind(3, c.at);
    mark.Bind(4, int64_t{c.keep ? 1 : 0}).Bind(5, op.id.view());
    if (Status s = Done(db, mark, "moderate"); !s.ok()) return s;
    if (sqlite3_changes(db.raw()) == 0) return NoSuchPaste();
    if (c.state == Moderation::kWithheld) {
      Statement& enqueue = db.Prepare(
          "INSERT INTO outbox (paste_id, kind, attempts, enqueued_at, next_attempt_at) "
          "VALUES (?, 'purge_edge', 0, ?, ?)");
      enqueue.Bind(1, op.id.view()).Bind(2, c.at).Bind(3, c.at);
      return Done(db, enqueue, "enqueue purge");
    }
    return CloseReports(db, op.id, c.at);
  }

  // One batch of at most `limit` rows, so the sweep never holds the writer for long: the
  // committer's other ops (creates) wait behind it. Both deletes walk an index from its old end.
  Status Apply(Db& db, const PurgeReportsOp& op) {
    Statement& reports = db.Prepare(
        "DELETE FROM paste_reports WHERE (paste_id, network) IN (SELECT paste_id, network "
        "FROM paste_reports WHERE open = 0 AND closed_at <= ? LIMIT ?)");
    reports.Bind(1, op.closed_before).Bind(2, static_cast<int64_t>(op.limit));
    if (Status done = Done(db, reports, "purge reports"); !done.ok()) return done;
    size_t deleted = static_cast<size_t>(sqlite3_changes(db.raw()));
    if (deleted < op.limit) {
      Statement& charges = db.Prepare(
          "DELETE FROM withhold_charges WHERE (network, at, paste_id) IN (SELECT network, at, "
          "paste_id FROM withhold_charges WHERE at <= ? LIMIT ?)");
      charges.Bind(1, op.now - kWithholdWindowSeconds)
          .Bind(2, static_cast<int64_t>(op.limit - deleted));
      if (Status done = Done(db, charges, "purge charges"); !done.ok()) return done;
      deleted += static_cast<size_t>(sqlite3_changes(db.raw()));
    }
    *op.deleted = deleted;
    return Ok();
  }

  Status Apply(Db& db, const AddBlockOp& op) {
    Statement& s =
        db.Prepare("INSERT INTO blocks (prefix, reason, created_at, until) VALUES (?, ?, ?, ?)");
    s.Bind(1, op.block.prefix).Bind(2, op.block.reason).Bind(3, op.block.created_at);
    s.Bind(4, op.block.until);
    return Done(db, s, "block");
  }

  Status Apply(Db& db, const AddAuditOp& op) {
    Statement& s = db.Prepare("INSERT INTO audit (at, action, target, detail) VALUES (?, ?, ?, ?)");
    s.Bind(1, op.entry.at).Bind(2, op.entry.action).Bind(3, op.entry.target);
    s.Bind(4, op.entry.detail);
    return Done(db, s, "audit");
  }

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

// The bodies table of meta.db as a BlobStore: Get, Delete and List for the bodies that creates
// wrote with their rows, and Put for a body written apart (a create whose store decorators do not
// pass InsertWithBody on, as the fault injection's do not). Writes go through the metadata
// store's one writer.
class SqliteMetaBodies final : public BlobStore {
 public:
  explicit SqliteMetaBodies(SqliteMetaStore& meta) : meta_(meta) {}

  awaitable<Status> Put(PasteId id, std::shared_ptr<const std::string> body,
                        admission::Deadline deadline) override {
    return meta_.PutBody(id, std::move(body), deadline);
  }
  awaitable<Result<std::string>> Get(PasteId id, admission::Deadline deadline) override {
    return meta_.GetBody(id, deadline);
  }
  awaitable<Status> Delete(PasteId id, admission::Deadline) override {
    return meta_.DeleteBodies({id});
  }
  awaitable<Status> DeleteMany(std::vector<PasteId> ids, admission::Deadline) override {
    return meta_.DeleteBodies(std::move(ids));
  }
  // The purge that follows deletes each row with its inline body in one transaction (PurgeOp).
  awaitable<Status> DeleteManyBeforePurge(std::vector<PasteId>, admission::Deadline) override {
    co_return Ok();
  }
  awaitable<Result<std::vector<BlobInfo>>> List(std::string after, size_t limit,
                                                admission::Deadline deadline) override {
    return meta_.ListBodies(std::move(after), limit, deadline);
  }

 private:
  SqliteMetaStore& meta_;
};

}  // namespace

std::unique_ptr<MetaStore> MakeSqliteMetaStore(const std::filesystem::path& db_path,
                                               BlockingPools pools, size_t colocated_body_limit,
                                               MetricsRegistry* metrics) {
  return std::make_unique<SqliteMetaStore>(db_path, pools, colocated_body_limit, metrics);
}

std::unique_ptr<BlobStore> MakeSqliteMetaBodies(MetaStore& sqlite_meta) {
  auto* meta = dynamic_cast<SqliteMetaStore*>(&sqlite_meta);
  if (meta == nullptr) {
    throw std::invalid_argument("MakeSqliteMetaBodies: not a store of MakeSqliteMetaStore");
  }
  return std::make_unique<SqliteMetaBodies>(*meta);
}

}  // namespace sluice::store
