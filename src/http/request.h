// What a handler sees of a request: method, path, query, header fields and the client, with no
// Beast types, so a test builds one from strings (tests/unit/http/handlers_test.cc).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/admission/client_key.h"
#include "sluice/common/result.h"
#include "sluice/service/paste_service.h"

namespace sluice::http {

/// kOther: a method HTTP knows but no route serves (405); kUnknown: one it does not (501).
enum class Method { kGet, kHead, kPost, kPut, kDelete, kOther, kUnknown };

/// The request's header fields; names compare case-insensitively.
class HeaderFields {
 public:
  virtual ~HeaderFields() = default;
  /// The first value of `name`, or empty.
  virtual std::string_view Get(std::string_view name) const = 0;
  /// Every value of `name`, in the order received.
  virtual std::vector<std::string_view> All(std::string_view name) const = 0;
};

/// A browser navigating to a page; API clients and curl ask for anything (*/*) and keep JSON.
bool WantsHtml(const HeaderFields& headers);

/// The body of a create, read only once its route has admitted it: a refused body is never read.
class BodyReader {
 public:
  virtual ~BodyReader() = default;
  /// Answers "100 Continue" if the client waits for it, then reads the whole body, never past
  /// `limit` bytes. A body that stops arriving fails with kDeadlineExceeded, one that breaks off
  /// or overruns with kInvalidArgument; either way the connection cannot be reused.
  virtual boost::asio::awaitable<Result<std::string>> Read(uint64_t limit) = 0;
  /// For a create refused because every create slot is taken, or (`own_network`) every unit of
  /// its network's share: cuts the slowest create body being read on this server (of the same
  /// network, if `own_network`; the lowest average rate so far, under the rate required at a full
  /// cap) with a 408, and returns once its create has ended, so its slot is free to ask for
  /// again; false if no body qualifies (docs/overload.md, "Pressure"). The default cuts nothing.
  virtual boost::asio::awaitable<bool> CutSlowestBody(bool /*own_network*/) { co_return false; }
};

struct Request {
  Method method = Method::kGet;
  /// As sent (origin form), for lookups that keep the query (static assets).
  std::string_view target;
  std::string_view path;
  std::string_view query;
  /// The {id} (or {path...}) the route matched, still percent-encoded.
  std::string_view id;
  const HeaderFields& headers;
  const service::ClientKeySource& client;
  /// What the headers declared of the body.
  std::optional<uint64_t> content_length;
  bool chunked = false;
  /// Routes other than creates: the small body already read (a form's fields).
  std::string_view small_body;
  /// Create routes only: reads the body once admitted.
  BodyReader* body = nullptr;

  bool WantsHtml() const { return http::WantsHtml(headers); }
  /// The decoded value of query parameter `name`, if present.
  std::optional<std::string> Query(std::string_view name) const;
};

/// The client of one request: the socket peer and, behind a trusted balancer, the hop it appended
/// to X-Forwarded-For and the name a forward-auth proxy gave. Worked out on first use only (a cache
/// hit never asks).
class RequestClient final : public service::ClientKeySource {
 public:
  /// `forward_auth_header`: the header a trusted proxy names the creator in; empty: none.
  RequestClient(const std::string& peer, const HeaderFields& headers,
                const admission::TrustedProxies& trusted, std::string_view forward_auth_header = {})
      : peer_(peer),
        headers_(headers),
        trusted_(trusted),
        forward_auth_header_(forward_auth_header) {}
  std::string Key() const override;
  /// The header's first value, when the socket peer is a trusted proxy (the rule of
  /// X-Forwarded-For: what a client writes itself is never read).
  std::optional<std::string> ForwardedUser() const override;
  /// The key a create from this client is budgeted under (admission::Creator::BudgetKey): the
  /// forward-auth name's when it gave a valid one, else Key(). Used by what counts a create body
  /// for its creator beside the service's budgets (the pressure's slow-body cuts, session.cc).
  std::string CreatorKey() const;

 private:
  const std::string& peer_;
  const HeaderFields& headers_;
  const admission::TrustedProxies& trusted_;
  std::string_view forward_auth_header_;
  mutable std::optional<std::string> key_;
};

/// The path of an origin-form or absolute-form target (which a server must accept, RFC 9112
/// section 3.2.2); the authority of an absolute URL plays no part in routing.
std::string_view TargetPath(std::string_view target);
/// Form and query decoding: "%41" is "A" and "+" is a space.
std::string PercentDecode(std::string_view s);
/// The credentials of an "Authorization: Bearer CREDENTIALS" value (the scheme in any case, RFC
/// 9110 11.1), without the spaces around them; nullopt for another scheme or none.
std::optional<std::string_view> BearerCredentials(std::string_view authorization);
/// The value of cookie `name` in the request's Cookie fields, as sent; nullopt if absent.
std::optional<std::string_view> CookieValue(const HeaderFields& headers, std::string_view name);
/// The decoded value of `name` in an application/x-www-form-urlencoded string.
std::optional<std::string> FormValue(std::string_view encoded, std::string_view name);

}  // namespace sluice::http
