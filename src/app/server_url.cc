#include "server_url.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "sluice/store/paste.h"

namespace sluice::app {

namespace {

constexpr std::string_view kHttp = "http://";
constexpr std::string_view kHttps = "https://";
// Longer than any link sluice makes (a base URL, 12 characters of id and an extension), short
// enough to show whole in a message.
constexpr size_t kMaxLinkBytes = 2048;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

bool IsLinkText(std::string_view text) {
  if (text.size() > kMaxLinkBytes) return false;
  if (!Lower(text.substr(0, kHttps.size())).starts_with(kHttps) &&
      !Lower(text.substr(0, kHttp.size())).starts_with(kHttp)) {
    return false;
  }
  // Printable ASCII only: 0x21-0x7E. A space would split a line of the token file; a control
  // character or a non-ASCII byte is nothing a URL needs (an IDN travels as punycode).
  return std::all_of(text.begin(), text.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

std::string ServerUrl::Origin() const {
  if (!socket_path.empty()) return "unix:" + socket_path;
  const std::string name = Lower(host);
  const bool v6 = name.find(':') != std::string::npos;
  return fmt::format("{}://{}{}{}:{}{}", tls ? "https" : "http", v6 ? "[" : "", name, v6 ? "]" : "",
                     port, base_path);
}

Result<ServerUrl> ParseServerUrl(std::string_view url) {
  const auto bad = [&](std::string_view why) {
    return MakeError(ErrorCode::kInvalidArgument, fmt::format("--server '{}': {}", url, why));
  };
  if (!IsLinkText(url)) {
    return bad(
        "want a URL like https://paste.example or http://127.0.0.1:8080 (printable ASCII, no "
        "spaces)");
  }
  const bool tls = Lower(url.substr(0, kHttps.size())) == kHttps;
  std::string_view rest = url.substr(tls ? kHttps.size() : kHttp.size());
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (path.find_first_of("?#") != std::string_view::npos ||
      authority.find_first_of("?#") != std::string_view::npos) {
    return bad("no query or fragment, please");
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (authority.find('@') != std::string_view::npos) return bad("user info is not supported");

  ServerUrl out;
  out.tls = tls;
  out.host_header = std::string(authority);
  out.base_path = std::string(path);
  std::string_view port;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in the host");
    out.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (!after.starts_with(':')) return bad("junk after the IPv6 address");
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) return bad("no host");
  if (port.empty()) port = tls ? "443" : "80";
  int number = 0;
  for (char c : port) {
    if (c < '0' || c > '9' || number > 65535) return bad("the port is not a number in 1-65535");
    number = number * 10 + (c - '0');
  }
  if (number < 1 || number > 65535) return bad("the port is not a number in 1-65535");
  out.port = std::to_string(number);
  return out;
}

Result<PasteLink> ParsePasteLink(std::string_view link) {
  const auto bad = [&](std::string_view why) {
    return MakeError(ErrorCode::kInvalidArgument,
                     fmt::format("'{}' is not a paste's link: {}", link, why));
  };
  if (!IsLinkText(link)) {
    return bad("want http://HOST/ID or https://HOST/ID, printable ASCII without spaces");
  }
  PasteLink out;
  std::string_view url = link;
  if (const size_t hash = url.find('#'); hash != std::string_view::npos) {
    out.key = std::string(url.substr(hash + 1));
    url = url.substr(0, hash);
  }
  url = url.substr(0, url.find('?'));
  while (!url.empty() && url.back() == '/') url.remove_suffix(1);
  const size_t slash = url.find_last_of('/');
  const size_t scheme_end = url.find("://") + 3;
  if (slash == std::string_view::npos || slash < scheme_end) return bad("it has no paste id");
  // The id, then maybe ".EXT" (the view's language): nothing else may follow the 12 characters.
  const std::string_view segment = url.substr(slash + 1);
  const std::string_view id = segment.substr(0, segment.find('.'));
  if (!store::PasteId::Parse(id)) {
    return bad("a paste id is exactly 12 characters of A-Z, a-z and 0-9");
  }
  out.id = std::string(id);
  std::string_view server = url.substr(0, slash);
  for (std::string_view suffix : {"/raw", "/api/v1/pastes", "/documents"}) {
    if (server.ends_with(suffix)) server.remove_suffix(suffix.size());
  }
  auto parsed = ParseServerUrl(server);
  if (!parsed.ok()) return bad(parsed.error().message);
  out.server = std::move(*parsed);
  return out;
}

std::string PercentEncode(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

}  // namespace sluice::app
