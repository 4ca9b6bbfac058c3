#include "presenter.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "pages.h"

namespace sluice::http {

namespace {

void AddRefusalFields(Reply& reply, const Error& e) {
  reply.Set("Cache-Control", "no-store");
  if (e.retry_after_seconds) reply.Set("Retry-After", std::to_string(*e.retry_after_seconds));
  if (e.limit) {
    // RateLimit header fields (IETF httpapi draft): the policy as a quota over a window, and what
    // is left of it with the seconds until the request could pass.
    const LimitInfo& l = *e.limit;
    reply.Set("RateLimit-Policy",
              fmt::format("\"{}\";q={};w={}", l.name, static_cast<int64_t>(l.quota),
                          static_cast<int64_t>(std::ceil(l.window_seconds))));
    reply.Set("RateLimit", fmt::format("\"{}\";r={};t={}", l.name,
                                       static_cast<int64_t>(l.remaining), l.reset_seconds));
  }
}

}  // namespace

Reply Present(Reply reply, bool wants_html, int64_t now_unix) {
  if (reply.error) {
    const Error& e = *reply.error;
    const std::string reason = e.reason.empty() ? std::string(ErrorCodeName(e.code)) : e.reason;
    if (wants_html) {
      reply.content_type = "text/html; charset=utf-8";
      reply.body = ErrorPage(reply.status, reason, e.message, e.retry_after_seconds, now_unix);
    } else {
      // "message" repeats "error" for haste's clients, which print that field of a refusal.
      nlohmann::json j = {{"error", e.message}, {"message", e.message}, {"reason", reason}};
      if (e.retry_after_seconds) j["retry_after"] = *e.retry_after_seconds;
      reply.content_type = "application/json";
      reply.body = j.dump() + "\n";
    }
    reply.shared_body.reset();
    AddRefusalFields(reply, e);
    reply.error.reset();
  }
  if (reply.content_type.starts_with("text/html")) {
    reply.Set("Content-Security-Policy", kPageCsp);
    reply.Set("X-Content-Type-Options", "nosniff");
    reply.Set("Referrer-Policy", "no-referrer");
  }
  return reply;
}

}  // namespace sluice::http
