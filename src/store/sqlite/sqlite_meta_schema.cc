// The metadata schema of meta.db, and its migrations (MigrateMetaSchema, sqlite_meta_store.h).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include "sluice/admission/network.h"
#include "sqlite_meta_store.h"

namespace sluice::store::sqlite {
namespace {

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
    // 15: the content blocklist (docs/moderation.md, "Takedowns that stick"): digests of bodies
    // creates are refused, and one row of counts whose version every change bumps, so that a
    // process reads the list again only when it changed.
    R"sql(
    CREATE TABLE blocked_contents (
      sha256 BLOB PRIMARY KEY,
      added_at INTEGER NOT NULL,
      source TEXT NOT NULL,
      reason TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE blocked_contents_state (
      slot INTEGER PRIMARY KEY,
      version INTEGER NOT NULL,
      entries INTEGER NOT NULL
    );
    INSERT INTO blocked_contents_state (slot, version, entries) VALUES (0, 0, 0);
    )sql",
    // 16: the takedown clock (docs/moderation.md): each queue entry's arrival, the time of the
    // report that queued it, indexed so that the oldest open entry is the index's first entry, one
    // probe however long the queue. Entries from before take their oldest open report's time
    // (their newest, when none of their reports was stored).
    R"sql(
    ALTER TABLE report_queue ADD COLUMN first_at INTEGER NOT NULL DEFAULT 0;
    UPDATE report_queue SET first_at = COALESCE((SELECT MIN(r.created_at) FROM paste_reports r
        WHERE r.paste_id = report_queue.paste_id AND r.open = 1), latest_at);
    CREATE INDEX report_queue_by_arrival ON report_queue (first_at);
    )sql",
    // 17: creator tokens (docs/admission.md, "Creator tokens"): the SHA-256 of each secret, never
    // the
    // secret, the token's own budget, and one row whose version every add and revoke bumps, so
    // that each process reads the tokens again only when they changed.
    R"sql(
    CREATE TABLE creator_tokens (
      id TEXT PRIMARY KEY,
      label TEXT NOT NULL,
      secret_sha256 BLOB NOT NULL UNIQUE,
      rate_milli INTEGER NOT NULL,
      burst INTEGER NOT NULL,
      bytes_rate INTEGER NOT NULL,
      bytes_burst INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      created_at INTEGER NOT NULL,
      revoked_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE creator_tokens_state (
      slot INTEGER PRIMARY KEY,
      version INTEGER NOT NULL
    );
    INSERT INTO creator_tokens_state (slot, version) VALUES (0, 0);
    )sql",
    // 18: the transparency report's counters (include/sluice/store/transparency.h): one row per
    // month, kind and label, added to by the transaction of the action each counts. A report
    // reads a range of the primary key from its first month on.
    R"sql(
    CREATE TABLE transparency_counts (
      month TEXT NOT NULL,
      kind TEXT NOT NULL,
      label TEXT NOT NULL,
      n INTEGER NOT NULL,
      PRIMARY KEY (month, kind, label)
    ) WITHOUT ROWID;
    )sql",
    // 19: notices (docs/moderation.md, "Notices"): unique by sender and reference; each named
    // paste a row with what the notice did to it, open until the operator acts on the paste. The
    // partial index on the arrival of open notices is the takedown clock's kind="notice": the
    // oldest open notice is one probe of it.
    R"sql(
    CREATE TABLE notices (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      sender TEXT NOT NULL,
      reference TEXT NOT NULL,
      category TEXT NOT NULL,
      deadline_at INTEGER NOT NULL,  -- 0: the sender gave none
      received_at INTEGER NOT NULL,
      open_pastes INTEGER NOT NULL,
      UNIQUE (sender, reference)
    );
    CREATE INDEX notices_open_by_arrival ON notices (received_at, id) WHERE open_pastes > 0;
    CREATE TABLE notice_pastes (
      notice_id INTEGER NOT NULL,
      paste_id TEXT NOT NULL,
      outcome TEXT NOT NULL,
      open INTEGER NOT NULL,
      PRIMARY KEY (notice_id, paste_id)
    );
    CREATE INDEX notice_pastes_open_by_paste ON notice_pastes (paste_id) WHERE open = 1;
    )sql",
    // 20: the closed notices in arrival order, so a store that holds max_notices makes room for a
    // new one by deleting the oldest closed notice (one probe), and refuses only when every
    // stored notice is still open (MetaStore::AddNotice).
    R"sql(
    CREATE INDEX notices_closed ON notices (id) WHERE open_pastes = 0;
    )sql",
    // 21: the pastes in creation order (docs/architecture.md, "Rows in creation order"). Keyed
    // by the random id (WITHOUT ROWID), each create wrote its row into a random leaf of the table
    // of every row, and a cold read walked a tree whose leaves are the whole table: past the page
    // cache both cost the disk (bench/results/growth.md). A rowid table appends each row to its
    // last leaf, and the unique index on the id (about 20 bytes an entry against about 130 for a
    // row) is the only tree that takes a random leaf per create, small enough to stay cached. The
    // id itself is unchanged. The rows move in one statement, sorted by creation time; the indexes
    // are built after the copy (one sort each, not a random insert per row). The whole step is one
    // transaction (MigrateMetaSchema): a kill leaves the old table, and the next start does it
    // again (tests/integration/test_data_dir_upgrade.py, bench/results/ordered-layout.md).
    R"sql(
    CREATE TABLE pastes_ordered (
      id TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      size_bytes INTEGER NOT NULL,
      token_hash BLOB NOT NULL,
      deleted INTEGER NOT NULL DEFAULT 0,
      body_sha256 BLOB,
      moderation INTEGER NOT NULL DEFAULT 0,
      moderation_reason TEXT,
      moderated_at INTEGER,
      burn INTEGER NOT NULL DEFAULT 0,
      body_n INTEGER,
      creator_network INTEGER,
      review_keep INTEGER NOT NULL DEFAULT 0,
      encrypted INTEGER NOT NULL DEFAULT 0,
      views_left INTEGER NOT NULL DEFAULT 1,
      parent TEXT
    );
    INSERT INTO pastes_ordered (id, created_at, expires_at, size_bytes, token_hash, deleted,
        body_sha256, moderation, moderation_reason, moderated_at, burn, body_n, creator_network,
        review_keep, encrypted, views_left, parent)
      SELECT id, created_at, expires_at, size_bytes, token_hash, deleted, body_sha256, moderation,
             moderation_reason, moderated_at, burn, body_n, creator_network, review_keep,
             encrypted, views_left, parent
      FROM pastes ORDER BY created_at, body_n, id;
    DROP TABLE pastes;
    ALTER TABLE pastes_ordered RENAME TO pastes;
    CREATE UNIQUE INDEX pastes_by_id ON pastes (id);
    CREATE INDEX pastes_by_expiry ON pastes (expires_at, body_n);
    )sql",
    // 22: a small body in its own row (`body`, `body_codec`), no longer a row of `inline_bodies`.
    // Past the page cache a read of a paste cost its row's page, its body's page in the other
    // table and that table's interior pages: 2.6-3.0 disk reads an answer at 10 million
    // (bench/results/growth.md). In the row, one leaf holds both (a body over about 4 KB goes on
    // in overflow pages, as it did in `inline_bodies`); the body's columns come last, so the row's
    // other columns stay on that leaf. Adding columns rewrites nothing: the bodies written before
    // stay in `inline_bodies` (found by `body_n`) until their pastes are purged.
    //
    // `pastes_bodied_outside` lists the live rows whose bodies are neither here nor in
    // `inline_bodies` (files, or `bodies` by id) for the backup's reconciliation
    // (sqlite_snapshot.cc), which would otherwise read every row's page, bodies and all. A row
    // enters it only with its body elsewhere, so a create of a small body writes none of it.
    R"sql(
    ALTER TABLE pastes ADD COLUMN body BLOB;
    ALTER TABLE pastes ADD COLUMN body_codec INTEGER;
    CREATE INDEX pastes_bodied_outside ON pastes (id)
      WHERE deleted = 0 AND body IS NULL AND body_n IS NULL;
    )sql",
};

// The first migration whose time grows with the pastes stored: announced with the rows it moves
// before it starts, and timed, so that an operator watching a start that pauses knows why. Those
// after it that read every row (22 builds an index) report their progress too.
constexpr int64_t kOrderedPastes = 21;

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

// A line every 10 s while a long migration runs (10 million pastes take over a minute), so that
// a start that is busy is not taken for one that hangs. The writer has no deadline at start, so
// its progress handler is free (Db::SetDeadline).
class MigrationProgress {
 public:
  MigrationProgress(Db& db, int64_t version, std::chrono::steady_clock::time_point began)
      : db_(db), version_(version), began_(began), next_(began + kEvery) {
    sqlite3_progress_handler(db_.raw(), 100000, &MigrationProgress::OnProgress, this);
  }
  ~MigrationProgress() { sqlite3_progress_handler(db_.raw(), 0, nullptr, nullptr); }
  MigrationProgress(const MigrationProgress&) = delete;
  MigrationProgress& operator=(const MigrationProgress&) = delete;

 private:
  static constexpr std::chrono::seconds kEvery{10};

  static int OnProgress(void* self) {
    auto* p = static_cast<MigrationProgress*>(self);
    const auto now = std::chrono::steady_clock::now();
    if (now >= p->next_) {
      p->next_ = now + kEvery;
      spdlog::info("metadata schema: migration {} still running, {:.0f} s so far", p->version_,
                   std::chrono::duration<double>(now - p->began_).count());
    }
    return 0;
  }

  Db& db_;
  const int64_t version_;
  const std::chrono::steady_clock::time_point began_;
  std::chrono::steady_clock::time_point next_;
};

}  // namespace

void MigrateMetaSchema(Db& db) {
  sqlite3_create_function_v2(db.raw(), "sluice_report_network", 1,
                             SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr, &ReportNetworkOfKey,
                             nullptr, nullptr, nullptr);
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
    const auto began = std::chrono::steady_clock::now();
    std::optional<MigrationProgress> progress;
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
      if (v + 1 == kOrderedPastes) {
        // Once, at start: a scan of the smallest index, not a statement of the running store
        // (which tests/integration/test_query_plans.py holds to an index).
        sqlite3_stmt* count = nullptr;
        sqlite3_prepare_v2(db.raw(), "SELECT count(*) FROM pastes", -1, &count, nullptr);
        const int64_t rows = sqlite3_step(count) == SQLITE_ROW ? sqlite3_column_int64(count, 0) : 0;
        sqlite3_finalize(count);
        if (rows > 0) {
          spdlog::info(
              "metadata schema: migration {} puts {} pastes in creation order, in one transaction "
              "(7-11 s per million on a 2-core VM: bench/results/ordered-layout.md); stopped "
              "before its end, it leaves the store as it was and runs again at the next start",
              v + 1, rows);
        }
      }
      if (v + 1 >= kOrderedPastes) progress.emplace(db, v + 1, began);
      db.Exec(kMigrations[v]);
      progress.reset();
      db.Exec(fmt::format("INSERT INTO schema_version (version) VALUES ({})", v + 1).c_str());
      db.Exec("COMMIT");
    } catch (...) {
      db.TryExec("ROLLBACK");
      throw;
    }
    spdlog::info("metadata schema migrated to version {} in {:.2f} s", v + 1,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  }
}

}  // namespace sluice::store::sqlite
