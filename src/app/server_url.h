// The addresses the command line talks to: a server's base URL (`--server`, `SLUICE_SERVER`,
// `--admin`), the link of a paste (`sluice get URL`, `sluice delete URL`), and the origin a kept
// delete token is bound to (docs/sharing.md, "The command line").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "sluice/common/result.h"

namespace sluice::app {

/// Where requests go: an http:// or https:// base URL, or (for `sluice admin` only) a Unix socket.
struct ServerUrl {
  std::string host;         // for the resolver: no brackets around an IPv6 literal
  std::string port;         // digits
  std::string host_header;  // as written in the URL
  std::string base_path;    // "" or "/prefix", no trailing slash
  bool tls = false;         // https://: the system's certificate store and a hostname check
  std::string socket_path;  // non-empty: a Unix socket; host, port and tls unused

  /// "scheme://host:port/base": the scheme and host in lower case, the port always written, the
  /// base path as given. Two URLs of one server compare equal whatever their spelling
  /// (http://Example:80/ and http://example are one origin).
  std::string Origin() const;
};

/// Parses an http:// or https:// base URL: no user info, query or fragment; trailing slashes
/// dropped. InvalidArgument saying what is wrong otherwise.
Result<ServerUrl> ParseServerUrl(std::string_view url);

/// Whether `text` can be a link the CLI prints, keeps or follows: http:// or https://, printable
/// ASCII without spaces (no control character, no line break, nothing a terminal obeys), at most
/// 2,048 bytes. A server's answer that is not is refused before it reaches a terminal or the
/// token file.
bool IsLinkText(std::string_view text);

/// A paste's link as people copy it: http://HOST[/prefix]/ID, /ID.py, /raw/ID, /ID?lang=x,
/// /api/v1/pastes/ID, /documents/ID, each maybe with #KEY.
struct PasteLink {
  ServerUrl server;  // what precedes the id (less /raw, the API's path or /documents)
  std::string id;    // 12 base62 characters
  std::string key;   // the fragment: an encrypted paste's key; never sent
};

/// InvalidArgument unless `link` is IsLinkText and its last path segment is a paste id (exactly
/// 12 base62 characters), alone or followed by ".EXT".
Result<PasteLink> ParsePasteLink(std::string_view link);

/// `text` with everything but RFC 3986's unreserved characters percent-encoded: for a query
/// value or a path segment.
std::string PercentEncode(std::string_view text);

}  // namespace sluice::app
