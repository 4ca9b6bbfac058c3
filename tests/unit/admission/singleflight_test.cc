#include "sluice/admission/singleflight.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sluice/common/result.h"

namespace sluice::admission {
namespace {

using Fill = Result<std::string>;
using Group = Singleflight<std::string, Fill>;

Group MakeGroup() { return Group(Fill(MakeError(ErrorCode::kInternal, "fill abandoned"))); }

TEST(SingleflightTest, ConcurrentJoinsShareOneFillAndItsResult) {
  Group group = MakeGroup();
  std::vector<std::string> got;
  auto waiter = [&](const Fill& fill) { got.push_back(fill.ok() ? *fill : "error"); };
  std::optional<Group::Flight> leader = group.Join("abc", waiter);
  ASSERT_TRUE(leader.has_value());
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(group.Join("abc", waiter).has_value());
  EXPECT_TRUE(got.empty());
  leader->Complete(Fill(std::string("body")));
  EXPECT_EQ(got, std::vector<std::string>(6, "body"));
  EXPECT_EQ(group.fills(), 1u);
  EXPECT_EQ(group.hits(), 5u);
  EXPECT_EQ(group.in_flight(), 0u);
}

TEST(SingleflightTest, ErrorsAreSharedToo) {
  Group group = MakeGroup();
  int errors = 0;
  auto waiter = [&](const Fill& fill) {
    if (!fill.ok() && fill.error().code == ErrorCode::kUnavailable) ++errors;
  };
  std::optional<Group::Flight> leader = group.Join("abc", waiter);
  (void)group.Join("abc", waiter);
  leader->Complete(Fill(MakeError(ErrorCode::kUnavailable, "primary down")));
  EXPECT_EQ(errors, 2);
}

TEST(SingleflightTest, AForgottenFlightCompletesWithTheAbandonValue) {
  Group group = MakeGroup();
  std::vector<ErrorCode> codes;
  auto waiter = [&](const Fill& fill) { codes.push_back(fill.error().code); };
  {
    std::optional<Group::Flight> leader = group.Join("abc", waiter);
    (void)group.Join("abc", waiter);
  }  // the leader's error path returned early
  EXPECT_EQ(codes, std::vector<ErrorCode>(2, ErrorCode::kInternal));
  EXPECT_EQ(group.in_flight(), 0u);
}

TEST(SingleflightTest, CompleteIsOnceOnly) {
  Group group = MakeGroup();
  int calls = 0;
  std::optional<Group::Flight> leader = group.Join("abc", [&](const Fill&) { ++calls; });
  leader->Complete(Fill(std::string("a")));
  leader->Complete(Fill(std::string("b")));
  leader.reset();
  EXPECT_EQ(calls, 1);
}

TEST(SingleflightTest, ResultsAreSharedNotCached) {
  Group group = MakeGroup();
  std::optional<Group::Flight> first = group.Join("abc", nullptr);
  first->Complete(Fill(std::string("old")));
  EXPECT_TRUE(group.Join("abc", nullptr).has_value());
  EXPECT_EQ(group.fills(), 2u);
}

TEST(SingleflightTest, KeysAreIndependent) {
  Group group = MakeGroup();
  std::vector<std::string> got;
  auto waiter = [&](const Fill& f) { got.push_back(f.ok() ? *f : f.error().message); };
  std::optional<Group::Flight> a = group.Join("a", waiter);
  std::optional<Group::Flight> b = group.Join("b", waiter);
  ASSERT_TRUE(a && b);
  b->Complete(Fill(std::string("B")));
  EXPECT_EQ(got, std::vector<std::string>{"B"});
  EXPECT_EQ(group.in_flight(), 1u);
  a.reset();
  EXPECT_EQ(got, (std::vector<std::string>{"B", "fill abandoned"}));
}

TEST(SingleflightTest, AWaiterMayJoinAgainFromItsCallback) {
  Group group = MakeGroup();
  std::optional<Group::Flight> second;
  std::optional<Group::Flight> first = group.Join("abc", [&](const Fill&) {
    second = group.Join("abc", nullptr);  // would deadlock if called under the lock
  });
  first->Complete(Fill(std::string("x")));
  EXPECT_TRUE(second.has_value());
}

TEST(SingleflightTest, MovedFlightCompletesOnce) {
  Group group = MakeGroup();
  int calls = 0;
  std::optional<Group::Flight> leader = group.Join("abc", [&](const Fill&) { ++calls; });
  Group::Flight moved = std::move(*leader);
  leader.reset();
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(moved.key(), "abc");
  moved.Complete(Fill(std::string("x")));
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace sluice::admission
