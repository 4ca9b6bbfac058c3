// The S3 store's HTTP client (s3_client.h): endpoints, and one exchange on a connection.
#include "s3_client.h"

#include <openssl/err.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sluice::store::s3 {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using admission::Deadline;
using asio::awaitable;

/// Interim answers skipped before the real one; real peers send at most one.
constexpr int kMaxInterimAnswers = 8;

bool PeerClosed(const beast::error_code& ec) {
  // Over TLS a peer that closes without close_notify shows as a truncated stream.
  return ec == http::error::end_of_stream || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::eof ||
         ec == ssl::error::stream_truncated;
}

void SetExpiry(beast::tcp_stream& stream, const Deadline& deadline) {
  if (deadline.IsNever()) {
    stream.expires_never();
  } else {
    stream.expires_at(deadline.at());
  }
}

awaitable<Exchange> Connect(Connection* c, Endpoint endpoint, std::string sni, Deadline deadline) {
  Exchange out;
  tcp::resolver resolver(c->strand());
  // The resolver has no expiry of its own: a timer on the same strand cancels it at the deadline.
  std::optional<asio::steady_timer> timer;
  if (!deadline.IsNever()) {
    timer.emplace(c->strand(), deadline.at());
    timer->async_wait([&resolver](boost::system::error_code ec) {
      if (!ec) resolver.cancel();
    });
  }
  const std::string host = ResolvableHost(endpoint.host);
  auto results = co_await resolver.async_resolve(host, endpoint.port,
                                                 asio::redirect_error(asio::use_awaitable, out.ec));
  if (timer) timer->cancel();
  if (out.ec) {
    if (out.ec == asio::error::operation_aborted) out.ec = beast::error::timeout;
    co_return out;
  }
  SetExpiry(c->tcp(), deadline);
  co_await c->tcp().async_connect(results, asio::redirect_error(asio::use_awaitable, out.ec));
  if (out.ec) co_return out;
  c->tcp().socket().set_option(tcp::no_delay(true));
  if (auto* tls = c->tls()) {
    // SNI names a host, never an address (RFC 6066); a peer reached by address gets none.
    boost::system::error_code not_address;
    asio::ip::make_address(sni, not_address);
    if (not_address && !SSL_set_tlsext_host_name(tls->native_handle(), sni.c_str())) {
      out.ec =
          beast::error_code(static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category());
      co_return out;
    }
    tls->set_verify_callback(ssl::host_name_verification(sni));
    co_await tls->async_handshake(ssl::stream_base::client,
                                  asio::redirect_error(asio::use_awaitable, out.ec));
    if (out.ec) co_return out;
  }
  c->connected = true;
  co_return out;
}

template <typename Stream>
awaitable<void> Transfer(Stream& stream, Connection* c, const SignedRequest& signed_request,
                         uint64_t max_body, Deadline deadline, bool reused, Exchange& out) {
  // The body is sent from the caller's buffer as it is, never copied into the request.
  http::request<http::span_body<const char>> req;
  req.method(signed_request.method);
  req.target(signed_request.target);
  req.version(11);
  for (const auto& [name, value] : signed_request.headers) req.set(name, value);
  if (signed_request.body) {
    req.body() = beast::span<const char>(signed_request.body->data(), signed_request.body->size());
  }
  req.keep_alive(true);
  req.prepare_payload();

  out.stage = Exchange::Stage::kSend;
  SetExpiry(c->tcp(), deadline);
  co_await http::async_write(stream, req, asio::redirect_error(asio::use_awaitable, out.ec));
  if (out.ec) {
    out.stale = reused && PeerClosed(out.ec);
    co_return;
  }
  out.stage = Exchange::Stage::kReceive;
  // Interim (1xx) answers come before the real one and must be skipped (RFC 9110 section 15.2):
  // taking a "100 Continue" as the answer would leave the real answer in the buffer, to be read as
  // the answer to the next request on this connection. Bounded so a peer cannot keep us here.
  for (int interim = 0;; ++interim) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(max_body);
    co_await http::async_read(stream, c->buffer(), parser,
                              asio::redirect_error(asio::use_awaitable, out.ec));
    if (out.ec) {
      out.stale = reused && interim == 0 && !parser.got_some() && PeerClosed(out.ec);
      co_return;
    }
    const unsigned status = parser.get().result_int();
    if (status >= 100 && status < 200 && status != 101) {
      if (interim < kMaxInterimAnswers) continue;
      out.ec = http::error::bad_status;
      co_return;
    }
    out.stage = Exchange::Stage::kDone;
    out.status = status;
    // We never send a second request before the answer to the first, so a well-framed answer
    // ends exactly where the bytes received end. Bytes past it mean the framing lied (a short
    // Content-Length, a stray answer): the body read is not to be trusted, and the connection is
    // out of step with the peer, so it is closed rather than reused.
    out.in_step = !c->HasBufferedBytes();
    // A 101 switched the connection to a protocol we did not ask for; an answer framed by the
    // end of the stream leaves nothing to reuse.
    out.keep_alive =
        out.in_step && status != 101 && parser.get().keep_alive() && !parser.get().need_eof();
    out.body = std::move(parser.get().body());
    co_return;
  }
}

}  // namespace

std::optional<Endpoint> ParseEndpoint(std::string_view url) {
  Endpoint e;
  if (url.starts_with("https://")) {
    e.tls = true;
    url.remove_prefix(8);
  } else if (url.starts_with("http://")) {
    url.remove_prefix(7);
  } else {
    return std::nullopt;
  }
  if (url.ends_with('/')) url.remove_suffix(1);
  if (url.empty() || url.find_first_of("/?#@ ") != std::string_view::npos) return std::nullopt;
  size_t colon = url.rfind(':');
  if (url.front() == '[') {
    const size_t close = url.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    colon = close + 1 < url.size() && url[close + 1] == ':' ? close + 1 : std::string_view::npos;
  }
  e.host = std::string(url.substr(0, colon));
  e.port = e.tls ? "443" : "80";
  if (colon != std::string_view::npos) {
    const std::string_view port = url.substr(colon + 1);
    if (port.empty() || port.find_first_not_of("0123456789") != std::string_view::npos) {
      return std::nullopt;
    }
    e.port = std::string(port);
    e.default_port = e.port == (e.tls ? "443" : "80");
  }
  if (e.host.empty()) return std::nullopt;
  return e;
}

std::string ResolvableHost(const std::string& host) {
  return host.front() == '[' ? host.substr(1, host.size() - 2) : host;
}

awaitable<Exchange> RunExchange(Connection* c, Endpoint endpoint, std::string sni,
                                std::shared_ptr<const SignedRequest> request, uint64_t max_body,
                                Deadline deadline, std::atomic<uint64_t>* opened) {
  const bool reused = c->connected;
  if (!c->connected) {
    auto connect = Connect(c, endpoint, sni, deadline);
    Exchange connected = co_await std::move(connect);
    if (connected.ec) co_return connected;
    opened->fetch_add(1, std::memory_order_relaxed);
  }
  Exchange out;
  if (auto* tls = c->tls()) {
    auto transfer = Transfer(*tls, c, *request, max_body, deadline, reused, out);
    co_await std::move(transfer);
  } else {
    auto transfer = Transfer(*c->plain(), c, *request, max_body, deadline, reused, out);
    co_await std::move(transfer);
  }
  co_return out;
}

}  // namespace sluice::store::s3
