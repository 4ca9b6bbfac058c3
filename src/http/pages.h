// The HTML pages of the minimal web view. Paste text only ever enters a page through EscapeHtml.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::http {

/// Escapes the five HTML-significant characters, so text is shown and never interpreted.
std::string EscapeHtml(std::string_view text);

/// Content-Security-Policy of every HTML page: no scripts, no plugins, no framing.
inline constexpr const char* kPageCsp =
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'";

std::string IndexPage(std::string_view default_ttl);
std::string PastePage(std::string_view id, std::string_view text, std::string_view raw_url,
                      int64_t expires_at);
std::string CreatedPage(std::string_view url, std::string_view raw_url, std::string_view delete_url,
                        std::string_view delete_token, int64_t expires_at);

/// RFC 3339 UTC ("2026-12-07T10:00:00Z") for expiry times in JSON and pages.
std::string FormatUnixTime(int64_t unix_seconds);

}  // namespace sluice::http
