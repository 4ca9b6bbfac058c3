#include "reply.h"

#include <strings.h>

namespace sluice::http {

unsigned StatusFor(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return 400;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kLengthRequired:
      return 411;
    case ErrorCode::kTooLarge:
      return 413;
    case ErrorCode::kResourceExhausted:
      return 429;
    case ErrorCode::kUnavailable:
    case ErrorCode::kDeadlineExceeded:
      return 503;
    case ErrorCode::kInternal:
      return 500;
    case ErrorCode::kInsufficientStorage:
      return 507;
    case ErrorCode::kPermissionDenied:
      return 403;
    case ErrorCode::kWithheld:
      return 451;
  }
  return 500;
}

Reply Reply::Json(unsigned status, std::string json) {
  return Reply{status, "application/json", std::move(json), {}, {}, {}, {}, false};
}

Reply Reply::Html(unsigned status, std::string html) {
  return Reply{status, "text/html; charset=utf-8", std::move(html), {}, {}, {}, {}, false};
}

Reply Reply::Text(unsigned status, std::string text) {
  return Reply{status, "text/plain; charset=utf-8", std::move(text), {}, {}, {}, {}, false};
}

Reply Reply::Empty(unsigned status) { return Reply{status, {}, {}, {}, {}, {}, {}, false}; }

Reply Reply::Refuse(Error error, unsigned status) {
  Reply r;
  r.status = status != 0 ? status : StatusFor(error.code);
  r.error = std::move(error);
  return r;
}

Reply Reply::Refuse(ErrorCode code, std::string message, std::string reason, unsigned status) {
  return Refuse(MakeError(code, std::move(message), std::move(reason)), status);
}

Reply& Reply::Set(std::string name, std::string value) {
  for (Header& h : headers) {
    if (strcasecmp(h.name.c_str(), name.c_str()) == 0) {
      h.value = std::move(value);
      return *this;
    }
  }
  headers.push_back({std::move(name), std::move(value)});
  return *this;
}

namespace {

const Header* Find(const std::vector<Header>& headers, std::string_view name) {
  for (const Header& h : headers) {
    if (h.name.size() == name.size() && strncasecmp(h.name.data(), name.data(), name.size()) == 0) {
      return &h;
    }
  }
  return nullptr;
}

}  // namespace

std::string_view Reply::Get(std::string_view name) const {
  if (const Header* h = Find(headers, name)) return h->value;
  if (fixed) {
    if (const Header* h = Find(fixed->headers, name)) return h->value;
  }
  return {};
}

}  // namespace sluice::http
