// The durable connections' VFS (src/store/sqlite/wal_write_gathering.h), against the real SQLite:
// that it gathers a transaction's WAL writes into few calls, that what it gathers is in the file
// before a commit returns (a process killed right after a commit loses nothing), that
// transactions of every shape (one row, more than a write's worth, larger than the page cache so
// that SQLite spills and rewrites frames) read back the same from other connections, that a write
// which fails still fails its commit, and that connections on many threads at once (this binary
// also runs under ThreadSanitizer: Makefile, check-tsan) see every commit whole.
#include "wal_write_gathering.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace sluice::store::sqlite {
namespace {

namespace fs = std::filesystem;

struct Closer {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
using Connection = std::unique_ptr<sqlite3, Closer>;

// As the store opens its connections (sqlite_db.cc, OpenDurable): WAL, a sync per commit.
Connection Open(const fs::path& path, const char* vfs) {
  sqlite3* raw = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &raw, flags, vfs), SQLITE_OK);
  Connection db(raw);
  sqlite3_busy_timeout(raw, 5000);
  EXPECT_EQ(sqlite3_exec(raw, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  return db;
}

void Exec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  ASSERT_EQ(rc, SQLITE_OK) << sql << ": " << (error ? error : "");
}

int64_t Scalar(sqlite3* db, const char* sql) {
  sqlite3_stmt* s = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &s, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  int64_t value = -1;
  if (sqlite3_step(s) == SQLITE_ROW) value = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  return value;
}

std::string Body(int64_t n, size_t size) {
  std::mt19937_64 rng(static_cast<uint64_t>(n));
  std::string out(size, '\0');
  for (auto& c : out) c = static_cast<char>('a' + rng() % 26);
  return out;
}

// Inserts rows first..first+count-1 in one transaction, each with Body(n, size).
void InsertRows(sqlite3* db, int64_t first, int count, size_t size) {
  Exec(db, "BEGIN IMMEDIATE");
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "INSERT INTO t (n, body) VALUES (?, ?)", -1, &s, nullptr),
            SQLITE_OK);
  for (int64_t n = first; n < first + count; ++n) {
    const std::string body = Body(n, size);
    sqlite3_bind_int64(s, 1, n);
    sqlite3_bind_blob(s, 2, body.data(), static_cast<int>(body.size()), SQLITE_TRANSIENT);
    ASSERT_EQ(sqlite3_step(s), SQLITE_DONE) << sqlite3_errmsg(db);
    sqlite3_reset(s);
  }
  sqlite3_finalize(s);
  Exec(db, "COMMIT");
}

// Rows whose body is not Body(n, size of the stored body), counted on `db`.
int64_t WrongRows(sqlite3* db) {
  sqlite3_stmt* s = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT n, body FROM t", -1, &s, nullptr), SQLITE_OK);
  int64_t wrong = 0;
  while (sqlite3_step(s) == SQLITE_ROW) {
    const auto* bytes = static_cast<const char*>(sqlite3_column_blob(s, 1));
    const std::string body(bytes, static_cast<size_t>(sqlite3_column_bytes(s, 1)));
    if (body != Body(sqlite3_column_int64(s, 0), body.size())) ++wrong;
  }
  sqlite3_finalize(s);
  return wrong;
}

// write(2)-class calls this process has made (the kernel's count: /proc/self/io, syscw).
int64_t WriteCalls() {
  std::ifstream io("/proc/self/io");
  std::string key;
  int64_t value = 0;
  while (io >> key >> value) {
    if (key == "syscw:") return value;
  }
  return -1;
}

class WalWriteGathering : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sluice-vfs-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path Db(const char* name = "t.db") const { return dir_ / name; }

  static void CreateTable(sqlite3* db) {
    Exec(db, "CREATE TABLE IF NOT EXISTS t (n INTEGER PRIMARY KEY, body BLOB NOT NULL)");
  }

  // The write calls one transaction of 100 rows of 3 KB (about 100 WAL frames) costs.
  static int64_t WriteCallsOfOneTransaction(const fs::path& path, const char* vfs) {
    auto db = Open(path, vfs);
    CreateTable(db.get());
    InsertRows(db.get(), 0, 1, 10);  // the WAL's header and first frames are written
    const int64_t before = WriteCalls();
    InsertRows(db.get(), 1, 100, 3000);
    return WriteCalls() - before;
  }

  fs::path dir_;
};

TEST_F(WalWriteGathering, ATransactionsFramesAreWrittenInAFewCalls) {
  const int64_t platform = WriteCallsOfOneTransaction(Db("platform.db"), nullptr);
  const int64_t gathered = WriteCallsOfOneTransaction(Db("gathered.db"), WalWriteGatheringVfs());
  // SQLite writes a frame's header and page apart: about 200 calls. Gathered, runs of up to
  // 128 KiB: 4 or 5.
  EXPECT_GE(platform, 150);
  EXPECT_LE(gathered, 12);
}

TEST_F(WalWriteGathering, TransactionsOfEveryShapeReadBackOnOtherConnections) {
  auto writer = Open(Db(), WalWriteGatheringVfs());
  CreateTable(writer.get());
  // A page cache of 16 pages: a transaction larger than that spills frames before its commit,
  // and SQLite rewrites a spilled frame in place when the page changes again (wal.c, iReCksum).
  Exec(writer.get(), "PRAGMA cache_size = 16");
  auto reader = Open(Db(), WalWriteGatheringVfs());
  int64_t next = 0;
  struct Shape {
    int rows;
    size_t size;
  };
  for (const Shape shape : {Shape{1, 10}, Shape{1, 200'000}, Shape{50, 5'000}, Shape{400, 900},
                            Shape{3, 1'500'000}, Shape{1, 131'071}, Shape{2000, 100}}) {
    InsertRows(writer.get(), next, shape.rows, shape.size);
    next += shape.rows;
    EXPECT_EQ(Scalar(reader.get(), "SELECT count(*) FROM t"), next) << shape.rows;
  }
  // Updates change pages already in this WAL; deletes free them.
  Exec(writer.get(), "BEGIN; DELETE FROM t WHERE n % 3 = 0; COMMIT");
  EXPECT_EQ(WrongRows(reader.get()), 0);
  EXPECT_EQ(Scalar(writer.get(),
                   "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check != 'ok'"),
            0);
  const int64_t kept = Scalar(reader.get(), "SELECT count(*) FROM t");
  EXPECT_GT(kept, 0);
  // A checkpoint reads the WAL through the same VFS; afterwards the database file alone, opened
  // without this VFS, holds every row: the format is SQLite's own.
  Exec(writer.get(), "PRAGMA wal_checkpoint(TRUNCATE)");
  reader.reset();
  writer.reset();
  auto plain = Open(Db(), nullptr);
  EXPECT_EQ(Scalar(plain.get(), "SELECT count(*) FROM t"), kept);
  EXPECT_EQ(WrongRows(plain.get()), 0);
}

TEST_F(WalWriteGathering, ACommitThatReturnedSurvivesTheProcessBeingKilled) {
  {
    auto db = Open(Db(), WalWriteGatheringVfs());
    CreateTable(db.get());
  }
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Commits without end, telling the parent each commit's last row once COMMIT has returned.
    close(pipe_fds[0]);
    auto db = Open(Db(), WalWriteGatheringVfs());
    for (int64_t n = 0;; n += 20) {
      InsertRows(db.get(), n, 20, 2000);
      const int64_t last = n + 19;
      if (write(pipe_fds[1], &last, sizeof last) != sizeof last) _exit(1);
    }
  }
  close(pipe_fds[1]);
  int64_t acknowledged = -1;
  for (int commits = 0; commits < 50; ++commits) {
    ASSERT_EQ(read(pipe_fds[0], &acknowledged, sizeof acknowledged),
              static_cast<ssize_t>(sizeof acknowledged));
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  while (read(pipe_fds[0], &acknowledged, sizeof acknowledged) ==
         static_cast<ssize_t>(sizeof acknowledged)) {
  }
  close(pipe_fds[0]);
  // Opened without this VFS: SQLite recovers the WAL as written.
  auto db = Open(Db(), nullptr);
  EXPECT_GE(Scalar(db.get(), "SELECT max(n) FROM t"), acknowledged);
  EXPECT_EQ(Scalar(db.get(), "SELECT count(*) FROM t"),
            Scalar(db.get(), "SELECT max(n) + 1 FROM t"));
  EXPECT_EQ(WrongRows(db.get()), 0);
}

// Gathered, a write that fails (here: past the process's file size limit, as a full disk would)
// fails at the commit's sync instead of at the write: the commit must still fail, and nothing
// committed before it may be lost.
TEST_F(WalWriteGathering, AWriteThatFailsFailsItsCommitAndLosesNothingBefore) {
  auto db = Open(Db(), WalWriteGatheringVfs());
  CreateTable(db.get());
  InsertRows(db.get(), 0, 10, 1000);
  const auto wal_size = static_cast<rlim_t>(fs::file_size(fs::path(Db()) += "-wal"));
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &limit), 0);
  const rlimit unlimited = limit;
  const auto previous = signal(SIGXFSZ, SIG_IGN);  // past the limit: EFBIG, not a signal
  limit.rlim_cur = wal_size + 8192;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  Exec(db.get(), "BEGIN IMMEDIATE");
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db.get(), "INSERT INTO t (n, body) VALUES (?, ?)", -1, &s, nullptr),
            SQLITE_OK);
  for (int64_t n = 10; n < 60; ++n) {
    const std::string body = Body(n, 3000);
    sqlite3_bind_int64(s, 1, n);
    sqlite3_bind_blob(s, 2, body.data(), static_cast<int>(body.size()), SQLITE_TRANSIENT);
    sqlite3_step(s);
    sqlite3_reset(s);
  }
  sqlite3_finalize(s);
  const int commit = sqlite3_exec(db.get(), "COMMIT", nullptr, nullptr, nullptr);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &unlimited), 0);
  signal(SIGXFSZ, previous);
  EXPECT_NE(commit, SQLITE_OK);
  if (sqlite3_get_autocommit(db.get()) == 0) Exec(db.get(), "ROLLBACK");

  // The connection goes on: the failed rows are absent, the ones before intact, and new commits
  // land.
  InsertRows(db.get(), 100, 10, 1000);
  EXPECT_EQ(Scalar(db.get(), "SELECT count(*) FROM t"), 20);
  EXPECT_EQ(Scalar(db.get(), "SELECT count(*) FROM t WHERE n BETWEEN 10 AND 59"), 0);
  db.reset();
  auto plain = Open(Db(), nullptr);
  EXPECT_EQ(Scalar(plain.get(), "SELECT count(*) FROM t"), 20);
  EXPECT_EQ(WrongRows(plain.get()), 0);
  EXPECT_EQ(Scalar(plain.get(),
                   "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check != 'ok'"),
            0);
}

TEST_F(WalWriteGathering, ReadersOnManyThreadsSeeEveryCommitWhole) {
  {
    auto db = Open(Db(), WalWriteGatheringVfs());
    CreateTable(db.get());
  }
  constexpr int kCommits = 150;
  constexpr int kRowsPerCommit = 7;
  std::atomic<bool> writing{true};
  std::atomic<int> torn{0};
  std::atomic<int> went_back{0};
  std::atomic<int> reads{0};
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    auto db = Open(Db(), WalWriteGatheringVfs());
    std::mt19937 rng(7);
    for (int c = 0; c < kCommits; ++c) {
      // Sizes from a row to several runs' worth, so commits end mid-run and across runs.
      InsertRows(db.get(), int64_t{c} * kRowsPerCommit, kRowsPerCommit, 100 + rng() % 40'000);
    }
    writing = false;
  });
  threads.emplace_back([&] {  // the store's checkpointer, as WalCheckpointer does (sqlite_db.cc)
    auto db = Open(Db(), WalWriteGatheringVfs());
    while (writing) {
      sqlite3_wal_checkpoint_v2(db.get(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      std::this_thread::yield();
    }
  });
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&] {
      auto db = Open(Db(), WalWriteGatheringVfs());
      int64_t seen = 0;
      while (writing) {
        const int64_t rows = Scalar(db.get(), "SELECT count(*) FROM t");
        if (rows % kRowsPerCommit != 0) ++torn;
        if (rows < seen) ++went_back;
        seen = rows;
        if (WrongRows(db.get()) != 0) ++torn;
        ++reads;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(went_back.load(), 0);
  EXPECT_GT(reads.load(), 0);
  auto db = Open(Db(), nullptr);
  EXPECT_EQ(Scalar(db.get(), "SELECT count(*) FROM t"), kCommits * kRowsPerCommit);
  EXPECT_EQ(WrongRows(db.get()), 0);
}

}  // namespace
}  // namespace sluice::store::sqlite
