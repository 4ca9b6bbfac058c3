// The embedded store's reads end at their deadline (src/store/sqlite/sqlite_db.h, Db::SetDeadline
// and Readers): a statement still running is interrupted, not left to finish on a pool thread
// while holding an old snapshot, and its connection serves the next read as if nothing happened.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <string>

#include "../../../src/store/sqlite/sqlite_db.h"

namespace sluice::store::sqlite {
namespace {

// A count to ten billion: minutes of work for SQLite, unless something stops it.
constexpr const char* kSlowQuery =
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000000000) "
    "SELECT count(*) FROM n";

class SqliteDeadlineTest : public ::testing::Test {
 protected:
  SqliteDeadlineTest()
      : path_(std::filesystem::temp_directory_path() /
              ("sluice-deadline-" + std::to_string(std::random_device{}()) + "-" +
               std::to_string(::getpid()) + ".db")) {
    auto db = OpenDurable(path_);
    db->Exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (7)");
  }
  ~SqliteDeadlineTest() override {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::filesystem::remove(path_.string() + suffix, ec);
    }
  }
  std::filesystem::path path_;
};

TEST_F(SqliteDeadlineTest, AStatementPastItsDeadlineIsInterruptedAndTheConnectionStaysUsable) {
  auto db = OpenDurable(path_);
  // Already passed: the first progress check stops the statement.
  db->SetDeadline(SystemClock::Instance().Now() - std::chrono::seconds(1));
  Statement& slow = db->Prepare(kSlowQuery);
  EXPECT_EQ(slow.Step(), SQLITE_INTERRUPT);
  EXPECT_TRUE(db->interrupted());
  db->ResetAll();
  db->ClearDeadline();
  EXPECT_FALSE(db->interrupted());
  Statement& fast = db->Prepare("SELECT x FROM t");
  ASSERT_EQ(fast.Step(), SQLITE_ROW);
  EXPECT_EQ(fast.Int(0), 7);
  db->ResetAll();
  // A deadline in the future lets a short statement finish.
  db->SetDeadline(SystemClock::Instance().Now() + std::chrono::hours(1));
  Statement& again = db->Prepare("SELECT x FROM t");
  ASSERT_EQ(again.Step(), SQLITE_ROW);
  EXPECT_FALSE(db->interrupted());
  db->ResetAll();
  db->ClearDeadline();
}

TEST_F(SqliteDeadlineTest, AReadRunningAtItsDeadlineEndsThereAsDeadlineExceeded) {
  Readers readers(path_, "test store");
  // Minutes of work if nothing stops it; the deadline is a fraction of a second away. What is
  // asserted is the outcome, not the time it took.
  auto slow = readers.Read(Deadline::After(SystemClock::Instance(), std::chrono::milliseconds(50)),
                           [](Db& db) -> Result<int64_t> {
                             Statement& s = db.Prepare(kSlowQuery);
                             if (s.Step() != SQLITE_ROW) {
                               return MakeError(ErrorCode::kUnavailable, db.LastError(), "x");
                             }
                             return s.Int(0);
                           });
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.error().code, ErrorCode::kDeadlineExceeded);
  // The same connection (the only one made) answers the next read.
  auto next = readers.Read(Deadline::Never(), [](Db& db) -> Result<int64_t> {
    Statement& s = db.Prepare("SELECT x FROM t");
    if (s.Step() != SQLITE_ROW) return MakeError(ErrorCode::kUnavailable, db.LastError(), "x");
    return s.Int(0);
  });
  ASSERT_TRUE(next.ok()) << next.error().message;
  EXPECT_EQ(*next, 7);
  // A read whose deadline passed while it waited for a thread never touches the database.
  bool ran = false;
  auto late = readers.Read(Deadline::At(SystemClock::Instance().Now() - std::chrono::seconds(1)),
                           [&ran](Db&) -> Result<int64_t> {
                             ran = true;
                             return int64_t{0};
                           });
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code, ErrorCode::kDeadlineExceeded);
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace sluice::store::sqlite
