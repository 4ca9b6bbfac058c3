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

namespace {

// "HOST[:PORT]" of a cache URL; `shown` is the URL without credentials, for errors.
Result<RedisOptions::Endpoint> ParseHostPort(std::string_view hp, int default_port,
                                             const std::string& shown) {
  RedisOptions::Endpoint e;
  e.port = default_port;
  const size_t colon = hp.rfind(':');
  const std::string_view host = colon == std::string_view::npos ? hp : hp.substr(0, colon);
  if (colon != std::string_view::npos) {
    const std::string port(hp.substr(colon + 1));
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p <= 0 || p > 65535) return BadUrl("bad port in " + shown);
    e.port = static_cast<int>(p);
  }
  if (host.empty() || host.find_first_of("/@?,") != std::string_view::npos) {
    return BadUrl("bad host in " + shown);
  }
  e.host = std::string(host);
  return e;
}

}  // namespace

Result<RedisOptions> ParseRedisUrl(std::string_view url) {
  RedisOptions o;
  std::string_view rest;
  bool sentinel = false;
  std::string scheme;
  for (const std::string_view s :
       {"redis://", "rediss://", "redis+sentinel://", "rediss+sentinel://"}) {
    if (url.substr(0, s.size()) == s) {
      rest = url.substr(s.size());
      scheme = std::string(s);
      o.tls = s.starts_with("rediss");
      sentinel = s.find("+sentinel") != std::string_view::npos;
    }
  }
  if (scheme.empty()) {
    return BadUrl(
        "expected redis://HOST:PORT, rediss://HOST:PORT or "
        "redis[s]+sentinel://HOST:PORT,.../MASTER");
  }
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
  const std::string shown = scheme + std::string(rest);
  if (!sentinel) {
    if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
    auto e = ParseHostPort(rest, 6379, shown);
    if (!e.ok()) return e.error();
    o.host = e->host;
    o.port = e->port;
    return o;
  }
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 >= rest.size()) {
    return BadUrl("the master's name is missing (redis+sentinel://HOST:PORT,.../MASTER) in " +
                  shown);
  }
  o.sentinel_master = std::string(rest.substr(slash + 1));
  if (o.sentinel_master.find_first_of("/?@, ") != std::string::npos) {
    return BadUrl("bad master name in " + shown);
  }
  std::string_view hosts = rest.substr(0, slash);
  while (true) {
    const size_t comma = hosts.find(',');
    auto e = ParseHostPort(hosts.substr(0, comma), 26379, shown);
    if (!e.ok()) return e.error();
    o.sentinels.push_back(*e);
    if (comma == std::string_view::npos) break;
    hosts = hosts.substr(comma + 1);
  }
  return o;
}

std::string RedactedRedisUrl(const RedisOptions& o) {
  std::string url = o.tls ? "rediss" : "redis";
  url += o.sentinels.empty() ? "://" : "+sentinel://";
  if (!o.user.empty() || !o.password.empty()) {
    url += o.user;
    if (!o.password.empty()) url += ":***";
    url += "@";
  }
  if (o.sentinels.empty()) return url + o.host + ":" + std::to_string(o.port);
  for (size_t i = 0; i < o.sentinels.size(); ++i) {
    if (i > 0) url += ",";
    url += o.sentinels[i].host + ":" + std::to_string(o.sentinels[i].port);
  }
  return url + "/" + o.sentinel_master;
}

}  // namespace sluice::store
