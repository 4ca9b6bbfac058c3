#include "backup_command.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "sluice/common/clock.h"
#include "sluice/store/backends.h"
#include "sluice/store/sqlite_snapshot.h"

namespace sluice::app {
namespace fs = std::filesystem;
namespace {

constexpr auto kCommand = "sluice admin backup";
// 4 MB of 4 KB pages a step: large enough that the steps' own cost is nothing, small enough that
// the pacing and the progress line move several times a second on a slow disk.
constexpr int kPagesPerStep = 1024;

// Holds the copy to `rate_mb` on average: after each piece, sleeps until the bytes so far are
// due. A schedule from the start rather than a bucket, so a slow stretch is not made up for with a
// burst above the rate.
class Pacer {
 public:
  explicit Pacer(double rate_mb) : bytes_per_second_(rate_mb * 1e6) {}

  void Copied(uint64_t bytes) {
    total_ += bytes;
    if (bytes_per_second_ <= 0) return;
    const auto due = started_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(total_ / bytes_per_second_));
    std::this_thread::sleep_until(due);
  }
  uint64_t total() const { return total_; }
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }
  double MegabytesPerSecond() const {
    const double s = Seconds();
    return s > 0 ? static_cast<double>(total_) / 1e6 / s : 0;
  }

 private:
  double bytes_per_second_;
  uint64_t total_ = 0;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

// A progress line at most once a second, to stderr (stdout carries the summary).
class Reporter {
 public:
  bool Due() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(1)) return false;
    last_ = now;
    return true;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

fs::path Resolved(const fs::path& path) {
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(path, ec);
  if (ec) resolved = fs::absolute(path, ec).lexically_normal();
  return resolved.filename().empty() ? resolved.parent_path() : resolved;  // no trailing "/"
}

// The destination must be new or empty, and outside the data dir (a copy into the folder it copies
// would copy itself).
bool UsableDestination(const fs::path& data_dir, const fs::path& destination) {
  std::error_code ec;
  if (fs::exists(destination, ec)) {
    if (!fs::is_directory(destination, ec) || !fs::is_empty(destination, ec)) {
      std::fprintf(stderr, "%s: %s exists and is not an empty folder\n", kCommand,
                   destination.c_str());
      return false;
    }
  }
  const fs::path data = Resolved(data_dir), dest = Resolved(destination);
  const auto [d, _] = std::mismatch(data.begin(), data.end(), dest.begin(), dest.end());
  if (d == data.end()) {
    std::fprintf(stderr, "%s: %s is inside the data dir %s\n", kCommand, destination.c_str(),
                 data_dir.c_str());
    return false;
  }
  return true;
}

// Root may read any store, but SQLite's reader of a stopped one creates meta.db-wal and -shm: as
// root, a copy killed before it closes leaves them owned by root, and the server's own user can no
// longer open its store. So root is refused for a store that another user owns.
bool RunByTheStoresOwner(const fs::path& data_dir) {
  struct stat owner {};
  if (::geteuid() != 0 || ::stat((data_dir / "meta.db").c_str(), &owner) != 0 ||
      owner.st_uid == 0) {
    return true;
  }
  struct passwd entry {};
  struct passwd* found = nullptr;
  char buffer[1024];
  const bool named =
      ::getpwuid_r(owner.st_uid, &entry, buffer, sizeof buffer, &found) == 0 && found != nullptr;
  const std::string user = named ? entry.pw_name : std::to_string(owner.st_uid);
  std::fprintf(stderr,
               "%s: %s belongs to %s: run the backup as that user, not as root (sudo -u %s "
               "sluice admin backup ...); as root, a copy killed midway could leave files in it "
               "that its server cannot open\n",
               kCommand, data_dir.c_str(), user.c_str(), user.c_str());
  return false;
}

bool SnapshotDatabase(const fs::path& source, const fs::path& target, Pacer& pacer,
                      Reporter& reporter) {
  uint64_t counted = 0;
  auto copied = store::SnapshotSqliteDatabase(
      source, target, kPagesPerStep, [&](const store::SnapshotProgress& p) {
        const uint64_t bytes = p.pages_copied * p.page_bytes;
        pacer.Copied(bytes - counted);
        counted = bytes;
        if (reporter.Due()) {
          const double rate = pacer.MegabytesPerSecond();
          const double left_mb =
              static_cast<double>((p.pages_total - p.pages_copied) * p.page_bytes) / 1e6;
          std::fprintf(stderr, "backup: %s %.0f of %.0f MB, %.1f MB/s, about %.0f s left\n",
                       source.filename().c_str(), static_cast<double>(bytes) / 1e6,
                       static_cast<double>(p.pages_total * p.page_bytes) / 1e6, rate,
                       rate > 0 ? left_mb / rate : 0.0);
        }
        return true;
      });
  if (!copied.ok()) {
    std::fprintf(stderr, "%s: %s\n", kCommand, copied.error().message.c_str());
    return false;
  }
  pacer.Copied(copied->pages_total * copied->page_bytes - counted);
  std::printf("%s: %llu pages of %llu bytes\n", target.filename().c_str(),
              static_cast<unsigned long long>(copied->pages_total),
              static_cast<unsigned long long>(copied->page_bytes));
  return true;
}

struct FileCounts {
  uint64_t files = 0;
  uint64_t bytes = 0;
  uint64_t gone = 0;  // deleted (by their owner, or expired) between the snapshot and their copy
};

// The bodies' files (src/store/fs/fs_blob_store.cc: blobs/XX/ID, written under blobs/.tmp and
// renamed), after the snapshot: every row in it finds its body, unless the paste was deleted or
// expired since (counted as gone). Written without a flush each; one syncfs at the end.
bool CopyBodies(const fs::path& from, const fs::path& to, Pacer& pacer, Reporter& reporter,
                FileCounts& counts) {
  std::error_code ec;
  if (!fs::exists(from, ec)) return true;
  for (const auto& shard : fs::directory_iterator(from, ec)) {
    const std::string name = shard.path().filename().string();
    if (name.empty() || name[0] == '.' || !shard.is_directory(ec)) continue;
    fs::create_directories(to / name, ec);
    if (ec) {
      std::fprintf(stderr, "%s: cannot create %s: %s\n", kCommand, (to / name).c_str(),
                   ec.message().c_str());
      return false;
    }
    for (const auto& file : fs::directory_iterator(shard.path(), ec)) {
      std::error_code copy_error;
      const uint64_t size = file.file_size(copy_error);
      if (!copy_error) fs::copy_file(file.path(), to / name / file.path().filename(), copy_error);
      if (copy_error == std::errc::no_such_file_or_directory) {
        ++counts.gone;
        continue;
      }
      if (copy_error) {
        std::fprintf(stderr, "%s: copying %s: %s\n", kCommand, file.path().c_str(),
                     copy_error.message().c_str());
        return false;
      }
      ++counts.files;
      counts.bytes += size;
      pacer.Copied(size);
      if (reporter.Due()) {
        std::fprintf(stderr, "backup: bodies %llu files, %.0f MB, %.1f MB/s\n",
                     static_cast<unsigned long long>(counts.files),
                     static_cast<double>(counts.bytes) / 1e6, pacer.MegabytesPerSecond());
      }
    }
    if (ec) break;
  }
  if (ec) {
    std::fprintf(stderr, "%s: listing %s: %s\n", kCommand, from.c_str(), ec.message().c_str());
    return false;
  }
  return true;
}

// What the copy's rows were brought to after the bodies (ReconcileWithSource).
struct Reconciled {
  uint64_t deleted = 0;       // deleted in the source since the snapshot (by owner or last view)
  uint64_t purged = 0;        // gone from the source altogether
  uint64_t copied_late = 0;   // found in the source after all
  uint64_t without_body = 0;  // live in the source without a body there either: its damage
};

fs::path BodyFile(const fs::path& blobs, const std::string& id) {
  return blobs / id.substr(0, 2) / id;  // src/store/fs/fs_blob_store.cc's FinalPath
}

// A paste deleted between the snapshot and its body's copy (by its owner, or by its last view)
// has its row in the copy and no body: restored, it would answer 503 body_missing until it
// expired. So the copy's live rows whose bodies are files are checked for their files, and those
// without are brought to the source's state now through the copy's own store
// (MetaStore::MarkDeleted, Purge), which keeps its live bytes, reports and notices right. The walk
// reads the copy, not the serving store; the source is asked only about the rows found.
bool ReconcileWithSource(const fs::path& data_dir, const fs::path& destination,
                         Reconciled& reconciled) {
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  std::vector<std::string> missing;
  std::error_code ec;
  Status walked = store::ForEachLiveRowBodiedOutside(
      destination / "meta.db", destination / "bodies.db", now, [&](std::string_view id) {
        if (!fs::exists(BodyFile(destination / "blobs", std::string(id)), ec)) {
          missing.emplace_back(id);
        }
      });
  if (!walked.ok()) {
    std::fprintf(stderr, "%s: checking the copy's bodies: %s\n", kCommand,
                 walked.error().message.c_str());
    return false;
  }
  if (missing.empty()) return true;
  auto states = store::ReadRowStates(data_dir / "meta.db", missing);
  if (!states.ok()) {
    std::fprintf(stderr, "%s: %s\n", kCommand, states.error().message.c_str());
    return false;
  }
  std::vector<store::PasteId> to_mark, to_purge;
  for (size_t i = 0; i < missing.size(); ++i) {
    const std::string& id = missing[i];
    const std::optional<store::PasteId> parsed = store::PasteId::Parse(id);
    if ((*states)[i] == store::RowState::kLive) {
      std::error_code copy_error;
      fs::create_directories(BodyFile(destination / "blobs", id).parent_path(), copy_error);
      fs::copy_file(BodyFile(data_dir / "blobs", id), BodyFile(destination / "blobs", id),
                    copy_error);
      if (!copy_error) {
        ++reconciled.copied_late;
        continue;
      }
      // Named, up to a screenful: a source that lost many bodies has a problem of its own.
      if (++reconciled.without_body <= 20)
        std::fprintf(stderr, "%s: %s is live in the source and has no body there either\n",
                     kCommand, id.c_str());
    } else if (parsed) {
      ((*states)[i] == store::RowState::kDeleted ? to_mark : to_purge).push_back(*parsed);
    }
  }
  if (to_mark.empty() && to_purge.empty()) return true;

  boost::asio::thread_pool pool(1);
  boost::asio::io_context io(1);
  std::unique_ptr<store::MetaStore> copy;
  try {
    copy = store::MakeSqliteMetaStore(destination / "meta.db", {&pool, &pool, &pool});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: opening the copy: %s\n", kCommand, e.what());
    return false;
  }
  const auto deadline = [] {
    return admission::Deadline::After(SystemClock::Instance(), std::chrono::seconds(60));
  };
  Status applied = Ok();
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        for (const store::PasteId& id : to_mark) {
          applied = co_await copy->MarkDeleted(id, now, deadline());
          if (!applied.ok()) co_return;
          ++reconciled.deleted;
        }
        if (to_purge.empty()) co_return;
        applied = co_await copy->Purge(to_purge, deadline());
        if (applied.ok()) reconciled.purged = to_purge.size();
      },
      boost::asio::detached);
  io.run();
  copy.reset();
  pool.join();
  if (!applied.ok()) {
    std::fprintf(stderr, "%s: updating the copy: %s\n", kCommand, applied.error().message.c_str());
    return false;
  }
  return true;
}

bool FlushFilesystem(const fs::path& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::syncfs(fd) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) std::fprintf(stderr, "%s: flushing %s failed\n", kCommand, folder.c_str());
  return ok;
}

bool QuickCheck(const fs::path& db) {
  auto checked = store::CheckSqliteDatabase(db);
  if (!checked.ok()) {
    std::fprintf(stderr, "%s: the copy %s failed its check: %s\n", kCommand, db.c_str(),
                 checked.error().message.c_str());
    return false;
  }
  std::printf("%s: quick_check ok\n", db.filename().c_str());
  return true;
}

}  // namespace

CLI::App* AddBackupCommand(CLI::App& admin, BackupOptions& o) {
  CLI::App* cmd = admin.add_subcommand(
      "backup",
      "Copy the embedded store while it serves: meta.db as of one moment, read in file order, "
      "then the bodies' files (docs/operations.md, 'Backups'); reads the data dir, not the "
      "listener");
  cmd->add_option("DEST", o.destination, "A folder that does not exist yet, or an empty one")
      ->required();
  cmd->add_option("--data-dir", o.data_dir, "The served data dir (serve's data_dir)")
      ->envname("SLUICE_DATA_DIR")
      ->required();
  cmd->add_option("--rate", o.rate_mb, "Megabytes per second read at most, from 0.01; 0: no limit")
      ->capture_default_str()
      ->check([](const std::string& text) -> std::string {
        // Below 10 KB/s a copy of any real store would take days, and the pacer's sleep times
        // would leave the clock's range: a typo, refused as one.
        const double rate = std::strtod(text.c_str(), nullptr);
        return rate == 0 || (rate >= 0.01 && rate <= 1e6) ? "" : "0, or 0.01 to 1000000 MB/s";
      });
  cmd->add_flag("--check", o.check,
                "Afterwards, SQLite's quick_check of the copied databases (reads them again)");
  return cmd;
}

int RunBackup(const BackupOptions& o) {
  const fs::path data_dir = o.data_dir, destination = o.destination;
  std::error_code ec;
  if (!fs::is_regular_file(data_dir / "meta.db", ec)) {
    std::fprintf(stderr,
                 "%s: no meta.db in %s: not an embedded store's data dir (on PostgreSQL, back up "
                 "with pg_dump and the bucket's own tools)\n",
                 kCommand, data_dir.c_str());
    return 2;
  }
  if (!RunByTheStoresOwner(data_dir) || !UsableDestination(data_dir, destination)) return 2;
  fs::create_directories(destination, ec);
  if (ec) {
    std::fprintf(stderr, "%s: cannot create %s: %s\n", kCommand, destination.c_str(),
                 ec.message().c_str());
    return 1;
  }
  Pacer pacer(o.rate_mb);
  Reporter reporter;
  // The databases first, then the files: a body written after the snapshot is only an orphan in
  // the copy (the reaper removes it after a restore), while a row without its file would be a
  // paste lost.
  std::vector<fs::path> databases{"meta.db"};
  // From before the bodies moved into meta.db (src/app/backends.cc), or beside PostgreSQL.
  if (fs::exists(data_dir / "bodies.db", ec)) databases.emplace_back("bodies.db");
  for (const fs::path& name : databases) {
    if (!SnapshotDatabase(data_dir / name, destination / name, pacer, reporter)) return 1;
  }
  FileCounts counts;
  if (!CopyBodies(data_dir / "blobs", destination / "blobs", pacer, reporter, counts)) return 1;
  Reconciled reconciled;
  if (!ReconcileWithSource(data_dir, destination, reconciled)) return 1;
  if (!FlushFilesystem(destination)) return 1;
  if (o.check) {
    for (const fs::path& name : databases) {
      if (!QuickCheck(destination / name)) return 1;
    }
  }
  std::printf(
      "backup: %.1f MB in %.1f s (%.1f MB/s); %llu body files, %llu gone since the snapshot "
      "(deleted or expired meanwhile)\n",
      static_cast<double>(pacer.total()) / 1e6, pacer.Seconds(), pacer.MegabytesPerSecond(),
      static_cast<unsigned long long>(counts.files), static_cast<unsigned long long>(counts.gone));
  std::printf(
      "backup: pastes deleted since the snapshot before their bodies were copied: %llu marked "
      "deleted and %llu removed in the copy, as in the source; %llu bodies copied late; %llu "
      "live without a body in the source too\n",
      static_cast<unsigned long long>(reconciled.deleted),
      static_cast<unsigned long long>(reconciled.purged),
      static_cast<unsigned long long>(reconciled.copied_late),
      static_cast<unsigned long long>(reconciled.without_body));
  return 0;
}

}  // namespace sluice::app
