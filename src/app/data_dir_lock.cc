#include "data_dir_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace sluice::app {

DataDirLock::DataDirLock(const std::filesystem::path& data_dir) {
  const std::filesystem::path path = data_dir / "sluice.lock";
  // Close-on-exec: a highlighter worker must not inherit the descriptor, or the lock would
  // outlive this process for as long as the worker does.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw std::runtime_error(
        fmt::format("cannot open the lock file {}: {}", path.string(), std::strerror(errno)));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char holder[32] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (error == EWOULDBLOCK) {
      const std::string pid = n > 0 ? std::string(holder, static_cast<size_t>(n)) : "unknown";
      throw std::runtime_error(fmt::format(
          "data dir {} is in use by another sluice process (pid {}, lock {}): one process per "
          "data dir; for more processes use PostgreSQL and S3 (see the README, 'Scale out')",
          data_dir.string(), pid.substr(0, pid.find('\n')), path.string()));
    }
    throw std::runtime_error(
        fmt::format("cannot lock {}: {}", path.string(), std::strerror(error)));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The lock is what matters; the pid is only for the message of a second start.
  }
}

DataDirLock::~DataDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace sluice::app
