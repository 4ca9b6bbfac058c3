// The HTTP session: Beast I/O only. It reads a request under its expiries, refuses broken framing,
// keeps connections alive, asks the route table which handler answers, and writes what the
// presenter made of the reply. Counts of connections and requests are held by RAII guards, and an
// exception while answering (the handler, the presenter, the head's serialiser) is answered with
// a 500, counted and logged like any answer, so neither can leak.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>

#include "beast_request.h"
#include "connection_caps.h"
#include "edge.h"

namespace sluice::http {

/// What a connection holds while it is open, given back however the session ends.
struct ConnectionHolds {
  /// Its unit of the connection count, or of the health reserve when `refusal` is set.
  std::optional<Held> connection;
  /// Its unit of its client's share (none for a trusted proxy).
  std::optional<admission::KeyedSlots::Slot> client_share;
  /// Its unit of its network's share (none for a trusted proxy).
  std::optional<admission::KeyedSlots::Slot> network_share;
  /// Set for a connection over a cap taken into the health reserve: it may ask for /healthz
  /// once; any other request gets this refusal (a 503), and the connection closes either way.
  std::optional<Error> refusal;
  /// Its place on the event loop it was given (Edge::loops).
  std::optional<admission::ConnectionBalancer::Seat> loop_seat;
};

/// Serves one connection until it closes. `peer` is the client's address as text (what the
/// listener read at accept), or "unix" for a Unix socket's peer.
boost::asio::awaitable<void> ServeConnection(std::shared_ptr<Edge> edge, Socket socket,
                                             std::string peer, ConnectionHolds holds);

/// Over a connection cap with the health reserve full too: one short 503 naming the cap and
/// close, rather than an fd the process cannot spare (a connection that cannot be accepted at all
/// gets no answer).
boost::asio::awaitable<void> RefuseConnection(std::shared_ptr<Edge> edge, Socket socket,
                                              Error refusal);

/// Test hook: `hook` is called with every presented reply before its head is serialised, so a
/// test can make answering throw and watch the exception boundary; null (the default) removes
/// it. Applies to every server in the process.
void SetBeforeWriteHookForTest(void (*hook)(const Reply&));

}  // namespace sluice::http
