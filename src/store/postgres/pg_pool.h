// A pool of libpq connections of one purpose (read, write, cleanup, moderation) for the PostgreSQL
// MetaStore (postgres_meta_store.h), and the errors of a statement that missed its deadline.
// Private to sluice_store_postgres.
#pragma once

#include <spdlog/spdlog.h>

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "pg_connection.h"
#include "sluice/asio/timer.h"
#include "sluice/store/postgres.h"

namespace sluice::store::pg {

using boost::asio::awaitable;

inline Error DeadlineError(std::string message) {
  return MakeError(ErrorCode::kDeadlineExceeded, std::move(message), "deadline_exceeded");
}

// The deadline passed before the statement left: it surely did not run.
inline Error NotSentError(std::string message) {
  Error e = DeadlineError(std::move(message));
  e.never_sent = true;
  return e;
}

// A pool of one purpose. Lives on the I/O thread: every member except the stats mirrors is touched
// there only, so it needs no lock.
class Pool {
 public:
  class Lease {
   public:
    Lease(Pool* pool, std::unique_ptr<Connection> conn) : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&& other) noexcept = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (conn_) pool_->Release(std::move(conn_));
    }
    Connection& conn() { return *conn_; }

   private:
    Pool* pool_;
    std::unique_ptr<Connection> conn_;
  };

  Pool(Connection::Executor executor, pg::ConnectSpec spec, PostgresPoolOptions options,
       Duration connect_timeout, const Clock& clock)
      : clock_(clock),
        executor_(executor),
        spec_(std::move(spec)),
        options_(options),
        statement_timeout_(StatementTimeoutFor(options.call_timeout)),
        connect_timeout_(connect_timeout) {}

  Duration statement_timeout() const { return statement_timeout_; }

  /// Lends a connection: an idle one, a new one while under the cap, or the next one returned
  /// before `deadline`.
  awaitable<Result<Lease>> Acquire(admission::Deadline deadline) {
    for (;;) {
      while (!idle_.empty()) {
        std::unique_ptr<Connection> conn = std::move(idle_.back());
        idle_.pop_back();
        if (conn->Usable()) {
          Publish();
          co_return Lease(this, std::move(conn));
        }
        --open_;  // closed while idle (a server restart): forget it, try the next
      }
      if (open_ < options_.connections) {
        Result<std::unique_ptr<Connection>> conn = co_await OpenOne();
        if (!conn.ok()) co_return conn.error();
        co_return Lease(this, std::move(*conn));
      }
      if (deadline.Expired(clock_)) {
        co_return NotSentError("postgres: no free connection before the deadline");
      }
      auto waiter = std::make_shared<Waiter>(clock_, executor_);
      waiters_.push_back(waiter);
      Publish();
      // Ends at the deadline, or early (cancelled) when WakeOne hands over a connection or a slot.
      auto waiting = waiter->timer.WaitUntil(deadline.at());
      (void)co_await std::move(waiting);
      // Checked before the timer's outcome: a connection handed over as the timer fired is ours.
      if (waiter->conn) co_return Lease(this, std::move(waiter->conn));
      std::erase(waiters_, waiter);
      Publish();
      if (!waiter->slot_freed) {
        co_return NotSentError("postgres: no free connection before the deadline");
      }
    }
  }

  /// Opens one connection ahead of need, so the first calls after start do not pay for a connect
  /// inside a timeout of a few milliseconds. A failure is only logged: calls connect on demand.
  /// It also reads the table once: a new server process loads the catalog entries of the table
  /// and its index on its first statement, which on a busy host takes longer than a 20 ms read.
  awaitable<void> Warm() {
    if (open_ >= options_.connections) co_return;
    Result<std::unique_ptr<Connection>> conn = co_await OpenOne();
    if (!conn.ok()) {
      spdlog::warn("{}: {}", spec_.application_name, conn.error().message);
      co_return;
    }
    auto warming = (*conn)->Exec("SELECT 1 FROM pastes WHERE id = ''", {},
                                 SystemClock::Instance().Now() + connect_timeout_);
    if (auto warmed = co_await std::move(warming); !warmed.ok()) {
      spdlog::warn("{}: {}", spec_.application_name, warmed.error().message);
    }
    Release(std::move(*conn));
  }

  /// Called when the store shuts down: connections returned from now on are closed.
  void Close() {
    closing_ = true;
    idle_.clear();
    open_ = 0;
    Publish();
  }

  PostgresMetaStore::PoolStats Stats() const {
    return {open_seen_.load(), idle_seen_.load(), waiting_seen_.load()};
  }

 private:
  // Opens a connection in a free slot (the caller checked there is one), holding the slot while
  // it connects.
  awaitable<Result<std::unique_ptr<Connection>>> OpenOne() {
    ++open_;
    Publish();
    auto opening =
        Connection::Open(executor_, spec_, SystemClock::Instance().Now() + connect_timeout_);
    Result<std::unique_ptr<Connection>> conn = co_await std::move(opening);
    if (!conn.ok()) {
      --open_;
      // A waiter may now connect in this slot; it learns at once if the server is down.
      WakeOne(nullptr);
      Publish();
    }
    co_return conn;
  }

  struct Waiter {
    Waiter(const Clock& clock, Connection::Executor executor) : timer(clock, executor) {}
    asio_glue::Timer timer;
    std::unique_ptr<Connection> conn;
    bool slot_freed = false;
  };

  void Release(std::unique_ptr<Connection> conn) {
    if (closing_) return;
    if (conn->broken()) {
      conn.reset();
      --open_;
      WakeOne(nullptr);
    } else if (!waiters_.empty()) {
      WakeOne(std::move(conn));
    } else {
      idle_.push_back(std::move(conn));
    }
    Publish();
  }

  // Hands `conn` to the oldest waiter, or with no connection tells it a slot is free to connect in.
  void WakeOne(std::unique_ptr<Connection> conn) {
    if (waiters_.empty()) return;
    std::shared_ptr<Waiter> w = waiters_.front();
    waiters_.pop_front();
    if (conn)
      w->conn = std::move(conn);
    else
      w->slot_freed = true;
    w->timer.Cancel();
  }

  void Publish() {
    open_seen_ = open_;
    idle_seen_ = idle_.size();
    waiting_seen_ = waiters_.size();
  }

  const Clock& clock_;
  const Connection::Executor executor_;
  const pg::ConnectSpec spec_;
  const PostgresPoolOptions options_;
  const Duration statement_timeout_;
  const Duration connect_timeout_;
  bool closing_ = false;
  size_t open_ = 0;  // idle, lent, and being opened
  std::vector<std::unique_ptr<Connection>> idle_;
  std::deque<std::shared_ptr<Waiter>> waiters_;
  std::atomic<size_t> open_seen_{0}, idle_seen_{0}, waiting_seen_{0};
};

}  // namespace sluice::store::pg
