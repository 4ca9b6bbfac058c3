// The request is written while the answer is read, so an early answer (a refusal decided from the
// headers) is never lost to a failed write. With expect_continue the body waits for "100
// Continue" (or one second, as curl waits), so a refusal from the headers arrives before the body
// is sent and the server never has to discard unread bytes (which can reset the connection and
// lose its answer).
#include "cli_exchange.h"

#include <fmt/format.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <memory>
#include <optional>
#include <type_traits>

namespace sluice::app {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;
using local = asio::local::stream_protocol;
using SteadyClock = std::chrono::steady_clock;

/// How long to wait for "100 Continue" before sending the body anyway.
constexpr auto kContinueWait = std::chrono::seconds(1);
/// Bytes held between the socket and the parser. A body passes through in pieces; what must fit
/// whole is a line of the head or of a chunked body's framing, which Beast bounds at 8 KB.
constexpr size_t kReadBufferBytes = 1 << 20;

// The client side of TLS: the system's certificate store (OpenSSL's default paths, which
// SSL_CERT_FILE and SSL_CERT_DIR override), the peer's certificate checked against it, and its
// name against the URL's host (RFC 2818: the DNS names, or the IP address, of its
// subjectAltName).
asio::ssl::context& ClientTls() {
  static asio::ssl::context ctx = [] {
    asio::ssl::context c(asio::ssl::context::tls_client);
    c.set_default_verify_paths();
    c.set_verify_mode(asio::ssl::verify_peer);
    return c;
  }();
  return ctx;
}

bool IsAddress(const std::string& host) {
  beast::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

std::string DescribeTlsFailure(const beast::error_code& ec) {
  return "TLS handshake failed (" + ec.message() +
         "): the server's certificate is not trusted by this system or does not name the host";
}

using TcpStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using UnixStream = beast::basic_stream<local>;

template <class Stream>
class Exchanger {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;
  static constexpr bool kUnix = std::is_same_v<Stream, UnixStream>;

 public:
  Exchanger(const ServerUrl& server, const CliRequest& request)
      : server_(server), limit_(request.answer_limit), expect_continue_(request.expect_continue) {
    if constexpr (kTls) {
      stream_ = std::make_unique<Stream>(io_, ClientTls());
    } else {
      stream_ = std::make_unique<Stream>(io_);
    }
    req_.method(bhttp::string_to_verb(request.method));
    req_.target(request.target);
    req_.version(11);
    req_.set(bhttp::field::host, kUnix ? std::string("localhost") : server.host_header);
    req_.set(bhttp::field::user_agent, request.user_agent);
    for (const auto& [name, value] : request.headers) req_.set(name, value);
    if (expect_continue_) req_.set(bhttp::field::expect, "100-continue");
    req_.keep_alive(false);
    req_.body() = request.body;
    // Content-Length always, so a POST without a body says 0.
    req_.prepare_payload();
  }

  Attempt Run() {
    deadline_ = SteadyClock::now() + kExchangeTimeout;
    const auto connect_by = std::min(deadline_, SteadyClock::now() + kConnectTimeout);
    if constexpr (kUnix) {
      Lowest().expires_at(connect_by);
      Lowest().async_connect(local::endpoint(server_.socket_path),
                             [this](beast::error_code ec) { OnConnected(ec); });
    } else {
      timer_.expires_at(connect_by);
      timer_.async_wait([this](beast::error_code ec) {
        if (!ec) resolver_.cancel();  // the name lookup took the whole connect budget
      });
      resolver_.async_resolve(server_.host, server_.port,
                              [this](beast::error_code ec, tcp::resolver::results_type results) {
                                OnResolved(ec, std::move(results));
                              });
    }
    io_.run();
    return std::move(attempt_);
  }

 private:
  auto& Lowest() { return beast::get_lowest_layer(*stream_); }

  void OnResolved(beast::error_code ec, tcp::resolver::results_type results) {
    timer_.cancel();
    if (ec) {
      attempt_.what = fmt::format(
          "cannot resolve {}: {}", server_.host,
          ec == asio::error::operation_aborted ? std::string("timed out") : ec.message());
      return Finish();
    }
    // The expiry set here also bounds the TLS handshake that follows.
    Lowest().expires_at(std::min(deadline_, SteadyClock::now() + kConnectTimeout));
    Lowest().async_connect(results, [this](beast::error_code connect_ec, const tcp::endpoint&) {
      OnConnected(connect_ec);
    });
  }

  void OnConnected(beast::error_code ec) {
    if (ec) {
      attempt_.connect_failed = true;
      attempt_.what = ec == beast::error::timeout
                          ? fmt::format("connect timed out after {} s", kConnectTimeout.count())
                          : ec.message();
      return Finish();
    }
    if constexpr (kTls) {
      // Nothing of the request leaves before the server has proven its name: a refused
      // handshake is "not sent", and final (another try meets the same certificate).
      if (!IsAddress(server_.host)) {
        // SNI names the host (never an address, which RFC 6066 forbids there).
        SSL_set_tlsext_host_name(stream_->native_handle(), server_.host.c_str());
      }
      stream_->set_verify_mode(asio::ssl::verify_peer);
      stream_->set_verify_callback(asio::ssl::host_name_verification(server_.host));
      stream_->async_handshake(asio::ssl::stream_base::client, [this](beast::error_code tls_ec) {
        if (tls_ec) {
          attempt_.what =
              tls_ec == beast::error::timeout
                  ? fmt::format("TLS handshake timed out after {} s", kConnectTimeout.count())
                  : DescribeTlsFailure(tls_ec);
          return Finish();
        }
        SendRequest();
      });
    } else {
      SendRequest();
    }
  }

  void SendRequest() {
    // From here on the server may have seen the request: no failure is "not sent" any more.
    attempt_.fate = Attempt::Fate::kUnknown;
    Lowest().expires_at(deadline_);
    serializer_.emplace(req_);
    ReadHead();
    bhttp::async_write_header(*stream_, *serializer_, [this](beast::error_code write_ec, size_t) {
      OnHeaderSent(write_ec);
    });
  }

  void OnHeaderSent(beast::error_code ec) {
    if (done_ || answered_) return;
    if (ec) {
      write_error_ = ec;  // the read in flight may still bring the server's answer
      return;
    }
    header_sent_ = true;
    if (continue_received_ || !expect_continue_) return StartBody();
    timer_.expires_after(kContinueWait);
    timer_.async_wait([this](beast::error_code timer_ec) {
      if (!timer_ec) StartBody();  // no 100 Continue: a server that ignores Expect
    });
  }

  void StartBody() {
    if (done_ || answered_ || body_started_ || !header_sent_) return;
    body_started_ = true;
    bhttp::async_write(*stream_, *serializer_, [this](beast::error_code ec, size_t) {
      if (ec && !done_) write_error_ = ec;
    });
  }

  void ReadHead() {
    parser_.emplace();
    parser_->body_limit(limit_);
    bhttp::async_read_header(*stream_, buffer_, *parser_,
                             [this](beast::error_code ec, size_t) { OnHead(ec); });
  }

  void OnHead(beast::error_code ec) {
    if (done_) return;
    if (ec) {
      attempt_.what = DescribeFailure(ec);
      return Finish();
    }
    const unsigned status = parser_->get().result_int();
    if (status == 100) {
      continue_received_ = true;
      timer_.cancel();
      StartBody();
      return ReadHead();
    }
    if (status < 200) return ReadHead();  // another interim answer (102, 103): not ours to act on
    answered_ = true;
    timer_.cancel();
    const auto& head = parser_->get();
    attempt_.fate = Attempt::Fate::kAnswered;
    attempt_.status = status;
    attempt_.status_text = std::string(head.reason());
    attempt_.retry_after = std::string(head[bhttp::field::retry_after]);
    attempt_.content_type = std::string(head[bhttp::field::content_type]);
    bhttp::async_read(*stream_, buffer_, *parser_,
                      [this](beast::error_code body_ec, size_t) { OnAnswer(body_ec); });
  }

  void OnAnswer(beast::error_code ec) {
    if (done_) return;
    if (ec) {
      attempt_.what = DescribeFailure(ec);
    } else {
      attempt_.body_complete = true;
      attempt_.body = std::move(parser_->get().body());
    }
    Finish();
  }

  std::string DescribeFailure(beast::error_code read_ec) const {
    if (read_ec == beast::error::timeout) {
      return fmt::format("no complete answer within {} s", kExchangeTimeout.count());
    }
    if (read_ec == bhttp::error::body_limit) {
      return fmt::format("the answer is larger than {} bytes, the most this command reads", limit_);
    }
    if (read_ec == bhttp::error::header_limit || read_ec == bhttp::error::buffer_overflow) {
      return "the answer's header or framing is larger than 8 KB";
    }
    std::string out =
        read_ec == bhttp::error::end_of_stream || read_ec == bhttp::error::partial_message
            ? std::string("the server closed the connection without a full answer")
            : "reading the answer failed: " + read_ec.message();
    if (write_error_) out += " (sending the request failed: " + write_error_.message() + ")";
    return out;
  }

  void Finish() {
    done_ = true;
    timer_.cancel();
    resolver_.cancel();
    beast::error_code ignored;
    Lowest().socket().shutdown(asio::socket_base::shutdown_both, ignored);
    Lowest().close();  // ends a write still in flight
  }

  const ServerUrl& server_;
  const uint64_t limit_;
  const bool expect_continue_;
  asio::io_context io_;
  tcp::resolver resolver_{io_};
  std::unique_ptr<Stream> stream_;
  asio::steady_timer timer_{io_};  // the name lookup's budget, then the wait for 100 Continue
  bhttp::request<bhttp::string_body> req_;
  std::optional<bhttp::request_serializer<bhttp::string_body>> serializer_;
  beast::flat_buffer buffer_{kReadBufferBytes};
  std::optional<bhttp::response_parser<bhttp::string_body>> parser_;
  SteadyClock::time_point deadline_;
  beast::error_code write_error_;
  bool header_sent_ = false;
  bool continue_received_ = false;
  bool body_started_ = false;
  bool answered_ = false;
  bool done_ = false;
  Attempt attempt_;
};

}  // namespace

Attempt Exchange(const ServerUrl& server, const CliRequest& request) {
  if (!server.socket_path.empty()) return Exchanger<UnixStream>(server, request).Run();
  if (server.tls) return Exchanger<TlsStream>(server, request).Run();
  return Exchanger<TcpStream>(server, request).Run();
}

std::optional<int> RetryAfterField(const Attempt& attempt) {
  const std::string& h = attempt.retry_after;
  if (!h.empty() && h.size() < 9 && h.find_first_not_of("0123456789") == std::string::npos) {
    return std::stoi(h);
  }
  return std::nullopt;
}

}  // namespace sluice::app
