// BlobStore on SQLite in WAL mode: small bodies as rows of one table (docs/architecture.md,
// "Durability"). A batch of bodies is one transaction and one fdatasync of the WAL, which, once
// the WAL has reached its working size, overwrites blocks the file already has: the flush waits
// for this file's pages only. The file protocol's syncfs waits for every dirty page of the
// filesystem, a co-tenant's gigabytes included (bench/results/creates.md).
//
// Checkpoints (copying the WAL into the database file) run on their own thread and connection, so
// their fsync of the database file, which grows and so waits for the filesystem's journal, is not
// in the path of any create.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <span>
#include <stdexcept>
#include <thread>
#include <variant>

#include "sluice/asio/completion.h"
#include "sluice/store/backends.h"
#include "sluice/store/group_commit.h"
#include "sqlite_db.h"

namespace sluice::store {
namespace {

using boost::asio::awaitable;
using sqlite::Db;
using sqlite::Statement;

struct PutOp {
  PasteId id;
  std::shared_ptr<const std::string> body;
  admission::Deadline deadline;
  int64_t written_at;
};
struct DeleteOp {
  PasteId id;
};
using BlobWriteOp = std::variant<PutOp, DeleteOp>;

Error BlobStorageError(Db& db, std::string_view what) {
  return MakeError(
      ErrorCode::kUnavailable, fmt::format("blob store (sqlite): {}: {}", what, db.LastError()),
      sqlite3_errcode(db.raw()) == SQLITE_FULL ? "storage_full" : "storage_unavailable");
}

class SqliteBlobStore final : public BlobStore {
 public:
  SqliteBlobStore(const std::filesystem::path& path, BlockingPools pools)
      : path_(path), pools_(pools), writer_(OpenConnection()) {
    writer_->Exec(
        "CREATE TABLE IF NOT EXISTS bodies (id TEXT PRIMARY KEY, written_at INTEGER NOT NULL, "
        "body BLOB NOT NULL)");
    // Checkpoints are the checkpointer thread's, never a commit's (the file comment).
    writer_->Exec("PRAGMA wal_autocheckpoint = 0");
    sqlite3_wal_hook(writer_->raw(), &SqliteBlobStore::OnWalCommit, this);
    checkpointer_db_ = OpenConnection();
    checkpointer_ = std::thread([this] { RunCheckpoints(); });
    committer_ = std::make_unique<GroupCommitter<BlobWriteOp>>(
        kMaxBatch,
        [this](std::vector<GroupCommitter<BlobWriteOp>::Item>& batch) { Commit(batch); });
  }

  ~SqliteBlobStore() override {
    committer_.reset();  // drains the queued writes first
    {
      std::lock_guard lock(ckpt_mu_);
      stopping_ = true;
    }
    ckpt_cv_.notify_one();
    checkpointer_.join();
  }

  awaitable<Status> Put(PasteId id, std::shared_ptr<const std::string> body,
                        admission::Deadline deadline) override {
    return committer_->Submit(
        PutOp{id, std::move(body), deadline, SystemClock::Instance().UnixSeconds()});
  }

  awaitable<Result<std::string>> Get(PasteId id, admission::Deadline) override {
    return asio_glue::RunBlocking(*pools_.read, [this, id]() -> Result<std::string> {
      return WithReader([&](Db& db) -> Result<std::string> {
        Statement& s = db.Prepare("SELECT body FROM bodies WHERE id = ?");
        s.Bind(1, id.view());
        const int rc = s.Step();
        if (rc == SQLITE_ROW) {
          const auto blob = s.Blob(0);
          return std::string(reinterpret_cast<const char*>(blob.data()), blob.size());
        }
        if (rc == SQLITE_DONE) return MakeError(ErrorCode::kNotFound, "no such body", "not_found");
        return BlobStorageError(db, "get");
      });
    });
  }

  awaitable<Status> Delete(PasteId id, admission::Deadline) override {
    return committer_->Submit(DeleteOp{id});
  }

  awaitable<Result<std::vector<BlobInfo>>> List(std::string after, size_t limit,
                                                admission::Deadline) override {
    return asio_glue::RunBlocking(
        *pools_.cleanup,
        [this, after = std::move(after), limit]() -> Result<std::vector<BlobInfo>> {
          return WithReader([&](Db& db) -> Result<std::vector<BlobInfo>> {
            Statement& s =
                db.Prepare("SELECT id, written_at FROM bodies WHERE id > ? ORDER BY id LIMIT ?");
            s.Bind(1, std::string_view(after)).Bind(2, static_cast<int64_t>(limit));
            std::vector<BlobInfo> out;
            int rc;
            while ((rc = s.Step()) == SQLITE_ROW) {
              // A row under an id that is not one (written by hand) is not a body of this store.
              if (auto id = PasteId::Parse(s.Text(0))) out.push_back(BlobInfo{*id, s.Int(1)});
            }
            if (rc != SQLITE_DONE) return BlobStorageError(db, "list");
            return out;
          });
        });
  }

 private:
  static constexpr size_t kMaxBatch = 256;
  // WAL frames (pages of 4 KB) past which the checkpointer is woken: about 16 MB, 1,600 bodies of
  // 10 KB. Larger means fewer, longer checkpoints and a bigger WAL to replay after a crash.
  static constexpr int kCheckpointFrames = 4096;
  // A passive checkpoint never catches up with a writer that commits without pause, and SQLite
  // rewrites the WAL from its start only once every frame is copied. Past this many frames the
  // committer copies the few frames the checkpointer has not (it is the only writer, so nothing
  // is appended meanwhile), and the next batch starts the WAL over: the file stops growing at
  // about 64 MB and its flushes overwrite blocks it already has.
  static constexpr int kRestartFrames = 16384;

  std::unique_ptr<Db> OpenConnection() {
    auto db = Db::Open(path_);
    db->Exec("PRAGMA busy_timeout = 5000");
    db->Exec("PRAGMA journal_mode = WAL");
    // FULL: the WAL is fsync'd at every commit, so a Put that succeeded survives power loss.
    db->Exec("PRAGMA synchronous = FULL");
    // Keep the WAL file when the last connection closes: a new one would be grown (allocated)
    // again, and a growing file's fdatasync waits for the filesystem journal.
    int persist = 1;
    sqlite3_file_control(db->raw(), "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
    return db;
  }

  template <typename Fn>
  auto WithReader(Fn fn) -> decltype(fn(std::declval<Db&>())) {
    std::unique_ptr<Db> db;
    {
      std::lock_guard lock(readers_mu_);
      if (!readers_.empty()) {
        db = std::move(readers_.back());
        readers_.pop_back();
      }
    }
    try {
      if (!db) db = OpenConnection();
      auto result = fn(*db);
      db->ResetAll();  // ends the read transaction, which would pin the WAL (sqlite_db.h)
      std::lock_guard lock(readers_mu_);
      readers_.push_back(std::move(db));
      return result;
    } catch (const std::exception& e) {
      return MakeError(ErrorCode::kUnavailable, std::string("blob store (sqlite): ") + e.what(),
                       "storage_unavailable");
    }
  }

  static int OnWalCommit(void* self, sqlite3*, const char*, int frames) {
    static_cast<SqliteBlobStore*>(self)->wal_frames_ = frames;
    return SQLITE_OK;
  }

  // Runs on the committer thread only. A failed statement fails its op alone; a failed COMMIT
  // fails the whole batch.
  void Commit(std::vector<GroupCommitter<BlobWriteOp>::Item>& batch) {
    Db& db = *writer_;
    if (db.TryExec("BEGIN IMMEDIATE") != SQLITE_OK) {
      const Error e = BlobStorageError(db, "begin");
      for (auto& item : batch) item.status = e;
      return;
    }
    for (auto& item : batch) {
      item.status = std::visit([&](auto& op) { return Apply(db, op); }, item.op);
    }
    db.ResetAll();
    if (db.TryExec("COMMIT") != SQLITE_OK) {
      const Error e = BlobStorageError(db, "commit");
      db.TryExec("ROLLBACK");
      for (auto& item : batch) item.status = e;
      return;
    }
    const int frames = wal_frames_;
    if (frames >= kRestartFrames) {
      // SQLITE_BUSY if the checkpointer is mid-pass: the next commit tries again.
      sqlite3_wal_checkpoint_v2(db.raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    } else if (frames >= kCheckpointFrames) {
      {
        std::lock_guard lock(ckpt_mu_);
        ckpt_wanted_ = true;
      }
      ckpt_cv_.notify_one();
    }
  }

  Status Apply(Db& db, const PutOp& op) {
    if (op.deadline.Expired(SystemClock::Instance())) {
      // Abandoned by its caller while queued: writing it now would only make an orphan.
      return MakeError(ErrorCode::kDeadlineExceeded, "write abandoned before it ran",
                       "deadline_exceeded");
    }
    Statement& s =
        db.Prepare("INSERT OR REPLACE INTO bodies (id, written_at, body) VALUES (?, ?, ?)");
    const std::string& body = *op.body;
    s.Bind(1, op.id.view())
        .Bind(2, op.written_at)
        .Bind(3, std::span(reinterpret_cast<const unsigned char*>(body.data()), body.size()));
    return s.Step() == SQLITE_DONE ? Ok() : BlobStorageError(db, "put");
  }

  Status Apply(Db& db, const DeleteOp& op) {
    Statement& s = db.Prepare("DELETE FROM bodies WHERE id = ?");
    s.Bind(1, op.id.view());
    const int rc = s.Step();
    return rc == SQLITE_DONE ? Ok() : BlobStorageError(db, "delete");
  }

  void RunCheckpoints() {
    for (;;) {
      {
        std::unique_lock lock(ckpt_mu_);
        ckpt_cv_.wait(lock, [this] { return stopping_ || ckpt_wanted_; });
        if (stopping_) return;
        ckpt_wanted_ = false;
      }
      // PASSIVE: copies what it can without blocking the committer; the committer's next
      // transaction restarts the WAL from its start once every frame is copied.
      const int rc = sqlite3_wal_checkpoint_v2(checkpointer_db_->raw(), nullptr,
                                               SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
        spdlog::warn("blob store (sqlite): checkpoint: {}", checkpointer_db_->LastError());
      }
    }
  }

  const std::filesystem::path path_;
  const BlockingPools pools_;
  std::unique_ptr<Db> writer_;  // committer thread only (and the constructor)
  int wal_frames_ = 0;          // committer thread only: set by OnWalCommit during COMMIT
  std::mutex readers_mu_;
  std::vector<std::unique_ptr<Db>> readers_;

  std::unique_ptr<Db> checkpointer_db_;  // checkpointer thread only
  std::mutex ckpt_mu_;
  std::condition_variable ckpt_cv_;
  bool ckpt_wanted_ = false;
  bool stopping_ = false;
  std::thread checkpointer_;

  std::unique_ptr<GroupCommitter<BlobWriteOp>>
      committer_;  // last: its thread uses everything above
};

}  // namespace

std::unique_ptr<BlobStore> MakeSqliteBlobStore(const std::filesystem::path& db_path,
                                               BlockingPools pools) {
  return std::make_unique<SqliteBlobStore>(db_path, pools);
}

}  // namespace sluice::store
