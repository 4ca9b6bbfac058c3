// A copy of a live SQLite database, read in the order of its file (`sluice admin backup`,
// docs/operations.md, "Backups").
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

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

/// Calls `visit` with the id of each row of the embedded store's meta.db at `path` (a copy made
/// above) that is live at `now` (neither deleted nor expired) and whose body is kept outside the
/// database: a file of the bodies' folder, or, when `bodies_db` exists, a row of it that is not
/// there either. One walk of the rows; the caller looks for the files. Internal error with
/// SQLite's message if the database is not an embedded store's.
Status ForEachLiveRowBodiedOutside(const std::filesystem::path& path,
                                   const std::filesystem::path& bodies_db, int64_t now,
                                   const std::function<void(std::string_view id)>& visit);

/// What a store's database holds for a paste.
enum class RowState { kAbsent, kLive, kDeleted };

/// The state of each of `ids` (in their order) in the embedded store's meta.db at `path`, read
/// in one transaction beside its server's writer.
Result<std::vector<RowState>> ReadRowStates(const std::filesystem::path& path,
                                            const std::vector<std::string>& ids);

/// SQLite's quick_check of the database at `path` (a copy made above): true, or an Internal error
/// with its first complaint.
Result<bool> CheckSqliteDatabase(const std::filesystem::path& path);

}  // namespace sluice::store
