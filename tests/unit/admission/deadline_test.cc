#include "sluice/admission/deadline.h"

#include <gtest/gtest.h>

namespace sluice::admission {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(DeadlineTest, AfterExpiresExactlyAtBudget) {
  ManualClock clock;
  const Deadline deadline = Deadline::After(clock, milliseconds(300));
  EXPECT_FALSE(deadline.Expired(clock));
  EXPECT_EQ(deadline.Remaining(clock), milliseconds(300));
  clock.Advance(milliseconds(299));
  EXPECT_FALSE(deadline.Expired(clock));
  EXPECT_EQ(deadline.Remaining(clock), milliseconds(1));
  clock.Advance(milliseconds(1));
  EXPECT_TRUE(deadline.Expired(clock));
  EXPECT_EQ(deadline.Remaining(clock), Duration::zero());
  clock.Advance(seconds(1));
  EXPECT_EQ(deadline.Remaining(clock), Duration::zero());
}

TEST(DeadlineTest, ForCallTakesTheSmallerOfOwnTimeoutAndWhatIsLeft) {
  ManualClock clock;
  const Deadline request = Deadline::After(clock, milliseconds(300));
  // Early on, the call's own 20 ms is the smaller.
  EXPECT_EQ(request.ForCall(clock, milliseconds(20)).Remaining(clock), milliseconds(20));
  clock.Advance(milliseconds(290));
  // With 10 ms left, the request's budget wins over a 200 ms object GET timeout.
  const Deadline call = request.ForCall(clock, milliseconds(200));
  EXPECT_EQ(call.Remaining(clock), milliseconds(10));
  EXPECT_EQ(call, request);
}

TEST(DeadlineTest, NeverNeverExpiresAndDoesNotOverflow) {
  ManualClock clock;
  const Deadline never = Deadline::Never();
  EXPECT_TRUE(never.IsNever());
  clock.Advance(seconds(1'000'000));
  EXPECT_FALSE(never.Expired(clock));
  EXPECT_EQ(never.Remaining(clock), Duration::max());
  EXPECT_EQ(never.ForCall(clock, seconds(1)).Remaining(clock), seconds(1));
  // A huge timeout saturates instead of wrapping into the past.
  EXPECT_TRUE(Deadline::After(clock, Duration::max()).IsNever());
  EXPECT_FALSE(never.ForCall(clock, Duration::max()).Expired(clock));
}

TEST(DeadlineTest, HasRoomForNeedsTheWholeAttemptAndNothingOnceExpired) {
  ManualClock clock;
  const Deadline deadline = Deadline::After(clock, milliseconds(100));
  EXPECT_TRUE(deadline.HasRoomFor(clock, milliseconds(100)));
  EXPECT_FALSE(deadline.HasRoomFor(clock, milliseconds(101)));
  clock.Advance(milliseconds(100));
  EXPECT_FALSE(deadline.HasRoomFor(clock, Duration::zero()));
  EXPECT_TRUE(Deadline::Never().HasRoomFor(clock, seconds(3600)));
}

TEST(DeadlineTest, EarliestHonoursBoth) {
  ManualClock clock;
  const Deadline a = Deadline::After(clock, milliseconds(50));
  const Deadline b = Deadline::After(clock, milliseconds(20));
  EXPECT_EQ(Deadline::Earliest(a, b), b);
  EXPECT_EQ(Deadline::Earliest(b, a), b);
  EXPECT_EQ(Deadline::Earliest(Deadline::Never(), a), a);
}

}  // namespace
}  // namespace sluice::admission
