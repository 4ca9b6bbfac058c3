// `sluice paste`: one create over HTTP/1.1, with the client side of the retry rule
// (docs/overload.md, "Retries, breakers, timeouts").
//
// What may be sent again, and why:
//  - a 429 or 503 that names a Retry-After: the server refused before creating anything (its order
//    of checks puts every refusal before the body is stored), so waiting and sending again cannot
//    make a second paste. We wait at least what it asked, plus up to 20% jitter so refused clients
//    do not come back as one wave, and only while the total stays within --max-wait;
//  - a connect that failed: nothing left this process. Once, after a short jittered pause.
// Everything else is final, including a 503 `outcome_unknown`: the server itself could not tell
// whether its insert committed, so that one is not a refusal at the door. A reset, a timeout or a
// 500 after the request may have left means the paste may exist: a second send could make a second
// paste, so we say so and stop.
//
// The body is announced with `Expect: 100-continue`, so a refusal decided from the headers (411,
// 413, 429, 503) arrives before the body is sent, and the server never has to discard unread
// bytes (which can reset the connection and lose its answer). A server that ignores Expect gets
// the body after one second, as curl does. The answer is read while the request is written, so
// an early answer is never lost to a failed write.
//
// Beast is used synchronously from the caller's point of view: each attempt runs its own
// io_context to completion on the calling thread. Timeouts come from tcp_stream's expiry (Beast's
// blocking calls have none).
#include "paste_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli_config.h"
#include "crypt_command.h"
#include "sluice/admission/jitter.h"
#include "sluice/common/duration.h"
#include "sluice/common/result.h"
#include "token_store.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "dev"
#endif

namespace sluice::app {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

constexpr auto kConnectTimeout = std::chrono::seconds(5);
constexpr auto kRequestTimeout = std::chrono::seconds(30);
/// How long to wait for "100 Continue" before sending the body anyway.
constexpr auto kContinueWait = std::chrono::seconds(1);
/// The pause before the one retry of a failed connect: short, and jittered.
constexpr auto kConnectRetryMin = std::chrono::milliseconds(100);
constexpr auto kConnectRetryMax = std::chrono::milliseconds(400);
/// Jitter added to a Retry-After, as a fraction of it.
constexpr double kRetryAfterJitter = 0.2;
/// Largest answer read: a create answer is a few hundred bytes of JSON.
constexpr uint64_t kAnswerLimit = 1 << 20;

constexpr int kExitCreated = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

template <typename... Args>
void Say(fmt::format_string<Args...> format, Args&&... args) {
  std::fputs(("sluice paste: " + fmt::format(format, std::forward<Args>(args)...) + "\n").c_str(),
             stderr);
}

// ---- the server URL ----------------------------------------------------------------------------

struct ServerUrl {
  std::string host;         // for the resolver: no brackets around an IPv6 literal
  std::string port;         // digits
  std::string host_header;  // as written in the URL
  std::string base_path;    // "" or "/prefix", no trailing slash
  bool tls = false;         // https://: the system's certificate store and a hostname check
};

Result<ServerUrl> ParseServerUrl(std::string_view url) {
  const auto bad = [&](std::string_view why) {
    return MakeError(ErrorCode::kInvalidArgument, fmt::format("--server '{}': {}", url, why));
  };
  constexpr std::string_view kHttp = "http://";
  constexpr std::string_view kHttps = "https://";
  const bool tls = url.starts_with(kHttps);
  if (!tls && !url.starts_with(kHttp)) {
    return bad("want a URL like https://paste.example or http://127.0.0.1:8080");
  }
  std::string_view rest = url.substr(tls ? kHttps.size() : kHttp.size());
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (path.find_first_of("?#") != std::string_view::npos)
    return bad("no query or fragment, please");
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (authority.find('@') != std::string_view::npos) return bad("user info is not supported");

  ServerUrl out;
  out.tls = tls;
  out.host_header = std::string(authority);
  out.base_path = std::string(path);
  std::string_view port;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in the host");
    out.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (!after.starts_with(':')) return bad("junk after the IPv6 address");
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) return bad("no host");
  if (port.empty()) port = tls ? "443" : "80";
  int number = 0;
  for (char c : port) {
    if (c < '0' || c > '9' || number > 65535) return bad("the port is not a number in 1-65535");
    number = number * 10 + (c - '0');
  }
  if (number < 1 || number > 65535) return bad("the port is not a number in 1-65535");
  out.port = std::string(port);
  return out;
}

std::string PercentEncode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

/// "60s", "250ms" (ParseDuration), or a bare number of seconds ("0", "10", "1.5").
std::optional<SteadyClock::duration> ParseMaxWait(std::string_view text) {
  if (auto d = ParseDuration(text); d.ok()) return *d;
  if (text.empty() || text.find_first_not_of("0123456789.") != std::string_view::npos) {
    return std::nullopt;
  }
  auto d = ParseDuration(std::string(text) + "s");
  if (!d.ok()) return std::nullopt;
  return *d;
}

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

// ---- the input ---------------------------------------------------------------------------------

Result<std::string> ReadInput(const std::string& file) {
  const bool from_stdin = file.empty() || file == "-";
  const std::string name = from_stdin ? std::string("stdin") : file;
  if (from_stdin && isatty(STDIN_FILENO)) {
    std::fputs("sluice paste: reading the paste from the terminal; end it with Ctrl-D\n", stderr);
  }
  std::FILE* f = from_stdin ? stdin : std::fopen(file.c_str(), "rb");
  if (f == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument,
                     fmt::format("cannot open {}: {}", name, std::strerror(errno)));
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const size_t n = std::fread(buf, 1, sizeof buf, f);
    out.append(buf, n);
    if (n < sizeof buf) break;
  }
  const bool failed = std::ferror(f) != 0;
  const int error = errno;
  if (!from_stdin) std::fclose(f);
  if (failed) {
    return MakeError(ErrorCode::kInvalidArgument,
                     fmt::format("cannot read {}: {}", name, std::strerror(error)));
  }
  return out;
}

// ---- one attempt -------------------------------------------------------------------------------

/// What one attempt learned.
struct Attempt {
  enum class Fate {
    /// Nothing left this process: resolving or connecting failed.
    kNotSent,
    /// The request may have reached the server and no complete answer came back.
    kUnknown,
    /// A final answer's status line and headers arrived.
    kAnswered,
  };
  Fate fate = Fate::kNotSent;
  /// kNotSent: the connect itself failed (not the name lookup), the one case worth a retry.
  bool connect_failed = false;
  /// What went wrong, for a person.
  std::string what;
  unsigned status = 0;
  std::string status_text;
  std::string retry_after;
  std::string body;
  /// False when the connection broke while the answer's body was read.
  bool body_complete = false;
};

/// One request on its own connection, run to completion on the calling thread. Single use.
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

template <class Stream>
void PrepareTls(Stream& stream, const ServerUrl& server) {
  // SNI names the host (never an address, which RFC 6066 forbids there).
  if (!IsAddress(server.host)) {
    SSL_set_tlsext_host_name(stream.native_handle(), server.host.c_str());
  }
  stream.set_verify_mode(asio::ssl::verify_peer);
  stream.set_verify_callback(asio::ssl::host_name_verification(server.host));
}

std::string DescribeTlsFailure(const beast::error_code& ec) {
  return "TLS handshake failed (" + ec.message() +
         "): the server's certificate is not trusted by this system or does not name the host";
}

template <bool kTls>
class PasteExchange {
  using Stream = std::conditional_t<kTls, beast::ssl_stream<beast::tcp_stream>, beast::tcp_stream>;

 public:
  PasteExchange(const ServerUrl& server, const std::string& target, const std::string& body,
                std::string_view filename = {})
      : server_(server) {
    if constexpr (kTls) {
      stream_ = std::make_unique<Stream>(io_, ClientTls());
    } else {
      stream_ = std::make_unique<Stream>(io_);
    }
    // The server takes the language of the link from the file name's extension (/ID.py).
    if (!filename.empty()) req_.set("Sluice-Filename", std::string(filename));
    req_.method(bhttp::verb::post);
    req_.target(target);
    req_.version(11);
    req_.set(bhttp::field::host, server.host_header);
    req_.set(bhttp::field::user_agent, "sluice-paste/" SLUICE_VERSION);
    req_.set(bhttp::field::accept, "application/json");
    req_.set(bhttp::field::content_type, "text/plain; charset=utf-8");
    req_.set(bhttp::field::expect, "100-continue");
    req_.keep_alive(false);
    req_.body() = body;
    req_.prepare_payload();
  }

  Attempt Run() {
    deadline_ = SteadyClock::now() + kRequestTimeout;
    timer_.expires_after(kConnectTimeout);
    timer_.async_wait([this](beast::error_code ec) {
      if (!ec) resolver_.cancel();  // the name lookup took the whole connect budget
    });
    resolver_.async_resolve(server_.host, server_.port,
                            [this](beast::error_code ec, tcp::resolver::results_type results) {
                              OnResolved(ec, std::move(results));
                            });
    io_.run();
    return std::move(attempt_);
  }

 private:
  void OnResolved(beast::error_code ec, tcp::resolver::results_type results) {
    timer_.cancel();
    if (ec) {
      attempt_.what = fmt::format(
          "cannot resolve {}: {}", server_.host,
          ec == asio::error::operation_aborted ? std::string("timed out") : ec.message());
      return Finish();
    }
    Lowest().expires_at(std::min(deadline_, SteadyClock::now() + kConnectTimeout));
    Lowest().async_connect(results, [this](beast::error_code connect_ec, const tcp::endpoint&) {
      OnConnected(connect_ec);
    });
  }

  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(*stream_); }

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
      PrepareTls(*stream_, server_);
      stream_->async_handshake(asio::ssl::stream_base::client, [this](beast::error_code tls_ec) {
        if (tls_ec) {
          attempt_.what = tls_ec == beast::error::timeout ? fmt::format("TLS handshake timed out")
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
    if (continue_received_) return StartBody();
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
    parser_->body_limit(kAnswerLimit);
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
    attempt_.fate = Attempt::Fate::kAnswered;
    attempt_.status = status;
    attempt_.status_text = std::string(parser_->get().reason());
    attempt_.retry_after = std::string(parser_->get()[bhttp::field::retry_after]);
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
      return fmt::format("no answer within {} s", kRequestTimeout.count());
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
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();  // ends a write still in flight
  }

  const ServerUrl& server_;
  asio::io_context io_;
  tcp::resolver resolver_{io_};
  std::unique_ptr<Stream> stream_;
  asio::steady_timer timer_{io_};  // the name lookup's budget, then the wait for 100 Continue
  bhttp::request<bhttp::string_body> req_;
  std::optional<bhttp::request_serializer<bhttp::string_body>> serializer_;
  beast::flat_buffer buffer_;
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

// ---- reading the answer ------------------------------------------------------------------------

struct ErrorDoc {
  std::string error;
  std::string reason;
  std::optional<int> retry_after;
};

ErrorDoc ParseErrorDoc(const Attempt& a) {
  ErrorDoc doc;
  const auto json = nlohmann::json::parse(a.body, nullptr, /*allow_exceptions=*/false);
  if (json.is_object()) {
    if (auto it = json.find("error"); it != json.end() && it->is_string()) doc.error = *it;
    if (auto it = json.find("reason"); it != json.end() && it->is_string()) doc.reason = *it;
    if (auto it = json.find("retry_after"); it != json.end() && it->is_number_integer()) {
      doc.retry_after = it->get<int>();
    }
  }
  if (doc.error.empty()) doc.error = a.body_complete && !a.body.empty() ? a.body : a.status_text;
  while (!doc.error.empty() && (doc.error.back() == '\n' || doc.error.back() == '\r')) {
    doc.error.pop_back();
  }
  if (doc.reason.empty()) doc.reason = a.status_text;
  return doc;
}

/// Retry-After in delta-seconds (what sluice sends), else the JSON body's retry_after.
std::optional<int> RetryAfterSeconds(const Attempt& a, const ErrorDoc& doc) {
  const std::string& h = a.retry_after;
  if (!h.empty() && h.size() < 9 && h.find_first_not_of("0123456789") == std::string::npos) {
    return std::stoi(h);
  }
  return doc.retry_after;
}

// The delete token goes to the state file, so `sluice delete URL` and `sluice list` find it; a
// paste is still created if the file cannot be written (the token is printed either way).
void KeepToken(const Attempt& a) {
  const auto doc = nlohmann::json::parse(a.body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return;
  KeptPaste kept;
  const auto text = [&doc](const char* key) {
    return doc.contains(key) && doc[key].is_string() ? doc[key].get<std::string>() : "";
  };
  kept.id = text("id");
  kept.url = text("url");
  kept.token = text("delete_token");
  kept.expires_at = text("expires_at");
  kept.created_at = static_cast<int64_t>(std::time(nullptr));
  if (kept.id.empty() || kept.token.empty()) return;
  if (Status s = TokenStore::Default().Add(kept); !s.ok()) {
    Say("the delete token was not kept: {}", s.error().message);
  }
}

// `fragment`: "#KEY" of an encrypted paste, added to the link (the server never had it).
int PrintCreated(const Attempt& a, bool json, const std::string& fragment) {
  const auto doc = nlohmann::json::parse(a.body, nullptr, /*allow_exceptions=*/false);
  const bool has_url = doc.is_object() && doc.contains("url") && doc["url"].is_string();
  if (json || !has_url) {
    std::fputs(a.body.c_str(), stdout);
    if (a.body.empty() || a.body.back() != '\n') std::fputc('\n', stdout);
    if (!has_url) Say("created (201), but the answer has no 'url' field");
  } else {
    std::fputs((doc["url"].get<std::string>() + fragment + "\n").c_str(), stdout);
  }
  std::fflush(stdout);
  if (doc.is_object() && doc.contains("delete_token") && doc["delete_token"].is_string()) {
    std::fputs(("delete token: " + doc["delete_token"].get<std::string>() + "\n").c_str(), stderr);
  }
  return kExitCreated;
}

}  // namespace

void AddPasteFlags(CLI::App& command, PasteCommandOptions& options) {
  command.add_option("FILE", options.file, "File to paste; stdin when absent or '-'");
  command
      .add_option("--server", options.server,
                  "Base URL of the sluice server: https:// (checked against the system's "
                  "certificates) or http://; default: `server` in ~/.config/sluice/cli.toml, "
                  "else http://127.0.0.1:8080")
      ->envname("SLUICE_SERVER");
  command.add_option("--ttl", options.ttl,
                     "Expiry: 10m, 1h, 1d, 1w or 30d (default: the server's default)");
  command
      .add_option("--max-wait", options.max_wait,
                  "Longest total wait for a busy server's Retry-After (e.g. 60s, 500ms; 0 never "
                  "waits)")
      ->capture_default_str();
  command.add_flag("--json", options.json,
                   "Print the server's whole JSON answer instead of the URL");
  command.add_option("--lang", options.lang,
                     "Language of the view (python, cpp, markdown...; default: from the file "
                     "name's extension, else detected by the server)");
  command.add_flag("--burn", options.burn, "Burn after reading: one reader gets the text");
  command
      .add_option("--max-views", options.max_views,
                  "Expire after N views (each a POST to the claim; 1 is --burn)")
      ->check(CLI::Range(1, 10000));
  command.add_flag("--encrypt", options.encrypt,
                   "Encrypt here before sending; the link printed carries the key after '#'");
  command
      .add_flag("--password", options.password,
                "With --encrypt: a password too (asked on the terminal, or SLUICE_PASSWORD)")
      ->needs("--encrypt");
  command.footer(
      "Prints the URL on stdout and the delete token on stderr, and keeps the token in "
      "$XDG_STATE_HOME/sluice/pastes (mode 0600) for `sluice delete` and `sluice list`. Exit "
      "status: 0 created, 1 "
      "refused or failed, 2 usage.\n"
      "A 429 or 503 means the server refused before creating anything: sluice paste waits its "
      "Retry-After plus up to 20% jitter and sends again while the total wait stays within "
      "--max-wait. A failed connect is retried once. A create whose fate is unknown (a reset, a "
      "timeout, a 500) is never sent again: it could make a second paste.\n"
      "Timeouts: connect 5 s, whole request 30 s.");
}

int RunPaste(const PasteCommandOptions& given) {
  PasteCommandOptions options = given;
  if (options.server.empty()) {
    auto configured = ConfiguredServer();
    if (!configured.ok()) {
      Say("{}", configured.error().message);
      return kExitUsage;
    }
    options.server = configured->value_or("http://127.0.0.1:8080");
  }
  auto server = ParseServerUrl(options.server);
  if (!server.ok()) {
    Say("{}", server.error().message);
    return kExitUsage;
  }
  const auto max_wait = ParseMaxWait(options.max_wait);
  if (!max_wait) {
    Say("--max-wait '{}': want a duration like 60s or 500ms, or 0", options.max_wait);
    return kExitUsage;
  }
  auto body = ReadInput(options.file);
  if (!body.ok()) {
    Say("{}", body.error().message);
    return kExitUsage;
  }
  std::string target = server->base_path + "/api/v1/pastes";
  std::string query;
  auto add = [&query](std::string_view name, std::string_view value) {
    query += query.empty() ? "?" : "&";
    query += name;
    query += "=";
    query += PercentEncode(value);
  };
  if (!options.ttl.empty()) add("ttl", options.ttl);
  // An encrypted paste's language and file name would tell the server what the text is.
  if (!options.lang.empty() && !options.encrypt) add("lang", options.lang);
  if (options.max_views > 0) {
    add("max_views", std::to_string(options.max_views));
  } else if (options.burn) {
    add("burn", "1");
  }
  std::string fragment;
  if (options.encrypt) {
    auto sealed = SealForPaste(*body, options.password);
    if (!sealed.ok()) {
      Say("{}", sealed.error().message);
      return sealed.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailed;
    }
    *body = std::move(sealed->envelope);
    fragment = "#" + sealed->key;
    add("encrypted", "1");
  }
  target += query;
  // Only the last part of the path: the server never needs the directories.
  std::string filename;
  if (!options.file.empty() && options.file != "-" && !options.encrypt) {
    filename = options.file.substr(options.file.find_last_of('/') + 1);
  }

  std::random_device device;
  admission::Jitter jitter((static_cast<uint64_t>(device()) << 32) ^ device());
  SteadyClock::duration waited{};
  bool connect_retried = false;
  for (;;) {
    const Attempt a = server->tls ? PasteExchange<true>(*server, target, *body, filename).Run()
                                  : PasteExchange<false>(*server, target, *body, filename).Run();

    if (a.fate == Attempt::Fate::kNotSent) {
      if (a.connect_failed && !connect_retried) {
        connect_retried = true;
        const auto pause = jitter.Between(Duration(kConnectRetryMin), Duration(kConnectRetryMax));
        Say("cannot connect to {} ({}); nothing was sent, trying once more in {} ms",
            options.server, a.what,
            std::chrono::duration_cast<std::chrono::milliseconds>(pause).count());
        std::this_thread::sleep_for(pause);
        continue;
      }
      Say("cannot connect to {} ({}); nothing was sent", options.server, a.what);
      return kExitFailed;
    }

    if (a.fate == Attempt::Fate::kUnknown) {
      Say("{}. The request may have reached the server, so the paste may or may not exist; not "
          "sending it again (that could make a second paste)",
          a.what);
      return kExitFailed;
    }

    if (a.status == 201) {
      if (!a.body_complete) {
        Say("the server created the paste (201), but its answer was cut off ({}), so its URL is "
            "lost; not sending it again (that would make a second paste)",
            a.what);
        return kExitFailed;
      }
      KeepToken(a);
      return PrintCreated(a, options.json, fragment);
    }

    const ErrorDoc doc = ParseErrorDoc(a);
    if ((a.status == 429 || a.status == 503) && doc.reason != "outcome_unknown") {
      const std::optional<int> retry_after = RetryAfterSeconds(a, doc);
      if (retry_after) {
        // At least what the server asked, plus up to 20% so refused clients spread out; trimmed to
        // what is left of --max-wait, but never below the server's number.
        // A floor of one second, so a server answering "Retry-After: 0" cannot make a busy loop.
        const Duration asked = std::chrono::seconds(std::max(1, *retry_after));
        const Duration jittered =
            asked + jitter.Between(Duration::zero(),
                                   std::chrono::duration_cast<Duration>(asked * kRetryAfterJitter));
        const Duration left = std::chrono::duration_cast<Duration>(*max_wait - waited);
        if (asked <= left) {
          const Duration pause = std::min(jittered, left);
          Say("server busy ({}), retrying in {:.1f} s", doc.reason, Seconds(pause));
          std::this_thread::sleep_for(pause);
          waited += pause;
          continue;
        }
        Say("server busy ({}): {}; it asks to retry in {} s, which is past --max-wait {} (waited "
            "{:.1f} s so far). Nothing was created",
            doc.reason, doc.error, *retry_after, options.max_wait, Seconds(waited));
        return kExitFailed;
      }
      if (a.status == 429) {
        Say("refused with 429 ({}): {}. Nothing was created", doc.reason, doc.error);
        return kExitFailed;
      }
      // A 503 without a Retry-After is a dependency failure, not a refusal at the door.
    }

    if (a.status >= 500) {
      Say("server error {} ({}): {}. The paste may or may not exist; not sending it again (that "
          "could make a second paste)",
          a.status, doc.reason, doc.error);
      return kExitFailed;
    }
    Say("refused with {} {} ({}): {}", a.status, a.status_text, doc.reason, doc.error);
    if (a.body_complete && !a.body.empty()) {
      std::fputs(a.body.c_str(), stderr);
      if (a.body.back() != '\n') std::fputc('\n', stderr);
    }
    return kExitFailed;
  }
}

}  // namespace sluice::app

namespace sluice::app {

namespace {

// A paste's link as people copy it: http://HOST[/prefix]/ID, /ID.py, /raw/ID, /ID?lang=x,
// /api/v1/pastes/ID. The server is what precedes the last path segment (less /raw or the API's
// path), the id its first 12 characters.
struct PasteLink {
  std::string server;
  std::string id;
};

std::optional<PasteLink> ParsePasteLink(std::string url) {
  url = url.substr(0, url.find_first_of("?#"));
  while (!url.empty() && url.back() == '/') url.pop_back();
  const size_t slash = url.find_last_of('/');
  if (slash == std::string::npos || slash < 8) return std::nullopt;
  std::string id = url.substr(slash + 1, 12);
  if (id.size() != 12 || !std::all_of(id.begin(), id.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0;
      })) {
    return std::nullopt;
  }
  std::string server = url.substr(0, slash);
  for (std::string_view suffix : {"/raw", "/api/v1/pastes", "/documents"}) {
    if (server.ends_with(suffix)) server.resize(server.size() - suffix.size());
  }
  return PasteLink{server, id};
}

struct Answer {
  bool sent = false;  // false: the connection failed, nothing left
  unsigned status = 0;
  std::string body;
  std::string content_type;
  std::optional<int> retry_after;
  std::string what;
};

// One request on its own connection, bounded by the same timeouts as a create's.
template <bool kTls>
Answer ExchangeOver(const ServerUrl& server, bhttp::verb method, const std::string& target,
                    const std::vector<std::pair<std::string, std::string>>& headers) {
  Answer out;
  try {
    asio::io_context io;
    tcp::resolver resolver(io);
    using Stream =
        std::conditional_t<kTls, beast::ssl_stream<beast::tcp_stream>, beast::tcp_stream>;
    std::unique_ptr<Stream> owned;
    if constexpr (kTls) {
      owned = std::make_unique<Stream>(io, ClientTls());
    } else {
      owned = std::make_unique<Stream>(io);
    }
    Stream& stream = *owned;
    beast::tcp_stream& lowest = beast::get_lowest_layer(stream);
    lowest.expires_after(kConnectTimeout);
    lowest.connect(resolver.resolve(server.host, server.port));
    if constexpr (kTls) {
      PrepareTls(stream, server);
      beast::error_code tls_ec;
      stream.handshake(asio::ssl::stream_base::client, tls_ec);
      if (tls_ec) {
        out.what = DescribeTlsFailure(tls_ec);
        return out;
      }
    }
    out.sent = true;
    bhttp::request<bhttp::empty_body> req{method, target, 11};
    req.set(bhttp::field::host, server.host_header);
    req.set(bhttp::field::user_agent, "sluice/" SLUICE_VERSION);
    for (const auto& [name, value] : headers) req.set(name, value);
    req.keep_alive(false);
    req.prepare_payload();  // a claim is a POST: Content-Length: 0
    lowest.expires_after(kRequestTimeout);
    bhttp::write(stream, req);
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(std::numeric_limits<uint64_t>::max());
    bhttp::read(stream, buffer, parser);
    const auto& res = parser.get();
    out.status = res.result_int();
    out.body = res.body();
    out.content_type = std::string(res[bhttp::field::content_type]);
    const auto retry = res.find(bhttp::field::retry_after);
    if (retry != res.end()) {
      const std::string value(retry->value());
      if (!value.empty() && value.size() < 9 &&
          std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        out.retry_after = std::stoi(value);
      }
    }
  } catch (const std::exception& e) {
    out.what = e.what();
  }
  return out;
}

Answer Exchange(const ServerUrl& server, bhttp::verb method, const std::string& target,
                const std::vector<std::pair<std::string, std::string>>& headers) {
  return server.tls ? ExchangeOver<true>(server, method, target, headers)
                    : ExchangeOver<false>(server, method, target, headers);
}

// Get and delete may be sent again: both are idempotent. A 429 or 503 with a Retry-After is
// waited out (with jitter, within --max-wait), as a create's is.
Answer Polite(const ServerUrl& server, bhttp::verb method, const std::string& target,
              const std::vector<std::pair<std::string, std::string>>& headers,
              SteadyClock::duration max_wait) {
  std::random_device device;
  admission::Jitter jitter((static_cast<uint64_t>(device()) << 32) ^ device());
  SteadyClock::duration waited{};
  for (;;) {
    Answer a = Exchange(server, method, target, headers);
    if (!(a.status == 429 || a.status == 503) || !a.retry_after) return a;
    const Duration asked = std::chrono::seconds(std::max(1, *a.retry_after));
    const Duration left = std::chrono::duration_cast<Duration>(max_wait - waited);
    if (asked > left) return a;
    const Duration pause = std::min(
        left, asked + jitter.Between(Duration::zero(), std::chrono::duration_cast<Duration>(
                                                           asked * kRetryAfterJitter)));
    Say("server busy ({}), retrying in {:.1f} s", a.status, Seconds(pause));
    std::this_thread::sleep_for(pause);
    waited += pause;
  }
}

std::string ReasonOf(const Answer& a) {
  const auto doc = nlohmann::json::parse(a.body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object() && doc.contains("error") && doc["error"].is_string()) {
    return doc["error"].get<std::string>();
  }
  return a.what.empty() ? "no reason given" : a.what;
}

struct Target {
  PasteLink link;
  ServerUrl server;
  SteadyClock::duration max_wait{};
};

std::optional<Target> ResolveTarget(const ShareCommandOptions& options) {
  auto link = ParsePasteLink(options.url);
  if (!link) {
    Say("'{}' is not a paste's link (want http://HOST/ID)", options.url);
    return std::nullopt;
  }
  auto server = ParseServerUrl(link->server);
  if (!server.ok()) {
    Say("{}", server.error().message);
    return std::nullopt;
  }
  const auto max_wait = ParseMaxWait(options.max_wait);
  if (!max_wait) {
    Say("--max-wait '{}': want a duration like 60s or 500ms, or 0", options.max_wait);
    return std::nullopt;
  }
  return Target{*link, *server, *max_wait};
}

}  // namespace

void AddGetFlags(CLI::App& command, ShareCommandOptions& options) {
  command.add_option("URL", options.url, "The paste's link (any of its forms)")->required();
  command.add_option("--max-wait", options.max_wait, "Longest total wait for a busy server")
      ->capture_default_str();
  command.add_flag("--claim", options.claim,
                   "Spend one view of a burn or limited-views paste (without it, such a paste "
                   "is refused, so a script cannot burn it by accident)");
  command.footer(
      "Prints the text, byte for byte, on stdout. An encrypted paste's link carries its key "
      "after '#' (never sent): the envelope is decrypted here, its password (if any) from "
      "SLUICE_PASSWORD or asked on the terminal. Exit status: 0 printed, 1 failed.");
}

void AddDeleteFlags(CLI::App& command, ShareCommandOptions& options) {
  command.add_option("URL", options.url, "The link of a paste this user made with sluice paste")
      ->required();
  command.add_option("--max-wait", options.max_wait, "Longest total wait for a busy server")
      ->capture_default_str();
  command.footer(
      "Deletes with the token `sluice paste` kept in $XDG_STATE_HOME/sluice/pastes and forgets "
      "it.");
}

int RunGet(const ShareCommandOptions& options) {
  const auto target = ResolveTarget(options);
  if (!target) return kExitUsage;
  // The key of an encrypted paste: the link's fragment, which no request carries.
  const size_t hash = options.url.find('#');
  const std::string key = hash == std::string::npos ? "" : options.url.substr(hash + 1);
  Answer a = Polite(target->server, bhttp::verb::get,
                    target->server.base_path + "/raw/" + target->link.id, {}, target->max_wait);
  if (a.status == 409 && options.claim) {
    a = Polite(target->server, bhttp::verb::post,
               target->server.base_path + "/api/v1/pastes/" + target->link.id + "/claim?format=raw",
               {}, target->max_wait);
  }
  if (a.status == 200) {
    // An encrypted paste is answered as its envelope, a JSON object (docs/encryption.md).
    if (a.content_type.starts_with("application/json") && a.body.starts_with('{')) {
      if (key.empty()) {
        Say("this paste is encrypted and the link has no key (the part after '#'); ask for the "
            "whole link");
        return kExitFailed;
      }
      return PrintOpened(a.body, key, "sluice get") == 0 ? 0 : kExitFailed;
    }
    if (!key.empty()) Say("this paste is not encrypted; the key is unused");
    std::fwrite(a.body.data(), 1, a.body.size(), stdout);
    std::fflush(stdout);
    return 0;
  }
  if (!a.sent || a.status == 0) {
    Say("cannot reach {} ({})", target->link.server, a.what);
  } else if (a.status == 409) {
    Say("this paste is shown a limited number of times; `sluice get --claim` spends one view");
  } else {
    Say("{} answered {}: {}", target->link.server, a.status, ReasonOf(a));
  }
  return kExitFailed;
}

int RunDelete(const ShareCommandOptions& options) {
  const auto target = ResolveTarget(options);
  if (!target) return kExitUsage;
  const TokenStore store = TokenStore::Default();
  const auto kept = store.Find(target->link.id);
  if (!kept) {
    Say("no delete token for {} in {}: only pastes made here with sluice paste can be deleted",
        target->link.id, store.path());
    return kExitFailed;
  }
  const Answer a =
      Polite(target->server, bhttp::verb::delete_,
             target->server.base_path + "/api/v1/pastes/" + target->link.id,
             {{"Authorization", "Bearer " + kept->token}, {"Accept", "application/json"}},
             target->max_wait);
  if (a.status == 204 || a.status == 404) {
    // 404: gone already (expired, burned, deleted elsewhere): the token is no use any more.
    if (Status s = store.Remove(target->link.id); !s.ok()) Say("{}", s.error().message);
    if (a.status == 204) {
      Say("deleted {}", target->link.id);
      return 0;
    }
    Say("{} was already gone", target->link.id);
    return kExitFailed;
  }
  if (!a.sent || a.status == 0) {
    Say("cannot reach {} ({}); nothing was deleted", target->link.server, a.what);
  } else {
    Say("{} answered {}: {}", target->link.server, a.status, ReasonOf(a));
  }
  return kExitFailed;
}

int RunList() {
  const TokenStore store = TokenStore::Default();
  const std::vector<KeptPaste> pastes = store.All();
  char now[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
  for (const KeptPaste& p : pastes) {
    // RFC 3339 in UTC compares as text.
    const bool expired = !p.expires_at.empty() && p.expires_at <= std::string(now);
    std::fputs(
        fmt::format("{}  {} {}\n", p.url.empty() ? p.id : p.url, expired ? "expired" : "expires",
                    p.expires_at.empty() ? "?" : p.expires_at)
            .c_str(),
        stdout);
  }
  return 0;
}

}  // namespace sluice::app
