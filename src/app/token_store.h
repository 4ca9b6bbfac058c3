// The delete tokens `sluice paste` keeps for `sluice delete` and `sluice list`: one line per paste
// in $XDG_STATE_HOME/sluice/pastes (else ~/.local/state/sluice/pastes), the file mode 0600 and
// its folder 0700, since a token deletes the paste.
//
// A token is bound to the origin that issued it (the scheme, host, port and base path the create
// was sent to): `sluice delete` sends it there and nowhere else, so a link that names another
// host, by mistake or by a forger's design, cannot make the CLI hand the token over.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/result.h"

namespace sluice::app {

/// One line of the file: "CREATED_UNIX EXPIRES_AT ID TOKEN URL ORIGIN", space separated, no field
/// empty ("-" for none). Lines of older versions, "CREATED_UNIX EXPIRES_AT ID TOKEN URL", have no
/// ORIGIN: theirs is the URL's server, the one that printed the link.
struct KeptPaste {
  int64_t created_at = 0;
  std::string expires_at;  // RFC 3339, as the server said; empty if unknown
  std::string id;          // 12 base62 characters
  std::string token;       // IsTokenText
  std::string url;         // the link printed; IsLinkText, or empty
  std::string origin;      // ServerUrl::Origin() of the server the create went to
};

/// Whether `text` can be a delete token: 1 to 256 characters of base64url or base64 (token68,
/// RFC 9110), which is all an Authorization header may carry; sluice mints 22 of base64url.
bool IsTokenText(std::string_view text);

/// Whether `text` can be an expiry as the server writes it (RFC 3339: digits, T, Z, :, ., +, -),
/// at most 40 characters.
bool IsTimestampText(std::string_view text);

/// Not thread-safe; one command at a time uses it. Appends are single write(2)s of one line to a
/// file opened O_APPEND, so two commands pasting at once do not interleave their lines.
class TokenStore {
 public:
  explicit TokenStore(std::string path) : path_(std::move(path)) {}
  /// The file named by $XDG_STATE_HOME or $HOME; with neither an absolute path, a store that
  /// holds nothing and refuses to keep anything.
  static TokenStore Default();

  const std::string& path() const { return path_; }
  /// Appends `paste`, creating the folder (0700) and the file (0600) if need be. InvalidArgument,
  /// and nothing written, unless the id is a paste id, the token IsTokenText, the origin and (if
  /// any) the URL IsLinkText and the expiry one word of RFC 3339's characters: no field can
  /// break the line or add one.
  Status Add(const KeptPaste& paste) const;
  /// Every line that parses and passes Add's checks, oldest first; an absent file is an empty
  /// list.
  std::vector<KeptPaste> All() const;
  /// The pastes kept under `id`, whatever their origin, oldest first.
  std::vector<KeptPaste> ForId(std::string_view id) const;
  /// Rewrites the file without the lines of `id` kept for `origin` (a temp file renamed over it,
  /// mode 0600).
  Status Remove(std::string_view id, std::string_view origin) const;

 private:
  std::string path_;
};

}  // namespace sluice::app
