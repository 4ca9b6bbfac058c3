#include "sqlite_db.h"

#include <spdlog/spdlog.h>

#include <stdexcept>

#include "sluice/common/thread_name.h"
#include "wal_write_gathering.h"

namespace sluice::store::sqlite {

std::unique_ptr<Db> Db::Open(const std::filesystem::path& path, const char* vfs) {
  sqlite3* raw = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path.c_str(), &raw, flags, vfs) != SQLITE_OK) {
    std::string message = raw ? sqlite3_errmsg(raw) : "out of memory";
    sqlite3_close(raw);
    throw std::runtime_error("cannot open " + path.string() + ": " + message);
  }
  return std::unique_ptr<Db>(new Db(raw));
}

Db::~Db() {
  statements_.clear();  // finalize before close, or close fails with SQLITE_BUSY
  sqlite3_close(db_);
}

void Db::Exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    throw std::runtime_error(std::string("sqlite: ") + message);
  }
}

int Db::TryExec(const char* sql) { return sqlite3_exec(db_, sql, nullptr, nullptr, nullptr); }

Statement& Db::Prepare(const char* sql) {
  auto it = statements_.find(sql);
  if (it == statements_.end()) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK) {
      throw std::runtime_error(std::string("sqlite prepare: ") + sqlite3_errmsg(db_));
    }
    it = statements_.emplace(sql, std::make_unique<Statement>(stmt)).first;
  }
  it->second->Reset();
  return *it->second;
}

std::unique_ptr<Db> OpenDurable(const std::filesystem::path& path) {
  // The gathering VFS relies on the sync of every commit that synchronous = FULL makes
  // (wal_write_gathering.cc): the two go together.
  auto db = Db::Open(path, WalWriteGatheringVfs());
  db->Exec("PRAGMA busy_timeout = 5000");
  db->Exec("PRAGMA journal_mode = WAL");
  db->Exec("PRAGMA synchronous = FULL");
  int persist = 1;
  sqlite3_file_control(db->raw(), "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
  return db;
}

WalCheckpointer::WalCheckpointer(Db& writer, const std::filesystem::path& path,
                                 std::string_view name, std::string thread_name)
    : name_(name), thread_name_(std::move(thread_name)), db_(OpenDurable(path)) {
  writer.Exec("PRAGMA wal_autocheckpoint = 0");
  sqlite3_wal_hook(writer.raw(), &WalCheckpointer::OnWalCommit, this);
  thread_ = std::thread([this] { Run(); });
}

WalCheckpointer::~WalCheckpointer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

int WalCheckpointer::OnWalCommit(void* self, sqlite3*, const char*, int frames) {
  static_cast<WalCheckpointer*>(self)->wal_frames_ = frames;
  return SQLITE_OK;
}

void WalCheckpointer::AfterCommit(Db& writer) {
  const int frames = wal_frames_;
  if (frames >= kRestartFrames) {
    // SQLITE_BUSY if the checkpointer is mid-pass: the next commit tries again.
    sqlite3_wal_checkpoint_v2(writer.raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  } else if (frames >= kCheckpointFrames) {
    {
      std::lock_guard lock(mu_);
      wanted_ = true;
    }
    cv_.notify_one();
  }
}

void WalCheckpointer::Run() {
  NameThisThread(thread_name_);
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || wanted_; });
      if (stopping_) return;
      wanted_ = false;
    }
    // PASSIVE: copies what it can without blocking the committer; the committer's next
    // transaction restarts the WAL from its start once every frame is copied.
    const int rc =
        sqlite3_wal_checkpoint_v2(db_->raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
      spdlog::warn("{}: checkpoint: {}", name_, db_->LastError());
    }
  }
}

}  // namespace sluice::store::sqlite
