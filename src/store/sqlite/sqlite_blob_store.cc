// BlobStore on SQLite in WAL mode: small bodies as rows of one table (docs/architecture.md,
// "Durability"). A batch of bodies is one transaction and one fdatasync of the WAL, which waits
// for this file's pages only; the file protocol's syncfs waits for every dirty page of the
// filesystem, a co-tenant's gigabytes included (bench/results/creates.md). Checkpoints run on their
// own thread (sqlite::WalCheckpointer).
//
// The embedded store keeps its small bodies in meta.db instead, beside their rows
// (sqlite_meta_store.h); this one is bodies.db, for small bodies next to a PostgreSQL primary and
// for bodies.db files written before.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <span>
#include <stdexcept>
#include <variant>

#include "bodies_table.h"
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
  std::vector<PasteId> ids;  // one transaction for them all (BlobStore::DeleteMany)
};
using BlobWriteOp = std::variant<PutOp, DeleteOp>;

Error BlobStorageError(Db& db, std::string_view what) {
  return MakeError(
      ErrorCode::kUnavailable, fmt::format("blob store (sqlite): {}: {}", what, db.LastError()),
      sqlite3_errcode(db.raw()) == SQLITE_FULL ? "storage_full" : "storage_unavailable");
}

class SqliteBlobStore final : public BlobStore {
 public:
  SqliteBlobStore(const std::filesystem::path& path, BlockingPools pools, MetricsRegistry* metrics)
      : path_(path), pools_(pools), writer_(sqlite::OpenDurable(path)) {
    writer_->Exec(
        "CREATE TABLE IF NOT EXISTS bodies (id TEXT PRIMARY KEY, written_at INTEGER NOT NULL, "
        "body BLOB NOT NULL)");
    checkpointer_ = std::make_unique<sqlite::WalCheckpointer>(*writer_, path, "blob store (sqlite)",
                                                              "ckpt-bodies");
    committer_ = std::make_unique<GroupCommitter<BlobWriteOp>>(
        "commit-bodies", kMaxBatch,
        [this](std::vector<GroupCommitter<BlobWriteOp>::Item>& batch) { Commit(batch); },
        CommitMetrics::In(metrics, "bodies"));
  }

  awaitable<Status> Put(PasteId id, std::shared_ptr<const std::string> body,
                        admission::Deadline deadline) override {
    return committer_->Submit(
        PutOp{id, std::move(body), deadline, SystemClock::Instance().UnixSeconds()});
  }

  awaitable<Result<std::string>> Get(PasteId id, admission::Deadline deadline) override {
    return asio_glue::RunBlocking(*pools_.read, [this, id, deadline]() -> Result<std::string> {
      return readers_.Read(deadline,
                           [&](Db& db) { return sqlite::ReadBodyRow(db, id, &BlobStorageError); });
    });
  }

  awaitable<Status> Delete(PasteId id, admission::Deadline) override {
    return committer_->Submit(DeleteOp{{id}});
  }
  awaitable<Status> DeleteMany(std::vector<PasteId> ids, admission::Deadline) override {
    return committer_->Submit(DeleteOp{std::move(ids)});
  }

  awaitable<Result<std::vector<BlobInfo>>> List(std::string after, size_t limit,
                                                admission::Deadline deadline) override {
    return asio_glue::RunBlocking(
        *pools_.cleanup,
        [this, after = std::move(after), limit, deadline]() -> Result<std::vector<BlobInfo>> {
          return readers_.Read(deadline, [&](Db& db) {
            return sqlite::ListBodyRows(db, after, limit, &BlobStorageError);
          });
        });
  }

 private:
  static constexpr size_t kMaxBatch = 256;

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
    checkpointer_->AfterCommit(db);
  }

  Status Apply(Db& db, const PutOp& op) {
    if (op.deadline.Expired(SystemClock::Instance())) {
      // Abandoned by its caller while queued: writing it now would only make an orphan.
      return MakeError(ErrorCode::kDeadlineExceeded, "write abandoned before it ran",
                       "deadline_exceeded");
    }
    return sqlite::WriteBodyRow(db, op.id, *op.body, op.written_at, &BlobStorageError);
  }

  Status Apply(Db& db, const DeleteOp& op) {
    for (const PasteId& id : op.ids) {
      if (Status s = sqlite::DeleteBodyRow(db, id, &BlobStorageError); !s.ok()) return s;
    }
    return Ok();
  }

  const std::filesystem::path path_;
  const BlockingPools pools_;
  std::unique_ptr<Db> writer_;  // committer thread only (and the constructor)
  sqlite::Readers readers_{path_, "blob store (sqlite)"};
  std::unique_ptr<sqlite::WalCheckpointer> checkpointer_;
  // Last: its thread uses everything above, and stops first.
  std::unique_ptr<GroupCommitter<BlobWriteOp>> committer_;
};

}  // namespace

std::unique_ptr<BlobStore> MakeSqliteBlobStore(const std::filesystem::path& db_path,
                                               BlockingPools pools, MetricsRegistry* metrics) {
  return std::make_unique<SqliteBlobStore>(db_path, pools, metrics);
}

}  // namespace sluice::store
