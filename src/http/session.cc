#include "session.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/http/span_body.hpp>
#include <limits>

#include "framing.h"
#include "presenter.h"

namespace sluice::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using asio::awaitable;
using tcp = asio::ip::tcp;
using Parser = bhttp::request_parser<bhttp::string_body>;

namespace {

// Bounds on what a client can make us hold before a route has decided anything: the head (its
// request line and fields, src/http/framing.h) is checked by ScanHead before Beast sees it, so the
// limits are exact whatever Beast's own header_limit counts.
constexpr HeadLimits kHeadLimits{};
// The read buffer holds at most one whole head; it is also the most of a rejected body that can
// arrive with its headers.
constexpr size_t kReadBufferLimit = kHeadLimits.head;
// Requests other than creates have no business sending more than this.
constexpr uint64_t kSmallBodyLimit = 16 * 1024;

struct Refusal {
  unsigned status;
  std::string_view message;
};

// What the parser lets through but the protocol (RFC 9112) says a server must refuse, each a way to
// make two parsers disagree about where a request ends (request smuggling): returns the status and
// reason, or nothing when the framing is sound. Every refusal closes the connection.
std::optional<Refusal> FramingProblem(const bhttp::request_header<>& req) {
  size_t hosts = 0, lengths = 0;
  std::vector<std::string_view> encodings;
  bool listed_length = false;
  for (const auto& field : req) {
    if (field.name() == bhttp::field::host) ++hosts;
    if (field.name() == bhttp::field::content_length) {
      ++lengths;
      // Beast accepts "5, 5"; RFC 9110 8.6 lets a recipient refuse a list, and the README says
      // a list is refused: two front ends may take different members of it.
      listed_length |= !IsSingleLength({field.value().data(), field.value().size()});
    }
    if (field.name() == bhttp::field::transfer_encoding) {
      encodings.emplace_back(field.value().data(), field.value().size());
    }
  }
  if (req.version() == 11 && hosts != 1) {
    return Refusal{400, "an HTTP/1.1 request needs exactly one Host"};
  }
  if (lengths > 1) return Refusal{400, "more than one Content-Length"};
  if (listed_length) return Refusal{400, "a Content-Length that is not one number"};
  if (!encodings.empty() && lengths > 0) {
    return Refusal{400, "both Transfer-Encoding and Content-Length"};
  }
  if (!encodings.empty()) {
    if (auto problem = CheckTransferCodings(encodings)) {
      return Refusal{problem->status, problem->message};
    }
  }
  const auto target = req.target();
  if (target.empty() || (target.front() != '/' && !target.starts_with("http://") &&
                         !target.starts_with("https://") && target != "*")) {
    return Refusal{400, "a request target that is neither a path nor an absolute URL"};
  }
  return std::nullopt;
}

// The JSON reason of a refusal by the framing checks, by its status.
std::string ReasonFor(unsigned status) {
  switch (status) {
    case 414:
      return "uri_too_long";
    case 431:
      return "header_too_large";
    case 501:
      return "not_implemented";
    default:
      return "bad_request";
  }
}

Method ToMethod(bhttp::verb verb) {
  switch (verb) {
    case bhttp::verb::get:
      return Method::kGet;
    case bhttp::verb::head:
      return Method::kHead;
    case bhttp::verb::post:
      return Method::kPost;
    case bhttp::verb::put:
      return Method::kPut;
    case bhttp::verb::delete_:
      return Method::kDelete;
    case bhttp::verb::unknown:
      return Method::kUnknown;
    default:
      return Method::kOther;
  }
}

std::string_view View(beast::string_view s) { return {s.data(), s.size()}; }

std::optional<uint64_t> DeclaredLength(const Parser& parser) {
  const auto length = parser.content_length();
  return length ? std::optional<uint64_t>(*length) : std::nullopt;
}

class BeastFields final : public HeaderFields {
 public:
  explicit BeastFields(const bhttp::request_header<>& header) : header_(header) {}
  std::string_view Get(std::string_view name) const override {
    const auto it = header_.find(beast::string_view(name.data(), name.size()));
    return it == header_.end() ? std::string_view() : View(it->value());
  }
  std::vector<std::string_view> All(std::string_view name) const override {
    std::vector<std::string_view> out;
    const auto [first, last] = header_.equal_range(beast::string_view(name.data(), name.size()));
    for (auto it = first; it != last; ++it) out.push_back(View(it->value()));
    return out;
  }

 private:
  const bhttp::request_header<>& header_;
};

// One request on one connection: the stream, what is buffered, and the parser holding the headers.
struct Exchange {
  Edge& edge;
  beast::tcp_stream& stream;
  beast::flat_buffer& buffer;
  Parser& parser;
  // Everything read from the socket is either consumed by a parser or still in the buffer.
  uint64_t& consumed;
};

class SessionBodyReader final : public BodyReader {
 public:
  explicit SessionBodyReader(Exchange& x) : x_(x) {}

  awaitable<Result<std::string>> Read(uint64_t limit) override {
    if (beast::iequals(x_.parser.get()[bhttp::field::expect], "100-continue")) {
      bhttp::response<bhttp::empty_body> go_on{bhttp::status::continue_, 11};
      x_.stream.expires_after(x_.edge.options.body_timeout);
      boost::system::error_code ec;
      co_await bhttp::async_write(x_.stream, go_on, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return MakeError(ErrorCode::kInvalidArgument, "client went away", "aborted");
    }
    x_.parser.body_limit(limit);
    x_.stream.expires_after(x_.edge.options.body_timeout);
    boost::system::error_code ec;
    x_.consumed += co_await bhttp::async_read(x_.stream, x_.buffer, x_.parser,
                                              asio::redirect_error(asio::use_awaitable, ec));
    if (ec == beast::error::timeout) {
      x_.edge.metrics.body_timeouts.Inc();
      co_return MakeError(ErrorCode::kDeadlineExceeded,
                          "the body did not arrive in full: " + ec.message(), "incomplete_body");
    }
    if (ec) {
      co_return MakeError(ErrorCode::kInvalidArgument,
                          "the body did not arrive in full: " + ec.message(), "incomplete_body");
    }
    co_return std::move(x_.parser.get().body());
  }

 private:
  Exchange& x_;
};

// Reads and drops the small body a non-create route may carry (a form's fields, or a GET that
// sends one: RFC 9110 9.3.1 gives it no meaning, and reading it keeps the connection usable), or
// the refusal when it is too large for such a route or does not arrive.
awaitable<std::optional<Reply>> ReadSmallBody(Exchange& x) {
  if (x.parser.is_done()) co_return std::nullopt;
  const auto declared = x.parser.content_length();
  if (declared && *declared > kSmallBodyLimit) {
    co_return Reply::Refuse(ErrorCode::kTooLarge,
                            "this route takes a body of at most 16 KB (it ignores it)",
                            "body_too_large")
        .Closing();
  }
  x.parser.body_limit(kSmallBodyLimit);
  x.stream.expires_after(x.edge.options.body_timeout);
  boost::system::error_code ec;
  x.consumed += co_await bhttp::async_read(x.stream, x.buffer, x.parser,
                                           asio::redirect_error(asio::use_awaitable, ec));
  if (!ec) co_return std::nullopt;
  if (ec == bhttp::error::body_limit) {
    co_return Reply::Refuse(ErrorCode::kTooLarge,
                            "this route takes a body of at most 16 KB (it ignores it)",
                            "body_too_large")
        .Closing();
  }
  if (ec == beast::error::timeout) {
    x.edge.metrics.body_timeouts.Inc();
    co_return Reply::Refuse(ErrorCode::kInvalidArgument, "the body took too long to arrive",
                            "body_timeout", 408)
        .Closing();
  }
  co_return Reply::Refuse(ErrorCode::kInvalidArgument,
                          "the body did not arrive in full: " + ec.message(), "incomplete_body")
      .Closing();
}

// The route's answer to one request whose headers have arrived, or the protocol's refusal.
awaitable<Reply> Dispatch(Exchange& x, const RequestClient& client, const HeaderFields& fields,
                          size_t& label_index) {
  const auto& req = x.parser.get();
  const std::string_view target = View(req.target());
  const std::string_view full_path = TargetPath(target);
  const size_t qmark = full_path.find('?');
  const Method method = ToMethod(req.method());
  const RouteMatch match = x.edge.routes.Match(method, full_path.substr(0, qmark));
  label_index = match.label_index;
  const bool unread_body = !x.parser.is_done();
  if (method == Method::kUnknown) {
    Reply r = Reply::Refuse(ErrorCode::kInvalidArgument, "this method is not implemented",
                            "method_not_implemented", 501);
    r.close = unread_body;
    co_return r;
  }
  if (match.allowed) {
    Reply r = Reply::Refuse(ErrorCode::kInvalidArgument, "method not allowed here",
                            "method_not_allowed", 405);
    r.Set("Allow", match.allowed->Allow());
    r.close = unread_body;
    co_return r;
  }
  SessionBodyReader body(x);
  Request request{method,
                  target,
                  full_path.substr(0, qmark),
                  qmark == std::string_view::npos ? "" : full_path.substr(qmark + 1),
                  match.id,
                  fields,
                  client,
                  DeclaredLength(x.parser),
                  x.parser.chunked(),
                  {},
                  nullptr};
  if (match.route && match.route->kind == RouteKind::kCreate) {
    request.body = &body;
  } else {
    if (auto refused = co_await ReadSmallBody(x)) co_return std::move(*refused);
    request.small_body = req.body();
  }
  if (!match.route) co_return Reply::Refuse(ErrorCode::kNotFound, "no such route", "no_route");
  try {
    co_return co_await match.route->handler(request, x.edge.context);
  } catch (const std::exception& e) {
    // A bug, not the client's fault: answered (nothing was sent yet) and logged, and the
    // connection closes, since the handler may have left the body half read.
    spdlog::error("{} {}: uncaught exception: {}", View(req.method_string()), full_path, e.what());
  }
  co_return Reply::Refuse(ErrorCode::kInternal, "internal error", "internal").Closing();
}

// Answers that never carry content, and so no Content-Length (RFC 9110 6.4.1).
bool HasContent(unsigned status) { return status >= 200 && status != 204 && status != 304; }

bhttp::response<bhttp::string_body> ToBeast(Reply& reply, bool close) {
  bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(reply.status), 11};
  res.set(bhttp::field::server, "sluice");
  if (!reply.content_type.empty()) res.set(bhttp::field::content_type, reply.content_type);
  for (const Header& h : reply.headers) res.set(h.name, h.value);
  res.body() = std::move(reply.body);
  res.keep_alive(!close);
  res.prepare_payload();
  if (!HasContent(reply.status)) {
    // RFC 9110 8.6: a 204 (and a 1xx) must not carry Content-Length; a 304's may only be the
    // 200's length, which this answer does not know, so it is left out too (15.4.5).
    res.erase(bhttp::field::content_length);
  }
  return res;
}

awaitable<bool> Write(Edge& edge, beast::tcp_stream& stream, Reply reply, bool head, bool close) {
  const size_t length = reply.body_size();
  const bool has_content = HasContent(reply.status);
  auto shared = std::move(reply.shared_body);
  auto res = ToBeast(reply, close);
  stream.expires_after(edge.options.body_timeout);
  boost::system::error_code ec;
  if (head) {
    bhttp::response<bhttp::empty_body> headers_only(std::move(res.base()));
    if (has_content) headers_only.content_length(length);
    co_await bhttp::async_write(stream, headers_only,
                                asio::redirect_error(asio::use_awaitable, ec));
  } else if (shared) {
    bhttp::response<bhttp::span_body<const char>> with_shared(std::move(res.base()));
    with_shared.body() = {shared->data(), shared->size()};
    with_shared.prepare_payload();
    co_await bhttp::async_write(stream, with_shared, asio::redirect_error(asio::use_awaitable, ec));
  } else {
    co_await bhttp::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
  }
  // A client that does not read its answer (a slow read) is cut off here.
  if (ec == beast::error::timeout) edge.metrics.write_timeouts.Inc();
  co_return !ec;
}

// A refusal written without counting it among the requests (a refused connection is counted as an
// admission rejection instead).
awaitable<void> WriteRefusal(Edge& edge, beast::tcp_stream& stream, Reply reply) {
  const int64_t now = edge.context.clock.UnixSeconds();
  co_await Write(edge, stream, Present(std::move(reply), false, now), false, true);
}

// A request refused before it could be routed (slow or malformed headers): answered, counted under
// the route "unparsed", then closed.
awaitable<void> RefuseRequest(Edge& edge, beast::tcp_stream& stream, Reply reply) {
  const auto started = std::chrono::steady_clock::now();
  const unsigned status = reply.status;
  co_await WriteRefusal(edge, stream, std::move(reply));
  edge.metrics.CountResponse(
      edge.metrics.unparsed_label(), status,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

}  // namespace

awaitable<void> RefuseConnection(std::shared_ptr<Edge> edge, tcp::socket socket) {
  edge->metrics.connections_refused.Inc();
  Error full =
      MakeError(ErrorCode::kUnavailable,
                "the server is at its limit of open connections; retry later", "connections");
  full.retry_after_seconds = 5;
  beast::tcp_stream stream(std::move(socket));
  co_await WriteRefusal(*edge, stream, Reply::Refuse(std::move(full)));
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
}

awaitable<void> ServeConnection(std::shared_ptr<Edge> edge, tcp::socket socket, Held connection) {
  // Held by the frame, so the count comes down however the session ends. A local, not the
  // parameter: g++ 12 destroyed the parameter copies in declaration order (ASan showed it), so a
  // parameter outlived `edge`, whose counter it decrements, when the frame was destroyed at exit.
  [[maybe_unused]] const Held held_connection = std::move(connection);
  boost::system::error_code peer_ec;
  const auto remote = socket.remote_endpoint(peer_ec);
  const std::string peer = peer_ec ? std::string() : remote.address().to_string();
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer(kReadBufferLimit);
  // Reads then fill the whole buffer at once, instead of growing from Beast's 512-byte minimum.
  buffer.reserve(kReadBufferLimit);
  uint64_t consumed = 0;
  for (;;) {
    Parser parser;
    // ScanHead has bounded the head already; Beast's own count is looser (src/http/framing.h).
    parser.header_limit(kHeadLimits.head + 1);
    // Routes decide body limits from the headers; Beast's own check would answer before them.
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    if (buffer.size() == 0) {
      // Two clocks: an idle keep-alive connection may wait idle_timeout for its next request,
      // but once a request starts its headers must all arrive within header_timeout, however
      // slowly the bytes trickle in.
      stream.expires_after(edge->options.idle_timeout);
      boost::system::error_code ec;
      const size_t got = co_await stream.async_read_some(
          buffer.prepare(kReadBufferLimit), asio::redirect_error(asio::use_awaitable, ec));
      buffer.commit(got);
      if (ec) break;
    }
    stream.expires_after(edge->options.header_timeout);
    const auto buffered = [&buffer] {
      return std::string_view(static_cast<const char*>(buffer.data().data()), buffer.size());
    };
    HeadScan scan = ScanHead(buffered(), kHeadLimits);
    boost::system::error_code ec;
    while (scan.state == HeadScan::State::kNeedMore && buffer.size() < kReadBufferLimit) {
      const size_t got =
          co_await stream.async_read_some(buffer.prepare(kReadBufferLimit - buffer.size()),
                                          asio::redirect_error(asio::use_awaitable, ec));
      buffer.commit(got);
      if (ec) break;
      scan = ScanHead(buffered(), kHeadLimits);
    }
    if (ec == beast::error::timeout) {
      edge->metrics.header_timeouts.Inc();
      co_await RefuseRequest(
          *edge, stream,
          Reply::Refuse(ErrorCode::kInvalidArgument, "the request headers took too long to arrive",
                        "header_timeout", 408));
      break;
    }
    if (ec) break;  // the client went away mid-head: nobody to answer
    if (scan.state == HeadScan::State::kNeedMore) {
      // A full buffer that ScanHead did not refuse: a head of exactly the limit, unfinished.
      scan.state = HeadScan::State::kRefuse;
      scan.status = 431;
      scan.message = "the request head is larger than 16 KB";
    }
    if (scan.state == HeadScan::State::kRefuse) {
      co_await RefuseRequest(*edge, stream,
                             Reply::Refuse(ErrorCode::kInvalidArgument, std::string(scan.message),
                                           ReasonFor(scan.status), scan.status));
      break;
    }
    buffer.consume(scan.skip);
    const size_t used = parser.put(asio::buffer(buffer.data().data(), scan.length), ec);
    consumed += scan.skip + used;
    buffer.consume(used);
    if (ec || !parser.is_header_done()) {
      // The bytes were not HTTP: say so and close, as the protocol requires.
      const std::string why = ec ? ec.message() : "an unfinished head";
      co_await RefuseRequest(
          *edge, stream,
          Reply::Refuse(ErrorCode::kInvalidArgument, "malformed request: " + why, "bad_request"));
      break;
    }
    if (auto problem = FramingProblem(parser.get())) {
      co_await RefuseRequest(*edge, stream,
                             Reply::Refuse(ErrorCode::kInvalidArgument,
                                           fmt::format("malformed request: {}", problem->message),
                                           ReasonFor(problem->status), problem->status));
      break;
    }
    const auto started = std::chrono::steady_clock::now();
    const Held in_flight(edge->in_flight, edge->metrics.in_flight);
    const bool head = parser.get().method() == bhttp::verb::head;
    const bool wants_keep_alive = parser.get().keep_alive();
    const BeastFields fields(parser.get());
    const RequestClient client(peer, fields, edge->options.trusted_proxies);
    Exchange exchange{*edge, stream, buffer, parser, consumed};
    size_t label_index = 0;
    Reply reply = co_await Dispatch(exchange, client, fields, label_index);
    const unsigned status = reply.status;
    const bool close = reply.close || !wants_keep_alive || edge->draining.load();
    Reply presented =
        Present(std::move(reply), WantsHtml(fields), edge->context.clock.UnixSeconds());
    const bool written = co_await Write(*edge, stream, std::move(presented), head, close);
    edge->metrics.CountResponse(
        label_index, status,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    if (close || !written) break;
  }
  edge->metrics.bytes_received.Inc(consumed + buffer.size());
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  // Lingering close: a client still sending (a refused body, a slowloris cut off mid-header)
  // would otherwise get a reset on close, and a reset can discard the error response before the
  // client reads it. Bounded in time and bytes, so it costs little against a hostile client.
  stream.expires_after(std::chrono::seconds(1));
  std::array<char, 4096> sink;
  for (size_t drained = 0; drained < 64 * 1024;) {
    boost::system::error_code ec;
    drained += co_await stream.async_read_some(asio::buffer(sink),
                                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
  }
}

}  // namespace sluice::http
