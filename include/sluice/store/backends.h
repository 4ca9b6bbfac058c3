// Factories for the concrete stores. Only src/app (and tests) call these; everything else sees the
// interfaces.
#pragma once

#include <boost/asio/thread_pool.hpp>
#include <filesystem>
#include <memory>

#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/store/blob_store.h"
#include "sluice/store/meta_store.h"

namespace sluice::store {

/// Thread pools for blocking backends. They stand in for connection pools, split by purpose so a
/// cleanup backlog cannot starve reads (docs/overload.md, "Read"), and the review queue and the
/// operator's reads (moderation) neither (docs/moderation.md). All must outlive the stores.
struct BlockingPools {
  boost::asio::thread_pool* read = nullptr;
  boost::asio::thread_pool* cleanup = nullptr;
  /// The metadata store's moderation and admin reads; null: the cleanup pool, never `read`.
  boost::asio::thread_pool* moderation = nullptr;
};

/// SQLite in WAL mode at `db_path`, migrated on open. Writes are group-committed: one transaction
/// and one WAL fsync per batch. Bodies up to `colocated_body_limit` bytes may be written with
/// their rows (MetaStore::InsertWithBody); 0 keeps none. With `metrics`, its committer reports
/// there as store="meta" (CommitMetrics, sluice/store/group_commit.h), as the two stores below do
/// as "files" and "bodies". Throws std::runtime_error if the database cannot be opened.
std::unique_ptr<MetaStore> MakeSqliteMetaStore(const std::filesystem::path& db_path,
                                               BlockingPools pools, size_t colocated_body_limit = 0,
                                               MetricsRegistry* metrics = nullptr);

/// The bodies that `sqlite_meta` (made by MakeSqliteMetaStore, which must outlive the result)
/// keeps beside its rows, as a BlobStore; its Put writes through the same writer. Throws
/// std::invalid_argument for any other store.
std::unique_ptr<BlobStore> MakeSqliteMetaBodies(MetaStore& sqlite_meta);

/// One file per body under `root`, written atomically (temp file, flush, rename, flush) with one
/// filesystem flush per batch. Throws std::runtime_error if `root` cannot be created.
std::unique_ptr<BlobStore> MakeFsBlobStore(const std::filesystem::path& root, BlockingPools pools,
                                           MetricsRegistry* metrics = nullptr);

/// Bodies as rows of a SQLite database at `db_path` (WAL), for small bodies: a batch of Puts is one
/// transaction and one WAL flush, which waits for no other file's dirty pages (unlike syncfs);
/// checkpoints run on a thread of their own. Throws std::runtime_error if it cannot be opened.
std::unique_ptr<BlobStore> MakeSqliteBlobStore(const std::filesystem::path& db_path,
                                               BlockingPools pools,
                                               MetricsRegistry* metrics = nullptr);

/// Bodies up to `small_max_bytes` in `small`, larger ones in `large`. Reads try `small` first,
/// then `large`; deletes and listings cover both (a body written under another limit is found).
std::unique_ptr<BlobStore> MakeTieredBlobStore(std::unique_ptr<BlobStore> small,
                                               std::unique_ptr<BlobStore> large,
                                               size_t small_max_bytes);

/// In-memory stores for tests and experiments; thread-safe; nothing survives the process. The blob
/// store dates each body by `clock` (which must outlive it) when it is written; without a clock it
/// lists bodies undated, which the orphan reaper never deletes.
std::unique_ptr<MetaStore> MakeMemoryMetaStore();
std::unique_ptr<BlobStore> MakeMemoryBlobStore(const Clock* clock = nullptr);

}  // namespace sluice::store
