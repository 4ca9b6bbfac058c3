// Helpers of the SharedState interface that do not depend on a backend.
#include "sluice/store/shared_state.h"

#include <cstdlib>

namespace sluice::store {

Result<RedisOptions> ParseRedisUrl(std::string_view url) {
  constexpr std::string_view kScheme = "redis://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return MakeError(ErrorCode::kInvalidArgument, "expected redis://HOST:PORT", "bad_cache_url");
  }
  std::string_view rest = url.substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  RedisOptions o;
  const size_t colon = rest.rfind(':');
  std::string_view host = colon == std::string_view::npos ? rest : rest.substr(0, colon);
  if (colon != std::string_view::npos) {
    const std::string port(rest.substr(colon + 1));
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p <= 0 || p > 65535) {
      return MakeError(ErrorCode::kInvalidArgument, "bad port in " + std::string(url),
                       "bad_cache_url");
    }
    o.port = static_cast<int>(p);
  }
  if (host.empty() || host.find_first_of("/@?") != std::string_view::npos) {
    return MakeError(ErrorCode::kInvalidArgument, "bad host in " + std::string(url),
                     "bad_cache_url");
  }
  o.host = std::string(host);
  return o;
}

}  // namespace sluice::store
