// Helpers of the SharedState interface that do not depend on a backend.
#include "sluice/store/shared_state.h"

#include <cctype>
#include <cstdlib>
#include <optional>

namespace sluice::store {

namespace {

Error BadUrl(std::string what) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(what), "bad_cache_url");
}

// %XX sequences of a user or password; nullopt for a broken one.
std::optional<std::string> PercentDecoded(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      return std::nullopt;
    }
    const long v = std::strtol(std::string(s.substr(i + 1, 2)).c_str(), nullptr, 16);
    out += static_cast<char>(v);
    i += 2;
  }
  return out;
}

}  // namespace

boost::asio::awaitable<Result<std::vector<double>>> SharedState::PeekAll(
    std::vector<BucketTake> /*buckets*/, admission::Deadline /*deadline*/) {
  co_return MakeError(ErrorCode::kUnavailable, "this shared state cannot read buckets",
                      "cache_unavailable");
}

Result<RedisOptions> ParseRedisUrl(std::string_view url) {
  RedisOptions o;
  std::string_view rest;
  if (url.substr(0, 8) == "redis://") {
    rest = url.substr(8);
  } else if (url.substr(0, 9) == "rediss://") {
    rest = url.substr(9);
    o.tls = true;
  } else {
    return BadUrl("expected redis://HOST:PORT or rediss://HOST:PORT");
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  // The password may hold anything but '@' unencoded, so the host starts after the last '@'.
  const size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view credentials = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = credentials.find(':');
    auto user = PercentDecoded(credentials.substr(0, colon));
    auto password = PercentDecoded(colon == std::string_view::npos ? std::string_view()
                                                                   : credentials.substr(colon + 1));
    if (!user || !password) return BadUrl("bad percent-encoding in the cache URL's credentials");
    // "USER@" alone names the user (its password from REDIS_PASSWORD); ":PASSWORD@" is the
    // default user's password.
    o.user = *user;
    o.password = *password;
  }
  const std::string shown = (o.tls ? "rediss://" : "redis://") + std::string(rest);
  const size_t colon = rest.rfind(':');
  std::string_view host = colon == std::string_view::npos ? rest : rest.substr(0, colon);
  if (colon != std::string_view::npos) {
    const std::string port(rest.substr(colon + 1));
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p <= 0 || p > 65535) return BadUrl("bad port in " + shown);
    o.port = static_cast<int>(p);
  }
  if (host.empty() || host.find_first_of("/@?") != std::string_view::npos) {
    return BadUrl("bad host in " + shown);
  }
  o.host = std::string(host);
  return o;
}

std::string RedactedRedisUrl(const RedisOptions& o) {
  std::string url = o.tls ? "rediss://" : "redis://";
  if (!o.user.empty() || !o.password.empty()) {
    url += o.user;
    if (!o.password.empty()) url += ":***";
    url += "@";
  }
  return url + o.host + ":" + std::to_string(o.port);
}

}  // namespace sluice::store
