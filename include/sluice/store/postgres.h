// The scaled-out metadata store: MetaStore on PostgreSQL through libpq's asynchronous API. Only
// src/app (and tests) name it; everything else sees MetaStore.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstddef>
#include <memory>
#include <string>

#include "sluice/common/clock.h"
#include "sluice/common/result.h"
#include "sluice/store/meta_store.h"

namespace sluice::store {

/// Which connection pool a call uses. Split by purpose so a cleanup backlog or a burst of creates
/// cannot take the connections that reads need (docs/overload.md, "Read").
enum class PostgresPurpose {
  /// Get.
  kRead,
  /// Insert, MarkDeleted.
  kWrite,
  /// DueOutbox, FinishOutbox, RetryOutboxLater, OldestOutboxAge, Expired, Purge, Existing,
  /// PurgeReports, LiveBytes.
  kCleanup,
  /// Reports, reviews, blocks, the audit trail and the review queue (docs/moderation.md): a
  /// flood of reports or a long admin listing waits for these few connections only.
  kModeration,
};

/// One pool.
struct PostgresPoolOptions {
  /// Most connections open at once; they open on demand. Size it to the admission slots that feed
  /// the pool, so the caps, not a hidden connection queue, decide who waits. Default: 8.
  size_t connections = 8;
  /// The app's timeout for calls of this purpose. Every connection of the pool runs with
  /// `statement_timeout` = StatementTimeoutFor(call_timeout), so a query the app abandoned dies on
  /// the server too (docs/overload.md, "Retries, breakers, timeouts"). Default: 1 s.
  Duration call_timeout = std::chrono::seconds(1);
  /// Connections opened at start, before any call needs them: a connect (TCP, start-up, auth)
  /// rarely fits in a read's 20 ms, so a cold pool would fail its first calls. At most
  /// `connections`. Default: 0.
  size_t warm = 0;
};

struct PostgresOptions {
  /// A libpq connection URI, postgres://USER@HOST:PORT/DB (postgresql:// also accepted); the
  /// other libpq parameters may follow as ?key=value, except `options`, which the pools set. A
  /// password belongs in PGPASSWORD or ~/.pgpass: the URL is logged. Required.
  std::string url;
  /// Default: 8 connections, 1 s.
  PostgresPoolOptions read;
  /// Default: 8 connections, 1 s.
  PostgresPoolOptions write;
  /// Default: 2 connections, 5 s.
  PostgresPoolOptions cleanup{2, std::chrono::seconds(5), 0};
  /// Default: 2 connections, 1 s.
  PostgresPoolOptions moderation{2, std::chrono::seconds(1), 0};
  /// Longest wait for a new connection when the call's own deadline allows more (background work
  /// has none). A connect past it is Unavailable. Default: 2 s.
  Duration connect_timeout = std::chrono::seconds(2);
  /// The clock of the calls' deadlines and of the waits on them (a call's timeout, a waiter for a
  /// pooled connection); must outlive the store. Null: SystemClock. Connects and the server's
  /// answers are still timed on the machine's clock: sockets wait in real time.
  const Clock* clock = nullptr;
};

/// The server-side timeout for a pool whose calls the app abandons after `call_timeout`: a little
/// above it (a quarter more, at least 5 ms), so the app's own timeout fires first and answers, and
/// the server then stops the work nobody waits for. 20 ms gives 25 ms.
Duration StatementTimeoutFor(Duration call_timeout);

/// MetaStore on PostgreSQL. Thread-safe: callers on any executor are resumed on their own executor.
///
/// Every connection lives on the store's one I/O thread, which multiplexes all of their sockets
/// with the event loop (no thread waits on a query). A thread of its own rather than the server's
/// loops because a libpq connection is bound to one thread at a time while requests come from every
/// loop, and because libpq resolves a host name synchronously while connecting: a slow DNS answer
/// stalls this store's connects, never the HTTP loops (use an address to avoid even that).
/// Connections open on demand (or ahead, see `warm`), and a broken one
/// is dropped and replaced by the next call that needs one, so traffic resumes by itself when the
/// server comes back. Errors:
///  - a connection that cannot be made (refused, unreachable, rejected) is Unavailable with
///    reason "connection_refused" and never_sent = true: the breaker opens on these;
///  - a connection lost or a query failing after it was sent is Unavailable, never_sent = false;
///  - the call's deadline passing is DeadlineExceeded at once, whether the call waits for a pooled
///    connection or for the server. A query already sent keeps its connection until the server
///    ends it (statement_timeout bounds that), so the pool never lends a busy connection and a
///    slow query keeps counting against its pool; a query not yet sent is never sent.
class PostgresMetaStore : public MetaStore {
 public:
  /// Connections open, idle, and calls waiting for one, per pool; for /metrics and tests.
  struct PoolStats {
    size_t open = 0;
    size_t idle = 0;
    size_t waiting = 0;
  };
  virtual PoolStats Stats(PostgresPurpose purpose) const = 0;

  /// Runs `SHOW setting` on a connection of the pool, for tests of the session settings.
  virtual boost::asio::awaitable<Result<std::string>> ShowForTest(PostgresPurpose purpose,
                                                                  std::string setting) = 0;
};

/// Starts the store's I/O thread and opens each pool's `warm` connections in the background; the
/// others open when calls need them. Throws std::invalid_argument if `options.url` is
/// not a postgres:// or postgresql:// URI. Expects a migrated database (see MigratePostgres).
std::unique_ptr<PostgresMetaStore> MakePostgresMetaStore(PostgresOptions options);

/// Brings the schema at `url` up to this binary's version. Each migration runs in its own
/// transaction under a transaction-scoped advisory lock, so processes migrating at once apply each
/// step exactly once, and running it again is a no-op. Blocks (start-up and `sluice migrate`
/// only). Returns Unavailable if the server cannot be reached, Internal if a migration fails or
/// the database is at a newer version than this binary knows. On success, `applied` (if given)
/// receives how many migrations this call applied.
Status MigratePostgres(const std::string& url, int* applied = nullptr);

/// The schema version this binary migrates to.
int PostgresSchemaVersion();

/// True if `url` names a PostgreSQL server (postgres:// or postgresql://).
bool IsPostgresUrl(std::string_view url);

}  // namespace sluice::store
