// BlobStore on a local filesystem: one file per body under root/<first two id chars>/<id>.
//
// A body is written to root/.tmp, made durable, renamed into place and the rename made durable, so
// a reader sees the whole body or nothing, even after kill -9 or power loss. Every flush names the
// files and directories of the batch only: fdatasync(2) of each temp file, fsync(2) of each shard
// folder the batch renamed into, and of root when a shard folder is new. Never syncfs(2): it
// flushes the whole filesystem, so a neighbour with gigabytes of dirty page cache (a backup, a log
// shipper, a `dd`) would hold every create until all of its data reached the disk.
//
// The batch still shares the device's work: sync_file_range(SYNC_FILE_RANGE_WRITE) first submits
// the writeback of every temp file of the batch (64 at a time) without waiting, so the fdatasyncs
// that follow mostly wait on IO already in flight together; on ext4 the first of them commits the
// journal transaction that holds the other files' metadata too, and the rest mostly pay a cache
// flush each. The renames then cost one fsync per distinct shard folder of the batch, not per body.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <utility>

#include "sluice/asio/completion.h"
#include "sluice/store/backends.h"
#include "sluice/store/group_commit.h"

namespace sluice::store {
namespace {

using boost::asio::awaitable;
namespace fs = std::filesystem;

Error IoError(std::string_view what, int err) {
  const bool full = err == ENOSPC || err == EDQUOT;
  return MakeError(ErrorCode::kUnavailable,
                   fmt::format("blob store: {}: {}", what, std::strerror(err)),
                   full ? "storage_full" : "storage_unavailable");
}

class UniqueFd {
 public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  /// Closes now and reports the error close(2) may carry for buffered writes.
  int Close() {
    if (fd_ < 0) return 0;
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

int WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

struct PutOp {
  PasteId id;
  std::shared_ptr<const std::string> body;
  admission::Deadline deadline;
};

class FsBlobStore final : public BlobStore {
 public:
  FsBlobStore(const fs::path& root, BlockingPools pools, MetricsRegistry* metrics)
      : root_(root), tmp_(root / ".tmp"), pools_(pools) {
    std::error_code ec;
    fs::create_directories(tmp_, ec);
    if (ec) throw std::runtime_error("cannot create " + tmp_.string() + ": " + ec.message());
    // Whatever a crash left half-written was never acknowledged: drop it.
    for (const auto& entry : fs::directory_iterator(tmp_, ec)) fs::remove(entry.path(), ec);
    root_fd_ = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd_ < 0) throw std::runtime_error("cannot open " + root_.string());
    // The shard folders there now (made by an earlier run, which may have died before flushing
    // root) become durable with one flush of root here, and root's own entry with one of its
    // parent (the first start creates root): from then on only a new shard folder needs root
    // flushed. Nothing is acknowledged yet, so a failure here only means a failed start.
    std::error_code list_ec;
    for (const auto& entry : fs::directory_iterator(root_, list_ec)) {
      const std::string name = entry.path().filename().string();
      std::error_code type_ec;
      if (name.size() == 2 && name[0] != '.' && entry.is_directory(type_ec)) {
        durable_shards_.insert(name);
      }
    }
    if (list_ec) {
      throw std::runtime_error("cannot list " + root_.string() + ": " + list_ec.message());
    }
    if (::fsync(root_fd_) != 0) {
      throw std::runtime_error("cannot flush " + root_.string() + ": " + std::strerror(errno));
    }
    const fs::path parent = root_.parent_path().empty() ? fs::path(".") : root_.parent_path();
    if (const int err = FsyncPath(parent); err != 0) {
      throw std::runtime_error("cannot flush " + parent.string() + ": " + std::strerror(err));
    }
    committer_ = std::make_unique<GroupCommitter<PutOp>>(
        "commit-files", kMaxBatch,
        [this](std::vector<GroupCommitter<PutOp>::Item>& batch) { Commit(batch); },
        CommitMetrics::In(metrics, "files"));
  }

  ~FsBlobStore() override {
    committer_.reset();
    ::close(root_fd_);
  }

  awaitable<Status> Put(PasteId id, std::shared_ptr<const std::string> body,
                        admission::Deadline deadline) override {
    return committer_->Submit(PutOp{id, std::move(body), deadline});
  }

  awaitable<Result<std::string>> Get(PasteId id, admission::Deadline) override {
    return asio_glue::RunBlocking(*pools_.read, [this, id]() -> Result<std::string> {
      UniqueFd fd(::open(FinalPath(id).c_str(), O_RDONLY | O_CLOEXEC));
      if (fd.get() < 0) {
        if (errno == ENOENT) return MakeError(ErrorCode::kNotFound, "no such body", "not_found");
        return IoError("open", errno);
      }
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0) return IoError("stat", errno);
      std::string body(static_cast<size_t>(st.st_size), '\0');
      size_t done = 0;
      while (done < body.size()) {
        const ssize_t n =
            ::pread(fd.get(), body.data() + done, body.size() - done, static_cast<off_t>(done));
        if (n < 0) {
          if (errno == EINTR) continue;
          return IoError("read", errno);
        }
        if (n == 0) break;
        done += static_cast<size_t>(n);
      }
      body.resize(done);
      return body;
    });
  }

  awaitable<Status> Delete(PasteId id, admission::Deadline deadline) override {
    return DeleteMany({id}, deadline);
  }

  // One trip to the cleanup pool for the whole batch.
  awaitable<Status> DeleteMany(std::vector<PasteId> ids, admission::Deadline) override {
    return asio_glue::RunBlocking(*pools_.cleanup, [this, ids = std::move(ids)]() -> Status {
      for (const PasteId& id : ids) {
        if (::unlink(FinalPath(id).c_str()) != 0 && errno != ENOENT) {
          return IoError("unlink", errno);
        }
      }
      return Ok();
    });
  }

  awaitable<Result<std::vector<BlobInfo>>> List(std::string after, size_t limit,
                                                admission::Deadline) override {
    return asio_glue::RunBlocking(
        *pools_.cleanup,
        [this, after = std::move(after), limit]() -> Result<std::vector<BlobInfo>> {
          return ListSorted(after, limit);
        });
  }

 private:
  static constexpr size_t kMaxBatch = 256;
  static constexpr size_t kMaxOpenTemps = 64;  // temp files open at once on the committer thread

  fs::path FanOut(const PasteId& id) const { return root_ / std::string(id.view().substr(0, 2)); }
  fs::path FinalPath(const PasteId& id) const { return FanOut(id) / std::string(id.view()); }

  Result<std::vector<BlobInfo>> ListSorted(const std::string& after, size_t limit) const {
    std::error_code ec;
    std::set<std::string> shards;
    for (const auto& entry : fs::directory_iterator(root_, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.size() == 2 && name[0] != '.' && name >= after.substr(0, 2)) shards.insert(name);
    }
    if (ec) return IoError("list", ec.value());
    std::vector<BlobInfo> out;
    for (const std::string& shard : shards) {
      std::set<std::string> names;
      for (const auto& entry : fs::directory_iterator(root_ / shard, ec)) {
        std::string name = entry.path().filename().string();
        if (name > after && PasteId::Parse(name)) names.insert(std::move(name));
      }
      for (const std::string& name : names) {
        struct stat st {};
        if (::stat((root_ / shard / name).c_str(), &st) != 0) {
          if (errno == ENOENT) continue;  // deleted meanwhile
          // Listed undated, so the reaper keeps it and counts it, rather than dropped unseen.
          out.push_back(BlobInfo{*PasteId::Parse(name), std::nullopt});
        } else {
          out.push_back(BlobInfo{*PasteId::Parse(name), static_cast<int64_t>(st.st_mtime)});
        }
        if (out.size() >= limit) return out;
      }
    }
    return out;
  }

  // Runs on the committer thread only.
  void Commit(std::vector<GroupCommitter<PutOp>::Item>& batch) {
    std::vector<std::string> tmp_paths(batch.size());
    // Steps 1 and 2 run over windows of kMaxOpenTemps bodies: a temp file stays open from its write
    // to its flush (fdatasync needs the fd, and reopening by path would cost a lookup and an open
    // per body), and a window bounds how many the committer holds at once (the server keeps only
    // 256 descriptors spare beside its connection cap, src/app/serve_options.cc).
    for (size_t begin = 0; begin < batch.size(); begin += kMaxOpenTemps) {
      WriteAndFlush(batch, tmp_paths, begin, std::min(batch.size(), begin + kMaxOpenTemps));
    }

    // Step 3: the renames, noting which shard folders they touched and which of those are new.
    std::map<std::string, std::vector<size_t>> renamed_into;  // shard -> items renamed into it
    std::set<std::string> new_shards;
    for (size_t i = 0; i < batch.size(); ++i) {
      auto& item = batch[i];
      if (!item.status.ok()) continue;
      const std::string shard_name(item.op.id.view().substr(0, 2));
      if (!durable_shards_.contains(shard_name)) {
        // EEXIST: created by an earlier batch whose flush of root failed; still flushed below.
        if (::mkdir(FanOut(item.op.id).c_str(), 0755) != 0 && errno != EEXIST) {
          item.status = IoError("mkdir", errno);
          ::unlink(tmp_paths[i].c_str());
          continue;
        }
        new_shards.insert(shard_name);
      }
      if (::rename(tmp_paths[i].c_str(), FinalPath(item.op.id).c_str()) != 0) {
        item.status = IoError("rename", errno);
        ::unlink(tmp_paths[i].c_str());
        continue;
      }
      renamed_into[shard_name].push_back(i);
    }

    // Step 4: make the renames durable: one fsync per shard folder of the batch writes its new
    // entries (and, on ext4/xfs, the journal transaction that holds the whole rename). .tmp is not
    // flushed: should the old name survive a crash beside the new one, the start drops it. A
    // failure fails the bodies of that folder; those that land anyway are orphans for the reaper,
    // never acknowledged pastes.
    for (const auto& [shard_name, items] : renamed_into) {
      const int err = FsyncPath(root_ / shard_name);
      if (err == 0) continue;
      const Error e = IoError("flush renames", err);
      for (size_t i : items) batch[i].status = e;
    }
    // Step 5: a shard folder created by this batch exists only through its entry in root: flush
    // root once for all of them. Only then is a shard folder known durable and root left alone.
    if (new_shards.empty()) return;
    if (::fsync(root_fd_) != 0) {
      const Error e = IoError("flush shard folders", errno);
      for (const std::string& shard_name : new_shards) {
        const auto it = renamed_into.find(shard_name);
        if (it == renamed_into.end()) continue;
        for (size_t i : it->second) batch[i].status = e;
      }
      return;
    }
    durable_shards_.insert(new_shards.begin(), new_shards.end());
  }

  // Steps 1 and 2 for batch[begin, end): each body written to its temp file and made durable.
  void WriteAndFlush(std::vector<GroupCommitter<PutOp>::Item>& batch,
                     std::vector<std::string>& tmp_paths, size_t begin, size_t end) {
    std::vector<UniqueFd> fds;
    fds.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) {
      auto& item = batch[i];
      UniqueFd& fd = fds.emplace_back(-1);
      if (item.op.deadline.Expired(SystemClock::Instance())) {
        // Abandoned by its caller while queued: writing it now would only make an orphan.
        item.status = MakeError(ErrorCode::kDeadlineExceeded, "write abandoned before it ran",
                                "deadline_exceeded");
        continue;
      }
      tmp_paths[i] = (tmp_ / fmt::format("{}.{}", item.op.id.view(), ++tmp_serial_)).string();
      fd = UniqueFd(::open(tmp_paths[i].c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      const int err = fd.get() < 0 ? errno : WriteAll(fd.get(), *item.op.body);
      if (err != 0) {
        item.status = IoError("write", err);
        fd.Close();
        ::unlink(tmp_paths[i].c_str());
      }
    }
    // Step 1: start the writeback of every body of the window without waiting for it, so the
    // device gets them all at once instead of one file per fdatasync round trip. A hint only: its
    // errors (EINVAL/ENOSYS where a filesystem lacks it, EIO) are left for fdatasync to report.
    for (size_t i = begin; i < end; ++i) {
      if (batch[i].status.ok()) {
        ::sync_file_range(fds[i - begin].get(), 0, 0, SYNC_FILE_RANGE_WRITE);
      }
    }
    // Step 2: make each body durable before its rename can be. fdatasync waits for the data
    // (mostly in flight already) and writes the metadata needed to read it back: the size and the
    // block map of the new inode. The temp file's own name in .tmp need not be durable: the rename
    // replaces it, and what a crash leaves in .tmp is dropped at start. A failed flush fails that
    // body alone.
    for (size_t i = begin; i < end; ++i) {
      auto& item = batch[i];
      if (!item.status.ok()) continue;
      UniqueFd& fd = fds[i - begin];
      int err = ::fdatasync(fd.get()) == 0 ? 0 : errno;
      const int close_err = fd.Close();
      if (err == 0) err = close_err;
      if (err != 0) {
        item.status = IoError("flush body", err);
        ::unlink(tmp_paths[i].c_str());
      }
    }
  }

  static int FsyncPath(const fs::path& dir) {
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.get() < 0) return errno;
    return ::fsync(fd.get()) == 0 ? 0 : errno;
  }

  const fs::path root_;
  const fs::path tmp_;
  const BlockingPools pools_;
  int root_fd_ = -1;
  uint64_t tmp_serial_ = 0;  // committer thread only
  // Shard folders whose entry in root is durable (committer thread only; the constructor fills it
  // with those that exist at start, after flushing root).
  std::set<std::string> durable_shards_;
  std::unique_ptr<GroupCommitter<PutOp>> committer_;
};

}  // namespace

std::unique_ptr<BlobStore> MakeFsBlobStore(const std::filesystem::path& root, BlockingPools pools,
                                           MetricsRegistry* metrics) {
  return std::make_unique<FsBlobStore>(root, pools, metrics);
}

}  // namespace sluice::store
