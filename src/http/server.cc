// The HTTP session and routes. One coroutine per connection on its own strand, an expiry set before
// every read and write (Beast's advice), and the order of checks for a create: headers, then
// (later) admission, then the body, never past its declared length.
#include "sluice/http/server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/http/span_body.hpp>
#include <cctype>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "assets.h"
#include "multipart.h"
#include "pages.h"
#include "sluice/render/highlighter.h"
#include "sluice/service/text.h"

namespace sluice::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using asio::awaitable;
using tcp = asio::ip::tcp;
using Response = bhttp::response<bhttp::string_body>;
using Parser = bhttp::request_parser<bhttp::string_body>;

namespace {

// Bounds on what a client can make us hold before a route has decided anything.
constexpr size_t kHeaderLimit = 16 * 1024;
// The read buffer's ceiling is also the most of a rejected body that can arrive with its headers.
constexpr size_t kReadBufferLimit = 16 * 1024;
// Requests other than creates have no business sending more than this.
constexpr uint64_t kSmallBodyLimit = 16 * 1024;
// Multipart framing (boundaries, part headers) allowed on top of the paste size limit.
constexpr uint64_t kMultipartAllowance = 16 * 1024;

enum class RouteName {
  kIndex,
  kCreateForm,
  kCreateApi,
  kRaw,
  kView,
  kDelete,
  kHealthz,
  kMetrics,
  kLimits,
  kDebugFaults,
  kStatic,
  kStatus,
  kStatusApi,
  kDeleteForm,
  kOther
};
constexpr std::array<const char*, 15> kRouteLabels = {
    "index",  "create_form", "create_api", "raw",         "view",
    "delete", "healthz",     "metrics",    "limits",      "debug",
    "static", "status",      "status_api", "delete_form", "other"};

struct RouteMatch {
  RouteName name = RouteName::kOther;
  std::string_view id;
  bool method_allowed = true;
  const char* allow = "";
};

bool IsReadMethod(bhttp::verb m) { return m == bhttp::verb::get || m == bhttp::verb::head; }

RouteMatch Match(bhttp::verb method, std::string_view path) {
  auto make = [&](RouteName name, bool allowed, const char* allow, std::string_view id = {}) {
    return RouteMatch{name, id, allowed, allow};
  };
  if (path == "/") {
    if (method == bhttp::verb::post) return make(RouteName::kCreateForm, true, "GET, HEAD, POST");
    return make(RouteName::kIndex, IsReadMethod(method), "GET, HEAD, POST");
  }
  if (path == "/healthz") return make(RouteName::kHealthz, IsReadMethod(method), "GET, HEAD");
  if (path == "/metrics") return make(RouteName::kMetrics, IsReadMethod(method), "GET, HEAD");
  if (path == "/api/v1/limits") return make(RouteName::kLimits, IsReadMethod(method), "GET, HEAD");
  if (path == "/status") return make(RouteName::kStatus, IsReadMethod(method), "GET, HEAD");
  if (path == "/api/v1/status")
    return make(RouteName::kStatusApi, IsReadMethod(method), "GET, HEAD");
  if (path.starts_with("/static/"))
    return make(RouteName::kStatic, IsReadMethod(method), "GET, HEAD");
  constexpr std::string_view kDeleteForm = "/delete/";
  if (path.starts_with(kDeleteForm) &&
      path.find('/', kDeleteForm.size()) == std::string_view::npos) {
    return make(RouteName::kDeleteForm, IsReadMethod(method) || method == bhttp::verb::post,
                "GET, HEAD, POST", path.substr(kDeleteForm.size()));
  }
  if (path == "/debug/faults") {
    return make(RouteName::kDebugFaults, IsReadMethod(method) || method == bhttp::verb::put,
                "GET, HEAD, PUT");
  }
  constexpr std::string_view kApi = "/api/v1/pastes";
  if (path == kApi) return make(RouteName::kCreateApi, method == bhttp::verb::post, "POST");
  if (path.starts_with(kApi) && path[kApi.size()] == '/') {
    const std::string_view id = path.substr(kApi.size() + 1);
    if (id.find('/') == std::string_view::npos) {
      return make(RouteName::kDelete, method == bhttp::verb::delete_, "DELETE", id);
    }
    return make(RouteName::kOther, true, "");
  }
  constexpr std::string_view kRaw = "/raw/";
  if (path.starts_with(kRaw) && path.find('/', kRaw.size()) == std::string_view::npos) {
    return make(RouteName::kRaw, IsReadMethod(method), "GET, HEAD", path.substr(kRaw.size()));
  }
  if (path.size() > 1 && path.find('/', 1) == std::string_view::npos) {
    return make(RouteName::kView, IsReadMethod(method), "GET, HEAD", path.substr(1));
  }
  return make(RouteName::kOther, true, "");
}

// What the parser lets through but the protocol (RFC 9112) says a server must refuse, each a way to
// make two parsers disagree about where a request ends (request smuggling): returns the reason, or
// nothing when the framing is sound. Every refusal closes the connection.
std::optional<std::string_view> FramingProblem(const bhttp::request_header<>& req) {
  size_t hosts = 0, lengths = 0, encodings = 0;
  for (const auto& field : req) {
    if (field.name() == bhttp::field::host) ++hosts;
    if (field.name() == bhttp::field::content_length) ++lengths;
    if (field.name() == bhttp::field::transfer_encoding) ++encodings;
  }
  if (req.version() == 11 && hosts != 1) return "an HTTP/1.1 request needs exactly one Host";
  if (lengths > 1) return "more than one Content-Length";
  if (encodings > 0 && lengths > 0) return "both Transfer-Encoding and Content-Length";
  if (encodings > 0) {
    // Only "chunked" as the final coding frames a request body (section 6.3 of RFC 9112).
    const auto te = req[bhttp::field::transfer_encoding];
    const std::string_view value(te.data(), te.size());
    const size_t last = value.find_last_not_of(" \t");
    const std::string_view trimmed = value.substr(0, last == std::string_view::npos ? 0 : last + 1);
    if (!trimmed.ends_with("chunked")) return "a Transfer-Encoding that does not end in chunked";
  }
  const auto target = req.target();
  if (target.empty() || (target.front() != '/' && !target.starts_with("http://") &&
                         !target.starts_with("https://") && target != "*")) {
    return "a request target that is neither a path nor an absolute URL";
  }
  return std::nullopt;
}

// The path of an origin-form or absolute-form target (which a server must accept, RFC 9112
// section 3.2.2); the authority of an absolute URL plays no part in routing.
std::string_view TargetPath(std::string_view target) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.starts_with(scheme)) {
      const size_t slash = target.find('/', scheme.size());
      return slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    }
  }
  return target;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() + 0 && HexValue(s[i + 1]) >= 0 &&
               HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<std::string> QueryParam(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const size_t eq = pair.find('=');
    if (PercentDecode(pair.substr(0, eq)) == name) {
      return eq == std::string_view::npos ? std::string() : PercentDecode(pair.substr(eq + 1));
    }
  }
  return std::nullopt;
}

bhttp::status StatusFor(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return bhttp::status::bad_request;
    case ErrorCode::kNotFound:
      return bhttp::status::not_found;
    case ErrorCode::kLengthRequired:
      return bhttp::status::length_required;
    case ErrorCode::kTooLarge:
      return bhttp::status::payload_too_large;
    case ErrorCode::kResourceExhausted:
      return bhttp::status::too_many_requests;
    case ErrorCode::kUnavailable:
      return bhttp::status::service_unavailable;
    case ErrorCode::kDeadlineExceeded:
      return bhttp::status::service_unavailable;
    case ErrorCode::kInternal:
      return bhttp::status::internal_server_error;
  }
  return bhttp::status::internal_server_error;
}

Response MakeResponse(bhttp::status status, std::string body, std::string_view content_type) {
  Response res{status, 11};
  res.set(bhttp::field::server, "sluice");
  res.set(bhttp::field::content_type, beast::string_view(content_type.data(), content_type.size()));
  res.body() = std::move(body);
  return res;
}

Response ErrorResponse(const Error& e) {
  nlohmann::json j = {{"error", e.message},
                      {"reason", e.reason.empty() ? ErrorCodeName(e.code) : e.reason}};
  if (e.retry_after_seconds) j["retry_after"] = *e.retry_after_seconds;
  Response res = MakeResponse(StatusFor(e.code), j.dump() + "\n", "application/json");
  res.set(bhttp::field::cache_control, "no-store");
  if (e.retry_after_seconds) {
    res.set(bhttp::field::retry_after, std::to_string(*e.retry_after_seconds));
  }
  if (e.limit) {
    // RateLimit header fields (IETF httpapi draft): the policy as a quota over a window, and what
    // is left of it with the seconds until the request could pass.
    const LimitInfo& l = *e.limit;
    res.set("RateLimit-Policy",
            fmt::format("\"{}\";q={};w={}", l.name, static_cast<int64_t>(l.quota),
                        static_cast<int64_t>(std::ceil(l.window_seconds))));
    res.set("RateLimit", fmt::format("\"{}\";r={};t={}", l.name, static_cast<int64_t>(l.remaining),
                                     l.reset_seconds));
  }
  return res;
}

Response ErrorResponse(ErrorCode code, std::string message, std::string reason) {
  return ErrorResponse(MakeError(code, std::move(message), std::move(reason)));
}

Response HtmlResponse(bhttp::status status, std::string body) {
  Response res = MakeResponse(status, std::move(body), "text/html; charset=utf-8");
  res.set("Content-Security-Policy", kPageCsp);
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
  return res;
}

// A browser navigating to a page; API clients and curl ask for anything (*/*) and keep JSON.
bool WantsHtml(const bhttp::request<bhttp::string_body>& req) {
  return req[bhttp::field::accept].find("text/html") != beast::string_view::npos;
}

// The JSON error a route produced, as a page a person understands. Status and headers stay
// (Retry-After, RateLimit): only the body and its type change.
void AsErrorPage(Response& res) {
  const auto type = res[bhttp::field::content_type];
  if (!type.starts_with("application/json")) return;
  const auto j = nlohmann::json::parse(res.body(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return;
  std::optional<int64_t> retry_after;
  if (j.contains("retry_after") && j["retry_after"].is_number_integer()) {
    retry_after = j["retry_after"].get<int64_t>();
  }
  res.body() = ErrorPage(res.result_int(), j.value("reason", ""), j.value("error", ""), retry_after,
                         SystemClock::Instance().UnixSeconds());
  res.set(bhttp::field::content_type, "text/html; charset=utf-8");
  res.set("Content-Security-Policy", kPageCsp);
  res.set("X-Content-Type-Options", "nosniff");
}

// Browsers send a text area's line breaks as CRLF whatever the person typed (HTML's form
// submission rules); a file part keeps its bytes.
std::string FromTextArea(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    out += text[i];
  }
  return out;
}

std::string LanguageLabel(std::string_view language) {
  for (const render::Language& l : render::Languages()) {
    if (l.name == language) return l.label;
  }
  return "Plain text";
}

// The client of one request: the socket peer and, behind a trusted balancer, the hop it appended.
// Worked out on first use only (a cache hit never asks).
class RequestClient final : public service::ClientKeySource {
 public:
  RequestClient(const std::string& peer, const bhttp::request<bhttp::string_body>& request,
                const admission::TrustedProxies& trusted)
      : peer_(peer), request_(request), trusted_(trusted) {}

  std::string Key() const override {
    if (!key_) {
      std::vector<std::string_view> forwarded;
      if (!trusted_.empty()) {
        for (const auto& field : request_) {
          if (beast::iequals(field.name_string(), "X-Forwarded-For")) {
            forwarded.emplace_back(field.value().data(), field.value().size());
          }
        }
      }
      key_ = admission::ClientKey(peer_, forwarded, trusted_);
    }
    return *key_;
  }

 private:
  const std::string& peer_;
  const bhttp::request<bhttp::string_body>& request_;
  const admission::TrustedProxies& trusted_;
  mutable std::optional<std::string> key_;
};

// Per-route metrics, resolved once so the hot path is a few atomic operations.
struct RouteStats {
  Histogram* latency = nullptr;
  std::array<std::atomic<Counter*>, 600> by_status{};
};

}  // namespace

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(std::vector<asio::io_context*> ios_in, ServerOptions options_in,
       service::PasteService& service_in, render::ViewRenderer& renderer_in,
       MetricsRegistry& metrics_in)
      : ios(std::move(ios_in)),
        options(std::move(options_in)),
        service(service_in),
        renderer(renderer_in),
        metrics(metrics_in),
        in_flight_gauge(metrics_in.GetGauge("sluice_http_in_flight", "Requests being served now")),
        connections_gauge(
            metrics_in.GetGauge("sluice_http_connections", "Open client connections")),
        connections_refused(metrics_in.GetCounter(
            "sluice_admission_rejections_total",
            "Requests refused by admission control, by the limit that refused them",
            {{"reason", "connections"}})),
        header_timeouts(metrics_in.GetCounter(
            "sluice_http_timeouts_total",
            "Requests cut off because their headers or body arrived too slowly",
            {{"phase", "headers"}})),
        body_timeouts(metrics_in.GetCounter("sluice_http_timeouts_total",
                                            "Requests cut off because their headers or body "
                                            "arrived too slowly",
                                            {{"phase", "body"}})),
        bytes_received(metrics_in.GetCounter("sluice_http_bytes_received_total",
                                             "Bytes read from client sockets (a rejected body is "
                                             "never read past the read buffer)")) {
    for (size_t i = 0; i < kRouteLabels.size(); ++i) {
      route_stats[i].latency = &metrics.GetHistogram("sluice_http_request_duration_seconds",
                                                     "Time from full headers to response written",
                                                     {{"route", kRouteLabels[i]}});
    }
  }

  // One event loop per thread, each with its own acceptor on the same port (SO_REUSEPORT): a
  // connection lives on one thread, so it needs no strand and its completions never cross cores.
  std::vector<asio::io_context*> ios;
  const ServerOptions options;
  service::PasteService& service;
  render::ViewRenderer& renderer;
  MetricsRegistry& metrics;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  std::string base_url;
  std::atomic<int64_t> in_flight{0};
  std::atomic<bool> draining{false};
  Gauge& in_flight_gauge;
  std::atomic<int64_t> connections{0};
  Gauge& connections_gauge;
  Counter& connections_refused;
  Counter& header_timeouts;
  Counter& body_timeouts;
  Counter& bytes_received;
  std::array<RouteStats, kRouteLabels.size()> route_stats;

  void CountResponse(RouteName route, unsigned status, double seconds) {
    RouteStats& stats = route_stats[static_cast<size_t>(route)];
    stats.latency->Observe(seconds);
    if (status >= stats.by_status.size()) return;
    Counter* counter = stats.by_status[status].load(std::memory_order_acquire);
    if (!counter) {
      counter = &metrics.GetCounter("sluice_http_requests_total", "Responses by route and status",
                                    {{"route", kRouteLabels[static_cast<size_t>(route)]},
                                     {"status", std::to_string(status)}});
      stats.by_status[status].store(counter, std::memory_order_release);
    }
    counter->Inc();
  }

  void Start() {
    const auto colon = options.listen.rfind(':');
    if (colon == std::string::npos) throw std::runtime_error("listen address must be host:port");
    std::string host = options.listen.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(host, ec);
    if (ec) throw std::runtime_error("listen address '" + host + "' is not an IP address");
    const tcp::endpoint endpoint(
        address, static_cast<uint16_t>(std::stoi(options.listen.substr(colon + 1))));
    using reuse_port = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;
    if (endpoint.port() != 0) {
      // SO_REUSEPORT, which lets this process's event loops share the port, would also let it
      // join a port another process listens on, and the kernel would split connections between
      // two servers that know nothing of each other. A socket without it cannot bind beside a
      // listener, so one bound and closed first tells whether anyone listens there.
      tcp::acceptor probe(*ios.front());
      probe.open(endpoint.protocol());
      probe.set_option(asio::socket_base::reuse_address(true));
      probe.bind(endpoint, ec);
      if (ec == asio::error::address_in_use) {
        throw std::runtime_error("cannot listen on " + options.listen +
                                 ": another process is already listening there");
      }
      ec.clear();
    }
    tcp::endpoint bind_to = endpoint;
    for (asio::io_context* io : ios) {
      auto acceptor = std::make_unique<tcp::acceptor>(*io);
      acceptor->open(bind_to.protocol());
      acceptor->set_option(asio::socket_base::reuse_address(true));
      acceptor->set_option(reuse_port(true));
      acceptor->bind(bind_to, ec);
      if (ec) throw std::runtime_error("cannot listen on " + options.listen + ": " + ec.message());
      acceptor->listen(asio::socket_base::max_listen_connections);
      bind_to = acceptor->local_endpoint();  // port 0 resolved once; the others share it
      acceptors.push_back(std::move(acceptor));
    }
    const auto bound = acceptors.front()->local_endpoint();
    base_url = options.public_url;
    if (base_url.empty()) {
      const std::string shown = bound.address().is_v6() ? "[" + bound.address().to_string() + "]"
                                                        : bound.address().to_string();
      base_url = fmt::format("http://{}:{}", shown, bound.port());
    }
    while (!base_url.empty() && base_url.back() == '/') base_url.pop_back();
    for (size_t i = 0; i < acceptors.size(); ++i) {
      asio::co_spawn(acceptors[i]->get_executor(), AcceptLoop(shared_from_this(), i),
                     asio::detached);
    }
  }

  static awaitable<void> AcceptLoop(std::shared_ptr<Impl> self, size_t index) {
    tcp::acceptor& acceptor = *self->acceptors[index];
    for (;;) {
      boost::system::error_code ec;
      tcp::socket socket = co_await acceptor.async_accept(
          *self->ios[index], asio::redirect_error(asio::use_awaitable, ec));
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) {
        // Out of file descriptors, most likely: the pending connection stays in the backlog, so
        // an immediate retry would spin. Pause, then keep serving the connections already open.
        spdlog::warn("accept: {}", ec.message());
        asio::steady_timer pause(*self->ios[index]);
        pause.expires_after(std::chrono::milliseconds(100));
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      auto executor = socket.get_executor();
      if (self->connections.fetch_add(1) >= self->options.max_connections) {
        self->connections.fetch_sub(1);
        asio::co_spawn(executor, RefuseConnection(self, std::move(socket)), asio::detached);
        continue;
      }
      self->connections_gauge.Add(1);
      asio::co_spawn(executor, Session(self, std::move(socket)), asio::detached);
    }
  }

  struct Outcome {
    Outcome() = default;
    Outcome(Response r, RouteName n, bool c = false) : response(std::move(r)), route(n), close(c) {}
    Response response;
    RouteName route = RouteName::kOther;
    bool close = false;  // the body was not read, or the protocol demands it
    /// When set, the body to send instead of response.body(): a cached paste, shared rather than
    /// copied into every response.
    std::shared_ptr<const std::string> shared_body;
  };

  // Over the connection cap: one short 503 and close, rather than an fd the process cannot spare
  // (a connection that cannot be accepted at all gets no answer).
  static awaitable<void> RefuseConnection(std::shared_ptr<Impl> self, tcp::socket socket) {
    self->connections_refused.Inc();
    Response res =
        ErrorResponse(ErrorCode::kUnavailable,
                      "the server is at its limit of open connections; retry later", "connections");
    res.set(bhttp::field::retry_after, "5");
    res.keep_alive(false);
    res.prepare_payload();
    beast::tcp_stream stream(std::move(socket));
    stream.expires_after(std::chrono::seconds(2));
    boost::system::error_code ec;
    co_await bhttp::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  }

  static awaitable<void> Session(std::shared_ptr<Impl> self, tcp::socket socket) {
    boost::system::error_code peer_ec;
    const auto remote = socket.remote_endpoint(peer_ec);
    const std::string peer = peer_ec ? std::string() : remote.address().to_string();
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer(kReadBufferLimit);
    // Reads then fill the whole buffer at once, instead of growing from Beast's 512-byte minimum.
    buffer.reserve(kReadBufferLimit);
    // Everything read from the socket is either consumed by a parser or still in the buffer.
    uint64_t consumed = 0;
    for (;;) {
      Parser parser;
      parser.header_limit(kHeaderLimit);
      // Routes decide body limits from the headers; Beast's own check would answer before them.
      parser.body_limit(std::numeric_limits<std::uint64_t>::max());
      boost::system::error_code ec;
      if (buffer.size() == 0) {
        // Two clocks: an idle keep-alive connection may wait idle_timeout for its next request,
        // but once a request starts its headers must all arrive within header_timeout, however
        // slowly the bytes trickle in.
        stream.expires_after(self->options.idle_timeout);
        const size_t got = co_await stream.async_read_some(
            buffer.prepare(kReadBufferLimit), asio::redirect_error(asio::use_awaitable, ec));
        buffer.commit(got);
        if (ec) break;
      }
      stream.expires_after(self->options.header_timeout);
      co_await bhttp::async_read_header(stream, buffer, parser,
                                        asio::redirect_error(asio::use_awaitable, ec));
      if (ec == beast::error::timeout) {
        self->header_timeouts.Inc();
        Outcome slow{ErrorResponse(ErrorCode::kInvalidArgument,
                                   "the request headers took too long to arrive", "header_timeout"),
                     RouteName::kOther, true};
        slow.response.result(bhttp::status::request_timeout);
        co_await self->Write(stream, slow, false);
        break;
      }
      if (ec) {
        if (ec.category() == bhttp::make_error_code(bhttp::error::end_of_stream).category() &&
            ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
          // The bytes were not HTTP: say so and close, as the protocol requires.
          Outcome bad{ErrorResponse(ErrorCode::kInvalidArgument,
                                    "malformed request: " + ec.message(), "bad_request"),
                      RouteName::kOther, true};
          if (ec == bhttp::error::header_limit) {
            bad.response.result(bhttp::status::request_header_fields_too_large);
          }
          co_await self->Write(stream, bad, false);
        }
        break;
      }
      if (auto problem = FramingProblem(parser.get())) {
        Outcome bad{ErrorResponse(ErrorCode::kInvalidArgument,
                                  fmt::format("malformed request: {}", *problem), "bad_request"),
                    RouteName::kOther, true};
        co_await self->Write(stream, bad, false);
        break;
      }
      const auto started = std::chrono::steady_clock::now();
      self->in_flight.fetch_add(1, std::memory_order_relaxed);
      self->in_flight_gauge.Add(1);
      const bool head = parser.get().method() == bhttp::verb::head;
      const bool wants_keep_alive = parser.get().keep_alive();
      const RequestClient client(peer, parser.get(), self->options.trusted_proxies);
      Outcome outcome = co_await self->Handle(stream, buffer, parser, client, consumed);
      if (outcome.response.result_int() >= 400 && WantsHtml(parser.get())) {
        AsErrorPage(outcome.response);
      }
      const bool close = outcome.close || !wants_keep_alive || self->draining.load();
      const bool written = co_await self->Write(stream, outcome, head, close);
      self->CountResponse(
          outcome.route, outcome.response.result_int(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      self->in_flight.fetch_sub(1, std::memory_order_relaxed);
      self->in_flight_gauge.Add(-1);
      if (close || !written) break;
    }
    self->bytes_received.Inc(consumed + buffer.size());
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    // Lingering close: a client still sending (a refused body, a slowloris cut off mid-header)
    // would otherwise get a reset on close, and a reset can discard the error response before the
    // client reads it. Bounded in time and bytes, so it costs little against a hostile client.
    stream.expires_after(std::chrono::seconds(1));
    std::array<char, 4096> sink;
    for (size_t drained = 0; drained < 64 * 1024;) {
      drained += co_await stream.async_read_some(
          asio::buffer(sink), asio::redirect_error(asio::use_awaitable, ignored));
      if (ignored) break;
    }
    self->connections.fetch_sub(1);
    self->connections_gauge.Add(-1);
  }

  awaitable<bool> Write(beast::tcp_stream& stream, Outcome& outcome, bool head, bool close = true) {
    Response& res = outcome.response;
    res.keep_alive(!close);
    res.prepare_payload();
    boost::system::error_code ec;
    stream.expires_after(options.body_timeout);
    if (head) {
      const auto length = outcome.shared_body ? outcome.shared_body->size() : res.body().size();
      bhttp::response<bhttp::empty_body> headers_only(std::move(res.base()));
      headers_only.content_length(length);
      co_await bhttp::async_write(stream, headers_only,
                                  asio::redirect_error(asio::use_awaitable, ec));
    } else if (outcome.shared_body) {
      bhttp::response<bhttp::span_body<const char>> shared(std::move(res.base()));
      shared.body() = {outcome.shared_body->data(), outcome.shared_body->size()};
      shared.prepare_payload();
      co_await bhttp::async_write(stream, shared, asio::redirect_error(asio::use_awaitable, ec));
    } else {
      co_await bhttp::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
    }
    co_return !ec;
  }

  awaitable<Outcome> Handle(beast::tcp_stream& stream, beast::flat_buffer& buffer, Parser& parser,
                            const RequestClient& client, uint64_t& consumed) {
    auto& req = parser.get();
    const std::string_view target = TargetPath({req.target().data(), req.target().size()});
    const size_t qmark = target.find('?');
    const std::string_view path = target.substr(0, qmark);
    const std::string_view query = qmark == std::string_view::npos ? "" : target.substr(qmark + 1);
    const RouteMatch route = Match(req.method(), path);

    if (req.method() == bhttp::verb::unknown) {
      Outcome out{ErrorResponse(ErrorCode::kInvalidArgument, "this method is not implemented",
                                "method_not_implemented"),
                  route.name, !parser.is_done()};
      out.response.result(bhttp::status::not_implemented);
      co_return out;
    }
    if (!route.method_allowed) {
      Outcome out{ErrorResponse(ErrorCode::kInvalidArgument, "method not allowed here",
                                "method_not_allowed"),
                  route.name, !parser.is_done()};
      out.response.result(bhttp::status::method_not_allowed);
      out.response.set(bhttp::field::allow, route.allow);
      co_return out;
    }
    if (route.name == RouteName::kCreateApi || route.name == RouteName::kCreateForm) {
      co_return co_await HandleCreate(stream, buffer, parser, route.name, query, client.Key(),
                                      consumed);
    }
    // Anything else may carry at most a small body, read (and ignored) to keep the connection
    // usable.
    if (!parser.is_done()) {
      const auto declared = parser.content_length();
      if (!declared || *declared > kSmallBodyLimit) {
        co_return Outcome{ErrorResponse(ErrorCode::kTooLarge, "this request may not carry a body",
                                        "body_not_allowed"),
                          route.name, true};
      }
      parser.body_limit(kSmallBodyLimit);
      boost::system::error_code ec;
      stream.expires_after(options.body_timeout);
      consumed += co_await bhttp::async_read(stream, buffer, parser,
                                             asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        co_return Outcome{ErrorResponse(ErrorCode::kTooLarge, "this request may not carry a body",
                                        "body_not_allowed"),
                          route.name, true};
      }
    }
    switch (route.name) {
      case RouteName::kHealthz:
        co_return Outcome{MakeResponse(bhttp::status::ok, "ok\n", "text/plain; charset=utf-8"),
                          route.name};
      case RouteName::kMetrics:
        co_return Outcome{MakeResponse(bhttp::status::ok, metrics.Render(),
                                       "text/plain; version=0.0.4; charset=utf-8"),
                          route.name};
      case RouteName::kIndex:
        co_return Outcome{HtmlResponse(bhttp::status::ok, IndexPage(DefaultTtlName())), route.name};
      case RouteName::kStatic:
        co_return HandleStatic(req, route);
      case RouteName::kStatus: {
        Outcome out{
            HtmlResponse(bhttp::status::ok,
                         StatusPage(metrics.Collect(), SystemClock::Instance().UnixSeconds())),
            route.name};
        out.response.set(bhttp::field::cache_control, "no-store");
        co_return out;
      }
      case RouteName::kStatusApi:
        co_return HandleStatusApi(route);
      case RouteName::kDeleteForm:
        co_return co_await HandleDeleteForm(req, route, query);
      case RouteName::kRaw:
      case RouteName::kView:
        co_return co_await HandleRead(req, route, client, query);
      case RouteName::kLimits:
        co_return HandleLimits(route, client.Key());
      case RouteName::kDebugFaults:
        co_return HandleFaults(req, route);
      case RouteName::kDelete:
        co_return co_await HandleDelete(req, route);
      default:
        co_return Outcome{ErrorResponse(ErrorCode::kNotFound, "no such route", "no_route"),
                          route.name};
    }
  }

  std::string_view DefaultTtlName() const {
    for (const auto& [name, seconds] : service::TtlAllowList()) {
      if (seconds == service.options().default_ttl) return name;
    }
    return "1w";
  }

  std::string PasteUrl(std::string_view id) const { return fmt::format("{}/{}", base_url, id); }
  // The chosen language travels in the link: nothing about it is stored with the paste.
  std::string PasteUrl(std::string_view id, std::string_view language) const {
    if (language != "text" && !render::IsLanguage(language)) return PasteUrl(id);
    return fmt::format("{}/{}?lang={}", base_url, id, language);
  }
  std::string RawUrl(std::string_view id) const { return fmt::format("{}/raw/{}", base_url, id); }
  std::string DeleteUrl(std::string_view id) const {
    return fmt::format("{}/api/v1/pastes/{}", base_url, id);
  }

  awaitable<Outcome> HandleCreate(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                  Parser& parser, RouteName route, std::string_view query,
                                  const std::string& client_key, uint64_t& consumed) {
    auto& req = parser.get();
    const std::string content_type(req[bhttp::field::content_type]);
    const auto boundary = route == RouteName::kCreateForm ? MultipartBoundary(content_type)
                                                          : std::optional<std::string>();
    service::CreateHeaders headers;
    if (auto length = parser.content_length()) headers.declared_length = *length;
    headers.chunked = parser.chunked();
    // Size, rate limits and in-flight caps, decided from the headers alone. A refused body is
    // never read, so the connection cannot be reused.
    auto admitting = service.AdmitCreate(client_key, headers, boundary ? kMultipartAllowance : 0);
    auto ticket = co_await std::move(admitting);
    if (!ticket.ok()) co_return Outcome{ErrorResponse(ticket.error()), route, true};
    boost::system::error_code ec;
    if (beast::iequals(req[bhttp::field::expect], "100-continue")) {
      bhttp::response<bhttp::empty_body> go_on{bhttp::status::continue_, 11};
      stream.expires_after(options.body_timeout);
      co_await bhttp::async_write(stream, go_on, asio::redirect_error(asio::use_awaitable, ec));
      if (ec)
        co_return Outcome{ErrorResponse(ErrorCode::kInvalidArgument, "client went away", "aborted"),
                          route, true};
    }
    parser.body_limit(*headers.declared_length);
    stream.expires_after(options.body_timeout);
    consumed += co_await bhttp::async_read(stream, buffer, parser,
                                           asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      Outcome out{
          ErrorResponse(ErrorCode::kInvalidArgument,
                        "the body did not arrive in full: " + ec.message(), "incomplete_body"),
          route, true};
      if (ec == beast::error::timeout) {
        body_timeouts.Inc();
        out.response.result(bhttp::status::request_timeout);
      }
      co_return out;
    }
    std::string body = std::move(req.body());
    std::string ttl;
    std::string language = QueryParam(query, "lang").value_or("auto");
    if (auto from_query = QueryParam(query, "ttl")) ttl = *from_query;
    if (ttl.empty()) ttl = std::string(req["Sluice-TTL"]);
    if (boundary) {
      auto parts = ParseMultipart(body, *boundary);
      if (!parts) {
        co_return Outcome{
            ErrorResponse(ErrorCode::kInvalidArgument, "malformed multipart body", "bad_multipart"),
            route};
      }
      std::optional<std::string> content;
      for (const FormPart& part : *parts) {
        if (part.name == "file" && !content) content = std::string(part.content);
        if (part.name == "content" && !content) content = FromTextArea(part.content);
        if (part.name == "ttl" && ttl.empty()) ttl = std::string(part.content);
        if (part.name == "lang") language = std::string(part.content);
      }
      if (!content) {
        co_return Outcome{
            ErrorResponse(ErrorCode::kInvalidArgument, "the form has no 'file' or 'content' field",
                          "bad_multipart"),
            route};
      }
      body = std::move(*content);
    }
    const bool browser = route == RouteName::kCreateForm && WantsHtml(req);
    // The page after a browser create shows the paste, so it keeps the text the service consumes.
    auto text = browser ? std::make_shared<const std::string>(body) : nullptr;
    auto create = service.Create(std::move(*ticket), std::move(body), ttl);  // see RunBlocking
    auto created = co_await std::move(create);
    if (!created.ok()) co_return Outcome{ErrorResponse(created.error()), route};
    const std::string id = created->id.str();
    Outcome out;
    out.route = route;
    if (route == RouteName::kCreateApi) {
      nlohmann::json j = {{"id", id},
                          {"url", PasteUrl(id)},
                          {"raw_url", RawUrl(id)},
                          {"delete_url", DeleteUrl(id)},
                          {"expires_at", FormatUnixTime(created->expires_at)},
                          {"delete_token", created->delete_token}};
      out.response = MakeResponse(bhttp::status::created, j.dump() + "\n", "application/json");
    } else if (browser) {
      auto rendering = renderer.Render(id, text, language, client_key);
      const render::RenderedView view = co_await std::move(rendering);
      PasteView page;
      page.id = id;
      page.url = PasteUrl(id, language);
      page.raw_url = "/raw/" + id;
      page.expires_at = created->expires_at;
      page.size_bytes = text->size();
      page.language_label = LanguageLabel(view.language);
      page.rung_tag = view.Tag();
      page.shed = view.rung == admission::Rung::kPlain && !view.language.empty();
      page.lines = *view.html;
      page.created =
          CreatedNotice{fmt::format("{}/delete/{}?token={}", base_url, id, created->delete_token)};
      out.response = HtmlResponse(bhttp::status::created, PastePage(page));
      out.response.set("X-Sluice-Rung", view.Tag());
    } else {
      out.response =
          MakeResponse(bhttp::status::created, PasteUrl(id) + "\n", "text/plain; charset=utf-8");
      out.response.set("X-Delete-Token", created->delete_token);
    }
    out.response.set(bhttp::field::location, PasteUrl(id, language));
    out.response.set(bhttp::field::cache_control, "no-store");
    co_return out;
  }

  awaitable<Outcome> HandleRead(const bhttp::request<bhttp::string_body>& req,
                                const RouteMatch& route, const RequestClient& client,
                                std::string_view query) {
    auto paste = co_await service.Read(client, route.id);
    if (!paste.ok()) co_return Outcome{ErrorResponse(paste.error()), route.name};
    // Only names from the list go further (links, the ETag): the query is the client's to write.
    std::string language = QueryParam(query, "lang").value_or("auto");
    if (language != "text" && !render::IsLanguage(language)) language = "auto";
    // The view's ETag names full quality only: a plain-rung answer carries none, so a visitor shed
    // under load revalidates into colours once the load is gone.
    const std::string etag = route.name == RouteName::kRaw
                                 ? fmt::format("\"{}\"", paste->meta.id.view())
                                 : fmt::format("\"{}-{}\"", paste->meta.id.view(), language);
    const int64_t max_age =
        std::max<int64_t>(0, paste->meta.expires_at - SystemClock::Instance().UnixSeconds());
    const std::string cache_control = fmt::format("public, max-age={}", max_age);
    const auto if_none_match = req[bhttp::field::if_none_match];
    if (!if_none_match.empty() &&
        (if_none_match == "*" || if_none_match.find(etag) != beast::string_view::npos)) {
      Outcome out{MakeResponse(bhttp::status::not_modified, "", "text/plain; charset=utf-8"),
                  route.name};
      out.response.erase(bhttp::field::content_type);
      out.response.set(bhttp::field::etag, etag);
      out.response.set(bhttp::field::cache_control, cache_control);
      co_return out;
    }
    Outcome out;
    out.route = route.name;
    const std::string id = paste->meta.id.str();
    if (route.name == RouteName::kRaw) {
      out.response = MakeResponse(bhttp::status::ok, "", "text/plain; charset=utf-8");
      out.shared_body = paste->body;
      out.response.set("Content-Security-Policy", "default-src 'none'; sandbox");
      out.response.set("X-Content-Type-Options", "nosniff");
      if (QueryParam(query, "download")) {
        out.response.set(bhttp::field::content_disposition,
                         fmt::format("attachment; filename=\"{}.txt\"", id));
      }
      out.response.set(bhttp::field::etag, etag);
      out.response.set(bhttp::field::cache_control, cache_control);
      co_return out;
    }
    auto rendering = renderer.Render(id, paste->body, language, client.Key());
    const render::RenderedView view = co_await std::move(rendering);
    PasteView page;
    page.id = id;
    page.url = PasteUrl(id, language);
    page.raw_url = "/raw/" + id;
    page.expires_at = paste->meta.expires_at;
    page.size_bytes = paste->body->size();
    page.language_label = LanguageLabel(view.language);
    page.rung_tag = view.Tag();
    page.shed = view.rung == admission::Rung::kPlain && !view.language.empty();
    page.lines = *view.html;
    out.response = HtmlResponse(bhttp::status::ok, PastePage(page));
    out.response.set("X-Sluice-Rung", view.Tag());
    if (view.rung == admission::Rung::kPlain && !view.language.empty()) {
      out.response.set(bhttp::field::cache_control, "no-cache");
    } else {
      out.response.set(bhttp::field::etag, etag);
      out.response.set(bhttp::field::cache_control, cache_control);
    }
    co_return out;
  }

  Outcome HandleStatic(const bhttp::request<bhttp::string_body>& req, const RouteMatch& route) {
    const std::string_view target(req.target().data(), req.target().size());
    const Asset* asset = FindAsset(target);
    if (asset == nullptr) {
      return Outcome{ErrorResponse(ErrorCode::kNotFound, "no such file", "no_route"), route.name};
    }
    const auto if_none_match = req[bhttp::field::if_none_match];
    Outcome out;
    out.route = route.name;
    if (!if_none_match.empty() && if_none_match.find(asset->etag) != beast::string_view::npos) {
      out.response = Response{bhttp::status::not_modified, 11};
      out.response.set(bhttp::field::server, "sluice");
    } else {
      out.response = MakeResponse(bhttp::status::ok, std::string(asset->body), asset->content_type);
    }
    out.response.set(bhttp::field::etag, asset->etag);
    // Pages link the versioned URL, so a long lifetime never serves an old build's file.
    out.response.set(bhttp::field::cache_control, target.find("?v=") != std::string_view::npos
                                                      ? "public, max-age=31536000, immutable"
                                                      : "public, max-age=300");
    out.response.set("X-Content-Type-Options", "nosniff");
    return out;
  }

  Outcome HandleStatusApi(const RouteMatch& route) {
    nlohmann::json values = nlohmann::json::object();
    for (const auto& [key, value] : metrics.Collect()) {
      values[key] = std::isfinite(value) ? value : 0.0;
    }
    const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    nlohmann::json j = {{"time_ms", now_ms}, {"metrics", std::move(values)}};
    Outcome out{MakeResponse(bhttp::status::ok, j.dump() + "\n", "application/json"), route.name};
    out.response.set(bhttp::field::cache_control, "no-store");
    return out;
  }

  // The delete link of the created page: a GET only asks (a link preview or prefetch must never
  // delete), the form's POST deletes.
  awaitable<Outcome> HandleDeleteForm(const bhttp::request<bhttp::string_body>& req,
                                      const RouteMatch& route, std::string_view query) {
    if (req.method() != bhttp::verb::post) {
      const std::string token = QueryParam(query, "token").value_or("");
      Outcome out{HtmlResponse(bhttp::status::ok, DeleteConfirmPage(route.id, token)), route.name};
      out.response.set(bhttp::field::cache_control, "no-store");
      co_return out;
    }
    const std::string token = QueryParam(req.body(), "token").value_or("");
    Status deleted = co_await service.Delete(route.id, token);
    if (!deleted.ok()) co_return Outcome{ErrorResponse(deleted.error()), route.name};
    renderer.Forget(route.id);
    Outcome out{HtmlResponse(bhttp::status::ok, DeletedPage(route.id)), route.name};
    out.response.set(bhttp::field::cache_control, "no-store");
    co_return out;
  }

  Outcome HandleLimits(const RouteMatch& route, const std::string& client_key) {
    const service::ClientBudgets b = service.Budgets(client_key);
    nlohmann::json buckets = nlohmann::json::object();
    for (const auto& bucket : b.buckets) {
      buckets[bucket.name] = {{"rate_per_second", bucket.policy.rate_per_second},
                              {"burst", bucket.policy.burst},
                              {"available", std::floor(bucket.available)}};
    }
    auto pool = [](const admission::SlotGauges& g) {
      return nlohmann::json{{"in_use", g.in_use}, {"limit", g.limit}};
    };
    nlohmann::json j = {
        {"client_key", client_key},
        {"buckets", buckets},
        {"pools",
         {{"create", pool(b.create_slots)},
          {"read", pool(b.read_slots)},
          {"fill", pool(b.fill_slots)}}},
        {"create_bytes",
         {{"in_use", b.create_slots.bytes_in_use}, {"limit", b.create_slots.max_bytes}}}};
    Outcome out{MakeResponse(bhttp::status::ok, j.dump(2) + "\n", "application/json"), route.name};
    out.response.set(bhttp::field::cache_control, "no-store");
    return out;
  }

  Outcome HandleFaults(const bhttp::request<bhttp::string_body>& req, const RouteMatch& route) {
    if (!options.get_faults || !options.set_faults) {
      return Outcome{ErrorResponse(ErrorCode::kNotFound, "no such route", "no_route"), route.name};
    }
    if (req.method() == bhttp::verb::put) {
      Status set = options.set_faults(req.body());
      if (!set.ok()) return Outcome{ErrorResponse(set.error()), route.name};
      spdlog::warn("fault injection rules replaced: '{}'", options.get_faults());
      Outcome out{Response{bhttp::status::no_content, 11}, route.name};
      out.response.set(bhttp::field::server, "sluice");
      return out;
    }
    return Outcome{
        MakeResponse(bhttp::status::ok, options.get_faults() + "\n", "text/plain; charset=utf-8"),
        route.name};
  }

  awaitable<Outcome> HandleDelete(const bhttp::request<bhttp::string_body>& req,
                                  const RouteMatch& route) {
    const auto auth = req[bhttp::field::authorization];
    constexpr beast::string_view kBearer = "Bearer ";
    if (auth.size() <= kBearer.size() || !beast::iequals(auth.substr(0, kBearer.size()), kBearer)) {
      Outcome out{
          ErrorResponse(ErrorCode::kInvalidArgument,
                        "send the delete token as 'Authorization: Bearer TOKEN'", "token_required"),
          route.name};
      out.response.result(bhttp::status::unauthorized);
      out.response.set(bhttp::field::www_authenticate, "Bearer");
      co_return out;
    }
    const std::string token(auth.substr(kBearer.size()));
    Status deleted = co_await service.Delete(route.id, token);
    if (!deleted.ok()) co_return Outcome{ErrorResponse(deleted.error()), route.name};
    renderer.Forget(route.id);
    Outcome out{Response{bhttp::status::no_content, 11}, route.name};
    out.response.set(bhttp::field::server, "sluice");
    out.response.set(bhttp::field::cache_control, "no-store");
    co_return out;
  }
};

HttpServer::HttpServer(std::vector<asio::io_context*> ios, ServerOptions options,
                       service::PasteService& service, render::ViewRenderer& renderer,
                       MetricsRegistry& metrics)
    : impl_(
          std::make_shared<Impl>(std::move(ios), std::move(options), service, renderer, metrics)) {}

HttpServer::~HttpServer() = default;

void HttpServer::Start() { impl_->Start(); }

uint16_t HttpServer::port() const { return impl_->acceptors.front()->local_endpoint().port(); }

std::string HttpServer::bound_address() const {
  const auto address = impl_->acceptors.front()->local_endpoint().address();
  return address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
}

std::string HttpServer::base_url() const { return impl_->base_url; }

void HttpServer::Drain(std::function<void()> done) {
  auto impl = impl_;
  impl->draining = true;
  for (auto& acceptor : impl->acceptors) {
    asio::post(acceptor->get_executor(), [a = acceptor.get()] {
      boost::system::error_code ignored;
      a->close(ignored);
    });
  }
  asio::co_spawn(
      *impl->ios.front(),
      [impl, done = std::move(done)]() -> awaitable<void> {
        asio::steady_timer timer(*impl->ios.front());
        const auto give_up = std::chrono::steady_clock::now() + impl->options.drain_timeout;
        while (impl->in_flight.load() > 0 && std::chrono::steady_clock::now() < give_up) {
          timer.expires_after(std::chrono::milliseconds(20));
          co_await timer.async_wait(asio::use_awaitable);
        }
        if (impl->in_flight.load() > 0) {
          spdlog::warn("drain: giving up on {} requests after {} s", impl->in_flight.load(),
                       impl->options.drain_timeout.count());
        }
        done();
      },
      asio::detached);
}

}  // namespace sluice::http
