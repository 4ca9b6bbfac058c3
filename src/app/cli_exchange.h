// One HTTP/1.1 request of the command line (`sluice paste`, `get`, `delete`, `admin`) on its own
// connection, with the limits every command shares (docs/sharing.md, "The command line"):
//  - connect (name lookup, TCP or Unix connect, TLS handshake) within kConnectTimeout;
//  - the whole exchange, from the first byte sent to the last byte of the answer, within
//    kExchangeTimeout: a server that accepts and then says nothing, or trickles, is cut off;
//  - an answer's body of at most the request's answer_limit, its head of at most Beast's 8 KB:
//    an endless or oversized answer ends the exchange, it does not grow the process.
//
// Every wait is an asynchronous operation on a tcp_stream (or basic_stream) whose expiry is set
// before it starts: Beast's blocking calls have no timeout, and expires_after does not apply to
// them. Each exchange runs its own io_context to completion on the calling thread, so callers
// stay simple sequential code.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server_url.h"

namespace sluice::app {

inline constexpr auto kConnectTimeout = std::chrono::seconds(5);
inline constexpr auto kExchangeTimeout = std::chrono::seconds(30);
/// Largest body of an answer that is a few hundred bytes of JSON (a create's, a delete's, any
/// error).
inline constexpr uint64_t kSmallAnswerBytes = uint64_t{1} << 20;

struct CliRequest {
  /// "GET", "POST" or "DELETE". Default: "GET".
  std::string method = "GET";
  /// Path and query, already percent-encoded, the server's base path included.
  std::string target;
  /// Extra header fields (Host, User-Agent and Connection are set by Exchange).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  /// Announce the body with `Expect: 100-continue` and send it on "100 Continue", or after one
  /// second from a server that ignores Expect. Default: false (head and body at once).
  bool expect_continue = false;
  /// Largest answer body read; a longer one fails the exchange. Default: kSmallAnswerBytes.
  uint64_t answer_limit = kSmallAnswerBytes;
  /// Sent as User-Agent. Default: "sluice".
  std::string user_agent = "sluice";
};

/// What one exchange learned.
struct Attempt {
  enum class Fate {
    /// Nothing left this process: resolving, connecting or the TLS handshake failed.
    kNotSent,
    /// The request may have reached the server and no complete answer head came back.
    kUnknown,
    /// A final answer's status line and headers arrived.
    kAnswered,
  };
  Fate fate = Fate::kNotSent;
  /// kNotSent: the connect itself failed (not the name lookup), the one case worth a retry.
  bool connect_failed = false;
  /// What went wrong, for a person (our words, never the server's).
  std::string what;
  unsigned status = 0;
  std::string status_text;  // the server's reason phrase: show it through ForTerminal
  std::string retry_after;  // the Retry-After field as sent
  std::string content_type;
  std::string body;
  /// False when the connection broke, the deadline passed or the limit was hit while the
  /// answer's body was read.
  bool body_complete = false;
};

/// Sends `request` to `server` on a fresh connection and reads the answer, within the limits
/// above. Never throws for a network or protocol failure: `fate` and `what` say what happened.
Attempt Exchange(const ServerUrl& server, const CliRequest& request);

/// The Retry-After field in delta-seconds (what sluice sends); nothing when absent or in another
/// form.
std::optional<int> RetryAfterField(const Attempt& attempt);

}  // namespace sluice::app
