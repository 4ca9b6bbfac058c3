// The one presenter: how every sluice answer looks. A refusal (Reply::error) becomes JSON for
// programs or a page for browsers, with its Retry-After and RateLimit fields either way; every
// HTML answer gets the page security headers. Handlers never format an error themselves.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "page_language.h"
#include "reply.h"

namespace sluice::http {

/// Every JSON body sluice writes, as text with a final newline. A string that is not valid UTF-8
/// (client bytes a handler passed on) has its bad bytes replaced by U+FFFD: nlohmann's dump()
/// throws type_error.316 by default, and such a throw once left a request with no answer at all.
/// `indent` as dump's (-1: one line).
std::string JsonText(const nlohmann::json& j, int indent = -1);

/// `wants_html`: the client navigates (Request::WantsHtml). `now_unix` dates the error page's
/// "try again at"; `reader` says its language. Every HTML answer varies on Accept-Language and
/// Cookie.
Reply Present(Reply reply, bool wants_html, int64_t now_unix, const Reader& reader = {});

/// Answers that carry content, and so a Content-Length (RFC 9110 6.4.1: not a 1xx, 204 or 304).
inline bool HasContent(unsigned status) { return status >= 200 && status != 204 && status != 304; }

/// Appends the head of a presented reply as sent (status line, fields, blank line) to `out`: the
/// session writes it and then the body (none for HEAD, 204, 304) with one call. `request_id` is
/// echoed as X-Request-Id unless empty; `close` adds Connection: close. The session keeps one
/// `out` per connection, so a keep-alive connection's heads cost no allocation.
void SerializeHead(const Reply& reply, std::string_view request_id, bool close, std::string& out);

/// Fixed fields (reply.h) made once, for an answer that repeats them for every request.
/// `page_security`: add the page security headers Present gives every HTML answer.
std::shared_ptr<const FixedFields> MakeFixedFields(std::vector<Header> headers, bool page_security);

}  // namespace sluice::http
