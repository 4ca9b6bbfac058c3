#include "sluice/admission/keyed_slots.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace sluice::admission {
namespace {

TEST(KeyedSlots, AdmitsAtMostTheShareOfOneKey) {
  KeyedSlots slots(3);
  std::vector<KeyedSlots::Slot> held;
  for (int i = 0; i < 3; ++i) held.push_back(*slots.TryAcquire("10.0.0.1"));
  EXPECT_FALSE(slots.TryAcquire("10.0.0.1").has_value());
  EXPECT_TRUE(slots.TryAcquire("10.0.0.2").has_value());  // another key is not affected
  held.pop_back();
  EXPECT_TRUE(slots.TryAcquire("10.0.0.1").has_value());
}

TEST(KeyedSlots, ForgetsKeysWithNothingInFlight) {
  KeyedSlots slots(2);
  {
    auto a = slots.TryAcquire("a");
    auto b = slots.TryAcquire("b");
    EXPECT_EQ(slots.keys(), 2u);
  }
  EXPECT_EQ(slots.keys(), 0u);
}

TEST(KeyedSlots, MovedSlotReleasesOnce) {
  KeyedSlots slots(1);
  auto first = slots.TryAcquire("k");
  KeyedSlots::Slot moved = std::move(*first);
  first.reset();
  EXPECT_EQ(slots.InFlight("k"), 1);
  moved.Release();
  EXPECT_EQ(slots.InFlight("k"), 0);
}

TEST(KeyedSlotsStress, NeverExceedsTheShareUnderContention) {
  KeyedSlots slots(3);
  std::atomic<int> now{0};
  std::atomic<int> peak{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        if (auto slot = slots.TryAcquire("shared")) {
          const int n = ++now;
          int p = peak.load();
          while (n > p && !peak.compare_exchange_weak(p, n)) {
          }
          --now;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(peak.load(), 3);
  EXPECT_EQ(slots.keys(), 0u);
}

}  // namespace
}  // namespace sluice::admission
