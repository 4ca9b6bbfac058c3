// The HTTP session: Beast I/O only. It reads a request under its expiries, refuses broken framing,
// keeps connections alive, asks the route table which handler answers, and writes what the
// presenter made of the reply. Counts of connections and requests are held by RAII guards, and an
// exception from a handler is answered with a 500, so neither can leak.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>

#include "edge.h"

namespace sluice::http {

/// Serves one connection until it closes; `connection` is its unit of the connection count.
boost::asio::awaitable<void> ServeConnection(std::shared_ptr<Edge> edge,
                                             boost::asio::ip::tcp::socket socket, Held connection);

/// Over the connection cap: one short 503 and close, rather than an fd the process cannot spare
/// (a connection that cannot be accepted at all gets no answer).
boost::asio::awaitable<void> RefuseConnection(std::shared_ptr<Edge> edge,
                                              boost::asio::ip::tcp::socket socket);

}  // namespace sluice::http
