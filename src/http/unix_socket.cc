// The file of a Unix socket the admin listener binds (unix_socket.h).
#include "unix_socket.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace sluice::http {

std::string ErrnoText(int error) {
  return std::error_code(error, std::system_category()).message();
}

void ClearStaleSocket(const std::string& path) {
  const std::string where = "cannot listen on unix:" + path;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw std::runtime_error(where + ": " + ErrnoText(errno));
  }
  if (!S_ISSOCK(st.st_mode)) {
    throw std::runtime_error(where +
                             ": the path exists and is not a socket; remove it or choose "
                             "another admin_listen");
  }
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) throw std::runtime_error(where + ": " + ErrnoText(errno));
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  const int error = rc == 0 ? 0 : errno;
  ::close(fd);
  if (rc == 0 || error == EAGAIN || error == EINPROGRESS) {
    throw std::runtime_error(where + ": another process is already listening there");
  }
  if (error != ECONNREFUSED) {
    throw std::runtime_error(
        where + ": cannot tell whether another process listens there: " + ErrnoText(error));
  }
  spdlog::warn("unix:{}: removing a stale socket file that no process listens on", path);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw std::runtime_error(where + ": cannot remove the stale socket file: " + ErrnoText(errno));
  }
}

int LockSocketPath(const std::string& path) {
  const std::string lock_path = path + ".lock";
  const std::string where = "cannot listen on unix:" + path;
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    throw std::runtime_error(where + ": cannot open " + lock_path + ": " + ErrnoText(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd);
    if (error == EWOULDBLOCK) {
      throw std::runtime_error(where +
                               ": another process is already listening there, or starting to (" +
                               lock_path + " is locked)");
    }
    throw std::runtime_error(where + ": cannot lock " + lock_path + ": " + ErrnoText(error));
  }
  return fd;
}

}  // namespace sluice::http
