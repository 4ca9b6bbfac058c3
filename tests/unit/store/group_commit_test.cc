// GroupCommitter (include/sluice/store/group_commit.h): every writer gets its own outcome, and what
// the committer reports on /metrics is what it did: one observation per batch, every operation
// counted once.
#include "sluice/store/group_commit.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <map>

namespace sluice::store {
namespace {

TEST(GroupCommitter, AnswersEachWriterAndReportsEachBatchOnce) {
  MetricsRegistry registry;
  std::mutex mu;
  std::vector<size_t> batch_sizes;  // as the commit function saw them
  std::map<int, bool> outcomes;
  {
    GroupCommitter<int> committer(
        "commit-test", 8,
        [&](std::vector<GroupCommitter<int>::Item>& batch) {
          std::lock_guard lock(mu);
          batch_sizes.push_back(batch.size());
          for (auto& item : batch) {
            if (item.op % 3 == 0) item.status = MakeError(ErrorCode::kUnavailable, "refused");
          }
        },
        CommitMetrics::In(&registry, "test"));
    boost::asio::io_context io;
    constexpr int kWriters = 50;
    for (int i = 0; i < kWriters; ++i) {
      boost::asio::co_spawn(
          io,
          [&, i]() -> boost::asio::awaitable<void> {
            const Status s = co_await committer.Submit(i);
            outcomes[i] = s.ok();
          },
          boost::asio::detached);
    }
    io.run();
    ASSERT_EQ(outcomes.size(), static_cast<size_t>(kWriters));
    for (const auto& [op, ok] : outcomes) EXPECT_EQ(ok, op % 3 != 0) << op;
  }
  size_t operations = 0;
  for (size_t n : batch_sizes) {
    EXPECT_LE(n, 8u);  // max_batch
    operations += n;
  }
  EXPECT_EQ(operations, 50u);
  const Labels labels{{"store", "test"}};
  EXPECT_EQ(registry.GetCounter("sluice_store_commit_batches_total", "", labels).value(),
            batch_sizes.size());
  EXPECT_EQ(registry.GetCounter("sluice_store_commit_operations_total", "", labels).value(), 50u);
  EXPECT_EQ(registry.GetHistogram("sluice_store_commit_seconds", "", labels).Take().count,
            batch_sizes.size());
  EXPECT_NE(registry.Render().find("sluice_store_commit_seconds_bucket{store=\"test\""),
            std::string::npos);
}

TEST(GroupCommitter, WithoutARegistryReportsNothing) {
  const CommitMetrics none = CommitMetrics::In(nullptr, "test");
  EXPECT_EQ(none.seconds, nullptr);
  EXPECT_EQ(none.batches, nullptr);
  EXPECT_EQ(none.operations, nullptr);
}

}  // namespace
}  // namespace sluice::store
