#include "pg_connection.h"

#include <fmt/format.h>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "sluice/store/meta_store.h"

namespace sluice::store::pg {
namespace {

namespace asio = boost::asio;

// A server that is no longer (or not yet) the primary: read-only after a demotion or on a standby
// (25006), or ending the session because it shuts down or restarts (57P01 admin_shutdown, 57P02
// crash_shutdown, 57P03 cannot_connect_now).
bool IsFailoverState(std::string_view sqlstate) {
  return sqlstate == "25006" || sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03";
}

// What libpq says when a connect reached servers but none of them takes writes (a multi-host URL
// with target_session_attrs=read-write during a promotion), or the server is starting up or
// shutting down: a failover under way rather than a primary that is gone.
bool IsFailoverConnectError(std::string_view message) {
  for (std::string_view sign : {"read-only", "hot standby", "in recovery", "is starting up",
                                "is shutting down", "not yet accepting connections"}) {
    if (message.find(sign) != std::string_view::npos) return true;
  }
  return false;
}

std::string Trimmed(const char* message) {
  std::string s = message ? message : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The server said no to a statement that reached it: a constraint or a bug in the SQL is not worth
// retrying; the server cancelling at statement_timeout is a timeout; the rest (shutting down, out
// of connections or resources, read-only after a failover) is the dependency being unavailable.
Error ServerError(const PGresult* r) {
  const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  const std::string sqlstate = state ? state : "";
  std::string message = fmt::format("postgres: {} ({})", Trimmed(PQresultErrorMessage(r)),
                                    sqlstate.empty() ? "no sqlstate" : sqlstate);
  if (sqlstate == "23505")
    return MakeError(ErrorCode::kInternal, std::move(message), "id_collision");
  if (sqlstate == "57014")
    return MakeError(ErrorCode::kDeadlineExceeded, std::move(message), "statement_timeout");
  if (sqlstate.starts_with("23") || sqlstate.starts_with("42"))
    return MakeError(ErrorCode::kInternal, std::move(message), "storage_error");
  if (IsFailoverState(sqlstate))
    return MakeError(ErrorCode::kUnavailable, std::move(message), std::string(kPrimaryFailover));
  return MakeError(ErrorCode::kUnavailable, std::move(message), "storage_unavailable");
}

}  // namespace

bool NamesAFailoverTarget(std::string_view url) {
  if (url.find("target_session_attrs=read-write") != std::string_view::npos ||
      url.find("target_session_attrs=primary") != std::string_view::npos) {
    return true;
  }
  // postgresql://h1:p1,h2:p2/db: a comma between the scheme and the path.
  const size_t scheme = url.find("://");
  if (scheme == std::string_view::npos)
    return url.find("host=") != std::string_view::npos && url.find(',') != std::string_view::npos;
  const size_t path = url.find_first_of("/?", scheme + 3);
  return url.substr(scheme + 3, path == std::string_view::npos ? url.npos : path - scheme - 3)
             .find(',') != std::string_view::npos;
}

Error RefusedError(std::string_view detail, bool failover) {
  Error e =
      MakeError(ErrorCode::kUnavailable, fmt::format("postgres: cannot connect: {}", detail),
                failover || IsFailoverConnectError(detail) ? std::string(kPrimaryFailover)
                                                           : std::string("connection_refused"));
  e.never_sent = true;
  return e;
}

Connection::~Connection() {
  DropSocket();
  PQfinish(conn_);
}

void Connection::DropSocket() {
  // Released, never closed: the fd is libpq's, and PQfinish closes it.
  if (socket_) socket_->release();
  socket_.reset();
}

void Connection::AdoptSocket() {
  DropSocket();
  const int fd = PQsocket(conn_);
  if (fd >= 0) socket_ = std::make_unique<asio::posix::stream_descriptor>(executor_, fd);
}

void Connection::MarkBroken() {
  broken_ = true;
  DropSocket();
}

Error Connection::LostError(std::string_view during) {
  MarkBroken();
  return MakeError(ErrorCode::kUnavailable,
                   fmt::format("postgres: connection lost during {}: {}", during,
                               Trimmed(PQerrorMessage(conn_))),
                   failover_ ? std::string(kPrimaryFailover) : std::string("storage_unavailable"));
}

asio::awaitable<bool> Connection::WaitFor(asio::posix::descriptor_base::wait_type what,
                                          TimePoint give_up) {
  if (!socket_) co_return false;
  // The timer cancels the wait; the shared flags let a timer handler that runs after the wait
  // ended (already queued when the wait completed) do nothing.
  struct Flags {
    bool done = false;
    bool timed_out = false;
  };
  auto flags = std::make_shared<Flags>();
  asio::steady_timer timer(executor_);
  if (give_up != TimePoint::max()) {
    timer.expires_at(give_up);
    timer.async_wait([flags, socket = socket_.get()](const boost::system::error_code& ec) {
      if (ec || flags->done) return;
      flags->timed_out = true;
      socket->cancel();
    });
  }
  boost::system::error_code ec;
  co_await socket_->async_wait(what, asio::redirect_error(asio::use_awaitable, ec));
  flags->done = true;
  timer.cancel();
  co_return !flags->timed_out;
}

asio::awaitable<Result<std::unique_ptr<Connection>>> Connection::Open(Executor executor,
                                                                      ConnectSpec spec,
                                                                      TimePoint give_up) {
  const char* keywords[] = {"dbname", "application_name", "options", nullptr};
  const char* values[] = {spec.url.c_str(), spec.application_name.c_str(), spec.options.c_str(),
                          nullptr};
  const bool failover = NamesAFailoverTarget(spec.url);
  PGconn* raw = PQconnectStartParams(keywords, values, /*expand_dbname=*/1);
  if (raw == nullptr) co_return RefusedError("out of memory");
  std::unique_ptr<Connection> conn(new Connection(executor, raw, failover));
  if (PQstatus(raw) == CONNECTION_BAD)
    co_return RefusedError(Trimmed(PQerrorMessage(raw)), failover);
  // libpq's documented start: behave as if PQconnectPoll had asked to wait for writing.
  PostgresPollingStatusType status = PGRES_POLLING_WRITING;
  while (status != PGRES_POLLING_OK) {
    if (status == PGRES_POLLING_FAILED)
      co_return RefusedError(Trimmed(PQerrorMessage(raw)), failover);
    conn->AdoptSocket();
    const auto what = status == PGRES_POLLING_READING ? asio::posix::descriptor_base::wait_read
                                                      : asio::posix::descriptor_base::wait_write;
    auto wait = conn->WaitFor(what, give_up);
    if (!co_await std::move(wait)) co_return RefusedError("timed out", failover);
    status = PQconnectPoll(raw);
  }
  conn->AdoptSocket();
  if (PQsetnonblocking(raw, 1) != 0) co_return RefusedError(Trimmed(PQerrorMessage(raw)), failover);
  co_return conn;
}

bool Connection::Usable() {
  if (broken_ || PQstatus(conn_) != CONNECTION_OK) return false;
  // Twice: a server going down sends its FATAL, then closes, and one read may return only the
  // message; the second then meets the end of the stream.
  for (int i = 0; i < 2; ++i) {
    if (PQconsumeInput(conn_) == 0 || PQstatus(conn_) != CONNECTION_OK) {
      MarkBroken();
      return false;
    }
  }
  return PQtransactionStatus(conn_) == PQTRANS_IDLE;
}

asio::awaitable<Result<PgResult>> Connection::Exec(const char* sql, std::vector<Param> params,
                                                   TimePoint give_up, bool* answer_lost) {
  // Every failure past the send but the server's own error answer: the statement may have run.
  auto lost = [answer_lost](Error e) {
    if (answer_lost) *answer_lost = true;
    return e;
  };
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  for (const Param& p : params) {
    values.push_back(p.value.data());
    lengths.push_back(static_cast<int>(p.value.size()));
    formats.push_back(p.binary ? 1 : 0);
  }
  if (PQsendQueryParams(conn_, sql, static_cast<int>(params.size()), nullptr, values.data(),
                        lengths.data(), formats.data(), /*resultFormat=*/0) == 0) {
    // Nothing left the process: the statement could not even be queued.
    Error e = LostError("send");
    e.never_sent = true;
    co_return e;
  }
  for (;;) {
    const int flushed = PQflush(conn_);
    if (flushed == 0) break;
    if (flushed < 0) co_return lost(LostError("send"));
    auto wait = WaitFor(asio::posix::descriptor_base::wait_write, give_up);
    if (!co_await std::move(wait)) {
      MarkBroken();
      co_return lost(MakeError(ErrorCode::kDeadlineExceeded,
                               "postgres: send did not finish in time", "deadline_exceeded"));
    }
    if (PQconsumeInput(conn_) == 0) co_return lost(LostError("send"));
  }
  // Consume before every wait: the descriptor is edge-triggered, so input that arrived before the
  // wait began would otherwise never wake it. Nothing runs on this thread in between.
  PgResult first_error;
  PgResult last;
  for (;;) {
    if (PQconsumeInput(conn_) == 0) co_return lost(LostError("query"));
    while (PQisBusy(conn_) == 0) {
      PgResult r(PQgetResult(conn_));
      if (!r) {
        if (first_error) {
          // A read-only server is a demoted primary (or a standby): this connection will never
          // write again, so it is dropped and the next one connects to whichever host now
          // takes writes (target_session_attrs=read-write).
          const char* failed = PQresultErrorField(first_error.get(), PG_DIAG_SQLSTATE);
          if (failed != nullptr && IsFailoverState(failed)) MarkBroken();
          // A server shutting the session down (57P01..57P03) may say so after the statement
          // committed: that is not a "no", only the end of the conversation.
          const char* state = PQresultErrorField(first_error.get(), PG_DIAG_SQLSTATE);
          if (state != nullptr && std::string_view(state).starts_with("57P")) {
            co_return lost(ServerError(first_error.get()));
          }
          co_return ServerError(first_error.get());
        }
        if (!last) co_return lost(LostError("query"));
        co_return std::move(last);
      }
      const ExecStatusType status = PQresultStatus(r.get());
      if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
        last = std::move(r);
      } else if (!first_error) {
        first_error = std::move(r);
      }
      if (PQstatus(conn_) != CONNECTION_OK) co_return lost(LostError("query"));
    }
    auto wait = WaitFor(asio::posix::descriptor_base::wait_read, give_up);
    if (!co_await std::move(wait)) {
      MarkBroken();
      co_return lost(
          MakeError(ErrorCode::kDeadlineExceeded,
                    "postgres: no answer even past the statement timeout; connection closed",
                    "deadline_exceeded"));
    }
  }
}

}  // namespace sluice::store::pg
