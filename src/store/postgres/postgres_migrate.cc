// Schema migrations of the PostgreSQL store. Blocking libpq on purpose: they run at start-up and
// from `sluice migrate`, before any event loop exists.
#include <fmt/format.h>
#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <iterator>
#include <memory>

#include "pg_connection.h"
#include "sluice/store/postgres.h"

namespace sluice::store {
namespace {

// Applied once each, in order, each in its own transaction. Never edit one that has shipped: add
// the next. Same rows and meaning as the SQLite store's schema (src/store/sqlite).
constexpr const char* kMigrations[] = {
    // 1: pastes, their tombstones, and the outbox of body removals owed after a delete.
    R"sql(
    CREATE TABLE pastes (
      id text PRIMARY KEY,
      created_at bigint NOT NULL,
      expires_at bigint NOT NULL,
      size_bytes bigint NOT NULL,
      token_hash bytea NOT NULL,
      deleted boolean NOT NULL DEFAULT false
    );
    CREATE INDEX pastes_by_expiry ON pastes (expires_at);
    CREATE TABLE outbox (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      paste_id text NOT NULL,
      kind text NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      enqueued_at bigint NOT NULL,
      next_attempt_at bigint NOT NULL
    );
    CREATE INDEX outbox_by_due ON outbox (next_attempt_at);
    CREATE INDEX outbox_by_paste ON outbox (paste_id);
    )sql",
    // 2: the SHA-256 of each body, recorded at create and checked on every read. Rows from before
    // have none (NULL) and are checked by size alone. Adding a nullable column rewrites nothing.
    R"sql(
    ALTER TABLE pastes ADD COLUMN IF NOT EXISTS body_sha256 bytea;
    )sql",
    // 3: moderation (README.md, "Moderation"): a paste's state with its reason and time, abuse
    // reports (one per client key and paste), blocked clients and the audit trail.
    R"sql(
    ALTER TABLE pastes ADD COLUMN IF NOT EXISTS moderation smallint NOT NULL DEFAULT 0;
    ALTER TABLE pastes ADD COLUMN IF NOT EXISTS moderation_reason text;
    ALTER TABLE pastes ADD COLUMN IF NOT EXISTS moderated_at bigint;
    CREATE TABLE IF NOT EXISTS reports (
      paste_id text NOT NULL,
      client_key text NOT NULL,
      reason text NOT NULL,
      note text NOT NULL,
      created_at bigint NOT NULL,
      open boolean NOT NULL DEFAULT true,
      PRIMARY KEY (paste_id, client_key)
    );
    CREATE INDEX IF NOT EXISTS reports_open ON reports (created_at) WHERE open;
    CREATE TABLE IF NOT EXISTS blocks (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      prefix text NOT NULL,
      reason text NOT NULL,
      created_at bigint NOT NULL,
      until bigint NOT NULL
    );
    CREATE TABLE IF NOT EXISTS audit (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      at bigint NOT NULL,
      action text NOT NULL,
      target text NOT NULL,
      detail text NOT NULL
    );
    )sql",
    // 4: burn after reading (MetaStore::Claim). A constant default rewrites nothing.
    R"sql(
    ALTER TABLE pastes ADD COLUMN IF NOT EXISTS burn boolean NOT NULL DEFAULT false;
    )sql",
    // 5: storage_usage, the live bytes (MetaStore::LiveBytes), kept by every statement that adds
    // or removes a live row, in sixteen slots chosen by the id's last character: one counter row
    // would serialise every insert of every process on its row lock; sixteen spread them, and a
    // read sums sixteen rows.
    R"sql(
    CREATE TABLE IF NOT EXISTS storage_usage (
      slot smallint PRIMARY KEY,
      live_bytes bigint NOT NULL
    );
    INSERT INTO storage_usage (slot, live_bytes)
      SELECT s, 0 FROM generate_series(0, 15) AS s ON CONFLICT (slot) DO NOTHING;
    UPDATE storage_usage
      SET live_bytes = (SELECT COALESCE(SUM(size_bytes), 0) FROM pastes WHERE NOT deleted)
      WHERE slot = 0;
    )sql",
    // 6: when a report was closed by its review, so handled reports can be deleted after
    // report_retention (MetaStore::PurgeReports). Reports closed before this step take their
    // paste's last review time, or their own when the paste is gone. A nullable column rewrites
    // nothing.
    R"sql(
    ALTER TABLE reports ADD COLUMN IF NOT EXISTS closed_at bigint;
    UPDATE reports r SET closed_at = COALESCE(
        (SELECT p.moderated_at FROM pastes p WHERE p.id = r.paste_id), r.created_at)
      WHERE NOT r.open AND r.closed_at IS NULL;
    CREATE INDEX IF NOT EXISTS reports_closed ON reports (closed_at) WHERE NOT open;
    )sql",
    // 7: storage reservations (MetaStore::ReserveStorage): the bytes each admitted create holds
    // against the quota until its insert takes them as live (in the insert's statement), it gives
    // them back, or its expiry passes (a crashed process's; bounded by the body's time to arrive
    // plus the create's budget). sluice_reserve_storage decides one under a transaction-scoped
    // advisory lock, so reservations from every process queue on it and each one's sums, read by
    // a statement that starts after the lock is held, see every reservation granted before it;
    // inserts, deletes and purges never take the lock, and only move bytes from reserved to live
    // or free them. The table holds at most the creates in flight across the tier plus what
    // crashed processes left until it expires, so the sums are bounded by the create slots, not
    // by the data. A reservation needs no flush before its answer (synchronous_commit off for its
    // transaction alone): lost in a crash of the server, it only lets the creates then in flight
    // insert unreserved, once, and meanwhile it holds the lock for microseconds, not for a flush
    // (or a synchronous standby's round trip). Self-contained: it names only storage_usage.
    R"sql(
    CREATE TABLE IF NOT EXISTS storage_reservations (
      id text PRIMARY KEY,
      bytes bigint NOT NULL,
      expires_at bigint NOT NULL
    );
    CREATE INDEX IF NOT EXISTS storage_reservations_by_expiry
      ON storage_reservations (expires_at);
    CREATE OR REPLACE FUNCTION sluice_reserve_storage(
        p_id text, p_bytes bigint, p_quota bigint, p_now bigint, p_expires_at bigint,
        OUT granted boolean, OUT in_use bigint)
      LANGUAGE plpgsql VOLATILE AS $fn$
    BEGIN
      -- "sluiceQ" in ASCII; the migrations take "sluice".
      PERFORM pg_advisory_xact_lock(32488873856820561);
      PERFORM set_config('synchronous_commit', 'off', true);
      DELETE FROM storage_reservations WHERE expires_at <= p_now;
      -- One statement, one snapshot: an insert that commits meanwhile moves its bytes from one
      -- sum to the other, never out of both.
      SELECT (SELECT COALESCE(SUM(live_bytes), 0) FROM storage_usage)
           + (SELECT COALESCE(SUM(bytes), 0) FROM storage_reservations)
        INTO in_use;
      granted := in_use + p_bytes <= p_quota;
      IF granted THEN
        INSERT INTO storage_reservations (id, bytes, expires_at)
          VALUES (p_id, p_bytes, p_expires_at);
      END IF;
    END
    $fn$;
    )sql",
};

// One key for every sluice process migrating this database: "sluice" in ASCII.
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(126879289336677)";

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};

std::string Trimmed(const char* message) {
  std::string s = message ? message : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Runs `sql` (several statements allowed); returns its result or the server's message.
Result<pg::PgResult> Run(PGconn* conn, const char* sql) {
  pg::PgResult r(PQexec(conn, sql));
  const ExecStatusType status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return r;
  return MakeError(ErrorCode::kInternal,
                   fmt::format("postgres migration: {}: {}", sql,
                               Trimmed(r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn))),
                   "migration_failed");
}

}  // namespace

int PostgresSchemaVersion() { return static_cast<int>(std::size(kMigrations)); }

Status MigratePostgres(const std::string& url, int* applied) {
  if (applied) *applied = 0;
  const char* keywords[] = {"dbname", "application_name", "connect_timeout", nullptr};
  const char* values[] = {url.c_str(), "sluice-migrate", "10", nullptr};
  std::unique_ptr<PGconn, ConnDeleter> conn(PQconnectdbParams(keywords, values, 1));
  if (!conn || PQstatus(conn.get()) != CONNECTION_OK) {
    return pg::RefusedError(conn ? Trimmed(PQerrorMessage(conn.get())) : "out of memory");
  }
  pg::PgResult(PQexec(conn.get(), "SET client_min_messages = warning"));  // quiet IF NOT EXISTS
  const int known = PostgresSchemaVersion();
  for (;;) {
    // Under the lock, read the version and apply the next step, all in one transaction: a process
    // that waited for the lock sees the steps another one committed, and skips them.
    auto step = [&]() -> Result<bool> {
      for (const char* sql :
           {"BEGIN", kMigrationLock,
            "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, "
            "applied_at timestamptz NOT NULL DEFAULT now())"}) {
        if (auto r = Run(conn.get(), sql); !r.ok()) return r.error();
      }
      auto current = Run(conn.get(), "SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
      if (!current.ok()) return current.error();
      const int version = std::atoi(PQgetvalue(current->get(), 0, 0));
      if (version > known) {
        return MakeError(ErrorCode::kInternal,
                         fmt::format("metadata schema version {} is newer than this binary knows "
                                     "({}); upgrade the binary",
                                     version, known),
                         "schema_too_new");
      }
      if (version == known) {
        if (auto r = Run(conn.get(), "COMMIT"); !r.ok()) return r.error();
        return false;
      }
      if (auto r = Run(conn.get(), kMigrations[version]); !r.ok()) return r.error();
      const std::string stamp =
          fmt::format("INSERT INTO schema_migrations (version) VALUES ({})", version + 1);
      if (auto r = Run(conn.get(), stamp.c_str()); !r.ok()) return r.error();
      if (auto r = Run(conn.get(), "COMMIT"); !r.ok()) return r.error();
      spdlog::info("postgres metadata schema migrated to version {}", version + 1);
      return true;
    };
    Result<bool> more = step();
    if (!more.ok()) {
      pg::PgResult(PQexec(conn.get(), "ROLLBACK"));
      if (PQstatus(conn.get()) != CONNECTION_OK) {
        Error e = more.error();
        e.code = ErrorCode::kUnavailable;
        return e;
      }
      return more.error();
    }
    if (!*more) return Ok();
    if (applied) ++*applied;
  }
}

}  // namespace sluice::store
