#include "session.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <limits>

#include "access_log.h"
#include "beast_request.h"
#include "framing.h"
#include "presenter.h"
#include "sluice/service/text.h"

namespace sluice::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using asio::awaitable;

namespace {

// Bounds on what a client can make us hold before a route has decided anything: the head (its
// request line and fields, src/http/framing.h) is checked by ScanHead before Beast sees it, so the
// limits are exact whatever Beast's own header_limit counts.
constexpr HeadLimits kHeadLimits{};
// How long a connection waiting in the health reserve over a full max_connections may wait, once
// its request has arrived, for a place to free or a connection to go idle (ServeConnection).
constexpr Duration kPromotionWait = std::chrono::milliseconds(250);
// The read buffer holds at most one whole head; it is also the most of a rejected body that can
// arrive with its headers.
constexpr size_t kReadBufferLimit = kHeadLimits.head;

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
  if (x.refusal && match.label != "healthz") co_return Reply::Refuse(*x.refusal).Closing();
  if (x.edge.options.surface == ServerOptions::Surface::kAdmin &&
      !(match.route && match.route->gate == AdminGate::kOwnSignIn)) {
    // Every admin answer, a 404 included, is for the token's holder only; the review page's
    // routes check their own sign-in (review_desk.h).
    if (auto refused = CheckAdminToken(fields, x.edge.context)) {
      refused->close = unread_body;
      co_return std::move(*refused);
    }
  }
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
  SessionBodyReader body(x, client);
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
  // What the handler throws is answered by the session's boundary (AnswerOrFail).
  co_return co_await match.route->handler(request, x.edge.context);
}

std::atomic<void (*)(const Reply&)> g_before_write_hook{nullptr};

// What one request is answered: the presented reply, its head serialised, and what the metrics
// and the access log say of it.
struct Answer {
  Reply presented;
  unsigned status = 0;
  std::string reason;
  bool close = false;
};

void Prepare(Answer& answer, Reply reply, const Exchange& x, bool wants_html, const Reader& reader,
             bool must_close, std::string& head) {
  answer.status = reply.status;
  answer.reason = reply.error ? reply.error->reason : std::string();
  // Read now, not before the route ran: a drain that began meanwhile closes this connection.
  answer.close = reply.close || must_close || x.edge.draining.load();
  answer.presented =
      Present(std::move(reply), wants_html, x.edge.context.clock.UnixSeconds(), reader);
  if (auto hook = g_before_write_hook.load(std::memory_order_relaxed)) hook(answer.presented);
  head.clear();
  SerializeHead(answer.presented, x.request_id, answer.close, head);
}

// The exception boundary: the route's reply, presented and its head serialised in `head`, or a
// 500 if anything on the way throws (a handler, the presenter, the serialiser). Nothing has been
// written then (at most a 100 Continue), so the client gets an answer that is counted and logged
// like any other; the connection stays open when the body was read in full, since the next
// request's bytes are then where they belong, and closes otherwise.
awaitable<Answer> AnswerOrFail(Exchange& x, const RequestClient& client, const HeaderFields& fields,
                               bool must_close, size_t& label_index, std::string& head) {
  const bool wants_html = WantsHtml(fields);
  // Only a page has a language: a program's JSON is English whatever the headers say. The
  // reader's path is for the error page the presenter may make: its language switch goes back to
  // the create page, so a path no route took (the client's bytes) is never written into a form.
  const Reader reader{wants_html ? PageLanguage(fields) : Lang::kEn, "/"};
  Answer answer;
  std::string failure;
  try {
    Reply reply = co_await Dispatch(x, client, fields, label_index);
    Prepare(answer, std::move(reply), x, wants_html, reader, must_close, head);
    co_return answer;
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "an exception of unknown type";
  }
  // A bug, not the client's fault. The path is the client's bytes, quoted as any error text.
  const auto& req = x.parser.get();
  spdlog::error("{} {}: uncaught exception while answering: {} (request {})",
                View(req.method_string()), service::QuotedClientText(View(req.target()), 256),
                failure, x.request_id);
  Reply failed = Reply::Refuse(ErrorCode::kInternal, "internal error", "internal");
  failed.close = !x.parser.is_done();
  answer = Answer{};
  try {
    Prepare(answer, std::move(failed), x, wants_html, reader, must_close, head);
  } catch (...) {
    // The hook again (a test's), or memory exhausted: the plainest answer there is.
    static constexpr std::string_view kBody =
        "{\"error\": \"internal error\", \"message\": \"internal error\", "
        "\"reason\": \"internal\"}\n";
    answer.presented = Reply::Json(500, std::string(kBody));
    answer.status = 500;
    answer.reason = "internal";
    answer.close = true;
    head.clear();
    SerializeHead(answer.presented, x.request_id, true, head);
  }
  co_return answer;
}

// Writes a presented reply: its head as serialised (into `head`, reused across a connection's
// answers) and the body, with one gather write; no body for HEAD. Beast's own serialiser cost
// about 8% of a hot read's CPU and an allocation per field (bench/results/profile/README.md).
awaitable<bool> Write(Edge& edge, Stream& stream, const std::string& head, const Reply& reply,
                      bool head_only) {
  const std::string_view body =
      head_only || !HasContent(reply.status) ? std::string_view() : reply.body_view();
  const std::array<asio::const_buffer, 2> buffers{asio::buffer(head),
                                                  asio::buffer(body.data(), body.size())};
  stream.expires_after(edge.Live()->body_timeout);
  boost::system::error_code ec;
  co_await asio::async_write(stream, buffers, asio::redirect_error(asio::use_awaitable, ec));
  // A client that does not read its answer (a slow read) is cut off here.
  if (ec == beast::error::timeout) edge.metrics.write_timeouts.Inc();
  co_return !ec;
}

// A refusal written without counting it among the requests (a refused connection is counted as an
// admission rejection instead).
awaitable<void> WriteRefusal(Edge& edge, Stream& stream, Reply reply) {
  const int64_t now = edge.context.clock.UnixSeconds();
  const Reply presented = Present(std::move(reply), false, now);
  std::string head;
  SerializeHead(presented, {}, true, head);
  co_await Write(edge, stream, head, presented, false);
}

// A request refused before it could be routed (slow or malformed headers): answered, counted under
// the route "unparsed", then closed.
awaitable<void> RefuseRequest(Edge& edge, Stream& stream, Reply reply) {
  const auto started = std::chrono::steady_clock::now();
  const unsigned status = reply.status;
  co_await WriteRefusal(edge, stream, std::move(reply));
  edge.metrics.CountResponse(
      edge.metrics.unparsed_label(), status,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

}  // namespace

void SetBeforeWriteHookForTest(void (*hook)(const Reply&)) {
  g_before_write_hook.store(hook, std::memory_order_relaxed);
}

awaitable<void> RefuseConnection(std::shared_ptr<Edge> edge, Socket socket, Error refusal) {
  Stream stream(std::move(socket));
  co_await WriteRefusal(*edge, stream, Reply::Refuse(std::move(refusal)));
  boost::system::error_code ignored;
  stream.socket().shutdown(asio::socket_base::shutdown_both, ignored);
}

awaitable<void> ServeConnection(std::shared_ptr<Edge> edge, Socket socket, std::string peer,
                                ConnectionHolds holds) {
  // Held by the frame, so the counts come down however the session ends. A local, not the
  // parameter: g++ 12 destroyed the parameter copies in declaration order (ASan showed it), so a
  // parameter outlived `edge`, whose counters it decrements, when the frame was destroyed at exit.
  ConnectionHolds held = std::move(holds);
  Stream stream(std::move(socket));
  beast::flat_buffer buffer(kReadBufferLimit);
  // Reads then fill the whole buffer at once, instead of growing from Beast's 512-byte minimum.
  buffer.reserve(kReadBufferLimit);
  // The heads of this connection's answers, one after the other (Write).
  std::string head;
  head.reserve(1024);
  uint64_t consumed = 0;
  // What another connection may ask of this one under pressure (Reclaimable): to give up its
  // wait between two requests. Emptied before the stream goes, so a late ask does nothing.
  const auto reclaimable = std::make_shared<Reclaimable>(stream.get_executor());
  // The socket peer's client key, as the listener's shares count it (src/http/server.cc).
  const std::string peer_key = admission::ClientKey(peer, {}, admission::TrustedProxies());
  const struct Forget {
    Reclaimable& r;
    ~Forget() { r.cancel = nullptr; }
  } forget{*reclaimable};
  for (bool first = true;; first = false) {
    // This request's settings: a reload in the middle of it changes the next one.
    const std::shared_ptr<const ServerOptions> live = edge->Live();
    Parser parser;
    // ScanHead has bounded the head already; Beast's own count is looser (src/http/framing.h).
    parser.header_limit(kHeadLimits.head + 1);
    // Routes decide body limits from the headers; Beast's own check would answer before them.
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    if (buffer.size() == 0) {
      // Three clocks: a new connection must send its first byte within first_byte_timeout (one
      // that sends nothing would otherwise hold a connection for idle_timeout); an idle
      // keep-alive connection, which has shown it speaks HTTP, may wait idle_timeout for its next
      // request; once a request starts its headers must all arrive within header_timeout,
      // however slowly the bytes trickle in.
      // The idle timeout shrinks as the connection cap fills, and at the cap the connection
      // idle longest is closed for a new one (docs/overload.md, "Pressure"). Only between two
      // requests: a new connection has first_byte_timeout, and none is reclaimed mid-request.
      std::optional<admission::IdleConnections<std::shared_ptr<Reclaimable>>::Entry> idle;
      if (first) {
        stream.expires_after(live->first_byte_timeout);
      } else {
        stream.expires_after(EffectiveIdleTimeout(*live, edge->connections.load()));
        reclaimable->cancel = [&stream] {
          boost::system::error_code ignored;
          stream.socket().cancel(ignored);
        };
        idle.emplace(edge->idle.Enter(std::chrono::steady_clock::now(), peer_key, reclaimable));
      }
      boost::system::error_code ec;
      const size_t got = co_await stream.async_read_some(
          buffer.prepare(kReadBufferLimit), asio::redirect_error(asio::use_awaitable, ec));
      idle.reset();
      reclaimable->cancel = nullptr;
      buffer.commit(got);
      // Closed without a word: nothing was asked, and a 408 on a connection a browser opened
      // ahead of time would be read as the answer to its next request.
      if (ec == beast::error::timeout && first) edge->metrics.first_byte_timeouts.Inc();
      if (reclaimable->reclaimed && got == 0) {
        // Given up for a new connection: nothing is in flight, so no lingering read either.
        edge->metrics.bytes_received.Inc(consumed);
        boost::system::error_code ignored;
        stream.socket().shutdown(asio::socket_base::shutdown_both, ignored);
        co_return;
      }
      // A request that arrived as the reclaim did is served (the count stays over the cap until
      // this connection ends, within kReclaimSlack).
      reclaimable->reclaimed = false;
      if (ec) break;
    }
    stream.expires_after(live->header_timeout);
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
    if (held.refusal && held.refusal->reason == "connections") {
      // Waiting in the health reserve because the cap was full and nothing idle at accept: by
      // the time its request has arrived a place may have freed, or a connection gone idle that
      // can give up its own, so a moment of churn at the cap (connections closing at the idle
      // timeout's floor while their clients reconnect) does not turn into a 503.
      const auto peer_ip = admission::IpAddress::Parse(peer);
      const bool exempt = peer == "unix" || (peer_ip && live->trusted_proxies.Contains(*peer_ip));
      ConnectionCap refused_by = ConnectionCap::kProcess;
      std::optional<ConnectionPlace> place =
          TakeConnectionPlace(*edge, *live, peer_key, exempt, refused_by);
      // Still none: the clients closed at the idle timeout's floor may all be reconnecting at
      // once. A short, bounded wait for one of them to go idle (at most kHealthReserve
      // connections wait so, each at most kPromotionWait).
      const auto give_up = std::chrono::steady_clock::now() + kPromotionWait;
      asio::steady_timer pause(stream.get_executor());
      while (!place && refused_by == ConnectionCap::kProcess &&
             std::chrono::steady_clock::now() < give_up) {
        pause.expires_after(std::chrono::milliseconds(5));
        boost::system::error_code ignored;
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
        place = TakeConnectionPlace(*edge, *live, peer_key, exempt, refused_by);
      }
      if (place) {
        held.connection.reset();  // the reserve's unit, and its share, go back
        held.connection.emplace(std::move(*place->connection));
        held.client_share = std::move(place->client_share);
        held.network_share = std::move(place->network_share);
        held.refusal.reset();
        edge->metrics.reserve_promotions.Inc();
      }
    }
    const auto started = std::chrono::steady_clock::now();
    const Held in_flight(edge->in_flight, edge->metrics.in_flight);
    const bool head_only = parser.get().method() == bhttp::verb::head;
    const bool wants_keep_alive = parser.get().keep_alive();
    const BeastFields fields(parser.get());
    const RequestClient client(peer, fields, live->trusted_proxies, live->forward_auth_header);
    const std::string request_id =
        RequestIdFor(fields.Get("X-Request-Id"), peer, live->trusted_proxies);
    Exchange exchange{*edge, stream, buffer, parser, consumed, held.refusal, request_id};
    size_t label_index = 0;
    const bool must_close = !wants_keep_alive || held.refusal.has_value();
    const Answer answer =
        co_await AnswerOrFail(exchange, client, fields, must_close, label_index, head);
    const bool written = co_await Write(*edge, stream, head, answer.presented, head_only);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    edge->metrics.CountResponse(label_index, answer.status, seconds);
    if (live->access_log && AccessLogWants(answer.status, live->access_log_sample)) {
      const auto method = parser.get().method_string();
      LogAccess({request_id, std::string_view(method.data(), method.size()),
                 edge->metrics.Label(label_index), answer.status, answer.reason, client.Key(),
                 seconds});
    }
    if (answer.close || !written) break;
  }
  edge->metrics.bytes_received.Inc(consumed + buffer.size());
  boost::system::error_code ignored;
  stream.socket().shutdown(asio::socket_base::shutdown_send, ignored);
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
