// One suite per store interface, run unchanged against every backend: the in-memory reference and
// the embedded SQLite and filesystem stores (on a temporary folder, with real fsyncs).
#include "store_contract.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../support/run_sync.h"
#include "sluice/store/backends.h"

namespace sluice::store {
namespace {

using admission::Deadline;
// The suite (and its gtest registration state) lives in contract::.
using namespace contract;  // NOLINT(google-build-using-namespace)
using testing::RunSync;
namespace fs = std::filesystem;

struct MemoryBackend : Backend {
  std::unique_ptr<MetaStore> meta_ = MakeMemoryMetaStore();
  std::unique_ptr<BlobStore> blobs_ = MakeMemoryBlobStore();
  MetaStore& meta() override { return *meta_; }
  BlobStore& blobs() override { return *blobs_; }
  void Reopen() override {}
  bool persistent() const override { return false; }
};

struct EmbeddedBackend : Backend {
  TempDir dir;
  boost::asio::thread_pool read_pool{4};
  boost::asio::thread_pool cleanup_pool{2};
  std::unique_ptr<MetaStore> meta_;
  std::unique_ptr<BlobStore> blobs_;
  EmbeddedBackend() { Reopen(); }
  MetaStore& meta() override { return *meta_; }
  BlobStore& blobs() override { return *blobs_; }
  void Reopen() override {
    meta_.reset();
    blobs_.reset();
    const BlockingPools pools{&read_pool, &cleanup_pool};
    meta_ = MakeSqliteMetaStore(dir.path() / "meta.db", pools);
    blobs_ = MakeFsBlobStore(dir.path() / "blobs", pools);
  }
  bool persistent() const override { return true; }
};

// The embedded backend as src/app/backends.cc composes it: bodies up to kInlineMax bytes are rows
// of bodies.db, larger ones files. At 3 bytes the suite's bodies land in both tiers ("x" and "b" in
// the database, "kept" and the concurrent writers' in files).
template <size_t kInlineMax>
struct TieredBackend : Backend {
  TempDir dir;
  boost::asio::thread_pool read_pool{4};
  boost::asio::thread_pool cleanup_pool{2};
  std::unique_ptr<MetaStore> meta_;
  std::unique_ptr<BlobStore> blobs_;
  TieredBackend() { Reopen(); }
  MetaStore& meta() override { return *meta_; }
  BlobStore& blobs() override { return *blobs_; }
  void Reopen() override {
    meta_.reset();
    blobs_.reset();
    const BlockingPools pools{&read_pool, &cleanup_pool};
    meta_ = MakeSqliteMetaStore(dir.path() / "meta.db", pools);
    blobs_ = MakeTieredBlobStore(MakeSqliteBlobStore(dir.path() / "bodies.db", pools),
                                 MakeFsBlobStore(dir.path() / "blobs", pools), kInlineMax);
  }
  bool persistent() const override { return true; }
};

// The embedded backend as src/app/backends.cc composes it with the rows in SQLite: bodies up to
// kInlineMax bytes beside their rows in meta.db (written there by the suite's Puts, through the
// metadata store's writer), larger ones files.
template <size_t kInlineMax>
struct ColocatedBackend : Backend {
  TempDir dir;
  boost::asio::thread_pool read_pool{4};
  boost::asio::thread_pool cleanup_pool{2};
  std::unique_ptr<MetaStore> meta_;
  std::unique_ptr<BlobStore> blobs_;
  ColocatedBackend() { Reopen(); }
  MetaStore& meta() override { return *meta_; }
  BlobStore& blobs() override { return *blobs_; }
  void Reopen() override {
    blobs_.reset();
    meta_.reset();
    const BlockingPools pools{&read_pool, &cleanup_pool};
    meta_ = MakeSqliteMetaStore(dir.path() / "meta.db", pools, kInlineMax);
    blobs_ = MakeTieredBlobStore(MakeSqliteMetaBodies(*meta_),
                                 MakeFsBlobStore(dir.path() / "blobs", pools), kInlineMax);
  }
  bool persistent() const override { return true; }
};

using Backends = ::testing::Types<MemoryBackend, EmbeddedBackend, TieredBackend<65536>,
                                  TieredBackend<3>, ColocatedBackend<65536>, ColocatedBackend<3>>;
class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, MemoryBackend>) return "memory";
    if (std::is_same_v<T, EmbeddedBackend>) return "sqlite_and_files";
    if (std::is_same_v<T, TieredBackend<65536>>) return "sqlite_bodies_up_to_64k";
    if (std::is_same_v<T, TieredBackend<3>>) return "sqlite_bodies_up_to_3_bytes";
    if (std::is_same_v<T, ColocatedBackend<65536>>) return "bodies_with_rows_up_to_64k";
    return "bodies_with_rows_up_to_3_bytes";
  }
};
INSTANTIATE_TYPED_TEST_SUITE_P(Embedded, StoreContract, Backends, BackendNames);

// A create on the embedded store: the body and the row in one transaction (InsertWithBody).
class ColocatedInsert : public ::testing::Test {
 protected:
  ColocatedBackend<16> backend_;
  MetaStore& meta() { return backend_.meta(); }
  BlobStore& blobs() { return backend_.blobs(); }
  Status InsertWithBody(std::string_view id, std::string body) {
    PasteMeta row = Row(id, 1000);
    row.size_bytes = body.size();
    return RunSync(meta().InsertWithBody(row, Body(std::move(body)), Deadline::Never()));
  }
};

TEST_F(ColocatedInsert, WritesTheRowAndTheBodyTogether) {
  EXPECT_EQ(meta().colocated_body_limit(), 16u);
  ASSERT_TRUE(InsertWithBody("AbCdEfGh1234", "with its row").ok());
  auto row = RunSync(meta().Get(Id("AbCdEfGh1234"), Deadline::Never()));
  ASSERT_TRUE(row.ok()) << row.error().message;
  EXPECT_EQ(row->size_bytes, 12u);
  EXPECT_EQ(*RunSync(blobs().Get(Id("AbCdEfGh1234"), Deadline::Never())), "with its row");
  // Not listed (the orphan reaper's view): a body in its row goes with the row, so it is never
  // an orphan. Deleted like any other.
  auto listed = RunSync(blobs().List("", 10, Deadline::Never()));
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  ASSERT_TRUE(RunSync(blobs().Delete(Id("AbCdEfGh1234"), Deadline::Never())).ok());
  EXPECT_EQ(RunSync(blobs().Get(Id("AbCdEfGh1234"), Deadline::Never())).error().code,
            ErrorCode::kNotFound);
}

// A row finds its body by number (src/store/sqlite/sqlite_meta_store.h, migration 8). A body
// deleted before its row is purged must never be replaced, under that number, by a later paste's:
// the tombstone would then lead to another paste's text.
TEST_F(ColocatedInsert, ARowWhoseBodyWasDeletedNeverFindsAnotherPastes) {
  ASSERT_TRUE(InsertWithBody("AbCdEfGh1234", "first").ok());
  ASSERT_TRUE(RunSync(meta().MarkDeleted(Id("AbCdEfGh1234"), 1000, Deadline::Never())).ok());
  ASSERT_TRUE(RunSync(blobs().Delete(Id("AbCdEfGh1234"), Deadline::Never())).ok());
  ASSERT_TRUE(InsertWithBody("ZyXwVuTs9876", "second").ok());
  backend_.Reopen();  // the next number must not come from what is left in the table either
  ASSERT_TRUE(InsertWithBody("QwErTyUi5555", "third").ok());
  EXPECT_EQ(RunSync(blobs().Get(Id("AbCdEfGh1234"), Deadline::Never())).error().code,
            ErrorCode::kNotFound);
  EXPECT_EQ(*RunSync(blobs().Get(Id("ZyXwVuTs9876"), Deadline::Never())), "second");
  EXPECT_EQ(*RunSync(blobs().Get(Id("QwErTyUi5555"), Deadline::Never())), "third");
  // Deleting again (the outbox retries) touches nobody else's body.
  ASSERT_TRUE(RunSync(blobs().Delete(Id("AbCdEfGh1234"), Deadline::Never())).ok());
  EXPECT_EQ(*RunSync(blobs().Get(Id("ZyXwVuTs9876"), Deadline::Never())), "second");
}

TEST_F(ColocatedInsert, APurgedRowTakesItsBodyWithIt) {
  ASSERT_TRUE(InsertWithBody("AbCdEfGh1234", "expired").ok());
  ASSERT_TRUE(InsertWithBody("ZyXwVuTs9876", "kept").ok());
  ASSERT_TRUE(RunSync(meta().Purge({Id("AbCdEfGh1234")}, Deadline::Never())).ok());
  EXPECT_EQ(RunSync(blobs().Get(Id("AbCdEfGh1234"), Deadline::Never())).error().code,
            ErrorCode::kNotFound);
  EXPECT_EQ(*RunSync(blobs().Get(Id("ZyXwVuTs9876"), Deadline::Never())), "kept");
}

// A body written apart from its row (Put, then Insert: the path of store decorators that do not
// pass InsertWithBody on) is found by its id, listed in id order and page by page (it could be an
// orphan, the bodies in rows cannot), and deleted like them.
TEST_F(ColocatedInsert, BodiesWrittenApartAreReadListedAndDeletedBesideTheOthers) {
  ASSERT_TRUE(InsertWithBody("bbbb00000001", "with row").ok());
  ASSERT_TRUE(InsertWithBody("dddd00000001", "with row").ok());
  for (const char* id : {"aaaa00000001", "cccc00000001"}) {
    ASSERT_TRUE(RunSync(blobs().Put(Id(id), Body("apart"), Deadline::Never())).ok());
    ASSERT_TRUE(RunSync(meta().Insert(Row(id, 1000), Deadline::Never())).ok());
  }
  EXPECT_EQ(*RunSync(blobs().Get(Id("cccc00000001"), Deadline::Never())), "apart");
  std::vector<std::string> listed;
  std::string cursor;
  for (int page = 0; page < 10; ++page) {
    auto got = RunSync(blobs().List(cursor, 3, Deadline::Never()));
    ASSERT_TRUE(got.ok()) << got.error().message;
    if (got->empty()) break;
    for (const auto& info : *got) listed.push_back(info.id.str());
    cursor = got->back().id.str();
  }
  EXPECT_EQ(listed, (std::vector<std::string>{"aaaa00000001", "cccc00000001"}));
  ASSERT_TRUE(RunSync(blobs().Delete(Id("cccc00000001"), Deadline::Never())).ok());
  ASSERT_TRUE(RunSync(blobs().Delete(Id("dddd00000001"), Deadline::Never())).ok());
  EXPECT_EQ(RunSync(blobs().List("", 10, Deadline::Never()))->size(), 1u);
  EXPECT_EQ(RunSync(blobs().Get(Id("dddd00000001"), Deadline::Never())).error().code,
            ErrorCode::kNotFound);
  EXPECT_EQ(*RunSync(blobs().Get(Id("bbbb00000001"), Deadline::Never())), "with row");
}

TEST_F(ColocatedInsert, SurvivesReopening) {
  ASSERT_TRUE(InsertWithBody("AbCdEfGh1234", "durable").ok());
  backend_.Reopen();
  EXPECT_TRUE(RunSync(meta().Get(Id("AbCdEfGh1234"), Deadline::Never())).ok());
  EXPECT_EQ(*RunSync(blobs().Get(Id("AbCdEfGh1234"), Deadline::Never())), "durable");
}

TEST_F(ColocatedInsert, ACollidingIdWritesNeitherTheRowNorTheBody) {
  ASSERT_TRUE(RunSync(meta().Insert(Row("AbCdEfGh1234", 1000), Deadline::Never())).ok());
  const Status collided = InsertWithBody("AbCdEfGh1234", "second");
  ASSERT_FALSE(collided.ok());
  EXPECT_EQ(collided.error().reason, "id_collision");
  EXPECT_EQ(RunSync(blobs().Get(Id("AbCdEfGh1234"), Deadline::Never())).error().code,
            ErrorCode::kNotFound);
  EXPECT_EQ(RunSync(meta().Get(Id("AbCdEfGh1234"), Deadline::Never()))->size_bytes, 5u);
}

TEST_F(ColocatedInsert, ABodyOverTheLimitIsRefusedAndNothingIsWritten) {
  const Status refused = InsertWithBody("AbCdEfGh1234", std::string(17, 'x'));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInternal);
  EXPECT_EQ(RunSync(meta().Get(Id("AbCdEfGh1234"), Deadline::Never())).error().code,
            ErrorCode::kNotFound);
}

TEST_F(ColocatedInsert, AnInsertAbandonedWhileQueuedWritesNothing) {
  PasteMeta row = Row("AbCdEfGh1234", 1000);
  const Status late = RunSync(meta().InsertWithBody(
      row, Body("late"), Deadline::At(SystemClock::Instance().Now() - std::chrono::seconds(1))));
  ASSERT_FALSE(late.ok());
  EXPECT_FALSE(InsertOutcomeUnknown(late.error()));
  EXPECT_EQ(RunSync(blobs().Get(Id("AbCdEfGh1234"), Deadline::Never())).error().code,
            ErrorCode::kNotFound);
}

TEST(MetaStoresWithoutBodies, RefuseInsertWithBody) {
  auto memory = MakeMemoryMetaStore();
  EXPECT_EQ(memory->colocated_body_limit(), 0u);
  const Status refused =
      RunSync(memory->InsertWithBody(Row("AbCdEfGh1234", 1000), Body("x"), Deadline::Never()));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().reason, "no_colocated_bodies");
  EXPECT_EQ(RunSync(memory->Get(Id("AbCdEfGh1234"), Deadline::Never())).error().code,
            ErrorCode::kNotFound);
  EXPECT_THROW(MakeSqliteMetaBodies(*memory), std::invalid_argument);
}

TEST(FsBlobStore, DropsHalfWrittenTempFilesOnOpen) {
  TempDir dir;
  fs::create_directories(dir.path() / "blobs" / ".tmp");
  { std::ofstream(dir.path() / "blobs" / ".tmp" / "half0000000.1") << "partial"; }
  boost::asio::thread_pool pool(1);
  auto blobs = MakeFsBlobStore(dir.path() / "blobs", BlockingPools{&pool, &pool});
  EXPECT_TRUE(fs::is_empty(dir.path() / "blobs" / ".tmp"));
}

TEST(FsBlobStore, StoresEachBodyUnderItsValidatedIdOnly) {
  TempDir dir;
  boost::asio::thread_pool pool(1);
  auto blobs = MakeFsBlobStore(dir.path() / "blobs", BlockingPools{&pool, &pool});
  ASSERT_TRUE(RunSync(blobs->Put(Id("AbCdEfGh1234"), Body("x"), Deadline::Never())).ok());
  EXPECT_TRUE(fs::exists(dir.path() / "blobs" / "Ab" / "AbCdEfGh1234"));
}

// One batch of large bodies from concurrent writers, into a shard folder made by an earlier run and
// into folders the batch creates (several bodies each): every acknowledged body reads back byte for
// byte after reopening, and no temp file is left. The flushes are per file and per folder
// (fdatasync, fsync), so a body or folder the batch forgot would be missing or short here.
TEST(FsBlobStore, BatchOfLargeBodiesAcrossNewShardsReadsBackAfterReopening) {
  TempDir dir;
  boost::asio::thread_pool pool(2);
  const BlockingPools pools{&pool, &pool};
  const fs::path root = dir.path() / "blobs";
  {
    auto blobs = MakeFsBlobStore(root, pools);
    ASSERT_TRUE(RunSync(blobs->Put(Id("Ab0000000000"), Body("earlier"), Deadline::Never())).ok());
  }
  std::mt19937 rng(20261201);
  std::vector<std::pair<std::string, std::string>> written;  // id, body
  for (const char* shard : {"Ab", "Cd", "Ef", "Gh", "Ij"}) {
    for (int i = 1; i <= 5; ++i) {
      std::string body(65'537 + static_cast<size_t>(rng() % 150'000), '\0');
      for (char& c : body) c = static_cast<char>(rng());  // NULs and bytes of every value
      written.emplace_back(fmt::format("{}{:010d}", shard, i), std::move(body));
    }
  }
  {
    auto blobs = MakeFsBlobStore(root, pools);
    boost::asio::io_context io;
    std::atomic<int> ok{0};
    for (const auto& [id, body] : written) {
      boost::asio::co_spawn(
          io,
          [&, id = id, body = body]() -> boost::asio::awaitable<void> {
            // Built outside the co_await: g++ 12 double-frees non-trivial temporaries inside it.
            auto put_op = blobs->Put(Id(id), Body(body), Deadline::Never());
            Status put = co_await std::move(put_op);
            EXPECT_TRUE(put.ok()) << id << ": " << put.error().message;
            if (put.ok()) ++ok;
          },
          boost::asio::detached);
    }
    io.run();
    ASSERT_EQ(ok.load(), static_cast<int>(written.size()));
    EXPECT_TRUE(fs::is_empty(root / ".tmp"));
  }
  auto blobs = MakeFsBlobStore(root, pools);
  EXPECT_EQ(*RunSync(blobs->Get(Id("Ab0000000000"), Deadline::Never())), "earlier");
  for (const auto& [id, body] : written) {
    auto got = RunSync(blobs->Get(Id(id), Deadline::Never()));
    ASSERT_TRUE(got.ok()) << id << ": " << got.error().message;
    ASSERT_EQ(got->size(), body.size()) << id;
    EXPECT_TRUE(*got == body) << id << " differs";
    EXPECT_TRUE(fs::exists(root / id.substr(0, 2) / id));
  }
  EXPECT_EQ(RunSync(blobs->List("", 100, Deadline::Never()))->size(), written.size() + 1);
}

// Bodies written before the tiers (files) or under another limit are found, deleted and listed
// wherever they are; the listing merges both tiers in id order, page by page.
TEST(TieredBlobStore, ReadsListsAndDeletesAcrossBothTiers) {
  TempDir dir;
  boost::asio::thread_pool pool(2);
  const BlockingPools pools{&pool, &pool};
  {
    auto files = MakeFsBlobStore(dir.path() / "blobs", pools);
    for (const char* id : {"aaaa00000001", "cccc00000001", "eeee00000001"}) {
      ASSERT_TRUE(RunSync(files->Put(Id(id), Body("from before"), Deadline::Never())).ok());
    }
  }
  auto blobs = MakeTieredBlobStore(MakeSqliteBlobStore(dir.path() / "bodies.db", pools),
                                   MakeFsBlobStore(dir.path() / "blobs", pools), 4);
  for (const char* id : {"bbbb00000001", "dddd00000001"}) {
    ASSERT_TRUE(RunSync(blobs->Put(Id(id), Body("new"), Deadline::Never())).ok());
  }
  ASSERT_TRUE(RunSync(blobs->Put(Id("ffff00000001"), Body("too big"), Deadline::Never())).ok());
  EXPECT_TRUE(fs::exists(dir.path() / "blobs" / "ff" / "ffff00000001"));
  EXPECT_FALSE(fs::exists(dir.path() / "blobs" / "bb" / "bbbb00000001"));
  EXPECT_EQ(*RunSync(blobs->Get(Id("cccc00000001"), Deadline::Never())), "from before");
  EXPECT_EQ(*RunSync(blobs->Get(Id("dddd00000001"), Deadline::Never())), "new");

  std::vector<std::string> listed;
  std::string cursor;
  for (int page = 0; page < 10; ++page) {
    auto got = RunSync(blobs->List(cursor, 4, Deadline::Never()));
    ASSERT_TRUE(got.ok()) << got.error().message;
    if (got->empty()) break;
    for (const auto& info : *got) {
      listed.push_back(info.id.str());
      EXPECT_TRUE(info.modified_at.has_value()) << info.id.str();
    }
    cursor = got->back().id.str();
  }
  EXPECT_EQ(listed, (std::vector<std::string>{"aaaa00000001", "bbbb00000001", "cccc00000001",
                                              "dddd00000001", "eeee00000001", "ffff00000001"}));

  for (const char* id : {"bbbb00000001", "cccc00000001"}) {
    ASSERT_TRUE(RunSync(blobs->Delete(Id(id), Deadline::Never())).ok());
    EXPECT_EQ(RunSync(blobs->Get(Id(id), Deadline::Never())).error().code, ErrorCode::kNotFound);
  }
  EXPECT_FALSE(fs::exists(dir.path() / "blobs" / "cc" / "cccc00000001"));
  EXPECT_EQ(RunSync(blobs->List("", 100, Deadline::Never()))->size(), 4u);
}

// A batch is one transaction: a few thousand bodies from many writers all read back after
// reopening.
TEST(SqliteBlobStore, BodiesSurviveReopeningAfterACheckpoint) {
  TempDir dir;
  boost::asio::thread_pool pool(2);
  const BlockingPools pools{&pool, &pool};
  const std::string big(9000, 'z');  // 3 pages each: past the checkpoint threshold quickly
  {
    auto blobs = MakeSqliteBlobStore(dir.path() / "bodies.db", pools);
    boost::asio::io_context io;
    int done = 0;
    for (int i = 0; i < 2000; ++i) {
      boost::asio::co_spawn(
          io,
          [&, i]() -> boost::asio::awaitable<void> {
            Status st = co_await blobs->Put(Id(fmt::format("ckpt{:08d}", i)),
                                            Body(big + std::to_string(i)), Deadline::Never());
            EXPECT_TRUE(st.ok());
            ++done;
          },
          boost::asio::detached);
    }
    io.run();
    ASSERT_EQ(done, 2000);
  }
  auto blobs = MakeSqliteBlobStore(dir.path() / "bodies.db", pools);
  for (int i : {0, 999, 1999}) {
    auto got = RunSync(blobs->Get(Id(fmt::format("ckpt{:08d}", i)), Deadline::Never()));
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(*got, big + std::to_string(i));
  }
  EXPECT_EQ(RunSync(blobs->List("", 5000, Deadline::Never()))->size(), 2000u);
}

TEST(SqliteMetaStore, RefusesADatabaseFromANewerSchema) {
  TempDir dir;
  boost::asio::thread_pool pool(1);
  { auto meta = MakeSqliteMetaStore(dir.path() / "meta.db", BlockingPools{&pool, &pool}); }
  {
    auto meta = MakeSqliteMetaStore(dir.path() / "meta.db", BlockingPools{&pool, &pool});
  }  // opening twice is safe: migrations apply once
  // Stamp a future version by hand, as a newer binary would.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path() / "meta.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "INSERT INTO schema_version VALUES (999)", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  EXPECT_THROW(MakeSqliteMetaStore(dir.path() / "meta.db", BlockingPools{&pool, &pool}),
               std::runtime_error);
}

// A database written by a binary from before body checksums (schema version 1, as
// src/store/sqlite shipped it), with one paste in it.
void WriteVersionOneDatabase(const fs::path& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const char* schema = R"sql(
    CREATE TABLE schema_version (version INTEGER NOT NULL);
    CREATE TABLE pastes (
      id TEXT PRIMARY KEY,
      created_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      size_bytes INTEGER NOT NULL,
      token_hash BLOB NOT NULL,
      deleted INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    CREATE INDEX pastes_by_expiry ON pastes (expires_at);
    CREATE TABLE outbox (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      paste_id TEXT NOT NULL,
      kind TEXT NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0,
      enqueued_at INTEGER NOT NULL,
      next_attempt_at INTEGER NOT NULL
    );
    CREATE INDEX outbox_by_due ON outbox (next_attempt_at);
    INSERT INTO schema_version VALUES (1);
    INSERT INTO pastes VALUES ('old000000001', 100, 5000, 5, zeroblob(32), 0);
  )sql";
  char* error = nullptr;
  ASSERT_EQ(sqlite3_exec(db, schema, nullptr, nullptr, &error), SQLITE_OK) << error;
  sqlite3_close(db);
}

TEST(SqliteMetaStore, MigratesADatabaseFromBeforeChecksumsKeepingItsRows) {
  TempDir dir;
  const fs::path path = dir.path() / "meta.db";
  WriteVersionOneDatabase(path);
  boost::asio::thread_pool pool(1);
  for (int open = 0; open < 2; ++open) {  // migrating twice is safe
    auto meta = MakeSqliteMetaStore(path, BlockingPools{&pool, &pool});
    auto old = RunSync(meta->Get(Id("old000000001"), Deadline::Never()));
    ASSERT_TRUE(old.ok()) << old.error().message;
    EXPECT_EQ(old->size_bytes, 5u);              // still size-checked
    EXPECT_FALSE(old->body_sha256.has_value());  // served without a checksum, not a wrong one
    EXPECT_FALSE(old->burn);
    // The live bytes start from the rows already there (5), plus the one inserted since (5).
    EXPECT_EQ(*RunSync(meta->LiveBytes(Deadline::Never())), open == 0 ? 5u : 10u);
    if (open == 0) {
      ASSERT_TRUE(RunSync(meta->Insert(Row("new000000001", 5000), Deadline::Never())).ok());
    }
    EXPECT_EQ(RunSync(meta->Get(Id("new000000001"), Deadline::Never()))->body_sha256,
              Row("new000000001", 5000).body_sha256);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT MAX(version), COUNT(*) FROM schema_version", -1, &stmt,
                               nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  // Every step up to the newest (more than the two this test's database predates), each stamped
  // once: later migrations append to the list without touching this test.
  EXPECT_GT(sqlite3_column_int(stmt, 0), 2);
  EXPECT_EQ(sqlite3_column_int(stmt, 1), sqlite3_column_int(stmt, 0));
  sqlite3_finalize(stmt);
  // Migration 21: a rowid table in creation order, the old row first though its id sorts after
  // the new one's (a table keyed by the id has no rowid, and this statement does not prepare).
  ASSERT_EQ(sqlite3_prepare_v2(
                db, "SELECT group_concat(id, ' ') FROM (SELECT id FROM pastes ORDER BY rowid)", -1,
                &stmt, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))),
            "old000000001 new000000001");
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

// The pastes in creation order (migration 21, src/store/sqlite/sqlite_meta_schema.cc): rows
// inserted under random ids are stored in the order they came, each found again by its id.
TEST(SqliteMetaStore, StoresRowsInTheOrderTheyCameUnderRandomIds) {
  TempDir dir;
  const fs::path path = dir.path() / "meta.db";
  boost::asio::thread_pool pool(1);
  std::vector<std::string> ids;
  {
    auto meta = MakeSqliteMetaStore(path, BlockingPools{&pool, &pool});
    std::mt19937 random(48);
    const std::string_view base62 =
        "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    for (int i = 0; i < 200; ++i) {
      std::string id(12, '0');
      for (char& c : id) c = base62[random() % base62.size()];
      ASSERT_TRUE(RunSync(meta->Insert(Row(id, 5000 + i), Deadline::Never())).ok());
      ids.push_back(id);
    }
    for (const std::string& id : ids) {
      auto row = RunSync(meta->Get(Id(id), Deadline::Never()));
      ASSERT_TRUE(row.ok()) << id;
      EXPECT_EQ(row->id.view(), id);
    }
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT id FROM pastes ORDER BY rowid", -1, &stmt, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  std::vector<std::string> stored;
  while (sqlite3_step(stmt) == SQLITE_ROW)
    stored.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  EXPECT_EQ(stored, ids);
}

}  // namespace
}  // namespace sluice::store

namespace sluice::store {
namespace {

// The embedded statement timeout: work whose caller already gave up never runs.
TEST(EmbeddedStores, WorkAbandonedBeforeItRunsIsNotDone) {
  TempDir dir;
  boost::asio::thread_pool pool(2);
  const BlockingPools pools{&pool, &pool};
  auto meta = MakeSqliteMetaStore(dir.path() / "meta.db", pools);
  auto blobs = MakeFsBlobStore(dir.path() / "blobs", pools);
  const Deadline past = Deadline::At(SystemClock::Instance().Now() - std::chrono::seconds(1));
  Status insert = RunSync(meta->Insert(Row("late00000000", 5000), past));
  ASSERT_FALSE(insert.ok());
  EXPECT_EQ(insert.error().code, ErrorCode::kDeadlineExceeded);
  EXPECT_EQ(RunSync(meta->Get(Id("late00000000"), Deadline::Never())).error().code,
            ErrorCode::kNotFound);
  Status put = RunSync(blobs->Put(Id("late00000000"), Body("x"), past));
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, ErrorCode::kDeadlineExceeded);
  EXPECT_FALSE(fs::exists(dir.path() / "blobs" / "la" / "late00000000"));
  auto inline_blobs = MakeSqliteBlobStore(dir.path() / "bodies.db", pools);
  put = RunSync(inline_blobs->Put(Id("late00000000"), Body("x"), past));
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, ErrorCode::kDeadlineExceeded);
  EXPECT_EQ(RunSync(inline_blobs->Get(Id("late00000000"), Deadline::Never())).error().code,
            ErrorCode::kNotFound);
}

}  // namespace
}  // namespace sluice::store
