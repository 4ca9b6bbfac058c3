// A copy of a live SQLite database, read in the order of its file (`sluice admin backup`,
// docs/operations.md, "Backups").
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>

#include "sluice/common/result.h"

namespace sluice::store {

struct SnapshotProgress {
  uint64_t pages_copied = 0;
  uint64_t pages_total = 0;
  uint64_t page_bytes = 0;
};

/// Copies the SQLite database at `source`, which another process may be writing meanwhile (WAL
/// mode), to the new file `target`, as it was at one moment.
///
/// SQLite's online backup copies pages in the file's own order, so a database larger than memory
/// is read front to back; VACUUM INTO walks it in the order of its trees instead, and at 10
/// million pastes (18 GB on a 24 GB machine) read 3 MB/s (bench/results/growth.md). One read
/// transaction is held over the whole copy: every step copies the same snapshot, and writers go
/// on, but the writer's checkpoints cannot pass it, so the source's WAL grows with what is written
/// until the copy ends.
///
/// `after_step` runs after each `pages_per_step` pages (to pace the copy, to report); false stops
/// it. The copy is written to `target` + ".partial", flushed and renamed, so a file under the
/// final name is always whole. Errors: NotFound when `source` does not exist, Internal otherwise
/// (each with SQLite's message); a stopped copy is an Internal error too, the partial file gone.
Result<SnapshotProgress> SnapshotSqliteDatabase(
    const std::filesystem::path& source, const std::filesystem::path& target, int pages_per_step,
    const std::function<bool(const SnapshotProgress&)>& after_step);

/// SQLite's quick_check of the database at `path` (a copy made above): true, or an Internal error
/// with its first complaint.
Result<bool> CheckSqliteDatabase(const std::filesystem::path& path);

}  // namespace sluice::store
