#include "sluice/store/sqlite_snapshot.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

namespace sluice::store {
namespace {

struct CloseDb {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
using DbHandle = std::unique_ptr<sqlite3, CloseDb>;

Error Failed(const std::string& what, sqlite3* db) {
  return MakeError(ErrorCode::kInternal, what + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
}

Result<DbHandle> OpenConnection(const std::filesystem::path& path, int flags) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  DbHandle db(raw);
  if (rc != SQLITE_OK) return Failed("cannot open " + path.string(), raw);
  return db;
}

int64_t ReadInteger(sqlite3* db, const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  int64_t value = 0;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    value = sqlite3_column_int64(stmt, 0);
  }
  sqlite3_finalize(stmt);
  return value;
}

// The copy is new and private until its rename: it needs no journal and no flush per step, only
// one flush of the whole file before it takes the final name, and of the folder after.
Result<bool> FlushAndRename(const std::filesystem::path& partial,
                            const std::filesystem::path& target) {
  const auto flush = [](const std::filesystem::path& path, int flags) -> int {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    if (fd < 0) return errno;
    const int err = ::fsync(fd) == 0 ? 0 : errno;
    ::close(fd);
    return err;
  };
  if (const int err = flush(partial, O_RDONLY); err != 0) {
    return MakeError(ErrorCode::kInternal,
                     "flushing " + partial.string() + ": " + std::strerror(err));
  }
  if (::rename(partial.c_str(), target.c_str()) != 0) {
    return MakeError(ErrorCode::kInternal,
                     "renaming " + partial.string() + ": " + std::strerror(errno));
  }
  const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : ".";
  if (const int err = flush(folder, O_RDONLY | O_DIRECTORY); err != 0) {
    return MakeError(ErrorCode::kInternal,
                     "flushing " + folder.string() + ": " + std::strerror(err));
  }
  return true;
}

}  // namespace

Result<SnapshotProgress> SnapshotSqliteDatabase(
    const std::filesystem::path& source, const std::filesystem::path& target, int pages_per_step,
    const std::function<bool(const SnapshotProgress&)>& after_step) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(source, ec)) {
    return MakeError(ErrorCode::kNotFound, source.string() + " does not exist");
  }
  // Read-write without create: a WAL database is read through its -shm, which a reader maps
  // writable; nothing here writes to the source.
  auto src = OpenConnection(source, SQLITE_OPEN_READWRITE);
  if (!src.ok()) return src.error();
  sqlite3* s = src->get();
  sqlite3_busy_timeout(s, 5000);
  // Pages read through a mapping rather than copied out by pread: a cold 3.5 GB meta.db copied in
  // 6.2 s instead of 9.3 s here (bench/results/backup.md). SQLite caps the size at what it was
  // built with (2 GB in Debian's), and reads the rest as before.
  sqlite3_exec(s, "PRAGMA mmap_size = 68719476736", nullptr, nullptr, nullptr);
  // The snapshot: a read transaction begun by the first read and held to the end. sqlite3_backup
  // copies inside the source's open transaction instead of one of its own per step, so no step
  // sees a later commit (which would make it start over).
  if (sqlite3_exec(s, "BEGIN; SELECT count(*) FROM sqlite_schema", nullptr, nullptr, nullptr) !=
      SQLITE_OK) {
    return Failed("reading " + source.string(), s);
  }

  const std::filesystem::path partial = target.string() + ".partial";
  std::filesystem::remove(partial, ec);
  auto dst = OpenConnection(partial, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (!dst.ok()) return dst.error();
  sqlite3* d = dst->get();
  sqlite3_exec(d, "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF", nullptr, nullptr, nullptr);

  sqlite3_backup* backup = sqlite3_backup_init(d, "main", s, "main");
  if (backup == nullptr) return Failed("copying " + source.string(), d);
  SnapshotProgress progress;
  progress.page_bytes = static_cast<uint64_t>(ReadInteger(s, "PRAGMA page_size"));
  int rc = SQLITE_OK;
  bool stopped = false;
  while (rc == SQLITE_OK) {
    rc = sqlite3_backup_step(backup, pages_per_step);
    if (rc != SQLITE_OK && rc != SQLITE_DONE) break;
    progress.pages_total = static_cast<uint64_t>(sqlite3_backup_pagecount(backup));
    progress.pages_copied =
        progress.pages_total - static_cast<uint64_t>(sqlite3_backup_remaining(backup));
    if (rc == SQLITE_OK && !after_step(progress)) {
      stopped = true;
      break;
    }
  }
  sqlite3_backup_finish(backup);
  sqlite3_exec(s, "COMMIT", nullptr, nullptr, nullptr);  // the end of a read: nothing to lose
  if (stopped || rc != SQLITE_DONE) {
    Error error = stopped ? MakeError(ErrorCode::kInternal, "stopped")
                          : Failed("copying " + source.string(), d);
    dst->reset();
    std::filesystem::remove(partial, ec);
    return error;
  }
  dst->reset();
  auto renamed = FlushAndRename(partial, target);
  if (!renamed.ok()) return renamed.error();
  return progress;
}

Status ForEachLiveRowBodiedOutside(const std::filesystem::path& path,
                                   const std::filesystem::path& bodies_db, int64_t now,
                                   const std::function<void(std::string_view id)>& visit) {
  auto db = OpenConnection(path, SQLITE_OPEN_READWRITE);
  if (!db.ok()) return db.error();
  std::error_code ec;
  const bool with_bodies_db = std::filesystem::is_regular_file(bodies_db, ec);
  if (with_bodies_db) {
    sqlite3_stmt* attach = nullptr;
    sqlite3_prepare_v2(db->get(), "ATTACH DATABASE ? AS side", -1, &attach, nullptr);
    sqlite3_bind_text(attach, 1, bodies_db.c_str(), -1, SQLITE_TRANSIENT);
    const int rc = sqlite3_step(attach);
    sqlite3_finalize(attach);
    if (rc != SQLITE_DONE) return Failed("attaching " + bodies_db.string(), db->get());
  }
  // A body in meta.db is in its row (migration 22) or named by the row's body_n (migration 8).
  // The other live rows are the partial index pastes_bodied_outside's, named so that the walk
  // cannot read every row's page instead (the planner prefers the expiry index otherwise). A
  // copy of a store its server has not migrated yet (a newer backup command beside an older
  // server) has neither the column nor the index, and is walked whole.
  sqlite3_stmt* probe = nullptr;
  sqlite3_prepare_v2(db->get(), "SELECT 1 FROM pragma_table_info('pastes') WHERE name = 'body'", -1,
                     &probe, nullptr);
  const bool bodies_in_rows = sqlite3_step(probe) == SQLITE_ROW;
  sqlite3_finalize(probe);
  const std::string sql =
      std::string(bodies_in_rows ? "SELECT id FROM pastes INDEXED BY pastes_bodied_outside WHERE "
                                   "deleted = 0 AND body IS NULL AND body_n IS NULL"
                                 : "SELECT id FROM pastes WHERE deleted = 0 AND body_n IS NULL") +
      " AND expires_at > ?" +
      (with_bodies_db ? " AND NOT EXISTS (SELECT 1 FROM side.bodies b WHERE b.id = pastes.id)"
                      : "");
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db->get(), sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    return Failed("reading " + path.string(), db->get());
  }
  sqlite3_bind_int64(stmt, 1, now);
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    visit(std::string_view(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)),
                           static_cast<size_t>(sqlite3_column_bytes(stmt, 0))));
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return Failed("reading " + path.string(), db->get());
  return Ok();
}

Result<std::vector<RowState>> ReadRowStates(const std::filesystem::path& path,
                                            const std::vector<std::string>& ids) {
  // Read-write without create, as the snapshot above opens a live database.
  auto db = OpenConnection(path, SQLITE_OPEN_READWRITE);
  if (!db.ok()) return db.error();
  sqlite3_busy_timeout(db->get(), 5000);
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_exec(db->get(), "BEGIN", nullptr, nullptr, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db->get(), "SELECT deleted FROM pastes WHERE id = ?", -1, &stmt,
                         nullptr) != SQLITE_OK) {
    return Failed("reading " + path.string(), db->get());
  }
  std::vector<RowState> states;
  states.reserve(ids.size());
  for (const std::string& id : ids) {
    sqlite3_reset(stmt);
    sqlite3_bind_text(stmt, 1, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
    const int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) {
      states.push_back(RowState::kAbsent);
    } else if (rc == SQLITE_ROW) {
      states.push_back(sqlite3_column_int(stmt, 0) != 0 ? RowState::kDeleted : RowState::kLive);
    } else {
      sqlite3_finalize(stmt);
      return Failed("reading " + path.string(), db->get());
    }
  }
  sqlite3_finalize(stmt);
  sqlite3_exec(db->get(), "COMMIT", nullptr, nullptr, nullptr);  // the end of a read
  return states;
}

Result<bool> CheckSqliteDatabase(const std::filesystem::path& path) {
  auto db = OpenConnection(path, SQLITE_OPEN_READONLY);
  if (!db.ok()) return db.error();
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db->get(), "PRAGMA quick_check(1)", -1, &stmt, nullptr) != SQLITE_OK) {
    return Failed("checking " + path.string(), db->get());
  }
  const int rc = sqlite3_step(stmt);
  std::string verdict =
      rc == SQLITE_ROW ? reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)) : "";
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW) return Failed("checking " + path.string(), db->get());
  if (verdict != "ok") return MakeError(ErrorCode::kInternal, verdict);
  return true;
}

}  // namespace sluice::store
