#include "sluice/admission/circuit_breaker.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace sluice::admission {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class CircuitBreakerTest : public ::testing::Test {
 protected:
  CircuitBreakerOptions Options() {
    CircuitBreakerOptions options;
    options.refusals_to_open = 3;
    options.open_for = seconds(5);
    options.failover_open_for = milliseconds(250);
    options.on_transition = [this](BreakerState from, BreakerState to) {
      seen_.emplace_back(from, to);
    };
    return options;
  }
  void Refuse(CircuitBreaker& breaker, int n) {
    for (int i = 0; i < n; ++i) {
      CircuitBreaker::Admission admission = breaker.TryPass();
      ASSERT_TRUE(admission.allowed());
      admission.pass->Refused();
    }
  }

  void NotPrimary(CircuitBreaker& breaker, int n) {
    for (int i = 0; i < n; ++i) {
      CircuitBreaker::Admission admission = breaker.TryPass();
      ASSERT_TRUE(admission.allowed());
      admission.pass->NotPrimary();
    }
  }

  ManualClock clock_;
  std::vector<std::pair<BreakerState, BreakerState>> seen_;
};

TEST_F(CircuitBreakerTest, OpensAfterConsecutiveRefusals) {
  CircuitBreaker breaker(Options(), clock_);
  Refuse(breaker, 2);
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
  Refuse(breaker, 1);
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
  const CircuitBreaker::Admission refused = breaker.TryPass();
  EXPECT_FALSE(refused.allowed());
  EXPECT_EQ(refused.retry_after, seconds(5));
}

TEST_F(CircuitBreakerTest, ASuccessResetsTheRefusalCount) {
  CircuitBreaker breaker(Options(), clock_);
  Refuse(breaker, 2);
  breaker.TryPass().pass->Succeeded();
  Refuse(breaker, 2);
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
}

TEST_F(CircuitBreakerTest, TimeoutsNeverOpenIt) {
  CircuitBreaker breaker(Options(), clock_);
  for (int i = 0; i < 1000; ++i) breaker.TryPass().pass->TimedOut();
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
  // Nor do they reset a run of refusals: slowness says nothing either way.
  Refuse(breaker, 2);
  breaker.TryPass().pass->TimedOut();
  Refuse(breaker, 1);
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
}

TEST_F(CircuitBreakerTest, AfterOpenForLetsExactlyOneProbeThrough) {
  CircuitBreaker breaker(Options(), clock_);
  Refuse(breaker, 3);
  clock_.Advance(seconds(5) - milliseconds(1));
  EXPECT_EQ(breaker.TryPass().retry_after, milliseconds(1));
  clock_.Advance(milliseconds(1));
  CircuitBreaker::Admission probe = breaker.TryPass();
  ASSERT_TRUE(probe.allowed());
  EXPECT_TRUE(probe.pass->is_probe());
  EXPECT_EQ(breaker.state(), BreakerState::kHalfOpen);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(breaker.TryPass().allowed());
}

TEST_F(CircuitBreakerTest, ProbeSuccessCloses) {
  CircuitBreaker breaker(Options(), clock_);
  Refuse(breaker, 3);
  clock_.Advance(seconds(5));
  breaker.TryPass().pass->Succeeded();
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
  EXPECT_TRUE(breaker.TryPass().allowed());
  // A fresh run of refusals is needed to open again.
  Refuse(breaker, 2);
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
}

TEST_F(CircuitBreakerTest, ProbeRefusalReopensForAnotherFullPeriod) {
  CircuitBreaker breaker(Options(), clock_);
  Refuse(breaker, 3);
  clock_.Advance(seconds(7));
  breaker.TryPass().pass->Refused();
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
  EXPECT_EQ(breaker.TryPass().retry_after, seconds(5));
}

TEST_F(CircuitBreakerTest, ProbeTimeoutOrForgottenProbeFreesThePlaceForAnother) {
  CircuitBreaker breaker(Options(), clock_);
  Refuse(breaker, 3);
  clock_.Advance(seconds(5));
  breaker.TryPass().pass->TimedOut();
  EXPECT_EQ(breaker.state(), BreakerState::kHalfOpen);
  {
    CircuitBreaker::Admission probe = breaker.TryPass();
    ASSERT_TRUE(probe.allowed());
  }  // dropped unreported
  EXPECT_TRUE(breaker.TryPass().allowed());
}

TEST_F(CircuitBreakerTest, LateResultsFromBeforeOpeningDoNotDecide) {
  CircuitBreaker breaker(Options(), clock_);
  CircuitBreaker::Admission early = breaker.TryPass();
  Refuse(breaker, 3);
  clock_.Advance(seconds(5));
  CircuitBreaker::Admission probe = breaker.TryPass();
  early.pass->Succeeded();  // not the probe: ignored
  EXPECT_EQ(breaker.state(), BreakerState::kHalfOpen);
  probe.pass->Refused();
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
}

TEST_F(CircuitBreakerTest, CountsAndReportsEveryTransition) {
  CircuitBreaker breaker(Options(), clock_);
  Refuse(breaker, 3);
  clock_.Advance(seconds(5));
  breaker.TryPass().pass->Succeeded();
  EXPECT_EQ(breaker.transitions(), 3u);
  const std::vector<std::pair<BreakerState, BreakerState>> expected{
      {BreakerState::kClosed, BreakerState::kOpen},
      {BreakerState::kOpen, BreakerState::kHalfOpen},
      {BreakerState::kHalfOpen, BreakerState::kClosed}};
  EXPECT_EQ(seen_, expected);
  EXPECT_STREQ(BreakerStateName(BreakerState::kHalfOpen), "half_open");
}

TEST_F(CircuitBreakerTest, MovedPassReportsOnce) {
  CircuitBreaker breaker(Options(), clock_);
  for (int i = 0; i < 3; ++i) {
    CircuitBreaker::Admission admission = breaker.TryPass();
    CircuitBreaker::Pass moved = std::move(*admission.pass);
    admission.pass.reset();  // the moved-from pass reports nothing
    moved.Refused();
    moved.Refused();  // second report ignored
    if (i < 2) {
      EXPECT_EQ(breaker.state(), BreakerState::kClosed);
    }
  }
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
}

// A primary failing over: the refusals that say "not the primary" open it as any refusals do, but
// for the short window, and the probe goes out when that window ends.
TEST_F(CircuitBreakerTest, NotPrimaryRefusalsOpenItForTheFailoverWindowThenOneProbe) {
  CircuitBreaker breaker(Options(), clock_);
  NotPrimary(breaker, 2);
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
  NotPrimary(breaker, 1);
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
  EXPECT_EQ(breaker.TryPass().retry_after, milliseconds(250));
  clock_.Advance(milliseconds(249));
  EXPECT_FALSE(breaker.TryPass().allowed());
  clock_.Advance(milliseconds(1));
  CircuitBreaker::Admission probe = breaker.TryPass();
  ASSERT_TRUE(probe.allowed());
  EXPECT_TRUE(probe.pass->is_probe());
  EXPECT_FALSE(breaker.TryPass().allowed());
  probe.pass->Succeeded();
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
}

// Blips keep breaker_open_for, also in a run that had "not primary" answers before them: the
// refusal that opens the breaker decides its window.
TEST_F(CircuitBreakerTest, BlipsStillOpenItForOpenFor) {
  CircuitBreaker breaker(Options(), clock_);
  NotPrimary(breaker, 2);
  Refuse(breaker, 1);
  ASSERT_EQ(breaker.state(), BreakerState::kOpen);
  EXPECT_EQ(breaker.TryPass().retry_after, seconds(5));
  clock_.Advance(milliseconds(250));
  EXPECT_FALSE(breaker.TryPass().allowed());
  clock_.Advance(seconds(5) - milliseconds(250));
  EXPECT_TRUE(breaker.TryPass().allowed());
}

// Timeouts stay neutral: however many, they neither open it nor add to a run of "not primary".
TEST_F(CircuitBreakerTest, TimeoutsNeverOpenItNorCountAsNotPrimary) {
  CircuitBreaker breaker(Options(), clock_);
  for (int i = 0; i < 1000; ++i) breaker.TryPass().pass->TimedOut();
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
  NotPrimary(breaker, 2);
  breaker.TryPass().pass->TimedOut();
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
}

// The probe's answer sets the next window: still not the primary, another short one; a blip (the
// new primary refusing connections), the long one; and the other way round.
TEST_F(CircuitBreakerTest, TheProbesRefusalChoosesTheNextWindow) {
  CircuitBreaker breaker(Options(), clock_);
  NotPrimary(breaker, 3);
  clock_.Advance(milliseconds(250));
  breaker.TryPass().pass->NotPrimary();
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
  EXPECT_EQ(breaker.TryPass().retry_after, milliseconds(250));
  clock_.Advance(milliseconds(250));
  breaker.TryPass().pass->Refused();
  EXPECT_EQ(breaker.TryPass().retry_after, seconds(5));
  clock_.Advance(seconds(5));
  breaker.TryPass().pass->NotPrimary();
  EXPECT_EQ(breaker.TryPass().retry_after, milliseconds(250));
}

// A reload changes the window of a breaker a failover holds open, as it does open_for's.
TEST_F(CircuitBreakerTest, AReloadAppliesTheNewFailoverWindowToAnOpenBreaker) {
  CircuitBreaker breaker(Options(), clock_);
  NotPrimary(breaker, 3);
  clock_.Advance(milliseconds(100));
  breaker.SetThresholds(3, seconds(5), milliseconds(400));
  EXPECT_EQ(breaker.TryPass().retry_after, milliseconds(300));
  breaker.SetThresholds(3, seconds(5), milliseconds(100));
  EXPECT_TRUE(breaker.TryPass().allowed());
}

}  // namespace
}  // namespace sluice::admission
