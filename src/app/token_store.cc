#include "token_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "server_url.h"
#include "sluice/store/paste.h"

namespace sluice::app {
namespace {

Error Homeless() {
  return MakeError(ErrorCode::kUnavailable,
                   "no place to keep it: neither XDG_STATE_HOME nor HOME is an absolute path",
                   "token_store");
}

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

// Add's checks, which All applies to each line read as well: a line that fails them (written by
// hand, or forged through an older sluice) is skipped, never obeyed.
Status Check(const KeptPaste& p) {
  const auto bad = [&](std::string_view what, std::string_view value) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        fmt::format("not keeping the token of '{}': {} '{}' is not one", p.id, what, value),
        "token_store");
  };
  if (!store::PasteId::Parse(p.id)) return bad("the id", p.id);
  if (!IsTokenText(p.token)) return bad("the token", p.token);
  if (!IsLinkText(p.origin)) return bad("the origin", p.origin);
  if (!p.url.empty() && !IsLinkText(p.url)) return bad("the link", p.url);
  if (!p.expires_at.empty() && !IsTimestampText(p.expires_at))
    return bad("the expiry", p.expires_at);
  return Ok();
}

std::string Line(const KeptPaste& p) {
  return fmt::format("{} {} {} {} {} {}\n", p.created_at, p.expires_at.empty() ? "-" : p.expires_at,
                     p.id, p.token, p.url.empty() ? "-" : p.url, p.origin);
}

std::optional<KeptPaste> ParseLine(std::string_view line) {
  std::vector<std::string_view> fields;
  for (size_t at = 0; at <= line.size();) {
    const size_t space = std::min(line.find(' ', at), line.size());
    fields.push_back(line.substr(at, space - at));
    at = space + 1;
  }
  // 6 fields now; 5 from older versions (the URL last, maybe empty).
  if (fields.size() != 5 && fields.size() != 6) return std::nullopt;
  KeptPaste p;
  const std::string_view created = fields[0];
  if (created.empty() || created.size() > 18 ||
      created.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  p.created_at = std::stoll(std::string(created));
  if (fields[1] != "-") p.expires_at = fields[1];
  p.id = fields[2];
  p.token = fields[3];
  if (fields[4] != "-") p.url = fields[4];
  if (fields.size() == 6) {
    p.origin = fields[5];
  } else if (auto link = ParsePasteLink(p.url); link.ok()) {
    // An older line: its token goes where the link it printed points, as it always did.
    p.origin = link->server.Origin();
  }
  if (!Check(p).ok()) return std::nullopt;
  return p;
}

}  // namespace

TokenStore TokenStore::Default() {
  // The XDG base directory rules: a relative path is to be ignored. Without an absolute one of
  // either, nothing is kept rather than a .local/state in whatever folder the command ran from (a
  // cron job, a CI step, `env -i`): the token is printed either way.
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state != nullptr && state[0] == '/') return TokenStore(std::string(state) + "/sluice/pastes");
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/')
    return TokenStore(std::string(home) + "/.local/state/sluice/pastes");
  return TokenStore("");
}

bool IsTimestampText(std::string_view text) {
  return !text.empty() && text.size() <= 40 &&
         text.find_first_not_of("0123456789TZ:.+-") == std::string_view::npos;
}

bool IsTokenText(std::string_view text) {
  if (text.empty() || text.size() > 256) return false;
  const size_t end = text.find_last_not_of('=') + 1;  // token68 may end in '=' padding
  return end > 0 &&
         std::all_of(text.begin(), text.begin() + static_cast<ptrdiff_t>(end), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' ||
                  c == '.' || c == '~' || c == '+' || c == '/';
         });
}

Status TokenStore::Add(const KeptPaste& paste) const {
  if (Status checked = Check(paste); !checked.ok()) return checked;
  if (path_.empty()) return Homeless();
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
    if (auto p = ParseLine(line)) out.push_back(std::move(*p));
  }
  return out;
}

std::vector<KeptPaste> TokenStore::ForId(std::string_view id) const {
  std::vector<KeptPaste> out;
  for (KeptPaste& p : All()) {
    if (p.id == id) out.push_back(std::move(p));
  }
  return out;
}

Status TokenStore::Remove(std::string_view id, std::string_view origin) const {
  if (path_.empty()) return Homeless();
  std::string kept;
  for (const KeptPaste& p : All()) {
    if (p.id != id || p.origin != origin) kept += Line(p);
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
