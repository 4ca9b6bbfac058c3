// SqliteMetaStore's reads (sqlite_meta_store.h): each on a reader connection from the pool that
// WAL lets run beside the writer, on the read or the cleanup threads, never the committer.
#include <algorithm>

#include "bodies_table.h"
#include "sluice/asio/completion.h"
#include "sqlite_meta_store.h"

namespace sluice::store::sqlite {

awaitable<Result<std::string>> SqliteMetaStore::GetBody(PasteId id, admission::Deadline deadline) {
  return asio_glue::RunBlocking(*pools_.read, [this, id, deadline]() -> Result<std::string> {
    return readers_.Read(deadline, [&](Db& db) -> Result<std::string> {
      // In the row, or (written before migration 22) by its number: a body and its codec are
      // written and cleared together, so a codec says a body was found. A row without a body_n
      // costs the join no lookup.
      Statement& s = db.Prepare(
          "SELECT COALESCE(p.body, b.body), COALESCE(p.body_codec, b.codec), p.size_bytes "
          "FROM pastes p LEFT JOIN inline_bodies b ON b.n = p.body_n WHERE p.id = ?");
      s.Bind(1, id.view());
      const int rc = s.Step();
      if (rc == SQLITE_ROW && s.OptionalInt(1)) {
        // The row's size bounds what a damaged header may make the decoder allocate.
        return DecodeBody(s.Blob(0), s.Int(1), static_cast<size_t>(s.Int(2)));
      }
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) return StorageError(db, "get body");
      return sqlite::ReadBodyRow(db, id, &StorageError);  // from before inline_bodies, or apart
    });
  });
}

// Only the bodies kept by id (`bodies`): a body in its row, or in `inline_bodies` by the row's
// number, goes in the transaction that removes its row, so it is never an orphan, and listing
// it would cost the reaper a row's page per paste for nothing.
awaitable<Result<std::vector<BlobInfo>>> SqliteMetaStore::ListBodies(std::string after,
                                                                     size_t limit,
                                                                     admission::Deadline deadline) {
  return asio_glue::RunBlocking(
      *pools_.cleanup,
      [this, after = std::move(after), limit, deadline]() -> Result<std::vector<BlobInfo>> {
        return readers_.Read(deadline, [&](Db& db) -> Result<std::vector<BlobInfo>> {
          return sqlite::ListBodyRows(db, after, limit, &StorageError);
        });
      });
}

awaitable<Result<PasteMeta>> SqliteMetaStore::Get(PasteId id, admission::Deadline deadline) {
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

awaitable<Result<std::vector<OutboxEntry>>> SqliteMetaStore::DueOutbox(
    int64_t now, size_t limit, admission::Deadline deadline) {
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

awaitable<Result<int64_t>> SqliteMetaStore::OldestOutboxAge(int64_t now,
                                                            admission::Deadline deadline) {
  return asio_glue::RunBlocking(*pools_.cleanup, [this, now, deadline]() -> Result<int64_t> {
    return readers_.Read(deadline, [&](Db& db) -> Result<int64_t> {
      Statement& s = db.Prepare("SELECT MIN(enqueued_at) FROM outbox");
      if (s.Step() != SQLITE_ROW) return StorageError(db, "outbox age");
      if (s.Text(0).empty()) return int64_t{0};
      return std::max<int64_t>(0, now - s.Int(0));
    });
  });
}

awaitable<Result<std::vector<PasteId>>> SqliteMetaStore::Expired(int64_t now, size_t limit,
                                                                 admission::Deadline deadline) {
  return asio_glue::RunBlocking(
      *pools_.cleanup, [this, now, limit, deadline]() -> Result<std::vector<PasteId>> {
        return readers_.Read(deadline, [&](Db& db) -> Result<std::vector<PasteId>> {
          Statement& s =
              db.Prepare("SELECT id FROM pastes WHERE expires_at <= ? ORDER BY expires_at LIMIT ?");
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

awaitable<Result<std::vector<PasteId>>> SqliteMetaStore::Existing(std::vector<PasteId> ids,
                                                                  admission::Deadline deadline) {
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

awaitable<Result<std::vector<PasteMeta>>> SqliteMetaStore::ListPastes(
    std::optional<PasteId> after, size_t limit, admission::Deadline deadline) {
  // On the cleanup threads: a migration's walk is background work, and must not hold a thread
  // that reads wait for.
  return asio_glue::RunBlocking(
      *pools_.cleanup, [this, after, limit, deadline]() -> Result<std::vector<PasteMeta>> {
        return readers_.Read(deadline, [&](Db& db) -> Result<std::vector<PasteMeta>> {
          // The id last, so RowToMeta reads the columns where Get puts them. A space is below
          // every base62 id (an empty text would be bound as NULL, which nothing is above).
          Statement& s = db.Prepare("SELECT " SLUICE_ROW_COLUMNS
                                    ", id FROM pastes WHERE id > ? ORDER BY id LIMIT ?");
          s.Bind(1, after ? after->view() : std::string_view(" "));
          s.Bind(2, static_cast<int64_t>(limit));
          std::vector<PasteMeta> out;
          int rc;
          while ((rc = s.Step()) == SQLITE_ROW) {
            if (auto id = PasteId::Parse(s.Text(12))) out.push_back(RowToMeta(*id, s));
          }
          if (rc != SQLITE_DONE) return StorageError(db, "list pastes");
          return out;
        });
      });
}

awaitable<Result<uint64_t>> SqliteMetaStore::LiveBytes(admission::Deadline deadline) {
  return asio_glue::RunBlocking(*pools_.cleanup, [this, deadline]() -> Result<uint64_t> {
    return readers_.Read(deadline, [&](Db& db) -> Result<uint64_t> {
      Statement& s = db.Prepare("SELECT COALESCE(SUM(live_bytes), 0) FROM storage_usage");
      if (s.Step() != SQLITE_ROW) return StorageError(db, "live bytes");
      return static_cast<uint64_t>(std::max<int64_t>(0, s.Int(0)));
    });
  });
}

}  // namespace sluice::store::sqlite
