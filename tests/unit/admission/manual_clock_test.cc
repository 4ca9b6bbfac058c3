// ManualClock's alarms, the waits that include/sluice/asio/timer.h builds its timers on. Here,
// with the admission tests, because this target also runs under ThreadSanitizer (Makefile
// test-tsan): stress tests share one ManualClock across threads.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "sluice/common/clock.h"

namespace sluice {
namespace {

using std::chrono::milliseconds;

TEST(ManualClockTest, AnAlarmRingsWhenTimeReachesItAndNotBefore) {
  ManualClock clock;
  int rang = 0;
  clock.SetAlarm(clock.Now() + milliseconds(10), [&] { ++rang; });
  EXPECT_EQ(clock.NextAlarm(), clock.Now() + milliseconds(10));
  clock.Advance(milliseconds(10) - Duration(1));
  EXPECT_EQ(rang, 0);
  clock.Advance(Duration(1));
  EXPECT_EQ(rang, 1);
  clock.Advance(milliseconds(10));
  EXPECT_EQ(rang, 1) << "rings once";
  EXPECT_EQ(clock.PendingAlarms(), 0u);
}

TEST(ManualClockTest, AnAlarmAlreadyDueRingsAtOnceAndAlarmsRingInTimeOrder) {
  ManualClock clock;
  std::vector<int> order;
  clock.SetAlarm(clock.Now(), [&] { order.push_back(0); });
  EXPECT_EQ(order, std::vector<int>{0});
  clock.SetAlarm(clock.Now() + milliseconds(3), [&] { order.push_back(3); });
  clock.SetAlarm(clock.Now() + milliseconds(1), [&] { order.push_back(1); });
  clock.SetAlarm(clock.Now() + milliseconds(2), [&] { order.push_back(2); });
  clock.Advance(milliseconds(5));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(ManualClockTest, ACancelledAlarmNeverRingsAndARingingOneMaySetAnother) {
  ManualClock clock;
  int rang = 0;
  const auto id = clock.SetAlarm(clock.Now() + milliseconds(1), [&] { ++rang; });
  EXPECT_TRUE(clock.CancelAlarm(id));
  EXPECT_FALSE(clock.CancelAlarm(id));
  // A ringing alarm sets the next one, as a loop's timer does; the same Advance rings it if due.
  clock.SetAlarm(clock.Now() + milliseconds(1), [&] {
    ++rang;
    clock.SetAlarm(clock.Now(), [&] { ++rang; });
  });
  clock.Advance(milliseconds(1));
  EXPECT_EQ(rang, 2);
}

TEST(ManualClockTest, AlarmsSetAndCancelledFromManyThreadsRingAtMostOnce) {
  ManualClock clock;
  constexpr int kThreads = 4;
  constexpr int kAlarms = 500;
  std::atomic<int> rang{0}, cancelled{0};
  std::atomic<bool> done{false};
  std::thread advancer([&] {
    while (!done) clock.Advance(milliseconds(1));
  });
  std::vector<std::thread> setters;
  for (int t = 0; t < kThreads; ++t) {
    setters.emplace_back([&, t] {
      for (int i = 0; i < kAlarms; ++i) {
        const auto id = clock.SetAlarm(clock.Now() + milliseconds(i % 3), [&] { ++rang; });
        if ((i + t) % 2 == 0 && clock.CancelAlarm(id)) ++cancelled;
      }
    });
  }
  for (auto& s : setters) s.join();
  clock.Advance(milliseconds(10));
  done = true;
  advancer.join();
  EXPECT_EQ(rang + cancelled, kThreads * kAlarms);
  EXPECT_EQ(clock.PendingAlarms(), 0u);
}

}  // namespace
}  // namespace sluice
