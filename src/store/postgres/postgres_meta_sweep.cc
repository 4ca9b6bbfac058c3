// PgMetaStore's background statements (postgres_meta_store.h): the outbox, the janitor's lease,
// the expiry sweep and the purge, on the cleanup pool.
#include "pg_rows.h"
#include "postgres_meta_store.h"

namespace sluice::store::pg {

awaitable<Result<std::vector<OutboxEntry>>> PgMetaStore::DueOutbox(int64_t now, size_t limit,
                                                                   admission::Deadline deadline) {
  return Query<std::vector<OutboxEntry>>(
      PostgresPurpose::kCleanup, deadline,
      "SELECT seq, paste_id, attempts, next_attempt_at, kind FROM outbox "
      "WHERE next_attempt_at <= $1 ORDER BY next_attempt_at, seq LIMIT $2",
      {P(now), P(static_cast<int64_t>(limit))},
      [](const PGresult* r) -> Result<std::vector<OutboxEntry>> {
        std::vector<OutboxEntry> out;
        for (int i = 0; i < PQntuples(r); ++i) {
          auto id = PasteId::Parse(Text(r, i, 1));
          if (!id) continue;  // unreachable: only parsed ids are ever written
          const auto kind = Text(r, i, 4) == "purge_edge" ? OutboxEntry::Kind::kPurgeEdge
                                                          : OutboxEntry::Kind::kDeleteBody;
          out.push_back(
              OutboxEntry{Int(r, i, 0), *id, kind, static_cast<int>(Int(r, i, 2)), Int(r, i, 3)});
        }
        return out;
      });
}

awaitable<Status> PgMetaStore::FinishOutbox(int64_t seq, admission::Deadline deadline) {
  return Command(PostgresPurpose::kCleanup, deadline, "DELETE FROM outbox WHERE seq = $1",
                 {P(seq)});
}

awaitable<Status> PgMetaStore::RetryOutboxLater(int64_t seq, int64_t next_attempt_at,
                                                admission::Deadline deadline) {
  return Command(PostgresPurpose::kCleanup, deadline,
                 "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = $1 WHERE seq = $2",
                 {P(next_attempt_at), P(seq)});
}

awaitable<Result<int64_t>> PgMetaStore::OldestOutboxAge(int64_t now, admission::Deadline deadline) {
  return Query<int64_t>(PostgresPurpose::kCleanup, deadline, "SELECT MIN(enqueued_at) FROM outbox",
                        {}, [now](const PGresult* r) -> Result<int64_t> {
                          if (PQntuples(r) == 0 || PQgetisnull(r, 0, 0)) return int64_t{0};
                          return std::max<int64_t>(0, now - Int(r, 0, 0));
                        });
}

// Dated by the server's clock, not `now`: the processes' clocks may differ, the database's is the
// one they share. Taken when absent, lapsed or already the holder's; one statement, so two
// processes asking at once cannot both get it.
awaitable<Result<bool>> PgMetaStore::HoldLease(std::string name, std::string holder, int64_t,
                                               int64_t seconds, admission::Deadline deadline) {
  return Query<bool>(
      PostgresPurpose::kCleanup, deadline,
      "WITH clock AS (SELECT extract(epoch FROM clock_timestamp())::bigint AS now) "
      "INSERT INTO leases AS l (name, holder, until) SELECT $1, $2, now + $3 FROM clock "
      "ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until "
      "WHERE l.holder = EXCLUDED.holder OR l.until <= (SELECT now FROM clock) RETURNING 1",
      {P(name), P(holder), P(seconds)},
      [](const PGresult* r) -> Result<bool> { return PQntuples(r) == 1; });
}

awaitable<Result<std::vector<PasteId>>> PgMetaStore::Expired(int64_t now, size_t limit,
                                                             admission::Deadline deadline) {
  return Query<std::vector<PasteId>>(
      PostgresPurpose::kCleanup, deadline,
      "SELECT id FROM pastes WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2",
      {P(now), P(static_cast<int64_t>(limit))},
      [](const PGresult* r) -> Result<std::vector<PasteId>> {
        std::vector<PasteId> out;
        for (int i = 0; i < PQntuples(r); ++i) {
          if (auto id = PasteId::Parse(Text(r, i, 0))) out.push_back(*id);
        }
        return out;
      });
}

awaitable<Status> PgMetaStore::Purge(std::vector<PasteId> ids, admission::Deadline deadline) {
  // The rows, their outbox entries, live bytes, open reports and queue rows in one function
  // (src/store/postgres/postgres_migrate.cc, migration 8), and their open notice rows in another
  // (migration 18), in one statement: one transaction.
  return Command(PostgresPurpose::kCleanup, deadline,
                 "SELECT sluice_purge_pastes($1::text[]), sluice_close_purged_notices($1::text[])",
                 {IdArray(ids)});
}

awaitable<Result<std::vector<PasteId>>> PgMetaStore::Existing(std::vector<PasteId> ids,
                                                              admission::Deadline deadline) {
  Param array = IdArray(ids);
  return Query<std::vector<PasteId>>(
      PostgresPurpose::kCleanup, deadline, "SELECT id FROM pastes WHERE id = ANY ($1::text[])",
      {std::move(array)},
      [ids = std::move(ids)](const PGresult* r) -> Result<std::vector<PasteId>> {
        std::set<std::string_view> found;
        for (int i = 0; i < PQntuples(r); ++i) found.insert(Text(r, i, 0));
        std::vector<PasteId> out;
        for (const PasteId& id : ids) {
          if (found.contains(id.view())) out.push_back(id);
        }
        return out;
      });
}

awaitable<Result<std::vector<PasteMeta>>> PgMetaStore::ListPastes(std::optional<PasteId> after,
                                                                  size_t limit,
                                                                  admission::Deadline deadline) {
  // A range of the primary key's index, in its collation's order: the cursor compares as the
  // index does, so a walk neither skips nor repeats, whatever that order is. The id goes last,
  // so RowFrom reads the columns where Get puts them. The empty string is below every id.
  return Query<std::vector<PasteMeta>>(
      PostgresPurpose::kCleanup, deadline,
      "SELECT " SLUICE_ROW_COLUMNS ", id FROM pastes WHERE id > $1 ORDER BY id LIMIT $2::integer",
      {P(after ? after->view() : std::string_view()), P(static_cast<int64_t>(limit))},
      [](const PGresult* r) -> Result<std::vector<PasteMeta>> {
        std::vector<PasteMeta> out;
        for (int i = 0; i < PQntuples(r); ++i) {
          if (auto id = PasteId::Parse(Text(r, i, 12))) out.push_back(RowFrom(*id, r, i));
        }
        return out;
      });
}

}  // namespace sluice::store::pg
