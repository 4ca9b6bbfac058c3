#include "sqlite_db.h"

#include <fmt/format.h>
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

void Db::SetDeadline(TimePoint at) {
  deadline_ = at;
  interrupted_ = false;
  // Every 1,000 virtual-machine steps, a few microseconds of work: a read is ended within a
  // fraction of a millisecond of its deadline, and a reading of the clock is cheap next to them.
  if (at != TimePoint::max()) sqlite3_progress_handler(db_, 1000, &Db::OnProgress, this);
}

void Db::ClearDeadline() {
  sqlite3_progress_handler(db_, 0, nullptr, nullptr);
  deadline_ = TimePoint::max();
  interrupted_ = false;
}

int Db::OnProgress(void* self) {
  Db* db = static_cast<Db*>(self);
  if (SystemClock::Instance().Now() < db->deadline_) return 0;
  db->interrupted_ = true;
  return 1;  // SQLITE_INTERRUPT for the running statement
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

std::unique_ptr<Db> Readers::Take() {
  std::lock_guard lock(mu_);
  if (idle_.empty()) return nullptr;
  std::unique_ptr<Db> db = std::move(idle_.back());
  idle_.pop_back();
  return db;
}

void Readers::Give(std::unique_ptr<Db> db) {
  std::lock_guard lock(mu_);
  idle_.push_back(std::move(db));
}

std::unique_ptr<Db> Readers::OpenReader() { return OpenDurable(path_); }

WalCheckpointer::WalCheckpointer(Db& writer, const std::filesystem::path& path,
                                 std::string_view name, std::string thread_name)
    : wal_path_(path.string() + "-wal"),
      name_(name),
      thread_name_(std::move(thread_name)),
      db_(OpenDurable(path)) {
  writer.Exec("PRAGMA wal_autocheckpoint = 0");
  writer.Exec(fmt::format("PRAGMA journal_size_limit = {}", kWalSizeLimit).c_str());
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
      const auto woken = [this] { return stopping_ || wanted_; };
      // An oversized WAL is looked at again every second even with no commit to wake this
      // thread: after a flood the writer may well be idle.
      if (oversized_) {
        cv_.wait_for(lock, std::chrono::seconds(1), woken);
      } else {
        cv_.wait(lock, woken);
      }
      if (stopping_) return;
      wanted_ = false;
    }
    // PASSIVE: copies what it can without blocking the committer; the committer's next
    // transaction restarts the WAL from its start once every frame is copied.
    int frames = 0, copied = 0;
    const int rc =
        sqlite3_wal_checkpoint_v2(db_->raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &frames, &copied);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
      spdlog::warn("{}: checkpoint: {}", name_, db_->LastError());
    } else if (rc == SQLITE_OK && frames == copied) {
      oversized_ = !TruncateIfOversized();
    } else {
      oversized_ = WalBytes() > kWalSizeLimit;
    }
  }
}

int64_t WalCheckpointer::WalBytes() const {
  std::error_code ec;
  const auto size = std::filesystem::file_size(wal_path_, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

bool WalCheckpointer::TruncateIfOversized() {
  const int64_t size = WalBytes();
  if (size <= kWalSizeLimit) return true;
  // Without waiting: a TRUNCATE checkpoint takes the write lock and waits for every reader, and a
  // busy handler here would hold the committer (and every create behind it) while it waits. Busy
  // now is tried again after the next pass.
  sqlite3_busy_timeout(db_->raw(), 0);
  const int rc =
      sqlite3_wal_checkpoint_v2(db_->raw(), nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
  sqlite3_busy_timeout(db_->raw(), 5000);
  if (rc != SQLITE_OK) return false;
  spdlog::info("{}: WAL of {} bytes truncated (over its limit of {})", name_, size, kWalSizeLimit);
  return true;
}

}  // namespace sluice::store::sqlite
