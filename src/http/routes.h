// The route table: one declaration per route, from which come matching, 405's Allow, 404 and the
// route label of every metric. Adding a route is adding one line to DefaultRoutes (routes.cc).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reply.h"
#include "request.h"

namespace sluice::http {

struct Context;
using Handler = boost::asio::awaitable<Reply> (*)(const Request&, Context&);

/// What the session does before the handler runs.
enum class RouteKind {
  /// Creates: the handler admits from the headers and only then reads the body (BodyReader).
  kCreate,
  /// Everything else: at most a small body, read before the handler runs.
  kOther,
};

/// Who may reach a route of the admin listener (the public side has no gate).
enum class AdminGate {
  /// The bearer token (CheckAdminToken), before the route runs: the JSON admin API.
  kBearerToken,
  /// The route checks its own sign-in (the review page's session cookie or forward-auth name,
  /// review_desk.h), or needs none (its stylesheet): a browser cannot send the bearer token.
  kOwnSignIn,
};

/// A set of methods, as bits of Method.
class Methods {
 public:
  constexpr Methods(std::initializer_list<Method> methods) {
    for (Method m : methods) bits_ |= Bit(m);
  }
  constexpr bool Has(Method m) const { return (bits_ & Bit(m)) != 0; }
  constexpr Methods& operator|=(Methods other) {
    bits_ |= other.bits_;
    return *this;
  }
  /// "GET, HEAD, POST": the Allow field's value.
  std::string Allow() const;

 private:
  static constexpr uint32_t Bit(Method m) { return 1u << static_cast<unsigned>(m); }
  uint32_t bits_ = 0;
};

struct Route {
  /// "/raw/{id}": literal segments, {id} for one segment, {path...} for the rest of the path.
  std::string_view pattern;
  Methods methods;
  Handler handler;
  /// The `route` label of the HTTP metrics.
  std::string_view label;
  RouteKind kind = RouteKind::kOther;
  AdminGate gate = AdminGate::kBearerToken;
};

struct RouteMatch {
  /// Null when no pattern matches the path (404), or none of its routes takes the method (405).
  const Route* route = nullptr;
  /// Set when the path is known but not for this method: the methods it takes.
  std::optional<Methods> allowed;
  /// The {id} or {path...} part of the path.
  std::string_view id;
  /// The metric label: the route's, the path's first route's when only the method is wrong,
  /// "other" for an unknown path.
  std::string_view label = "other";
  /// Index of the label in Labels(), for per-route metrics without a lookup.
  size_t label_index = 0;
};

class RouteTable {
 public:
  explicit RouteTable(std::vector<Route> routes);
  /// The first pattern that matches `path` decides; among the routes declared with that pattern,
  /// the one that takes `method`.
  RouteMatch Match(Method method, std::string_view path) const;
  /// Every distinct label, "other" last.
  const std::vector<std::string_view>& Labels() const { return labels_; }

 private:
  size_t LabelIndex(std::string_view label) const;
  std::vector<Route> routes_;
  std::vector<std::string_view> labels_;
};

/// sluice's public routes: the API and the web UI, and /metrics when `metrics` is true.
std::vector<Route> DefaultRoutes(bool metrics = true);
/// The admin listener's routes: /metrics, /debug/faults and the moderation API under /admin/.
std::vector<Route> AdminRoutes();

}  // namespace sluice::http
