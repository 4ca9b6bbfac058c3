// One serving process per data dir. Two processes on one embedded store disagree about what
// exists (each keeps its own cache of pastes: after a delete, reads alternate 200 and 404), and a
// hurried restart can overlap the old process with the new one. An exclusive lock on a file in the
// data dir, held for the life of the process, makes the second start fail with a clear message.
#pragma once

#include <filesystem>
#include <string>

namespace sluice::app {

class DataDirLock {
 public:
  /// Locks `data_dir`/sluice.lock (flock, exclusive, non-blocking) and writes this process's id
  /// in it. Throws std::runtime_error naming the lock file and the holder's pid when another
  /// process holds it. The kernel releases the lock when the process ends, however it ends.
  explicit DataDirLock(const std::filesystem::path& data_dir);
  ~DataDirLock();

  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace sluice::app
