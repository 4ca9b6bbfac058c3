// The request as Beast parsed it, for the session (src/http/session.cc): the framing checks Beast
// leaves to us, its translation into the handlers' types (src/http/request.h), and the reading of
// its body under the body timeout and the minimum rate.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "edge.h"
#include "reply.h"
#include "request.h"
#include "routes.h"

namespace sluice::http {

using Parser = boost::beast::http::request_parser<boost::beast::http::string_body>;

/// A connection's socket and stream, TCP or Unix alike: the listener (src/http/server.cc) accepts
/// either into a socket of the generic stream protocol, so one session serves both. It is the same
/// reactive socket as a tcp::socket, with no virtual call or allocation per operation; only its
/// endpoint type is wider.
using Socket = boost::asio::generic::stream_protocol::socket;
using Stream = boost::beast::basic_stream<boost::asio::generic::stream_protocol>;

struct Refusal {
  unsigned status;
  std::string_view message;
};

/// What the parser lets through but the protocol (RFC 9112) says a server must refuse, each a way
/// to make two parsers disagree about where a request ends (request smuggling): returns the status
/// and reason, or nothing when the framing is sound. Every refusal closes the connection.
std::optional<Refusal> FramingProblem(const boost::beast::http::request_header<>& req);

/// The JSON reason of a refusal by the framing checks, by its status.
std::string ReasonFor(unsigned status);

Method ToMethod(boost::beast::http::verb verb);

inline std::string_view View(boost::beast::string_view s) { return {s.data(), s.size()}; }

std::optional<uint64_t> DeclaredLength(const Parser& parser);

class BeastFields final : public HeaderFields {
 public:
  explicit BeastFields(const boost::beast::http::request_header<>& header) : header_(header) {}
  std::string_view Get(std::string_view name) const override;
  std::vector<std::string_view> All(std::string_view name) const override;

 private:
  const boost::beast::http::request_header<>& header_;
};

// One request on one connection: the stream, what is buffered, and the parser holding the headers.
struct Exchange {
  Edge& edge;
  Stream& stream;
  boost::beast::flat_buffer& buffer;
  Parser& parser;
  // Everything read from the socket is either consumed by a parser or still in the buffer.
  uint64_t& consumed;
  // Set on a connection in the health reserve: what any request but /healthz is answered.
  const std::optional<Error>& refusal;
  // X-Request-Id of this request (src/http/access_log.h), for the lines logged about it.
  std::string_view request_id;
};

/// Reads a create's body once its route has admitted it (src/http/request.h, BodyReader).
class SessionBodyReader final : public BodyReader {
 public:
  /// `client` is the request's (the key its body is counted for); it outlives the reader.
  SessionBodyReader(Exchange& x, const RequestClient& client) : x_(x), client_(client) {}
  SessionBodyReader(const SessionBodyReader&) = delete;
  SessionBodyReader& operator=(const SessionBodyReader&) = delete;

  /// Says the create that read this body has ended (Reclaimable::released): its handler's frame,
  /// and with it the create slot, is gone before the session's Dispatch destroys the reader.
  ~SessionBodyReader() { reclaimable_->released.store(true, std::memory_order_release); }

  boost::asio::awaitable<Result<std::string>> Read(uint64_t limit) override;
  boost::asio::awaitable<bool> CutSlowestBody(bool own_network) override;

 private:
  Exchange& x_;
  const RequestClient& client_;
  // Expires with the reader; see Read.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  // What a create at the cap may ask of this body's read (Edge::bodies).
  std::shared_ptr<Reclaimable> reclaimable_ =
      std::make_shared<Reclaimable>(x_.stream.get_executor());
};

/// Reads and drops the small body a non-create route may carry (a form's fields, or a GET that
/// sends one: RFC 9110 9.3.1 gives it no meaning, and reading it keeps the connection usable), or
/// the refusal when it is too large for such a route or does not arrive.
boost::asio::awaitable<std::optional<Reply>> ReadSmallBody(Exchange& x);

}  // namespace sluice::http
