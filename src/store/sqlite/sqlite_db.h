// A minimal RAII layer over the SQLite C API: one connection with its prepared statements cached.
// Not thread-safe: one thread uses a connection at a time.
#pragma once

#include <sqlite3.h>

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "sluice/common/clock.h"
#include "sluice/common/deadline.h"
#include "sluice/common/result.h"

namespace sluice::store::sqlite {

/// A prepared statement, reset before each use by Db::Prepare.
class Statement {
 public:
  explicit Statement(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int index, int64_t value) {
    sqlite3_bind_int64(stmt_, index, value);
    return *this;
  }
  Statement& Bind(int index, std::string_view text) {
    sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& Bind(int index, std::span<const unsigned char> blob) {
    sqlite3_bind_blob(stmt_, index, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
    return *this;
  }
  /// Binds without a copy: `bytes` must outlive the statement's next Reset (Db::Prepare and
  /// Db::ResetAll reset it). For a create's body, which its op owns until the batch is done.
  Statement& BindUnowned(int index, std::string_view bytes) {
    sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_STATIC);
    return *this;
  }
  /// Returns SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(stmt_); }

  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  std::optional<int64_t> OptionalInt(int column) const {
    if (sqlite3_column_type(stmt_, column) == SQLITE_NULL) return std::nullopt;
    return Int(column);
  }
  std::string_view Text(int column) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
    return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
             : std::string_view();
  }
  std::span<const unsigned char> Blob(int column) const {
    const auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(stmt_, column));
    return {p, static_cast<size_t>(sqlite3_column_bytes(stmt_, column))};
  }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

 private:
  sqlite3_stmt* stmt_;
};

/// One open connection. Throws std::runtime_error from Open and Exec only (start-up paths).
class Db {
 public:
  /// `vfs`: a registered VFS's name, or null for SQLite's default.
  static std::unique_ptr<Db> Open(const std::filesystem::path& path, const char* vfs = nullptr);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  /// Runs statements that return no rows; throws on failure (schema and pragmas at start-up).
  void Exec(const char* sql);
  /// Runs a statement that returns no rows; returns the SQLite result code.
  int TryExec(const char* sql);
  /// Returns the cached statement for `sql`, reset and with bindings cleared.
  Statement& Prepare(const char* sql);
  /// Resets every cached statement. A statement left mid-result keeps its read transaction, and in
  /// WAL mode that pins the connection to an old snapshot: the next query would miss newer commits.
  void ResetAll() {
    for (auto& [sql, stmt] : statements_) stmt->Reset();
  }
  std::string LastError() const { return sqlite3_errmsg(db_); }
  sqlite3* raw() { return db_; }

  /// Interrupts any statement of this connection still running at `at` (on SystemClock): its
  /// step returns SQLITE_INTERRUPT and its read transaction ends, so a read abandoned by its caller
  /// stops costing its thread and stops holding the WAL back. Until ClearDeadline. For readers:
  /// an interrupted write would roll back the batch it is part of.
  void SetDeadline(TimePoint at);
  /// Stops watching the time; interrupted() is false again.
  void ClearDeadline();
  /// True if the deadline interrupted a statement since SetDeadline.
  bool interrupted() const { return interrupted_; }

 private:
  explicit Db(sqlite3* db) : db_(db) {}
  static int OnProgress(void* self);
  sqlite3* db_;
  std::unordered_map<const char*, std::unique_ptr<Statement>> statements_;
  TimePoint deadline_ = TimePoint::max();
  bool interrupted_ = false;
};

/// The reader connections of one database, lent to one read at a time and opened on demand, and
/// the deadline of each read: a read whose caller gave up while it queued for a thread never
/// starts, and one still running at its deadline is interrupted (Db::SetDeadline), so no
/// abandoned read holds a pool thread, or an old snapshot that keeps checkpoints from the WAL,
/// past the time its caller waits. Thread-safe.
class Readers {
 public:
  /// `what` names the store in error messages ("metadata store").
  Readers(std::filesystem::path path, std::string what)
      : path_(std::move(path)), what_(std::move(what)) {}

  /// Runs `fn(Db&)`, which returns a Result, on a reader connection within `deadline` (on
  /// SystemClock). Past it: DeadlineExceeded. A connection that cannot be opened: Unavailable.
  template <typename Fn>
  auto Read(Deadline deadline, Fn fn) -> decltype(fn(std::declval<Db&>())) {
    if (deadline.Expired(SystemClock::Instance())) return PastDeadline();
    std::unique_ptr<Db> db = Take();
    try {
      if (!db) db = OpenReader();
      db->SetDeadline(deadline.at());
      auto result = fn(*db);
      db->ResetAll();  // ends the read transaction, which would pin the WAL
      const bool interrupted = db->interrupted();
      db->ClearDeadline();
      Give(std::move(db));
      if (interrupted && !result.ok()) return PastDeadline();
      return result;
    } catch (const std::exception& e) {
      return MakeError(ErrorCode::kUnavailable, what_ + ": " + e.what(), "storage_unavailable");
    }
  }

 private:
  Error PastDeadline() const {
    return MakeError(ErrorCode::kDeadlineExceeded, what_ + ": read past its deadline",
                     "deadline_exceeded");
  }
  std::unique_ptr<Db> Take();
  void Give(std::unique_ptr<Db> db);
  std::unique_ptr<Db> OpenReader();

  const std::filesystem::path path_;
  const std::string what_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Db>> idle_;
};

/// Opens a connection to a database whose commits must be durable when they return: WAL mode,
/// the WAL fsync'd at every commit (synchronous FULL: a 201 survives power loss; the group
/// committers make that one fsync per batch), a busy timeout for the moments another connection
/// holds the write lock, and the WAL file kept when the last connection closes (a new one would
/// be grown, that is allocated, again, and a growing file's fdatasync waits for the filesystem's
/// journal).
std::unique_ptr<Db> OpenDurable(const std::filesystem::path& path);

/// Checkpoints (copying the WAL into the database file) of the database behind one writer
/// connection, on a thread and connection of their own, so that their fsync of the database file,
/// which grows and so waits for the filesystem's journal, is in no commit's path. Once the WAL
/// has reached its working size, a commit's fdatasync overwrites blocks the file already has and
/// waits for this file's pages only (docs/architecture.md, "Durability").
///
/// Made after the writer's schema is in place; the writer's committer thread calls AfterCommit
/// after each COMMIT, and nothing else writes to the database meanwhile.
class WalCheckpointer {
 public:
  /// Turns the writer's automatic checkpoints off and watches its commits.
  /// `name` is for log lines, `thread_name` names its thread (sluice/common/thread_name.h).
  WalCheckpointer(Db& writer, const std::filesystem::path& path, std::string_view name,
                  std::string thread_name);
  ~WalCheckpointer();
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  /// On the committer thread, after a COMMIT of `writer`.
  void AfterCommit(Db& writer);

 private:
  // WAL frames (pages of 4 KB) past which the checkpointer is woken: about 16 MB, 1,600 bodies of
  // 10 KB. Larger means fewer, longer checkpoints and a bigger WAL to replay after a crash.
  static constexpr int kCheckpointFrames = 4096;
  // A passive checkpoint never catches up with a writer that commits without pause, and SQLite
  // rewrites the WAL from its start only once every frame is copied. Past this many frames the
  // committer copies the few frames the checkpointer has not (it is the only writer, so nothing
  // is appended meanwhile), and the next batch starts the WAL over: the file stops growing at
  // about 64 MB and its flushes overwrite blocks it already has.
  static constexpr int kRestartFrames = 16384;

 public:
  /// The WAL's size after a restart (`PRAGMA journal_size_limit` on the writer): the working size
  /// kRestartFrames makes, with room for one large batch, so a WAL grown past it while readers
  /// held old snapshots (a flood of them) is cut back at the first commit after the restart, and
  /// one of working size is never cut and grown again.
  static constexpr int64_t kWalSizeLimit = int64_t{kRestartFrames + 2048} * (4096 + 24);

 private:
  // After a complete pass (every frame copied: no reader in the way) with the WAL file still
  // larger than kWalSizeLimit, and no commit coming to cut it (the writer is idle after a flood).
  // True unless the WAL is still over the limit.
  bool TruncateIfOversized();
  int64_t WalBytes() const;

  static int OnWalCommit(void* self, sqlite3*, const char*, int frames);
  void Run();

  const std::filesystem::path wal_path_;
  const std::string name_;
  const std::string thread_name_;
  int wal_frames_ = 0;      // committer thread only: set by OnWalCommit during COMMIT
  std::unique_ptr<Db> db_;  // the checkpointer thread's
  std::mutex mu_;
  std::condition_variable cv_;
  bool wanted_ = false;
  bool stopping_ = false;
  bool oversized_ = false;  // the checkpointer thread's
  std::thread thread_;
};

}  // namespace sluice::store::sqlite
