// What a handler answers, as plain values: a status, headers, a body, or a refusal (an Error) that
// the presenter (presenter.h) writes as JSON or as a page, whichever the client reads. No Beast
// types here, so handlers and their tests never touch a socket.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/result.h"

namespace sluice::http {

struct Header {
  std::string name;
  std::string value;
};

/// Header fields of an answer that does not change between requests (a cached paste's raw read,
/// its rendered page), made once by the presenter (presenter.h, MakeFixedFields) and shared by
/// every answer that carries them, so a hot read neither builds nor serialises them again.
struct FixedFields {
  /// The fields, for whoever reads the reply (Reply::Get, the tests).
  std::vector<Header> headers;
  /// The same fields as sent: "Name: value\r\n" each.
  std::string wire;
  /// The page security headers are among them (the presenter adds them to every HTML answer).
  bool page_security = false;
};

struct Reply {
  unsigned status = 200;
  /// Empty for answers without a body type (204, 304).
  std::string content_type;
  std::string body;
  /// When set, sent instead of `body`: a cached paste, shared rather than copied per answer.
  std::shared_ptr<const std::string> shared_body;
  std::vector<Header> headers;
  /// When set, sent before `headers`, which must not repeat any of them.
  std::shared_ptr<const FixedFields> fixed;
  /// A refusal: the presenter writes it by Accept (JSON for programs, a page for browsers).
  std::optional<Error> error;
  /// Close after answering: the body was not read, or the protocol demands it.
  bool close = false;

  static Reply Json(unsigned status, std::string json);
  static Reply Html(unsigned status, std::string html);
  static Reply Text(unsigned status, std::string text);
  static Reply Empty(unsigned status);
  /// `status` 0: the status of the error's code (StatusFor); otherwise one the code cannot say
  /// (401, 405, 408, 431, 501).
  static Reply Refuse(Error error, unsigned status = 0);
  static Reply Refuse(ErrorCode code, std::string message, std::string reason, unsigned status = 0);

  Reply& Set(std::string name, std::string value);
  /// The value of a header set on this reply (or among its fixed fields), or empty.
  std::string_view Get(std::string_view name) const;
  Reply& Closing() {
    close = true;
    return *this;
  }
  size_t body_size() const { return shared_body ? shared_body->size() : body.size(); }
  std::string_view body_view() const { return shared_body ? *shared_body : body; }
};

/// `reply`, never to be stored by a cache (pages and answers that are one visitor's).
inline Reply Uncached(Reply reply) {
  reply.Set("Cache-Control", "no-store");
  return reply;
}

/// The HTTP status of an error code.
unsigned StatusFor(ErrorCode code);

}  // namespace sluice::http
