#include "presenter.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "pages.h"
#include "sluice/service/text.h"

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

// The reason phrase of the status line (RFC 9110 15): clients ignore it, people read it.
std::string_view ReasonPhrase(unsigned status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 303:
      return "See Other";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 411:
      return "Length Required";
    case 412:
      return "Precondition Failed";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 451:
      return "Unavailable For Legal Reasons";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 507:
      return "Insufficient Storage";
    default:
      return "Unknown";
  }
}

// A field value is the server's own, but a CR or LF in one would end the head early (response
// splitting): sent as a space instead.
void AppendField(std::string& out, std::string_view name, std::string_view value) {
  out.append(name);
  out.append(": ");
  if (value.find_first_of("\r\n") == std::string_view::npos) {
    out.append(value);
  } else {
    for (const char c : value) out.push_back(c == '\r' || c == '\n' ? ' ' : c);
  }
  out.append("\r\n");
}

void AppendNumber(std::string& out, uint64_t n) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
  out.append(digits, end);
}

// A page's words follow Accept-Language and the language cookie (page_language.h): a shared
// cache must keep one copy per language. A field of its own, since a negotiated view already
// varies on Accept (RFC 9110 12.5.5: several Vary fields combine).
void AddPageVary(std::vector<Header>& headers) {
  headers.push_back({"Vary", "Accept-Language, Cookie"});
}

void AddPageSecurity(std::vector<Header>& headers) {
  headers.push_back({"Content-Security-Policy", std::string(kPageCsp)});
  headers.push_back({"X-Content-Type-Options", "nosniff"});
  headers.push_back({"Referrer-Policy", "no-referrer"});
  AddPageVary(headers);
}

}  // namespace

void SerializeHead(const Reply& reply, std::string_view request_id, bool close, std::string& out) {
  out.append("HTTP/1.1 ");
  AppendNumber(out, reply.status);
  out.push_back(' ');
  out.append(ReasonPhrase(reply.status));
  out.append("\r\nServer: sluice\r\n");
  if (!reply.content_type.empty()) AppendField(out, "Content-Type", reply.content_type);
  if (reply.fixed) out.append(reply.fixed->wire);
  for (const Header& h : reply.headers) AppendField(out, h.name, h.value);
  if (!request_id.empty()) AppendField(out, "X-Request-Id", request_id);
  // A 304's Content-Length could only be the 200's, which this answer does not know (RFC 9110
  // 8.6, 15.4.5); a 204 must not carry one.
  if (HasContent(reply.status)) {
    out.append("Content-Length: ");
    AppendNumber(out, reply.body_size());
    out.append("\r\n");
  }
  if (close) out.append("Connection: close\r\n");
  out.append("\r\n");
}

std::shared_ptr<const FixedFields> MakeFixedFields(std::vector<Header> headers,
                                                   bool page_security) {
  auto fixed = std::make_shared<FixedFields>();
  fixed->headers = std::move(headers);
  if (page_security) AddPageSecurity(fixed->headers);
  fixed->page_security = page_security;
  for (const Header& h : fixed->headers) AppendField(fixed->wire, h.name, h.value);
  return fixed;
}

std::string JsonText(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Reply Present(Reply reply, bool wants_html, int64_t now_unix, const Reader& reader) {
  if (reply.error) {
    const Error& e = *reply.error;
    const std::string reason = e.reason.empty() ? std::string(ErrorCodeName(e.code)) : e.reason;
    // Messages quote client bytes only through service::QuotedClientText; this repair is for any
    // that does not, so that neither the page nor the JSON is ever invalid UTF-8.
    const std::string message = service::ReplaceInvalidUtf8(e.message);
    if (wants_html) {
      reply.content_type = "text/html; charset=utf-8";
      reply.body =
          ErrorPage(reader, reply.status, reason, message, e.retry_after_seconds, now_unix);
    } else {
      // "message" repeats "error" for haste's clients, which print that field of a refusal.
      nlohmann::json j = {{"error", message}, {"message", message}, {"reason", reason}};
      if (e.retry_after_seconds) j["retry_after"] = *e.retry_after_seconds;
      if (e.challenge) j["challenge"] = nlohmann::json::parse(*e.challenge);
      reply.content_type = "application/json";
      reply.body = JsonText(j);
    }
    reply.shared_body.reset();
    reply.fixed.reset();
    AddRefusalFields(reply, e);
    reply.error.reset();
  }
  if (reply.content_type.starts_with("text/html") && !(reply.fixed && reply.fixed->page_security)) {
    reply.Set("Content-Security-Policy", kPageCsp);
    reply.Set("X-Content-Type-Options", "nosniff");
    reply.Set("Referrer-Policy", "no-referrer");
    AddPageVary(reply.headers);
  }
  return reply;
}

}  // namespace sluice::http
