#include "token_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace sluice::app {
namespace {

Error Failed(const std::string& what, const std::string& path) {
  return MakeError(ErrorCode::kUnavailable,
                   fmt::format("{} {}: {}", what, path, std::strerror(errno)), "token_store");
}

// mkdir -p with mode 0700 for the folders it makes.
bool MakeFolders(const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at != dir.size() && dir[at] != '/') continue;
    const std::string part = dir.substr(0, at);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  return true;
}

Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Failed("cannot write", path);
    done += static_cast<size_t>(n);
  }
  return Ok();
}

std::string Line(const KeptPaste& p) {
  return fmt::format("{} {} {} {} {}\n", p.created_at, p.expires_at.empty() ? "-" : p.expires_at,
                     p.id, p.token, p.url);
}

}  // namespace

TokenStore TokenStore::Default() {
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state != nullptr && state[0] == '/') return TokenStore(std::string(state) + "/sluice/pastes");
  const char* home = std::getenv("HOME");
  return TokenStore(std::string(home != nullptr ? home : ".") + "/.local/state/sluice/pastes");
}

Status TokenStore::Add(const KeptPaste& paste) const {
  const std::string dir = path_.substr(0, path_.find_last_of('/'));
  if (!dir.empty() && !MakeFolders(dir)) return Failed("cannot make", dir);
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return Failed("cannot open", path_);
  // A file made before with a wider mode (by hand, or a umask-less copy) is narrowed: it holds
  // tokens that delete pastes.
  ::fchmod(fd, 0600);
  Status written = WriteAll(fd, Line(paste), path_);
  ::close(fd);
  return written;
}

std::vector<KeptPaste> TokenStore::All() const {
  std::vector<KeptPaste> out;
  std::ifstream in(path_);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    KeptPaste p;
    if (!(fields >> p.created_at >> p.expires_at >> p.id >> p.token)) continue;
    std::getline(fields >> std::ws, p.url);
    if (p.expires_at == "-") p.expires_at.clear();
    out.push_back(std::move(p));
  }
  return out;
}

std::optional<KeptPaste> TokenStore::Find(const std::string& id) const {
  std::optional<KeptPaste> found;
  for (KeptPaste& p : All()) {
    if (p.id == id) found = std::move(p);  // the last line wins
  }
  return found;
}

Status TokenStore::Remove(const std::string& id) const {
  std::string kept;
  for (const KeptPaste& p : All()) {
    if (p.id != id) kept += Line(p);
  }
  const std::string temp = path_ + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Failed("cannot open", temp);
  Status written = WriteAll(fd, kept, temp);
  ::close(fd);
  if (!written.ok()) return written;
  if (::rename(temp.c_str(), path_.c_str()) != 0) return Failed("cannot replace", path_);
  return Ok();
}

}  // namespace sluice::app
