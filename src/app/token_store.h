// The delete tokens `sluice paste` keeps for `sluice delete` and `sluice list`: one line per paste
// in $XDG_STATE_HOME/sluice/pastes (else ~/.local/state/sluice/pastes), the file mode 0600 and
// its folder 0700, since a token deletes the paste.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sluice/common/result.h"

namespace sluice::app {

/// One line of the file: "CREATED_UNIX EXPIRES_AT ID TOKEN URL", space separated (no field but
/// the URL, which is last, can hold a space; none does).
struct KeptPaste {
  int64_t created_at = 0;
  std::string expires_at;  // RFC 3339, as the server said
  std::string id;
  std::string token;
  std::string url;
};

/// Not thread-safe; one command at a time uses it. Appends are single write(2)s of one line to a
/// file opened O_APPEND, so two commands pasting at once do not interleave their lines.
class TokenStore {
 public:
  explicit TokenStore(std::string path) : path_(std::move(path)) {}
  /// The file named by $XDG_STATE_HOME or $HOME.
  static TokenStore Default();

  const std::string& path() const { return path_; }
  /// Appends `paste`, creating the folder (0700) and the file (0600) if need be.
  Status Add(const KeptPaste& paste) const;
  /// Every line that parses, oldest first; an absent file is an empty list.
  std::vector<KeptPaste> All() const;
  std::optional<KeptPaste> Find(const std::string& id) const;
  /// Rewrites the file without `id` (a temp file renamed over it, mode 0600).
  Status Remove(const std::string& id) const;

 private:
  std::string path_;
};

}  // namespace sluice::app
