// MetaStore on PostgreSQL: four pools of libpq connections (read, write, cleanup, moderation) on
// one I/O thread, every statement a single round trip.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdlib>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "pg_connection.h"
#include "sluice/asio/completion.h"
#include "sluice/asio/spawn.h"
#include "sluice/asio/timer.h"
#include "sluice/common/thread_name.h"
#include "sluice/store/postgres.h"

namespace sluice::store {
namespace {

namespace asio = boost::asio;
using asio::awaitable;
using pg::Connection;
using pg::Param;
using pg::PgResult;

Error DeadlineError(std::string message) {
  return MakeError(ErrorCode::kDeadlineExceeded, std::move(message), "deadline_exceeded");
}

// The deadline passed before the statement left: it surely did not run.
Error NotSentError(std::string message) {
  Error e = DeadlineError(std::move(message));
  e.never_sent = true;
  return e;
}

// A write that left and whose answer did not come back: it may have committed (MetaStore::Insert).
Error OutcomeUnknown(Error e) {
  e.reason = std::string(kOutcomeUnknown);
  e.message += " (sent; it may have committed)";
  e.never_sent = false;
  return e;
}

// Which statements say "outcome unknown" when their answer is lost after the send.
enum class LostAnswer { kPlainError, kOutcomeUnknown };

std::string DurationSetting(Duration d) {
  // statement_timeout takes whole milliseconds; 0 would mean "no limit", so never round to it.
  const auto ms = std::max<int64_t>(1, std::chrono::ceil<std::chrono::milliseconds>(d).count());
  return fmt::format("{}ms", ms);
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

// Answers the caller once: with the result, or with DeadlineExceeded when its deadline passes
// first. Touched on the I/O thread only.
template <typename T>
struct Answer {
  explicit Answer(asio_glue::Completion<Result<T>> c) : done(std::move(c)) {}
  bool answered() const { return !done; }
  void Finish(Result<T> result) {
    if (done) done(std::move(result));
  }
  asio_glue::Completion<Result<T>> done;
};

// Parses what the server sent; the text format throughout, bytea as "\x" and hex digits.
int64_t Int(const PGresult* r, int row, int col) {
  return std::strtoll(PQgetvalue(r, row, col), nullptr, 10);
}

std::string_view Text(const PGresult* r, int row, int col) {
  return {PQgetvalue(r, row, col), static_cast<size_t>(PQgetlength(r, row, col))};
}

TokenHash Hash(std::string_view hex) {
  TokenHash out{};
  if (hex.starts_with("\\x")) hex.remove_prefix(2);
  auto nibble = [](char c) -> unsigned {
    if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<unsigned>(c - 'A' + 10);
    return 0;
  };
  for (size_t i = 0; i < out.size() && 2 * i + 1 < hex.size(); ++i) {
    out[i] = static_cast<unsigned char>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  }
  return out;
}

Moderation ModerationOf(int64_t v) {
  return v >= 0 && v <= 2 ? static_cast<Moderation>(v) : Moderation::kNone;
}

Param P(int64_t v) { return Param{std::to_string(v), false}; }
Param P(std::string_view v) { return Param{std::string(v), false}; }

// Ids are base62, so a Postgres array literal needs no quoting.
Param IdArray(const std::vector<PasteId>& ids) {
  std::string s = "{";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += ids[i].view();
  }
  s += '}';
  return Param{std::move(s), false};
}

// The columns every row read selects, in the order RowFrom parses (the claim's own select puts
// its own views_left in place of the eleventh, then the parent).
#define SLUICE_ROW_COLUMNS_BEFORE_VIEWS                                                      \
  "created_at, expires_at, size_bytes, token_hash, deleted, body_sha256, burn, moderation, " \
  "creator_network, encrypted"
#define SLUICE_ROW_COLUMNS SLUICE_ROW_COLUMNS_BEFORE_VIEWS ", views_left, parent"

PasteMeta RowFrom(const PasteId& id, const PGresult* r) {
  PasteMeta m{id,
              Int(r, 0, 0),
              Int(r, 0, 1),
              static_cast<uint64_t>(Int(r, 0, 2)),
              Hash(Text(r, 0, 3)),
              Text(r, 0, 4) == "t",
              std::nullopt};
  // NULL on rows from before checksums ("\\x" and 64 hex digits otherwise).
  if (!PQgetisnull(r, 0, 5) && Text(r, 0, 5).size() == 2 + 2 * BodyDigest().size()) {
    m.body_sha256 = Hash(Text(r, 0, 5));
  }
  m.burn = Text(r, 0, 6) == "t";
  m.moderation = ModerationOf(Int(r, 0, 7));
  if (!PQgetisnull(r, 0, 8)) m.creator_network = static_cast<uint64_t>(Int(r, 0, 8));
  m.encrypted = Text(r, 0, 9) == "t";
  m.views_left = static_cast<uint32_t>(std::clamp<int64_t>(Int(r, 0, 10), 0, UINT32_MAX));
  if (!PQgetisnull(r, 0, 11)) m.parent = PasteId::Parse(Text(r, 0, 11));
  return m;
}

bool Bool(const PGresult* r, int row, int col) { return Text(r, row, col) == "t"; }

// The storage_usage slot of a row (src/store/postgres/postgres_migrate.cc): its id's last
// character, spread over sixteen counter rows.
#define SLUICE_USAGE_SLOT(id) "ascii(right(" id ", 1)) % 16"

class PgMetaStore final : public PostgresMetaStore, private StorageReservation::Ledger {
 public:
  explicit PgMetaStore(PostgresOptions options)
      : options_(std::move(options)), guard_(asio::make_work_guard(io_)) {
    auto make_pool = [&](const char* name, const PostgresPoolOptions& pool) {
      // bytea_output pinned because the rows are parsed as text: a server configured for the
      // old escape format must not garble token hashes.
      pg::ConnectSpec spec{options_.url, std::string("sluice-") + name,
                           fmt::format("-c statement_timeout={} -c bytea_output=hex",
                                       DurationSetting(StatementTimeoutFor(pool.call_timeout)))};
      return std::make_unique<Pool>(io_.get_executor(), std::move(spec), pool,
                                    options_.connect_timeout, clock_);
    };
    pools_[0] = make_pool("read", options_.read);
    pools_[1] = make_pool("write", options_.write);
    pools_[2] = make_pool("cleanup", options_.cleanup);
    pools_[3] = make_pool("moderation", options_.moderation);
    const std::pair<Pool*, size_t> warm[] = {{pools_[0].get(), options_.read.warm},
                                             {pools_[1].get(), options_.write.warm},
                                             {pools_[2].get(), options_.cleanup.warm},
                                             {pools_[3].get(), options_.moderation.warm}};
    for (const auto& [pool, count] : warm) {
      for (size_t i = 0; i < count; ++i)
        asio::co_spawn(io_, pool->Warm(), asio_glue::LogIfThrown("postgres: warm"));
    }
    thread_ = std::thread([this] {
      NameThisThread("postgres-io");
      io_.run();
    });
  }

  ~PgMetaStore() override {
    guard_.reset();
    io_.stop();
    thread_.join();
    // Idle connections close now, while their io_context exists; lent ones close as the
    // operations holding them are destroyed with the io_context.
    for (auto& pool : pools_) pool->Close();
    io_holder_.reset();
  }

  awaitable<Status> Insert(PasteMeta meta, admission::Deadline deadline) override {
    std::string hash(reinterpret_cast<const char*>(meta.token_hash.data()), meta.token_hash.size());
    // An empty bytea stands for "no checksum" (NULL): a text parameter cannot carry NULL here.
    std::string digest;
    if (meta.body_sha256) {
      digest.assign(reinterpret_cast<const char*>(meta.body_sha256->data()),
                    meta.body_sha256->size());
    }
    // No creator network is '' (NULL), as no checksum is an empty bytea.
    std::string network =
        meta.creator_network ? std::to_string(static_cast<int64_t>(*meta.creator_network)) : "";
    // One statement, so the row and its live bytes commit together, and with them the end of the
    // row's reservation (ReserveStorage): its bytes move from reserved to live in one commit.
    // Only a create that reserved pays for that delete.
#define SLUICE_INSERT_ROW                                                                       \
  "added AS (INSERT INTO pastes (id, created_at, expires_at, size_bytes, token_hash, deleted, " \
  "body_sha256, burn, creator_network, encrypted, views_left, parent) VALUES ($1, $2, $3, $4, " \
  "$5, false, NULLIF($6::bytea, ''::bytea), $7::boolean, NULLIF($8, '')::bigint, $9::boolean, " \
  "$10::integer, NULLIF($11, '')) "                                                             \
  "RETURNING id, size_bytes) "                                                                  \
  "UPDATE storage_usage u SET live_bytes = u.live_bytes + a.size_bytes FROM added a "           \
  "WHERE u.slot = " SLUICE_USAGE_SLOT("a.id")
    static constexpr const char* kInsert = "WITH " SLUICE_INSERT_ROW;
    static constexpr const char* kInsertTakingReservation =
        "WITH taken AS (DELETE FROM storage_reservations WHERE id = $1), " SLUICE_INSERT_ROW;
#undef SLUICE_INSERT_ROW
    return Command(PostgresPurpose::kWrite, deadline,
                   HoldsReservation(meta.id) ? kInsertTakingReservation : kInsert,
                   {P(meta.id.view()), P(meta.created_at), P(meta.expires_at),
                    P(static_cast<int64_t>(meta.size_bytes)), Param{std::move(hash), true},
                    Param{std::move(digest), true}, P(meta.burn ? "true" : "false"),
                    Param{std::move(network), false}, P(meta.encrypted ? "true" : "false"),
                    P(static_cast<int64_t>(meta.burn ? meta.views_left : 1)),
                    P(meta.parent ? meta.parent->view() : std::string_view())},
                   nullptr, LostAnswer::kOutcomeUnknown);
  }

  awaitable<Result<PasteMeta>> Get(PasteId id, admission::Deadline deadline) override {
    return Query<PasteMeta>(
        PostgresPurpose::kRead, deadline, "SELECT " SLUICE_ROW_COLUMNS " FROM pastes WHERE id = $1",
        {P(id.view())}, [id](const PGresult* r) -> Result<PasteMeta> {
          if (PQntuples(r) == 0)
            return MakeError(ErrorCode::kNotFound, "no such paste", "not_found");
          return RowFrom(id, r);
        });
  }

  awaitable<Status> MarkDeleted(PasteId id, int64_t now, admission::Deadline deadline) override {
    // One statement, so one implicit transaction: the tombstone and its outbox entry commit
    // together. A concurrent second delete waits on the row lock, then re-checks `NOT deleted` and
    // finds nothing to mark, so the body is owed once. `present` reads the snapshot from before the
    // update, which is enough to tell a tombstone from no row.
    return Command(
        PostgresPurpose::kWrite, deadline,
        "WITH marked AS (UPDATE pastes SET deleted = true WHERE id = $1 AND NOT deleted "
        "RETURNING id, size_bytes), "
        "queued AS (INSERT INTO outbox (paste_id, kind, attempts, enqueued_at, next_attempt_at) "
        "SELECT id, 'delete_body', 0, $2, $2 FROM marked RETURNING seq), "
        "counted AS (UPDATE storage_usage u SET live_bytes = u.live_bytes - m.size_bytes "
        "FROM marked m WHERE u.slot = " SLUICE_USAGE_SLOT("m.id") ") "
        "SELECT (SELECT count(*) FROM queued), EXISTS (SELECT 1 FROM pastes WHERE id = $1)",
        {P(id.view()), P(now)}, [](const PGresult* r) -> Result<std::monostate> {
          if (Int(r, 0, 0) > 0 || Text(r, 0, 1) == "t") return std::monostate{};
          return MakeError(ErrorCode::kNotFound, "no such paste", "not_found");
        });
  }

  awaitable<Result<std::vector<OutboxEntry>>> DueOutbox(int64_t now, size_t limit,
                                                        admission::Deadline deadline) override {
    return Query<std::vector<OutboxEntry>>(
        PostgresPurpose::kCleanup, deadline,
        "SELECT seq, paste_id, attempts, next_attempt_at, kind FROM outbox "
        "WHERE next_attempt_at <= $1 ORDER BY next_attempt_at, seq LIMIT $2",
        {P(now), P(static_cast<int64_t>(limit))},
        [](const PGresult* r) -> Result<std::vector<OutboxEntry>> {
          std::vector<OutboxEntry> out;
          for (int i = 0; i < PQntuples(r); ++i) {
            auto id = PasteId::Parse(Text(r, i, 1));
            if (!id) continue;  // unreachable: only parsed ids are ever written
            const auto kind = Text(r, i, 4) == "purge_edge" ? OutboxEntry::Kind::kPurgeEdge
                                                            : OutboxEntry::Kind::kDeleteBody;
            out.push_back(
                OutboxEntry{Int(r, i, 0), *id, kind, static_cast<int>(Int(r, i, 2)), Int(r, i, 3)});
          }
          return out;
        });
  }

  awaitable<Status> FinishOutbox(int64_t seq, admission::Deadline deadline) override {
    return Command(PostgresPurpose::kCleanup, deadline, "DELETE FROM outbox WHERE seq = $1",
                   {P(seq)});
  }

  awaitable<Status> RetryOutboxLater(int64_t seq, int64_t next_attempt_at,
                                     admission::Deadline deadline) override {
    return Command(PostgresPurpose::kCleanup, deadline,
                   "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = $1 WHERE seq = $2",
                   {P(next_attempt_at), P(seq)});
  }

  awaitable<Result<int64_t>> OldestOutboxAge(int64_t now, admission::Deadline deadline) override {
    return Query<int64_t>(PostgresPurpose::kCleanup, deadline,
                          "SELECT MIN(enqueued_at) FROM outbox", {},
                          [now](const PGresult* r) -> Result<int64_t> {
                            if (PQntuples(r) == 0 || PQgetisnull(r, 0, 0)) return int64_t{0};
                            return std::max<int64_t>(0, now - Int(r, 0, 0));
                          });
  }

  // Dated by the server's clock, not `now`: the processes' clocks may differ, the database's is the
  // one they share. Taken when absent, lapsed or already the holder's; one statement, so two
  // processes asking at once cannot both get it.
  awaitable<Result<bool>> HoldLease(std::string name, std::string holder, int64_t, int64_t seconds,
                                    admission::Deadline deadline) override {
    return Query<bool>(
        PostgresPurpose::kCleanup, deadline,
        "WITH clock AS (SELECT extract(epoch FROM clock_timestamp())::bigint AS now) "
        "INSERT INTO leases AS l (name, holder, until) SELECT $1, $2, now + $3 FROM clock "
        "ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until "
        "WHERE l.holder = EXCLUDED.holder OR l.until <= (SELECT now FROM clock) RETURNING 1",
        {P(name), P(holder), P(seconds)},
        [](const PGresult* r) -> Result<bool> { return PQntuples(r) == 1; });
  }

  awaitable<Result<std::vector<PasteId>>> Expired(int64_t now, size_t limit,
                                                  admission::Deadline deadline) override {
    return Query<std::vector<PasteId>>(
        PostgresPurpose::kCleanup, deadline,
        "SELECT id FROM pastes WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2",
        {P(now), P(static_cast<int64_t>(limit))},
        [](const PGresult* r) -> Result<std::vector<PasteId>> {
          std::vector<PasteId> out;
          for (int i = 0; i < PQntuples(r); ++i) {
            if (auto id = PasteId::Parse(Text(r, i, 0))) out.push_back(*id);
          }
          return out;
        });
  }

  awaitable<Status> Purge(std::vector<PasteId> ids, admission::Deadline deadline) override {
    // The rows, their outbox entries, live bytes, open reports and queue rows in one function
    // (src/store/postgres/postgres_migrate.cc, migration 8).
    return Command(PostgresPurpose::kCleanup, deadline, "SELECT sluice_purge_pastes($1::text[])",
                   {IdArray(ids)});
  }

  awaitable<Result<std::vector<PasteId>>> Existing(std::vector<PasteId> ids,
                                                   admission::Deadline deadline) override {
    Param array = IdArray(ids);
    return Query<std::vector<PasteId>>(
        PostgresPurpose::kCleanup, deadline, "SELECT id FROM pastes WHERE id = ANY ($1::text[])",
        {std::move(array)},
        [ids = std::move(ids)](const PGresult* r) -> Result<std::vector<PasteId>> {
          std::set<std::string_view> found;
          for (int i = 0; i < PQntuples(r); ++i) found.insert(Text(r, i, 0));
          std::vector<PasteId> out;
          for (const PasteId& id : ids) {
            if (found.contains(id.view())) out.push_back(id);
          }
          return out;
        });
  }

  // Moderation: every call on the moderation pool, whose few connections and statement timeout
  // are its own (a report flood cannot take a connection that creates or reads need), except
  // the retention sweep, which is the cleanup pool's. A report and a review are one function
  // each (migration 8), so a report costs one round trip and a bounded number of index lookups.

  awaitable<Result<ReportOutcome>> AddReport(AbuseReport report, ReportPolicy policy,
                                             admission::Deadline deadline) override {
    const int64_t reason_bit = ReportReasonBit(report.reason);
    return Query<ReportOutcome>(
        PostgresPurpose::kModeration, deadline,
        "SELECT * FROM sluice_add_report($1, $2, $3, $4, $5, $6::boolean, $7, $8, $9, $10, "
        "$11::boolean, $12, $13)",
        {P(report.id.view()), P(report.network), P(report.reason), P(report.note), P(report.at),
         P(report.from_creator ? "true" : "false"), P(reason_bit), P(policy.hide_threshold),
         P(policy.withholds_per_network), P(policy.max_open_reports),
         P(policy.may_withhold ? "true" : "false"), P(kWithholdWindowSeconds), P(kSpareVoters)},
        [](const PGresult* r) -> Result<ReportOutcome> {
          if (PQntuples(r) == 0 || !Bool(r, 0, 0)) {
            return MakeError(ErrorCode::kNotFound, "no such paste", "not_found");
          }
          ReportOutcome out;
          out.counted = Bool(r, 0, 1);
          out.stored = Bool(r, 0, 2);
          out.vote = Bool(r, 0, 3);
          out.open_reports = Int(r, 0, 4);
          out.votes = Int(r, 0, 5);
          out.withheld = Bool(r, 0, 6);
          out.withhold_deferred = Bool(r, 0, 7);
          out.kept = Bool(r, 0, 8);
          for (std::string_view left = Text(r, 0, 9); !left.empty();) {
            const size_t comma = std::min(left.find(','), left.size());
            out.charged.emplace_back(left.substr(0, comma));
            left.remove_prefix(std::min(comma + 1, left.size()));
          }
          return out;
        });
  }

  awaitable<Status> SetModeration(PasteId id, ModerationChange change,
                                  admission::Deadline deadline) override {
    return Command(PostgresPurpose::kModeration, deadline,
                   "SELECT sluice_set_moderation($1, $2::smallint, $3, $4, $5::boolean)",
                   {P(id.view()), P(static_cast<int64_t>(change.state)), P(change.reason),
                    P(change.at), P(change.keep ? "true" : "false")},
                   [](const PGresult* r) -> Result<std::monostate> {
                     if (PQntuples(r) > 0 && Bool(r, 0, 0)) return std::monostate{};
                     return MakeError(ErrorCode::kNotFound, "no such paste", "not_found");
                   });
  }

  awaitable<Result<size_t>> PurgeReports(int64_t closed_before, int64_t now, size_t limit,
                                         admission::Deadline deadline) override {
    // One batch of at most `limit` rows per statement, so one sweep never holds many row locks;
    // both walk an index from its old end.
    return Query<size_t>(
        PostgresPurpose::kCleanup, deadline,
        "WITH doomed AS (SELECT paste_id, network FROM paste_reports WHERE NOT open "
        "AND closed_at <= $1 LIMIT $3), "
        "gone AS (DELETE FROM paste_reports r USING doomed d WHERE r.paste_id = d.paste_id "
        "AND r.network = d.network RETURNING 1), "
        "old AS (SELECT network, at, paste_id FROM withhold_charges WHERE at <= $2 "
        "LIMIT GREATEST($3 - (SELECT count(*) FROM doomed), 0)), "
        "expired AS (DELETE FROM withhold_charges w USING old o WHERE w.network = o.network "
        "AND w.at = o.at AND w.paste_id = o.paste_id RETURNING 1) "
        "SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM expired)",
        {P(closed_before), P(now - kWithholdWindowSeconds), P(static_cast<int64_t>(limit))},
        [](const PGresult* r) -> Result<size_t> {
          if (PQntuples(r) == 0) return size_t{0};
          return static_cast<size_t>(std::max<int64_t>(0, Int(r, 0, 0)));
        });
  }

  awaitable<Result<ReportPage>> OpenReports(std::optional<ReportCursor> after, size_t limit,
                                            admission::Deadline deadline) override {
    // One range of the queue's index and a row lookup per paste listed; no cursor starts above
    // every id ('~' sorts after base62 in the "C" collation of the queue's ids).
    return Query<ReportPage>(
        PostgresPurpose::kModeration, deadline,
        "SELECT q.paste_id, q.reports, q.notes, q.votes, q.reasons, q.latest_at, q.latest_note, "
        "COALESCE(p.moderation, 0), COALESCE(p.review_keep, false) "
        "FROM report_queue q LEFT JOIN pastes p ON p.id = q.paste_id "
        "WHERE (q.latest_at, q.paste_id) < ($1::bigint, $2::text) "
        "ORDER BY q.latest_at DESC, q.paste_id DESC LIMIT $3",
        {P(after ? after->latest_at : std::numeric_limits<int64_t>::max()),
         P(after ? after->id.view() : std::string_view("~")), P(static_cast<int64_t>(limit) + 1)},
        [limit](const PGresult* r) -> Result<ReportPage> {
          ReportPage page;
          for (int i = 0; i < PQntuples(r); ++i) {
            auto id = PasteId::Parse(Text(r, i, 0));
            if (!id) continue;
            if (page.pastes.size() == limit) {
              page.next = ReportCursor{page.pastes.back().latest_at, page.pastes.back().id};
              break;
            }
            ReportSummary s{*id};
            s.reports = Int(r, i, 1);
            s.networks = Int(r, i, 2);
            s.votes = Int(r, i, 3);
            s.reasons = ReportReasonNames(Int(r, i, 4));
            s.latest_at = Int(r, i, 5);
            s.latest_note = std::string(Text(r, i, 6));
            s.moderation = ModerationOf(Int(r, i, 7));
            s.keep = Bool(r, i, 8);
            page.pastes.push_back(std::move(s));
          }
          return page;
        });
  }

  awaitable<Result<ReportCounts>> CountReports(admission::Deadline deadline) override {
    return Query<ReportCounts>(PostgresPurpose::kModeration, deadline,
                               "SELECT pending, open_reports FROM report_counts WHERE slot = 0", {},
                               [](const PGresult* r) -> Result<ReportCounts> {
                                 if (PQntuples(r) == 0) return ReportCounts{};
                                 return ReportCounts{Int(r, 0, 0), Int(r, 0, 1)};
                               });
  }

  awaitable<Status> AddBlock(ClientBlock block, admission::Deadline deadline) override {
    return Command(PostgresPurpose::kModeration, deadline,
                   "INSERT INTO blocks (prefix, reason, created_at, until) VALUES ($1, $2, $3, $4)",
                   {P(block.prefix), P(block.reason), P(block.created_at), P(block.until)});
  }

  awaitable<Result<std::vector<ClientBlock>>> ActiveBlocks(int64_t now,
                                                           admission::Deadline deadline) override {
    return Query<std::vector<ClientBlock>>(
        PostgresPurpose::kModeration, deadline,
        "SELECT prefix, reason, created_at, until FROM blocks WHERE until > $1 ORDER BY seq",
        {P(now)}, [](const PGresult* r) -> Result<std::vector<ClientBlock>> {
          std::vector<ClientBlock> out;
          for (int i = 0; i < PQntuples(r); ++i) {
            out.push_back(ClientBlock{std::string(Text(r, i, 0)), std::string(Text(r, i, 1)),
                                      Int(r, i, 2), Int(r, i, 3)});
          }
          return out;
        });
  }

  awaitable<Status> AddAudit(AuditEntry entry, admission::Deadline deadline) override {
    return Command(PostgresPurpose::kModeration, deadline,
                   "INSERT INTO audit (at, action, target, detail) VALUES ($1, $2, $3, $4)",
                   {P(entry.at), P(entry.action), P(entry.target), P(entry.detail)});
  }

  awaitable<Result<std::vector<AuditEntry>>> AuditTrail(size_t limit,
                                                        admission::Deadline deadline) override {
    return Query<std::vector<AuditEntry>>(
        PostgresPurpose::kModeration, deadline,
        "SELECT at, action, target, detail FROM audit ORDER BY seq DESC LIMIT $1",
        {P(static_cast<int64_t>(limit))}, [](const PGresult* r) -> Result<std::vector<AuditEntry>> {
          std::vector<AuditEntry> out;
          for (int i = 0; i < PQntuples(r); ++i) {
            out.push_back(AuditEntry{Int(r, i, 0), std::string(Text(r, i, 1)),
                                     std::string(Text(r, i, 2)), std::string(Text(r, i, 3))});
          }
          return out;
        });
  }

  // Burn after reading and storage accounting

  awaitable<Result<PasteMeta>> Claim(PasteId id, int64_t now,
                                     admission::Deadline deadline) override {
    // One statement, so one transaction: the view taken and, with the last one, the tombstone,
    // its outbox entry and the live bytes commit together. Concurrent claims (from any process)
    // queue on the row lock; under READ COMMITTED each later one re-evaluates its WHERE and SET
    // against the row the earlier one committed, so N views go to exactly N claims, and a claim
    // after the last finds the tombstone and updates nothing. The final SELECT reads the
    // statement's snapshot (the row before any of this: its other columns do not change), except
    // views_left, which only the UPDATE's RETURNING knows: the count after this claim. A
    // withheld or taken-down row is never claimed; a SetModeration that commits first is seen by
    // the same re-check.
    return Query<PasteMeta>(
        PostgresPurpose::kWrite, deadline,
        "WITH claimed AS (UPDATE pastes SET views_left = views_left - 1, "
        "deleted = (views_left <= 1) WHERE id = $1 AND burn AND NOT deleted AND moderation = 0 "
        "AND expires_at > $2 AND views_left >= 1 RETURNING id, size_bytes, deleted, views_left), "
        "queued AS (INSERT INTO outbox (paste_id, kind, attempts, enqueued_at, next_attempt_at) "
        "SELECT id, 'delete_body', 0, $2, $2 FROM claimed WHERE deleted), "
        "counted AS (UPDATE storage_usage u SET live_bytes = u.live_bytes - c.size_bytes "
        "FROM claimed c WHERE c.deleted AND u.slot = " SLUICE_USAGE_SLOT("c.id") ") "
        "SELECT " SLUICE_ROW_COLUMNS_BEFORE_VIEWS ", (SELECT c.views_left + 1 FROM claimed c), "
        "parent FROM pastes WHERE id = $1 AND EXISTS (SELECT 1 FROM claimed)",
        {P(id.view()), P(now)}, [id](const PGresult* r) -> Result<PasteMeta> {
          if (PQntuples(r) == 0)
            return MakeError(ErrorCode::kNotFound, "no such paste to claim", "not_found");
          return RowFrom(id, r);
        });
  }

  awaitable<Result<uint64_t>> LiveBytes(admission::Deadline deadline) override {
    return Query<uint64_t>(PostgresPurpose::kCleanup, deadline,
                           "SELECT COALESCE(SUM(live_bytes), 0) FROM storage_usage", {},
                           [](const PGresult* r) -> Result<uint64_t> {
                             if (PQntuples(r) == 0) return uint64_t{0};
                             return static_cast<uint64_t>(std::max<int64_t>(0, Int(r, 0, 0)));
                           });
  }

  awaitable<Result<StorageReservation>> ReserveStorage(StorageRequest request,
                                                       admission::Deadline deadline) override {
    // On the write pool: a reservation is the first write of a create, fed by the same slots.
    // Made on the I/O thread when the answer arrives, so a grant whose caller already gave up is
    // destroyed there, unanswered, and so given back.
    const PasteId id = request.id;
    const uint64_t bytes = request.bytes;
    const uint64_t quota = request.quota;
    return Query<StorageReservation>(
        PostgresPurpose::kWrite, deadline,
        "SELECT granted, in_use FROM sluice_reserve_storage($1, $2, $3, $4, $5)",
        {P(id.view()), P(static_cast<int64_t>(bytes)), P(static_cast<int64_t>(quota)),
         P(request.now), P(request.expires_at)},
        [this, id, bytes, quota](const PGresult* r) -> Result<StorageReservation> {
          if (PQntuples(r) != 1) {
            return MakeError(ErrorCode::kUnavailable, "postgres: no answer from the reservation",
                             "storage_unavailable");
          }
          if (Text(r, 0, 0) != "t") {
            return StorageQuotaReached(static_cast<uint64_t>(std::max<int64_t>(0, Int(r, 0, 1))),
                                       quota);
          }
          {
            std::lock_guard lock(reserved_mu_);
            reserved_.insert(id);
          }
          return StorageReservation(*this, id, bytes);
        });
  }

  void Settle(const PasteId& id, bool spent) noexcept override {
    {
      std::lock_guard lock(reserved_mu_);
      reserved_.erase(id);
    }
    if (spent) return;  // the insert's statement deleted the row
    try {
      asio::co_spawn(io_, GiveBack(id), asio_glue::LogIfThrown("postgres: reservation"));
    } catch (const std::exception& e) {
      spdlog::warn("storage reservation {} not given back ({}); it counts until it expires",
                   id.view(), e.what());
    }
  }

  PoolStats Stats(PostgresPurpose purpose) const override {
    return pools_[static_cast<size_t>(purpose)]->Stats();
  }

  awaitable<Result<std::string>> ShowForTest(PostgresPurpose purpose,
                                             std::string setting) override {
    const bool valid = !setting.empty() && std::all_of(setting.begin(), setting.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
    if (!valid) throw std::invalid_argument("not a setting name: " + setting);
    auto sql = std::make_shared<std::string>("SHOW " + setting);
    return Query<std::string>(
        purpose, admission::Deadline::Never(), sql->c_str(), {},
        [sql](const PGresult* r) -> Result<std::string> { return std::string(Text(r, 0, 0)); });
  }

 private:
  template <typename T>
  using Parser = std::function<Result<T>(const PGresult*)>;

  // Not a coroutine on purpose: the caller's co_await starts it, and g++ 12 mishandles the
  // non-trivial temporaries a coroutine here would hold in its co_await expressions.
  template <typename T>
  awaitable<Result<T>> Query(PostgresPurpose purpose, admission::Deadline deadline, const char* sql,
                             std::vector<Param> params, Parser<T> parse,
                             LostAnswer lost = LostAnswer::kPlainError) {
    auto start = [this, purpose, deadline, sql, params = std::move(params),
                  parse = std::move(parse), lost](asio_glue::Completion<Result<T>> done) mutable {
      auto answer = std::make_shared<Answer<T>>(std::move(done));
      asio::co_spawn(io_,
                     Run<T>(purpose, deadline, sql, std::move(params), std::move(parse),
                            std::move(answer), lost),
                     asio_glue::LogIfThrown("postgres: statement"));
    };
    return asio_glue::AwaitCompletion<Result<T>>(std::move(start));
  }

  // A statement whose rows say nothing beyond success, unless `check` finds otherwise.
  awaitable<Status> Command(PostgresPurpose purpose, admission::Deadline deadline, const char* sql,
                            std::vector<Param> params, Parser<std::monostate> check = nullptr,
                            LostAnswer lost = LostAnswer::kPlainError) {
    if (!check) check = [](const PGresult*) -> Result<std::monostate> { return std::monostate{}; };
    return AsStatus(
        Query<std::monostate>(purpose, deadline, sql, std::move(params), std::move(check), lost));
  }

  static awaitable<Status> AsStatus(awaitable<Result<std::monostate>> call) {
    Result<std::monostate> r = co_await std::move(call);
    if (!r.ok()) co_return r.error();
    co_return Ok();
  }

  // Runs on the I/O thread. The caller is answered at its deadline even while this goes on; a
  // statement not yet sent by then is never sent.
  //
  // Why no PQcancel: it connects and waits synchronously, which would stall every connection on
  // this thread. The server-side statement_timeout (a little above the app's timeout) ends the
  // abandoned statement instead, and until it does the connection stays lent, so the pool keeps
  // counting the work the server is still doing.
  template <typename T>
  awaitable<void> Run(PostgresPurpose purpose, admission::Deadline deadline, const char* sql,
                      std::vector<Param> params, Parser<T> parse, std::shared_ptr<Answer<T>> answer,
                      LostAnswer lost) {
    asio_glue::Timer timer(clock_, io_.get_executor());
    // Set once the statement may have left: a deadline past it leaves the outcome unknown.
    auto sent = std::make_shared<bool>(false);
    if (!deadline.IsNever()) {
      timer.AsyncWaitUntil(deadline.at(), [answer, sent, lost](bool reached) {
        if (!reached) return;
        if (!*sent) {
          answer->Finish(NotSentError("postgres: no answer in time, and nothing was sent"));
          return;
        }
        Error e = DeadlineError("postgres: the call did not answer in time");
        answer->Finish(lost == LostAnswer::kOutcomeUnknown ? OutcomeUnknown(std::move(e))
                                                           : std::move(e));
      });
    }
    Pool& pool = *pools_[static_cast<size_t>(purpose)];
    auto acquiring = pool.Acquire(deadline);
    Result<Pool::Lease> lease = co_await std::move(acquiring);
    if (!lease.ok()) {
      answer->Finish(lease.error());
      co_return;
    }
    std::optional<Pool::Lease> held(std::move(*lease));
    if (answer->answered() || deadline.Expired(clock_)) {
      held.reset();
      answer->Finish(NotSentError("postgres: abandoned before it was sent"));
      co_return;
    }
    // Past this the server should have cancelled the statement itself; no answer by then means the
    // connection or the server is stuck, and the connection is closed rather than lent for ever.
    const Duration hard_limit =
        pool.statement_timeout() + std::max<Duration>(pool.statement_timeout(), kStuckGrace);
    *sent = true;
    bool answer_lost = false;
    auto exec = held->conn().Exec(sql, std::move(params),
                                  SystemClock::Instance().Now() + hard_limit, &answer_lost);
    Result<PgResult> result = co_await std::move(exec);
    timer.Cancel();
    // The connection goes back before the caller resumes, so the caller's next call finds it.
    held.reset();
    if (!result.ok() && answer_lost && lost == LostAnswer::kOutcomeUnknown) {
      answer->Finish(OutcomeUnknown(result.error()));
      co_return;
    }
    answer->Finish(result.ok() ? parse(result->get()) : Result<T>(result.error()));
  }

  static constexpr Duration kStuckGrace = std::chrono::seconds(1);
  // Voters a withholding looks at beyond the threshold (as the SQLite store's kSpareVoters).
  static constexpr int64_t kSpareVoters = 64;

  bool HoldsReservation(const PasteId& id) {
    std::lock_guard lock(reserved_mu_);
    return reserved_.contains(id);
  }

  // A create that ended without its row gives its room back at once; if this fails (the server
  // is unreachable, and so is every create), the row counts until its expiry.
  awaitable<void> GiveBack(PasteId id) {
    auto releasing =
        Command(PostgresPurpose::kWrite, admission::Deadline::After(clock_, kGiveBackTimeout),
                "DELETE FROM storage_reservations WHERE id = $1", {P(id.view())});
    const Status released = co_await std::move(releasing);
    if (!released.ok()) {
      spdlog::debug("storage reservation {} not given back ({}); it counts until it expires",
                    id.view(), released.error().message);
    }
  }
  static constexpr Duration kGiveBackTimeout = std::chrono::seconds(1);

  const PostgresOptions options_;
  const Clock& clock_ = options_.clock != nullptr ? *options_.clock : SystemClock::Instance();
  // The reservations this object granted and no insert or release has ended yet: an Insert of
  // one of these ids also ends its reservation.
  std::mutex reserved_mu_;
  std::set<PasteId> reserved_;
  std::array<std::unique_ptr<Pool>, 4> pools_;  // by PostgresPurpose; outlive io_
  std::unique_ptr<asio::io_context> io_holder_ = std::make_unique<asio::io_context>(1);
  asio::io_context& io_ = *io_holder_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::thread thread_;
};

}  // namespace

Duration StatementTimeoutFor(Duration call_timeout) {
  return call_timeout + std::max<Duration>(std::chrono::milliseconds(5), call_timeout / 4);
}

bool IsPostgresUrl(std::string_view url) {
  return url.starts_with("postgres://") || url.starts_with("postgresql://");
}

std::unique_ptr<PostgresMetaStore> MakePostgresMetaStore(PostgresOptions options) {
  if (!IsPostgresUrl(options.url)) {
    throw std::invalid_argument("not a postgres:// or postgresql:// URL: " + options.url);
  }
  return std::make_unique<PgMetaStore>(std::move(options));
}

}  // namespace sluice::store
