// The one presenter: how every sluice answer looks. A refusal (Reply::error) becomes JSON for
// programs or a page for browsers, with its Retry-After and RateLimit fields either way; every
// HTML answer gets the page security headers. Handlers never format an error themselves.
#pragma once

#include <cstdint>

#include "reply.h"

namespace sluice::http {

/// `wants_html`: the client navigates (Request::WantsHtml). `now_unix` dates the error page's
/// "try again at".
Reply Present(Reply reply, bool wants_html, int64_t now_unix);

}  // namespace sluice::http
