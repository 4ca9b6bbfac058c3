// The embedded store's read-ahead of its id index at start (src/store/sqlite/sqlite_db.h,
// IndexWarmer): the pass counts every entry of the index it was given, and destroying it while the
// pass may still run stops it without a partial count, a crash or a hang (this file runs under
// AddressSanitizer and UBSan in `make test`).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "../../../src/store/sqlite/sqlite_db.h"

namespace sluice::store::sqlite {
namespace {

constexpr int64_t kRows = 20000;

class IndexWarmerTest : public ::testing::Test {
 protected:
  IndexWarmerTest()
      : path_(std::filesystem::temp_directory_path() /
              ("sluice-warmer-" + std::to_string(std::random_device{}()) + "-" +
               std::to_string(::getpid()) + ".db")) {
    auto db = OpenDurable(path_);
    db->Exec(
        "CREATE TABLE pastes (id TEXT NOT NULL, created_at INTEGER NOT NULL);"
        "CREATE UNIQUE INDEX pastes_by_id ON pastes (id);"
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) "
        "INSERT INTO pastes SELECT hex(randomblob(9)), i FROM n;");
  }
  ~IndexWarmerTest() override {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::filesystem::remove(path_.string() + suffix, ec);
    }
  }

  // Waits for the pass to end by itself: for an event, not for a time (the minute is only there
  // so that a pass that never ends fails the test instead of hanging it).
  static void WaitUntilFinished(const IndexWarmer& warmer) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (!warmer.finished() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(warmer.finished());
  }

  std::filesystem::path path_;
};

TEST_F(IndexWarmerTest, ThePassCountsEveryEntryOfTheIndex) {
  IndexWarmer warmer(path_, "pastes", "pastes_by_id", "test store", "warm-test");
  WaitUntilFinished(warmer);
  EXPECT_EQ(warmer.entries(), kRows);
}

TEST_F(IndexWarmerTest, AnIndexThatDoesNotExistEndsThePassWithNoCount) {
  IndexWarmer warmer(path_, "pastes", "no_such_index", "test store", "warm-test");
  WaitUntilFinished(warmer);
  EXPECT_EQ(warmer.entries(), std::nullopt);
}

TEST_F(IndexWarmerTest, StoppedAtAnyMomentItEndsWithTheWholeCountOrNone) {
  // Stopped before its thread opens the database, during the pass, or after it: each ends, and a
  // pass that was interrupted never reports the entries it had reached.
  int whole = 0;
  for (int delay_us : {0, 0, 50, 200, 1000, 5000, 20000, 200000}) {
    IndexWarmer warmer(path_, "pastes", "pastes_by_id", "test store", "warm-test");
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    warmer.Stop();
    EXPECT_EQ(warmer.finished(), warmer.entries().has_value());
    if (warmer.entries()) {
      EXPECT_EQ(*warmer.entries(), kRows) << "stopped after " << delay_us << " us";
      ++whole;
    }
  }
  RecordProperty("whole_counts", whole);
}

}  // namespace
}  // namespace sluice::store::sqlite
