// The PostgreSQL metadata store against a real server: the shared store contract, unchanged, and
// what only this backend has (migrations, pools under deadlines, statement_timeout, outages).
// Time bounds are loose on purpose: the machine is shared and noisy.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "../../src/store/postgres/pg_connection.h"
#include "../contract/store_contract.h"
#include "../support/run_sync.h"
#include "postgres_env.h"
#include "sluice/store/backends.h"
#include "sluice/store/postgres.h"

namespace sluice::store {
namespace contract {

// Its own database, migrated; bodies in memory (the contract's blob tests are not this backend's
// business, and the memory store keeps them across Reopen).
struct PostgresBackend : Backend {
  testenv::TestDatabase db;
  std::unique_ptr<MetaStore> meta_;
  std::unique_ptr<BlobStore> blobs_ = MakeMemoryBlobStore();
  PostgresBackend() {
    Status migrated = MigratePostgres(db.url());
    if (!migrated.ok()) throw std::runtime_error(migrated.error().message);
    Reopen();
  }
  MetaStore& meta() override { return *meta_; }
  BlobStore& blobs() override { return *blobs_; }
  void Reopen() override {
    meta_.reset();
    PostgresOptions options;
    options.url = db.url();
    meta_ = MakePostgresMetaStore(options);
  }
  bool persistent() const override { return true; }
};

class PostgresName {
 public:
  template <typename T>
  static std::string GetName(int) {
    return "postgres";
  }
};
INSTANTIATE_TYPED_TEST_SUITE_P(Backend, StoreContract, ::testing::Types<PostgresBackend>,
                               PostgresName);

}  // namespace contract

namespace {

using admission::Deadline;
using contract::Hold;
using contract::Id;
using contract::Row;
using testing::RunSync;
using namespace std::chrono_literals;

Deadline In(Duration d) { return Deadline::After(SystemClock::Instance(), d); }

double SecondsSince(TimePoint start) {
  return std::chrono::duration<double>(SystemClock::Instance().Now() - start).count();
}

// Runs coroutines in the background, for calls that must stay in flight while the test goes on.
class Background {
 public:
  Background() : guard_(boost::asio::make_work_guard(io_)), thread_([this] { io_.run(); }) {}
  ~Background() {
    guard_.reset();
    thread_.join();
  }
  template <typename T>
  std::future<T> Start(boost::asio::awaitable<T> task) {
    auto promise = std::make_shared<std::promise<T>>();
    auto future = promise->get_future();
    boost::asio::co_spawn(
        io_,
        [promise, task = std::move(task)]() mutable -> boost::asio::awaitable<void> {
          promise->set_value(co_await std::move(task));
        },
        boost::asio::detached);
    return future;
  }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
};

std::unique_ptr<PostgresMetaStore> MigratedStore(const std::string& url, PostgresOptions options) {
  Status migrated = MigratePostgres(url);
  if (!migrated.ok()) throw std::runtime_error(migrated.error().message);
  options.url = url;
  return MakePostgresMetaStore(options);
}

TEST(PostgresMigrations, RunningTwiceAppliesNothingTheSecondTime) {
  testenv::TestDatabase db;
  int applied = -1;
  ASSERT_TRUE(MigratePostgres(db.url(), &applied).ok());
  EXPECT_EQ(applied, PostgresSchemaVersion());
  ASSERT_TRUE(MigratePostgres(db.url(), &applied).ok());
  EXPECT_EQ(applied, 0);
  testenv::Session session(db.url());
  EXPECT_EQ(session.Exec("SELECT count(*) FROM schema_migrations"),
            std::to_string(PostgresSchemaVersion()));
}

TEST(PostgresMigrations, ConcurrentMigratorsApplyEachStepOnce) {
  testenv::TestDatabase db;
  constexpr int kMigrators = 6;
  std::vector<std::future<std::pair<bool, int>>> runs;
  for (int i = 0; i < kMigrators; ++i) {
    runs.push_back(std::async(std::launch::async, [url = db.url()] {
      int applied = 0;
      Status s = MigratePostgres(url, &applied);
      if (!s.ok()) ADD_FAILURE() << s.error().message;
      return std::make_pair(s.ok(), applied);
    }));
  }
  int total = 0;
  for (auto& run : runs) {
    auto [ok, applied] = run.get();
    EXPECT_TRUE(ok);
    total += applied;
  }
  EXPECT_EQ(total, PostgresSchemaVersion());
  testenv::Session session(db.url());
  EXPECT_EQ(session.Exec("SELECT count(*) FROM schema_migrations"),
            std::to_string(PostgresSchemaVersion()));
}

// A database as a binary from before body checksums left it (schema version 1 of
// src/store/postgres/postgres_migrate.cc), with one paste.
TEST(PostgresMigrations, MigratesADatabaseFromBeforeChecksumsKeepingItsRows) {
  testenv::TestDatabase db;
  testenv::Session(db.url()).Exec(R"sql(
    CREATE TABLE schema_migrations (version integer PRIMARY KEY,
                                    applied_at timestamptz NOT NULL DEFAULT now());
    CREATE TABLE pastes (
      id text PRIMARY KEY,
      created_at bigint NOT NULL,
      expires_at bigint NOT NULL,
      size_bytes bigint NOT NULL,
      token_hash bytea NOT NULL,
      deleted boolean NOT NULL DEFAULT false
    );
    CREATE INDEX pastes_by_expiry ON pastes (expires_at);
    CREATE TABLE outbox (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      paste_id text NOT NULL,
      kind text NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      enqueued_at bigint NOT NULL,
      next_attempt_at bigint NOT NULL
    );
    CREATE INDEX outbox_by_due ON outbox (next_attempt_at);
    CREATE INDEX outbox_by_paste ON outbox (paste_id);
    INSERT INTO schema_migrations (version) VALUES (1);
    INSERT INTO pastes VALUES ('old000000001', 100, 5000, 5, decode(repeat('00', 32), 'hex'), false);
  )sql");
  int applied = -1;
  ASSERT_TRUE(MigratePostgres(db.url(), &applied).ok());
  EXPECT_EQ(applied, PostgresSchemaVersion() - 1);
  ASSERT_TRUE(MigratePostgres(db.url(), &applied).ok());
  EXPECT_EQ(applied, 0);
  PostgresOptions options;
  options.url = db.url();
  auto store = MakePostgresMetaStore(options);
  auto old = RunSync(store->Get(Id("old000000001"), Deadline::Never()));
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_EQ(old->size_bytes, 5u);
  EXPECT_FALSE(old->body_sha256.has_value());
  ASSERT_TRUE(RunSync(store->Insert(Row("new000000001", 5000), Deadline::Never())).ok());
  EXPECT_EQ(RunSync(store->Get(Id("new000000001"), Deadline::Never()))->body_sha256,
            Row("new000000001", 5000).body_sha256);
}

TEST(PostgresMigrations, RefusesADatabaseFromANewerSchema) {
  testenv::TestDatabase db;
  ASSERT_TRUE(MigratePostgres(db.url()).ok());
  testenv::Session(db.url()).Exec("INSERT INTO schema_migrations (version) VALUES (999)");
  Status s = MigratePostgres(db.url());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInternal);
  EXPECT_EQ(s.error().reason, "schema_too_new");
}

TEST(PostgresMetaStore, EachPoolRunsWithItsOwnStatementTimeout) {
  testenv::TestDatabase db;
  PostgresOptions options;
  options.read.call_timeout = 20ms;
  options.write.call_timeout = 1s;
  options.cleanup.call_timeout = 5s;
  auto store = MigratedStore(db.url(), options);
  EXPECT_EQ(*RunSync(store->ShowForTest(PostgresPurpose::kRead, "statement_timeout")), "25ms");
  EXPECT_EQ(*RunSync(store->ShowForTest(PostgresPurpose::kWrite, "statement_timeout")), "1250ms");
  EXPECT_EQ(*RunSync(store->ShowForTest(PostgresPurpose::kCleanup, "statement_timeout")), "6250ms");
}

// An insert sent and then cut off (its backend killed while it waits on a lock) cannot say whether
// it committed: it says "outcome unknown", never a plain failure that would read as "not written".
TEST(PostgresMetaStore, InsertWhoseConnectionDiesAfterTheSendIsOutcomeUnknown) {
  testenv::TestDatabase db;
  PostgresOptions options;
  options.write.call_timeout = 30s;
  auto store = MigratedStore(db.url(), options);
  testenv::Session blocker(db.url());
  blocker.Exec("BEGIN");
  blocker.Exec("LOCK TABLE pastes IN ACCESS EXCLUSIVE MODE");
  Background background;
  auto insert = background.Start(store->Insert(Row("cut000000000", 5000), Deadline::Never()));
  testenv::Session killer(db.url());
  // Wait until the insert is on the server (waiting for the lock), then end its backend. Only this
  // test's database: the other tests' stores run beside it on the same server (ctest -j) with
  // write connections of the same name, and ending one of theirs fails both tests.
  for (int i = 0; i < 500; ++i) {
    if (killer.Exec("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                    "'sluice-write' AND wait_event_type = 'Lock' "
                    "AND datname = current_database()") == "1") {
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  killer.Exec(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = "
      "'sluice-write' AND datname = current_database()");
  ASSERT_EQ(insert.wait_for(20s), std::future_status::ready);
  Status s = insert.get();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().reason, "outcome_unknown") << s.error().message;
  EXPECT_FALSE(s.error().never_sent);
  blocker.Exec("ROLLBACK");
  // The store recovers by itself: the next insert gets a new connection.
  EXPECT_TRUE(RunSync(store->Insert(Row("after0000000", 5000), Deadline::Never())).ok());
}

// The server ends a statement the app stopped waiting for, even when the app set no deadline.
TEST(PostgresMetaStore, StatementTimeoutEndsABlockedStatementOnTheServer) {
  testenv::TestDatabase db;
  PostgresOptions options;
  options.write.call_timeout = 200ms;
  auto store = MigratedStore(db.url(), options);
  testenv::Session blocker(db.url());
  blocker.Exec("BEGIN");
  blocker.Exec("LOCK TABLE pastes IN ACCESS EXCLUSIVE MODE");
  const TimePoint start = SystemClock::Instance().Now();
  Status s = RunSync(store->Insert(Row("stuck0000000", 5000), Deadline::Never()));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kDeadlineExceeded) << s.error().message;
  EXPECT_EQ(s.error().reason, "statement_timeout");
  EXPECT_LT(SecondsSince(start), 10.0);
  blocker.Exec("ROLLBACK");
  EXPECT_EQ(RunSync(store->Get(Id("stuck0000000"), Deadline::Never())).error().code,
            ErrorCode::kNotFound);
}

// The only write connection is busy: a call waiting for it gives up at its deadline, and the
// connection is neither lost nor doubled.
TEST(PostgresMetaStore, WaitingForABusyPoolEndsAtTheDeadlineWithoutLeaking) {
  testenv::TestDatabase db;
  PostgresOptions options;
  options.write.connections = 1;
  options.write.call_timeout = 30s;  // the blocked statement must outlive the test's waits
  auto store = MigratedStore(db.url(), options);
  ASSERT_TRUE(RunSync(store->Insert(Row("first0000000", 5000), Deadline::Never())).ok());

  testenv::Session blocker(db.url());
  blocker.Exec("BEGIN");
  blocker.Exec("LOCK TABLE pastes IN ACCESS EXCLUSIVE MODE");
  Background background;
  auto held = background.Start(store->Insert(Row("held00000000", 5000), Deadline::Never()));
  // Wait until the held insert owns the connection.
  for (int i = 0; i < 200 && store->Stats(PostgresPurpose::kWrite).idle != 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(store->Stats(PostgresPurpose::kWrite).idle, 0u);

  const TimePoint start = SystemClock::Instance().Now();
  Status late = RunSync(store->Insert(Row("late00000000", 5000), In(200ms)));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code, ErrorCode::kDeadlineExceeded);
  EXPECT_LT(SecondsSince(start), 5.0);
  // The caller's own deadline and the pool's waiter fire at the same instant, on two threads:
  // the waiter may leave the queue just after the caller has its answer.
  for (int i = 0; i < 100 && store->Stats(PostgresPurpose::kWrite).waiting != 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  const auto during = store->Stats(PostgresPurpose::kWrite);
  EXPECT_EQ(during.open, 1u);
  EXPECT_EQ(during.waiting, 0u);

  blocker.Exec("COMMIT");
  ASSERT_EQ(held.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(held.get().ok());
  ASSERT_TRUE(RunSync(store->Insert(Row("after0000000", 5000), In(10s))).ok());
  const auto after = store->Stats(PostgresPurpose::kWrite);
  EXPECT_EQ(after.open, 1u);
  EXPECT_EQ(after.idle, 1u);
  // The abandoned call was never sent.
  EXPECT_EQ(RunSync(store->Get(Id("late00000000"), Deadline::Never())).error().code,
            ErrorCode::kNotFound);
}

// A statement already sent when its deadline passes: the caller hears at once, the connection
// stays lent until the server finishes, then returns to the pool.
TEST(PostgresMetaStore, AnAbandonedStatementKeepsItsConnectionUntilTheServerEndsIt) {
  testenv::TestDatabase db;
  PostgresOptions options;
  options.write.connections = 1;
  options.write.call_timeout = 30s;
  auto store = MigratedStore(db.url(), options);
  ASSERT_TRUE(RunSync(store->Insert(Row("warm00000000", 5000), Deadline::Never())).ok());
  testenv::Session blocker(db.url());
  blocker.Exec("BEGIN");
  blocker.Exec("LOCK TABLE pastes IN ACCESS EXCLUSIVE MODE");

  const TimePoint start = SystemClock::Instance().Now();
  Status s = RunSync(store->Insert(Row("gaveup000000", 5000), In(300ms)));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kDeadlineExceeded);
  EXPECT_LT(SecondsSince(start), 5.0);
  EXPECT_EQ(store->Stats(PostgresPurpose::kWrite).idle, 0u);

  blocker.Exec("COMMIT");
  for (int i = 0; i < 500 && store->Stats(PostgresPurpose::kWrite).idle != 1; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(store->Stats(PostgresPurpose::kWrite).idle, 1u);
  EXPECT_EQ(store->Stats(PostgresPurpose::kWrite).open, 1u);
  // It was sent, so it committed: a timed-out insert may have landed (never retried for that).
  EXPECT_TRUE(RunSync(store->Get(Id("gaveup000000"), Deadline::Never())).ok());
}

TEST(PostgresMetaStore, ConnectionsAreReusedAcrossCalls) {
  testenv::TestDatabase db;
  auto store = MigratedStore(db.url(), PostgresOptions{});
  ASSERT_TRUE(RunSync(store->Insert(Row("reuse0000000", 5000), Deadline::Never())).ok());
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(RunSync(store->Get(Id("reuse0000000"), Deadline::Never())).ok());
  }
  EXPECT_EQ(store->Stats(PostgresPurpose::kRead).open, 1u);
  EXPECT_EQ(store->Stats(PostgresPurpose::kRead).idle, 1u);
}

TEST(PostgresMetaStore, WarmConnectionsOpenBeforeAnyCall) {
  testenv::TestDatabase db;
  PostgresOptions options;
  options.read.warm = 2;
  options.cleanup.warm = 5;  // more than the pool's 2: capped
  auto store = MigratedStore(db.url(), options);
  for (int i = 0; i < 1000 && (store->Stats(PostgresPurpose::kRead).idle < 2 ||
                               store->Stats(PostgresPurpose::kCleanup).idle < 2);
       ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(store->Stats(PostgresPurpose::kRead).idle, 2u);
  EXPECT_EQ(store->Stats(PostgresPurpose::kCleanup).open, 2u);
  EXPECT_EQ(store->Stats(PostgresPurpose::kWrite).open, 0u);
  // A read now needs no connect, so even a tight deadline is met.
  auto got = RunSync(store->Get(Id("nothere00000"), In(2s)));
  EXPECT_EQ(got.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store->Stats(PostgresPurpose::kRead).open, 2u);
}

TEST(PostgresMetaStore, ResumesTheCallerOnItsOwnThread) {
  testenv::TestDatabase db;
  auto store = MigratedStore(db.url(), PostgresOptions{});
  const auto caller = std::this_thread::get_id();
  auto check = [&]() -> boost::asio::awaitable<bool> {
    auto get = store->Get(Id("nothere00000"), Deadline::Never());
    auto result = co_await std::move(get);
    co_return !result.ok() && std::this_thread::get_id() == caller;
  };
  EXPECT_TRUE(RunSync(check()));
}

TEST(PostgresMetaStore, NoServerIsARefusalReportedQuickly) {
  PostgresOptions options;
  options.url =
      "postgres://postgres@127.0.0.1:" + std::to_string(testenv::ClosedPort()) + "/sluice";
  auto store = MakePostgresMetaStore(options);
  const TimePoint start = SystemClock::Instance().Now();
  auto got = RunSync(store->Get(Id("nothere00000"), In(30s)));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(got.error().never_sent);
  EXPECT_EQ(got.error().reason, "connection_refused");
  EXPECT_LT(SecondsSince(start), 5.0);
  EXPECT_EQ(store->Stats(PostgresPurpose::kRead).open, 0u);
}

// With a standby named in the URL, no writable host is a failover under way: still a refusal (the
// breaker opens on it), but with its own reason, which the 503 carries (docs/scale-out.md).
TEST(PostgresMetaStore, NoWritableHostOfAMultiHostUrlIsAPrimaryFailover) {
  PostgresOptions options;
  options.url = "postgres://postgres@127.0.0.1:" + std::to_string(testenv::ClosedPort()) +
                ",127.0.0.1:" + std::to_string(testenv::ClosedPort()) +
                "/sluice?target_session_attrs=read-write";
  auto store = MakePostgresMetaStore(options);
  auto got = RunSync(store->Get(Id("nothere00000"), In(30s)));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(got.error().never_sent);
  EXPECT_EQ(got.error().reason, kPrimaryFailover);
}

TEST(PostgresFailoverUrl, AStandbyInTheUrlIsRecognised) {
  EXPECT_TRUE(pg::NamesAFailoverTarget("postgresql://a:1,b:2/sluice"));
  EXPECT_TRUE(pg::NamesAFailoverTarget("postgres://u@a/sluice?target_session_attrs=read-write"));
  EXPECT_TRUE(pg::NamesAFailoverTarget("host=a,b dbname=sluice"));
  EXPECT_FALSE(pg::NamesAFailoverTarget("postgres://u@a:5432/sluice"));
  EXPECT_FALSE(pg::NamesAFailoverTarget("postgres://u@a:5432/sluice?options=-c%20x=1,2"));
  EXPECT_FALSE(pg::NamesAFailoverTarget("host=a dbname=sluice"));
}

// An outage: calls fail fast as refusals (so the breaker opens and the service answers 503), and
// traffic resumes by itself when the server is back.
TEST(PostgresMetaStore, AnOutageIsUnavailableAndRecoveryNeedsNoRestart) {
  testenv::PrivateServer server;
  auto store = MigratedStore(server.url(), PostgresOptions{});
  ASSERT_TRUE(RunSync(store->Insert(Row("before000000", 5000), In(30s))).ok());
  ASSERT_TRUE(RunSync(store->Get(Id("before000000"), In(30s))).ok());

  server.Pause();
  for (int i = 0; i < 3; ++i) {
    const TimePoint start = SystemClock::Instance().Now();
    auto got = RunSync(store->Get(Id("before000000"), In(30s)));
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.error().code, ErrorCode::kUnavailable) << got.error().message;
    EXPECT_LT(SecondsSince(start), 5.0);
  }
  // Once the pooled connections are gone, every call is a refusal that provably never left.
  auto refused = RunSync(store->Insert(Row("during000000", 5000), In(30s)));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.error().never_sent);
  EXPECT_EQ(refused.error().reason, "connection_refused");

  server.Resume();
  auto back = RunSync(store->Get(Id("before000000"), In(30s)));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(RunSync(store->Insert(Row("after0000000", 5000), In(30s))).ok());
}

// The storage quota across processes (MetaStore::ReserveStorage): two store objects on one
// database stand for two sluice processes.

std::string ReservationRows(const std::string& url) {
  testenv::Session session(url);
  return session.Exec("SELECT count(*) FROM storage_reservations");
}

TEST(PostgresMetaStore, ReservationsFromTwoProcessesShareOneQuota) {
  testenv::TestDatabase db;
  auto a = MigratedStore(db.url(), PostgresOptions{});
  auto b = MigratedStore(db.url(), PostgresOptions{});
  constexpr int kCreates = 40;
  contract::ConcurrentReservations got = contract::ReserveConcurrently(
      kCreates, 10, 100, "twop", [&](int i) -> MetaStore* { return i % 2 ? a.get() : b.get(); });
  EXPECT_EQ(got.granted.size(), 10u);
  EXPECT_EQ(got.refused, kCreates - 10);
  EXPECT_EQ(got.failed, 0);
  // Each grant is one row, and each insert, by the process that reserved, ends it in its own
  // statement.
  EXPECT_EQ(ReservationRows(db.url()), "10");
  for (auto& [store, reservation] : got.granted) {
    ASSERT_TRUE(
        RunSync(store->Insert(Row(reservation.id()->view(), 5000), Deadline::Never())).ok());
    reservation.Spent();
  }
  EXPECT_EQ(ReservationRows(db.url()), "0");
  EXPECT_EQ(*RunSync(a->LiveBytes(Deadline::Never())), 50u);  // ten rows of 5 bytes
}

// What a crashed process leaves: reservations nobody gives back, which hold room until their
// expiry and not a second longer.
TEST(PostgresMetaStore, AReservationOfACrashedProcessCountsUntilItExpires) {
  testenv::TestDatabase db;
  {
    auto crashed = MigratedStore(db.url(), PostgresOptions{});
    auto held = RunSync(
        crashed->ReserveStorage(Hold("gone00000001", 60, 100, 100, 110), Deadline::Never()));
    ASSERT_TRUE(held.ok()) << held.error().message;
    held->Spent();  // forgotten without a word to the server, as by a process that died
  }
  EXPECT_EQ(ReservationRows(db.url()), "1");
  auto survivor = MigratedStore(db.url(), PostgresOptions{});
  auto early =
      RunSync(survivor->ReserveStorage(Hold("next00000001", 60, 100, 109, 200), Deadline::Never()));
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.error().code, ErrorCode::kInsufficientStorage);
  auto late =
      RunSync(survivor->ReserveStorage(Hold("next00000002", 60, 100, 110, 200), Deadline::Never()));
  ASSERT_TRUE(late.ok()) << late.error().message;
  EXPECT_EQ(ReservationRows(db.url()), "1");  // the expired one went with the decision
}

// A grant that arrives after its caller gave up is given back by the store, not left to expire.
TEST(PostgresMetaStore, AReservationGrantedAfterItsCallerGaveUpIsGivenBack) {
  testenv::TestDatabase db;
  PostgresOptions options;
  options.write.call_timeout = 30s;
  auto store = MigratedStore(db.url(), options);
  ASSERT_TRUE(RunSync(store->Insert(Row("warm00000000", 5000), Deadline::Never())).ok());
  testenv::Session blocker(db.url());
  blocker.Exec("SELECT pg_advisory_lock(32488873856820561)");  // the reservations' lock
  auto abandoned = RunSync(store->ReserveStorage(Hold("slow00000001", 10, 100), In(300ms)));
  ASSERT_FALSE(abandoned.ok());
  EXPECT_EQ(abandoned.error().code, ErrorCode::kDeadlineExceeded);
  blocker.Exec("SELECT pg_advisory_unlock(32488873856820561)");
  std::string rows = "?";
  for (int i = 0; i < 500; ++i) {
    rows = ReservationRows(db.url());
    if (rows == "0") break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(rows, "0");
}

// The leases of the background jobs (MetaStore::HoldLease): two store objects on one database
// stand for two sluice processes; the lease is one, whoever asks and however many at once.
TEST(PostgresMetaStore, OneProcessHoldsAJobsLeaseUntilItLapsesOnTheServersClock) {
  testenv::TestDatabase db;
  auto a = MigratedStore(db.url(), PostgresOptions{});
  auto b = MigratedStore(db.url(), PostgresOptions{});
  constexpr int kAskers = 16;
  std::vector<std::future<Result<bool>>> asked;
  for (int i = 0; i < kAskers; ++i) {
    asked.push_back(std::async(std::launch::async, [&, i] {
      MetaStore& store = i % 2 ? *a : *b;
      return RunSync(store.HoldLease("expiry_sweep", "process-" + std::to_string(i), 0, 30,
                                     Deadline::Never()));
    }));
  }
  std::vector<int> holders;
  for (int i = 0; i < kAskers; ++i) {
    Result<bool> got = asked[i].get();
    ASSERT_TRUE(got.ok()) << got.error().message;
    if (*got) holders.push_back(i);
  }
  ASSERT_EQ(holders.size(), 1u) << "two processes hold one lease";
  const std::string holder = "process-" + std::to_string(holders[0]);
  const std::string other = "process-" + std::to_string((holders[0] + 1) % kAskers);
  // `now` is the caller's and ignored: the lease runs 30 s on the server's clock.
  testenv::Session session(db.url());
  const int64_t left = std::stoll(
      session.Exec("SELECT until - extract(epoch FROM clock_timestamp())::bigint FROM leases"));
  EXPECT_GE(left, 25);
  EXPECT_LE(left, 30);
  EXPECT_TRUE(*RunSync(a->HoldLease("expiry_sweep", holder, 0, 30, Deadline::Never())));
  EXPECT_FALSE(*RunSync(b->HoldLease("expiry_sweep", other, 1LL << 40, 30, Deadline::Never())));
  // Another job's lease is its own.
  EXPECT_TRUE(*RunSync(b->HoldLease("orphan_reaper", other, 0, 30, Deadline::Never())));
  // The holder died 31 s ago: its lease has run out, the other takes it, and the first is refused.
  session.Exec("UPDATE leases SET until = until - 31 WHERE name = 'expiry_sweep'");
  EXPECT_TRUE(*RunSync(b->HoldLease("expiry_sweep", other, 0, 30, Deadline::Never())));
  EXPECT_FALSE(*RunSync(a->HoldLease("expiry_sweep", holder, 0, 30, Deadline::Never())));
}

}  // namespace
}  // namespace sluice::store
