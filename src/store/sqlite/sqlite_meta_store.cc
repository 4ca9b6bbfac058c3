// SqliteMetaStore (sqlite_meta_store.h): opening the database, the committer's batch, the row
// helpers every file uses, and the bodies of meta.db as a BlobStore.
#include "sqlite_meta_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace sluice::store::sqlite {

Error StorageError(Db& db, std::string_view what) {
  Error e =
      MakeError(ErrorCode::kUnavailable,
                fmt::format("metadata store: {}: {}", what, db.LastError()), "storage_unavailable");
  return e;
}

PasteMeta RowToMeta(const PasteId& id, Statement& s) {
  PasteMeta m{id, s.Int(0), s.Int(1), static_cast<uint64_t>(s.Int(2)), {}, s.Int(4) != 0, {}};
  m.burn = s.Int(6) != 0;
  auto hash = s.Blob(3);
  std::copy_n(hash.begin(), std::min(hash.size(), m.token_hash.size()), m.token_hash.begin());
  // Anything but 32 bytes (NULL on rows from before checksums) is no checksum, never a wrong one.
  auto digest = s.Blob(5);
  if (digest.size() == BodyDigest().size()) {
    m.body_sha256.emplace();
    std::copy_n(digest.begin(), digest.size(), m.body_sha256->begin());
  }
  const int64_t moderation = s.Int(7);
  if (moderation >= 0 && moderation <= kMaxModeration)
    m.moderation = static_cast<Moderation>(moderation);
  if (auto network = s.OptionalInt(8)) m.creator_network = static_cast<uint64_t>(*network);
  m.encrypted = s.Int(9) != 0;
  m.views_left = static_cast<uint32_t>(std::clamp<int64_t>(s.Int(10), 0, UINT32_MAX));
  if (const std::string_view parent = s.Text(11); !parent.empty())
    m.parent = PasteId::Parse(parent);
  return m;
}

Moderation ModerationOf(int64_t v) {
  return v >= 0 && v <= kMaxModeration ? static_cast<Moderation>(v) : Moderation::kNone;
}

Error NoSuchPaste() { return MakeError(ErrorCode::kNotFound, "no such paste", "not_found"); }

SqliteMetaStore::SqliteMetaStore(const std::filesystem::path& path, BlockingPools pools,
                                 size_t colocated_body_limit, MetricsRegistry* metrics)
    : path_(path),
      pools_(pools),
      colocated_body_limit_(colocated_body_limit),
      writer_(sqlite::OpenDurable(path)) {
  MigrateMetaSchema(*writer_);
  ledger_.Committed(ReadLiveBytes(*writer_), {});
  checkpointer_ =
      std::make_unique<sqlite::WalCheckpointer>(*writer_, path, "metadata store", "ckpt-meta");
  committer_ = std::make_unique<GroupCommitter<WriteOp>>(
      "commit-meta", kMaxBatch,
      [this](std::vector<GroupCommitter<WriteOp>::Item>& batch) { Commit(batch); },
      CommitMetrics::In(metrics, "meta"));
}

int64_t SqliteMetaStore::ReadLiveBytes(Db& db) {
  Statement& s = db.Prepare("SELECT COALESCE(SUM(live_bytes), 0) FROM storage_usage");
  if (s.Step() != SQLITE_ROW) throw std::runtime_error("metadata store: " + db.LastError());
  const int64_t live = s.Int(0);
  s.Reset();
  return live;
}

void SqliteMetaStore::Commit(std::vector<GroupCommitter<WriteOp>::Item>& batch) {
  Db& db = *writer_;
  if (db.TryExec("BEGIN IMMEDIATE") != SQLITE_OK) {
    const Error e = StorageError(db, "begin");
    for (auto& item : batch) item.status = e;
    return;
  }
  // Prepared once rather than parsed per op (TryExec): a few microseconds per create.
  const auto run = [&db](const char* sql) { db.Prepare(sql).Step(); };
  // What the batch does to the storage quota, told to the ledger once it has committed.
  int64_t live_delta = 0;
  std::vector<PasteId> inserted;
  for (auto& item : batch) {
    run("SAVEPOINT op");
    op_live_delta_ = 0;
    item.status = std::visit([&](auto& op) { return Apply(db, op); }, item.op);
    if (!item.status.ok()) {
      run("ROLLBACK TO op");
    } else {
      live_delta += op_live_delta_;
      if (const auto* insert = std::get_if<InsertOp>(&item.op)) inserted.push_back(insert->meta.id);
    }
    run("RELEASE op");
  }
  db.ResetAll();
  if (db.TryExec("COMMIT") != SQLITE_OK) {
    const Error e = StorageError(db, "commit");
    db.TryExec("ROLLBACK");
    for (auto& item : batch) item.status = e;
    return;
  }
  ledger_.Committed(live_delta, inserted);
  checkpointer_->AfterCommit(db);
}

Status SqliteMetaStore::Done(Db& db, Statement& s, std::string_view what) {
  const int rc = s.Step();
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) return Ok();
  if (rc == SQLITE_CONSTRAINT) {
    return MakeError(ErrorCode::kInternal,
                     fmt::format("metadata store: {}: {}", what, db.LastError()), "id_collision");
  }
  return StorageError(db, what);
}

namespace {

// The bodies table of meta.db as a BlobStore: Get, Delete and List for the bodies that creates
// wrote with their rows, and Put for a body written apart (a create whose store decorators do not
// pass InsertWithBody on, as the fault injection's do not). Writes go through the metadata
// store's one writer.
class SqliteMetaBodies final : public BlobStore {
 public:
  explicit SqliteMetaBodies(SqliteMetaStore& meta) : meta_(meta) {}

  awaitable<Status> Put(PasteId id, std::shared_ptr<const std::string> body,
                        admission::Deadline deadline) override {
    return meta_.PutBody(id, std::move(body), deadline);
  }
  awaitable<Result<std::string>> Get(PasteId id, admission::Deadline deadline) override {
    return meta_.GetBody(id, deadline);
  }
  awaitable<Status> Delete(PasteId id, admission::Deadline) override {
    return meta_.DeleteBodies({id});
  }
  awaitable<Status> DeleteMany(std::vector<PasteId> ids, admission::Deadline) override {
    return meta_.DeleteBodies(std::move(ids));
  }
  // The purge that follows deletes each row with its inline body in one transaction (PurgeOp).
  awaitable<Status> DeleteManyBeforePurge(std::vector<PasteId>, admission::Deadline) override {
    co_return Ok();
  }
  awaitable<Result<std::vector<BlobInfo>>> List(std::string after, size_t limit,
                                                admission::Deadline deadline) override {
    return meta_.ListBodies(std::move(after), limit, deadline);
  }

 private:
  SqliteMetaStore& meta_;
};

}  // namespace

}  // namespace sluice::store::sqlite

namespace sluice::store {

std::unique_ptr<MetaStore> MakeSqliteMetaStore(const std::filesystem::path& db_path,
                                               BlockingPools pools, size_t colocated_body_limit,
                                               MetricsRegistry* metrics) {
  return std::make_unique<sqlite::SqliteMetaStore>(db_path, pools, colocated_body_limit, metrics);
}

std::unique_ptr<BlobStore> MakeSqliteMetaBodies(MetaStore& sqlite_meta) {
  auto* meta = dynamic_cast<sqlite::SqliteMetaStore*>(&sqlite_meta);
  if (meta == nullptr) {
    throw std::invalid_argument("MakeSqliteMetaBodies: not a store of MakeSqliteMetaStore");
  }
  return std::make_unique<sqlite::SqliteMetaBodies>(*meta);
}

}  // namespace sluice::store
