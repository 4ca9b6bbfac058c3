#include "sluice/admission/pressure.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "sluice/common/clock.h"

namespace sluice::admission {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(PressureCurve, IsRelaxedUpToItsStartFullFromItsEndAndLinearBetween) {
  const PressureCurve curve{0.5, 0.9};
  EXPECT_EQ(curve.Level(0, 1000), 0.0);
  EXPECT_EQ(curve.Level(500, 1000), 0.0);
  EXPECT_NEAR(curve.Level(600, 1000), 0.25, 1e-9);
  EXPECT_NEAR(curve.Level(700, 1000), 0.5, 1e-9);
  EXPECT_EQ(curve.Level(900, 1000), 1.0);
  EXPECT_EQ(curve.Level(1000, 1000), 1.0);
  EXPECT_EQ(curve.Level(1200, 1000), 1.0);  // over a cap lowered by a reload
  EXPECT_EQ(curve.Level(0, 0), 1.0);
}

TEST(PressureCurve, AStepWhenStartAndFullMeet) {
  const PressureCurve curve{0.8, 0.8};
  EXPECT_EQ(curve.Level(79, 100), 0.0);
  EXPECT_EQ(curve.Level(80, 100), 1.0);
}

TEST(ScaledTimeout, ShrinksFromTheRelaxedTimeoutToTheFloor) {
  EXPECT_EQ(ScaledTimeout(seconds(30), seconds(1), 0.0), seconds(30));
  EXPECT_EQ(ScaledTimeout(seconds(30), seconds(1), 1.0), seconds(1));
  EXPECT_EQ(ScaledTimeout(seconds(30), seconds(1), 0.5), milliseconds(15'500));
  // Out-of-range levels are clamped; a floor above the relaxed timeout changes nothing.
  EXPECT_EQ(ScaledTimeout(seconds(30), seconds(1), 7.0), seconds(1));
  EXPECT_EQ(ScaledTimeout(seconds(2), seconds(5), 1.0), seconds(2));
}

TEST(ScaledRate, RisesFromTheFloorRateToThePressedRate) {
  EXPECT_EQ(ScaledRate(1024, 65536, 0.0), 1024);
  EXPECT_EQ(ScaledRate(1024, 65536, 1.0), 65536);
  EXPECT_EQ(ScaledRate(1024, 65536, 0.5), 33280);
  EXPECT_EQ(ScaledRate(100'000, 65536, 1.0), 100'000);  // never below the configured floor
}

TEST(IdleConnections, TakesTheLongestIdleFirst) {
  ManualClock clock;
  IdleConnections<std::string> idle;
  const TimePoint t0 = clock.Now();
  auto b = idle.Enter(t0 + seconds(2), "k", "b");
  auto a = idle.Enter(t0, "k", "a");
  auto c = idle.Enter(t0 + seconds(5), "k", "c");
  EXPECT_EQ(idle.TakeLongestIdle(), "a");
  EXPECT_EQ(idle.TakeLongestIdle(), "b");
  EXPECT_EQ(idle.size(), 1u);
}

TEST(IdleConnections, AConnectionThatLeftIdleIsNeverTaken) {
  ManualClock clock;
  IdleConnections<std::string> idle;
  const TimePoint t0 = clock.Now();
  auto busy = std::make_optional(idle.Enter(t0, "k", "busy now"));
  auto waiting = idle.Enter(t0 + seconds(1), "k", "waiting");
  busy.reset();  // its next request arrived: it is mid-request, not idle
  EXPECT_EQ(idle.TakeLongestIdle(), "waiting");
  EXPECT_EQ(idle.TakeLongestIdle(), std::nullopt);
}

TEST(IdleConnections, ATakenConnectionIsTakenOnceAndItsEntryLeavesQuietly) {
  ManualClock clock;
  IdleConnections<int> idle;
  {
    auto only = idle.Enter(clock.Now(), "k", 7);
    EXPECT_EQ(idle.TakeLongestIdle(), 7);
    EXPECT_EQ(idle.TakeLongestIdle(), std::nullopt);
  }  // the taken connection's entry ends without disturbing the others
  auto next = idle.Enter(clock.Now(), "k", 8);
  EXPECT_EQ(idle.size(), 1u);
}

TEST(IdleConnections, TwoConnectionsIdleSinceTheSameMomentAreBothKept) {
  ManualClock clock;
  IdleConnections<int> idle;
  auto one = idle.Enter(clock.Now(), "k", 1);
  auto two = idle.Enter(clock.Now(), "k", 2);
  EXPECT_EQ(idle.size(), 2u);
  EXPECT_TRUE(idle.TakeLongestIdle().has_value());
  EXPECT_TRUE(idle.TakeLongestIdle().has_value());
}

TEST(BodiesInFlight, CutsTheLowestRateUnderTheRequiredRate) {
  ManualClock clock;
  BodiesInFlight<std::string> bodies;
  const TimePoint t0 = clock.Now();
  auto fast = bodies.Begin(t0, "k", "fast");
  auto trickle = bodies.Begin(t0, "k", "trickle");
  auto slower = bodies.Begin(t0 + seconds(1), "k", "slower");
  clock.Advance(seconds(10));
  fast.Progress(10 * 100'000);   // 100 KB/s
  trickle.Progress(10 * 1'500);  // 1.5 KB/s
  slower.Progress(9 * 1'000);    // 1 KB/s over its 9 s
  EXPECT_EQ(bodies.TakeSlowest(clock.Now(), 65'536, seconds(1)), "slower");
  EXPECT_EQ(bodies.TakeSlowest(clock.Now(), 65'536, seconds(1)), "trickle");
  // A body at the required rate or above is never cut.
  EXPECT_EQ(bodies.TakeSlowest(clock.Now(), 65'536, seconds(1)), std::nullopt);
  EXPECT_EQ(bodies.size(), 1u);
}

TEST(BodiesInFlight, ABodyYoungerThanTheMinimumAgeIsNotJudged) {
  ManualClock clock;
  BodiesInFlight<int> bodies;
  auto old = bodies.Begin(clock.Now(), "k", 1);
  clock.Advance(milliseconds(900));
  auto young =
      bodies.Begin(clock.Now(), "k", 2);  // nothing yet: its first bytes may be on the wire
  old.Progress(800);                      // under 1 KB/s
  clock.Advance(milliseconds(200));
  EXPECT_EQ(bodies.TakeSlowest(clock.Now(), 1024, milliseconds(500)), 1);
  EXPECT_EQ(bodies.TakeSlowest(clock.Now(), 1024, milliseconds(500)), std::nullopt);
}

TEST(BodiesInFlight, ABodyThatEndedIsNeverCut) {
  ManualClock clock;
  BodiesInFlight<int> bodies;
  auto done = std::make_optional(bodies.Begin(clock.Now(), "k", 1));
  clock.Advance(seconds(5));
  done.reset();
  EXPECT_EQ(bodies.TakeSlowest(clock.Now(), 1e9, Duration::zero()), std::nullopt);
  EXPECT_EQ(bodies.size(), 0u);
}

TEST(BodiesInFlight, TiesGoToTheOlderBody) {
  ManualClock clock;
  BodiesInFlight<int> bodies;
  auto younger = bodies.Begin(clock.Now() + seconds(1), "k", 2);
  auto older = bodies.Begin(clock.Now(), "k", 1);
  clock.Advance(seconds(5));
  EXPECT_EQ(bodies.TakeSlowest(clock.Now(), 1024, seconds(1)), 1);  // both at 0 B/s
}

TEST(BodiesInFlight, ConcurrentBodiesAndCutsLoseNothing) {
  BodiesInFlight<int> bodies;
  std::atomic<int> cut{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        auto entry = bodies.Begin(TimePoint(), "k", t * 10000 + i);
        entry.Progress(static_cast<uint64_t>(i));
        if (bodies.TakeSlowest(TimePoint(seconds(1)), 1e9, Duration::zero())) ++cut;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(bodies.size(), 0u);
  EXPECT_GT(cut.load(), 0);
}

TEST(IdleConnections, AClientWithAnIdleConnectionOfItsOwnClosesNobodys) {
  ManualClock clock;
  IdleConnections<std::string> idle;
  const TimePoint t0 = clock.Now();
  auto innocent = idle.Enter(t0, "10.0.0.9", "innocent, idle longest");
  auto mine = std::make_optional(idle.Enter(t0 + seconds(1), "10.0.0.1", "mine"));
  EXPECT_EQ(idle.TakeLongestIdle("10.0.0.1"), std::nullopt);
  EXPECT_EQ(idle.size(), 2u);
  mine.reset();  // its own connection is busy now: it may take the longest idle of all
  EXPECT_EQ(idle.TakeLongestIdle("10.0.0.1"), "innocent, idle longest");
  EXPECT_EQ(idle.TakeLongestIdle("10.0.0.1"), std::nullopt);
}

TEST(BodiesInFlight, AClientWithABodyInFlightCutsNobody) {
  ManualClock clock;
  BodiesInFlight<std::string> bodies;
  auto attacker = bodies.Begin(clock.Now(), "10.0.0.1", "attacker's trickle");
  auto other = bodies.Begin(clock.Now(), "10.0.0.2", "another trickle");
  clock.Advance(seconds(10));
  EXPECT_EQ(bodies.TakeSlowest(clock.Now(), 65'536, seconds(1), "10.0.0.1"), std::nullopt);
  EXPECT_EQ(bodies.TakeSlowest(clock.Now(), 65'536, seconds(1), "10.0.0.9"), "attacker's trickle");
}

TEST(BodiesInFlight, AClientWhoseBodyWasCutForSlownessCutsNobodyForAWhile) {
  ManualClock clock;
  BodiesInFlight<std::string> bodies(seconds(10));
  auto a = bodies.Begin(clock.Now(), "10.0.0.1", "a's trickle");
  auto b = bodies.Begin(clock.Now(), "10.0.0.2", "b's trickle");
  clock.Advance(seconds(3));
  // 10.0.0.9 cuts a's body; a reconnects at once and may not cut b's in its turn.
  EXPECT_EQ(bodies.TakeSlowest(clock.Now(), 1024, seconds(1), "10.0.0.9"), "a's trickle");
  EXPECT_FALSE(bodies.MayCut("10.0.0.1", clock.Now()));
  EXPECT_EQ(bodies.TakeSlowest(clock.Now(), 1024, seconds(1), "10.0.0.1"), std::nullopt);
  // A body cut by the rate itself counts the same.
  bodies.NoteSlow("10.0.0.3", clock.Now());
  EXPECT_FALSE(bodies.MayCut("10.0.0.3", clock.Now()));
  clock.Advance(seconds(10));
  EXPECT_TRUE(bodies.MayCut("10.0.0.1", clock.Now()));
  EXPECT_EQ(bodies.TakeSlowest(clock.Now(), 1024, seconds(1), "10.0.0.1"), "b's trickle");
}

TEST(BodiesInFlight, SaysWhetherAnyBodyIsUnderTheRateWhateverItsAge) {
  ManualClock clock;
  BodiesInFlight<int> bodies;
  EXPECT_FALSE(bodies.AnyUnder(clock.Now(), 1024));
  auto young = bodies.Begin(clock.Now(), "k", 1);
  EXPECT_TRUE(bodies.AnyUnder(clock.Now(), 1024));  // just begun: nothing yet
  clock.Advance(milliseconds(100));
  young.Progress(10'000);  // 100 KB/s
  EXPECT_FALSE(bodies.AnyUnder(clock.Now(), 1024));
}

TEST(BodiesInFlight, RemembersAtMostItsBoundOfSlowClients) {
  ManualClock clock;
  BodiesInFlight<int> bodies(seconds(10), 3);
  for (int i = 0; i < 4; ++i) {
    bodies.NoteSlow("10.0.0." + std::to_string(i), clock.Now());
    clock.Advance(milliseconds(1));
  }
  EXPECT_TRUE(bodies.MayCut("10.0.0.0", clock.Now()));  // the oldest, forgotten
  EXPECT_FALSE(bodies.MayCut("10.0.0.3", clock.Now()));
}

TEST(BodyRateCurve, IsTheFloorUpToTheStartAndThePressedRateFromTheFull) {
  const BodyRateCurve curve{{0.5, 0.9}, 1024, 65536};
  EXPECT_EQ(curve.At(25, 50), 1024);
  EXPECT_NEAR(curve.At(40, 50), 49'408, 1e-6);  // 0.8 full: three quarters of the way
  EXPECT_EQ(curve.At(50, 50), 65536);
}

// The attack (docs/overload.md, "Pressure"): 40 of 50 create slots held by bodies that
// sent one byte each. Counted as fill they would require 49,408 B/s of every body, and an honest
// upload at 30 KB/s, faster than all of them, would be cut at the grace.
TEST(BodiesInFlight, BodiesThatSendNothingRaiseNothingAnotherBodyMustDo) {
  ManualClock clock;
  BodiesInFlight<int> bodies;
  const BodyRateCurve curve{{0.5, 0.9}, 1024, 65536};
  std::vector<BodiesInFlight<int>::Entry> trickles;
  for (int i = 0; i < 40; ++i) {
    trickles.push_back(bodies.Begin(clock.Now(), "10.1.0." + std::to_string(i), i));
    trickles.back().Progress(1);
  }
  auto phone = bodies.Begin(clock.Now(), "10.9.0.1", 99);
  clock.Advance(seconds(6));
  phone.Progress(6 * 30'000);
  EXPECT_EQ(bodies.RequiredOf(clock.Now(), 30'000, 41, 50, curve), 1024);
  EXPECT_EQ(bodies.Required(clock.Now(), 41, 50, curve), 1024);
  // The trickles themselves are each behind the phone: one of them is held to what the phone's
  // slot raises, still the floor (1 of 50), and is cut at the grace by the floor.
  EXPECT_EQ(bodies.RequiredOf(clock.Now(), 1.0 / 6, 41, 50, curve), 1024);
}

TEST(BodiesInFlight, ABodyIsHeldToWhatTheWorkAndTheBodiesFasterThanItRequire) {
  ManualClock clock;
  BodiesInFlight<int> bodies;
  const BodyRateCurve curve{{0.5, 0.9}, 1024, 65536};
  std::vector<BodiesInFlight<int>::Entry> fast;
  for (int i = 0; i < 40; ++i) fast.push_back(bodies.Begin(clock.Now(), "10.1.0.1", i));
  auto phone = bodies.Begin(clock.Now(), "10.9.0.1", 99);
  clock.Advance(seconds(10));
  for (auto& body : fast) body.Progress(10 * 40'000);  // 40 KB/s each
  phone.Progress(10 * 30'000);
  // 40 of 50 slots held by bodies faster than the phone: 49,408 B/s, and it is cut.
  EXPECT_NEAR(bodies.RequiredOf(clock.Now(), 30'000, 41, 50, curve), 49'408, 1e-6);
  // One of the fast bodies is outpaced by none: the floor.
  EXPECT_EQ(bodies.RequiredOf(clock.Now(), 40'000, 41, 50, curve), 1024);
  // The gauge: the rate under which a body is cut, the fast bodies' own (they justify no more).
  EXPECT_NEAR(bodies.Required(clock.Now(), 41, 50, curve), 40'000, 1e-6);
  // Slots held by creates whose bodies have arrived count for everyone: 9 more in use.
  EXPECT_NEAR(bodies.RequiredOf(clock.Now(), 40'000, 50, 50, curve), curve.At(9, 50), 1e-6);
}

TEST(BodiesInFlight, TheRequiredRateRisesOnlyToTheRateOfTheBodiesThatRaiseIt) {
  ManualClock clock;
  BodiesInFlight<int> bodies;
  const BodyRateCurve curve{{0.5, 0.9}, 1024, 65536};
  std::vector<BodiesInFlight<int>::Entry> trickles;
  for (int i = 0; i < 40; ++i) trickles.push_back(bodies.Begin(clock.Now(), "10.1.0.1", i));
  clock.Advance(seconds(10));
  for (auto& body : trickles) body.Progress(10 * 1'100);  // just above the floor
  // Paying the floor for 40 slots raises the rate to the payers' own, not to 49,408 B/s: a
  // phone at 30 KB/s is not touched.
  EXPECT_NEAR(bodies.Required(clock.Now(), 40, 50, curve), 1'100, 1e-6);
  EXPECT_EQ(bodies.RequiredOf(clock.Now(), 30'000, 41, 50, curve), 1024);
}

TEST(BodiesInFlight, ACutForANetworksShareTakesOnlyThatNetworksSlowestBody) {
  ManualClock clock;
  BodiesInFlight<std::string> bodies;
  auto elsewhere = bodies.Begin(clock.Now(), "10.2.0.1", "another /24's trickle", "10.2.0.0/24");
  auto slow = bodies.Begin(clock.Now(), "10.1.0.1", "slow", "10.1.0.0/24");
  auto slower = bodies.Begin(clock.Now(), "10.1.0.2", "slower", "10.1.0.0/24");
  clock.Advance(seconds(5));
  elsewhere.Progress(0);
  slow.Progress(5 * 500);
  slower.Progress(5 * 100);
  EXPECT_TRUE(bodies.AnyUnder(clock.Now(), 1024, "10.1.0.0/24"));
  EXPECT_FALSE(bodies.AnyUnder(clock.Now(), 1024, "10.3.0.0/24"));
  EXPECT_EQ(bodies.TakeSlowest(clock.Now(), 1024, seconds(1), "10.1.0.9", "10.1.0.0/24"), "slower");
  EXPECT_EQ(bodies.TakeSlowest(clock.Now(), 1024, seconds(1), "10.1.0.8", "10.1.0.0/24"), "slow");
  EXPECT_EQ(bodies.TakeSlowest(clock.Now(), 1024, seconds(1), "10.1.0.7", "10.1.0.0/24"),
            std::nullopt);
  EXPECT_EQ(bodies.size(), 1u);
}

}  // namespace
}  // namespace sluice::admission
