// One libpq connection driven by Asio: connect and query without blocking, the socket watched by a
// stream_descriptor on the store's I/O thread. Not thread-safe: only that thread touches it.
#pragma once

#include <libpq-fe.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <memory>
#include <string>
#include <vector>

#include "sluice/common/clock.h"
#include "sluice/common/result.h"

namespace sluice::store::pg {

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

/// One statement parameter: text, or raw bytes for a bytea column.
struct Param {
  std::string value;
  bool binary = false;
};

/// The libpq keywords of a connection: the URL, then the session settings of its pool.
struct ConnectSpec {
  std::string url;
  std::string application_name;
  /// Passed to the server as `-c` options at connect time: no extra round trip per connection.
  std::string options;
};

/// The error of a connection that could not be made: the request never left (docs/overload.md,
/// "Retries, breakers, timeouts"). `failover` (the URL names a standby to fail over to) makes its
/// reason primary_failover, as does libpq saying the host reached takes no writes.
Error RefusedError(std::string_view detail, bool failover = false);

/// True if `url` names several hosts or asks for a read-write session: whoever wrote it runs a
/// primary with a standby, so a connect that fails or a connection that dies is, most likely, a
/// failover under way (docs/scale-out.md, "PostgreSQL with a standby").
bool NamesAFailoverTarget(std::string_view url);

class Connection {
 public:
  using Executor = boost::asio::io_context::executor_type;

  /// Connects without blocking; gives up at `give_up`. Every failure is RefusedError.
  static boost::asio::awaitable<Result<std::unique_ptr<Connection>>> Open(Executor executor,
                                                                          ConnectSpec spec,
                                                                          TimePoint give_up);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Sends one statement and returns its result (rows or command status), or the server's error
  /// mapped to an ErrorCode. Precondition: Usable(). Past `give_up` the connection is closed and
  /// marked broken: a server that never answers must not hold the connection for ever.
  /// `answer_lost`, if given, is set when the call fails after the statement (partly) left without
  /// the server's answer (connection lost, no answer in time): the statement may have run.
  boost::asio::awaitable<Result<PgResult>> Exec(const char* sql, std::vector<Param> params,
                                                TimePoint give_up, bool* answer_lost = nullptr);

  /// True if a call may use the connection. Reads whatever an idle connection received without
  /// waiting: a server that shut down sends a FATAL and closes, and this notices it.
  bool Usable();
  bool broken() const { return broken_; }

 private:
  Connection(Executor executor, PGconn* conn, bool failover)
      : executor_(executor), conn_(conn), failover_(failover) {}
  /// Wraps the current socket. libpq may open a new one at each connect step (another address of
  /// the host), so the descriptor is renewed after each; it never owns the fd (libpq does).
  void AdoptSocket();
  void DropSocket();
  /// Waits until the socket is ready for `what`; false if `give_up` passed first.
  boost::asio::awaitable<bool> WaitFor(boost::asio::posix::descriptor_base::wait_type what,
                                       TimePoint give_up);
  Error LostError(std::string_view during);
  void MarkBroken();

  Executor executor_;
  PGconn* conn_;
  const bool failover_;  // the URL names a standby: a lost connection is a failover's
  std::unique_ptr<boost::asio::posix::stream_descriptor> socket_;
  bool broken_ = false;
};

}  // namespace sluice::store::pg
