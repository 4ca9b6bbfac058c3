// BlobStore on a local filesystem: one file per body under root/<first two id chars>/<id>.
//
// A body is written to root/.tmp, made durable, renamed into place and the rename made durable, so
// a reader sees the whole body or nothing, even after kill -9 or power loss. The flushes are shared
// by a batch: one syncfs(2) covers every temp file of the batch and a second covers every rename.
// The disk this was sized on does about 1,000 serial fsyncs/s but about 24,000 bodies/s when a
// batch shares one flush; per-file fsync cannot reach the 7,000 durable creates/s target.
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
#include <mutex>
#include <set>
#include <stdexcept>

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
  int get() const { return fd_; }
  /// Closes now and reports the error close(2) may carry for buffered writes.
  int Close() {
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
  FsBlobStore(const fs::path& root, BlockingPools pools)
      : root_(root), tmp_(root / ".tmp"), pools_(pools) {
    std::error_code ec;
    fs::create_directories(tmp_, ec);
    if (ec) throw std::runtime_error("cannot create " + tmp_.string() + ": " + ec.message());
    // Whatever a crash left half-written was never acknowledged: drop it.
    for (const auto& entry : fs::directory_iterator(tmp_, ec)) fs::remove(entry.path(), ec);
    root_fd_ = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd_ < 0) throw std::runtime_error("cannot open " + root_.string());
    committer_ = std::make_unique<GroupCommitter<PutOp>>(
        kMaxBatch, [this](std::vector<GroupCommitter<PutOp>::Item>& batch) { Commit(batch); });
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

  awaitable<Status> Delete(PasteId id, admission::Deadline) override {
    return asio_glue::RunBlocking(*pools_.cleanup, [this, id]() -> Status {
      if (::unlink(FinalPath(id).c_str()) != 0 && errno != ENOENT) return IoError("unlink", errno);
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
    bool any_written = false;
    for (size_t i = 0; i < batch.size(); ++i) {
      auto& item = batch[i];
      if (item.op.deadline.Expired(SystemClock::Instance())) {
        // Abandoned by its caller while queued: writing it now would only make an orphan.
        item.status = MakeError(ErrorCode::kDeadlineExceeded, "write abandoned before it ran",
                                "deadline_exceeded");
        continue;
      }
      tmp_paths[i] = (tmp_ / fmt::format("{}.{}", item.op.id.view(), ++tmp_serial_)).string();
      UniqueFd fd(::open(tmp_paths[i].c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      int err = fd.get() < 0 ? errno : WriteAll(fd.get(), *item.op.body);
      if (err == 0) err = fd.Close();
      if (err != 0) {
        item.status = IoError("write", err);
        ::unlink(tmp_paths[i].c_str());
        continue;
      }
      any_written = true;
    }
    if (!any_written) return;
    if (::syncfs(root_fd_) != 0) {
      FailWritten(batch, tmp_paths, IoError("flush bodies", errno));
      return;
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      auto& item = batch[i];
      if (!item.status.ok()) continue;
      const fs::path shard = FanOut(item.op.id);
      const std::string shard_name(item.op.id.view().substr(0, 2));
      if (!known_shards_.contains(shard_name)) {
        if (::mkdir(shard.c_str(), 0755) != 0 && errno != EEXIST) {
          item.status = IoError("mkdir", errno);
          ::unlink(tmp_paths[i].c_str());
          continue;
        }
        known_shards_.insert(shard_name);
      }
      if (::rename(tmp_paths[i].c_str(), FinalPath(item.op.id).c_str()) != 0) {
        item.status = IoError("rename", errno);
        ::unlink(tmp_paths[i].c_str());
      }
    }
    // The renames (and any new shard folder) are directory updates: flushed together here. If this
    // fails the bodies may or may not be visible after a crash; they are reported failed and any
    // that land are orphans for the reaper, never acknowledged pastes.
    if (::syncfs(root_fd_) != 0) {
      const Error e = IoError("flush renames", errno);
      for (auto& item : batch) {
        if (item.status.ok()) item.status = e;
      }
    }
  }

  static void FailWritten(std::vector<GroupCommitter<PutOp>::Item>& batch,
                          const std::vector<std::string>& tmp_paths, const Error& e) {
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!batch[i].status.ok()) continue;
      batch[i].status = e;
      ::unlink(tmp_paths[i].c_str());
    }
  }

  const fs::path root_;
  const fs::path tmp_;
  const BlockingPools pools_;
  int root_fd_ = -1;
  uint64_t tmp_serial_ = 0;             // committer thread only
  std::set<std::string> known_shards_;  // committer thread only: shard folders that exist
  std::unique_ptr<GroupCommitter<PutOp>> committer_;
};

}  // namespace

std::unique_ptr<BlobStore> MakeFsBlobStore(const std::filesystem::path& root, BlockingPools pools) {
  return std::make_unique<FsBlobStore>(root, pools);
}

}  // namespace sluice::store
