#include "request.h"

#include "sluice/admission/create_access.h"

namespace sluice::http {

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool WantsHtml(const HeaderFields& headers) {
  return headers.Get("Accept").find("text/html") != std::string_view::npos;
}

std::optional<std::string> Request::Query(std::string_view name) const {
  return FormValue(query, name);
}

std::string RequestClient::Key() const {
  if (!key_) {
    std::vector<std::string_view> forwarded;
    if (!trusted_.empty()) forwarded = headers_.All("X-Forwarded-For");
    key_ = admission::ClientKey(peer_, forwarded, trusted_);
  }
  return *key_;
}

std::optional<std::string> RequestClient::ForwardedUser() const {
  if (forward_auth_header_.empty() || trusted_.empty()) return std::nullopt;
  const std::vector<std::string_view> values = headers_.All(forward_auth_header_);
  if (values.empty()) return std::nullopt;
  const auto peer = admission::IpAddress::Parse(peer_);
  if (!peer || !trusted_.Contains(*peer)) return std::nullopt;
  // Two values are two names: which one the proxy meant cannot be told, so neither is taken (the
  // check refuses the joined text, which holds a comma).
  if (values.size() > 1) {
    std::string joined(values.front());
    for (size_t i = 1; i < values.size(); ++i) (joined += ",") += values[i];
    return joined;
  }
  return std::string(values.front());
}

std::string RequestClient::CreatorKey() const {
  std::optional<std::string> user = ForwardedUser();
  // An invalid name never reaches a body: its create is refused from the headers (CreatorOf).
  if (!user || !admission::IsValidForwardedUser(*user)) return Key();
  return admission::Creator{Key(), std::move(*user), {}}.BudgetKey();
}

std::string_view TargetPath(std::string_view target) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.starts_with(scheme)) {
      const size_t slash = target.find('/', scheme.size());
      return slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    }
  }
  return target;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 &&
               HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<std::string> FormValue(std::string_view encoded, std::string_view name) {
  while (!encoded.empty()) {
    const size_t amp = encoded.find('&');
    const std::string_view pair = encoded.substr(0, amp);
    encoded = amp == std::string_view::npos ? std::string_view() : encoded.substr(amp + 1);
    const size_t eq = pair.find('=');
    if (PercentDecode(pair.substr(0, eq)) == name) {
      return eq == std::string_view::npos ? std::string() : PercentDecode(pair.substr(eq + 1));
    }
  }
  return std::nullopt;
}

std::optional<std::string_view> BearerCredentials(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) {
      return std::nullopt;
    }
  }
  std::string_view rest = authorization.substr(kScheme.size());
  if (rest.front() != ' ' && rest.front() != '\t') return std::nullopt;
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
  return rest;
}

std::optional<std::string_view> CookieValue(const HeaderFields& headers, std::string_view name) {
  for (std::string_view line : headers.All("Cookie")) {
    while (!line.empty()) {
      const size_t semicolon = std::min(line.find(';'), line.size());
      std::string_view pair = line.substr(0, semicolon);
      line.remove_prefix(std::min(semicolon + 1, line.size()));
      while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
      if (pair.size() > name.size() && pair.starts_with(name) && pair[name.size()] == '=') {
        return pair.substr(name.size() + 1);
      }
    }
  }
  return std::nullopt;
}

}  // namespace sluice::http
