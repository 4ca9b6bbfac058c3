#include "sluice/admission/connection_balancer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "run_threads.h"

namespace sluice::admission {
namespace {

// What a listener does per connection: choose, accept, sit.
ConnectionBalancer::Seat Accept(ConnectionBalancer& balancer) {
  return balancer.Sit(balancer.Choose());
}

std::vector<int64_t> Loads(const ConnectionBalancer& balancer) {
  std::vector<int64_t> loads;
  for (size_t w = 0; w < balancer.workers(); ++w) loads.push_back(balancer.Load(w));
  return loads;
}

TEST(ConnectionBalancer, SpreadsABurstEvenly) {
  // 64 connections over 2 loops is the benchmark's shape: the kernel's hash split it up to 41/24.
  ConnectionBalancer balancer(2);
  std::vector<ConnectionBalancer::Seat> seats;
  for (int i = 0; i < 64; ++i) seats.push_back(Accept(balancer));
  EXPECT_EQ(Loads(balancer), (std::vector<int64_t>{32, 32}));

  ConnectionBalancer three(3);
  std::vector<ConnectionBalancer::Seat> more;
  for (int i = 0; i < 10; ++i) more.push_back(Accept(three));
  const auto loads = Loads(three);
  EXPECT_LE(
      *std::max_element(loads.begin(), loads.end()) - *std::min_element(loads.begin(), loads.end()),
      1);
}

TEST(ConnectionBalancer, RefillsTheLoopWhoseConnectionsClosed) {
  ConnectionBalancer balancer(2);
  std::vector<ConnectionBalancer::Seat> seats;
  for (int i = 0; i < 8; ++i) seats.push_back(Accept(balancer));
  // Close every connection of worker 0: the next four all go there, none to worker 1.
  std::erase_if(seats, [](const ConnectionBalancer::Seat& s) { return s.worker() == 0; });
  EXPECT_EQ(Loads(balancer), (std::vector<int64_t>{0, 4}));
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(Accept(balancer).worker(), 0u) << i;  // each released at once
  for (int i = 0; i < 4; ++i) seats.push_back(Accept(balancer));
  EXPECT_EQ(Loads(balancer), (std::vector<int64_t>{4, 4}));
}

TEST(ConnectionBalancer, TiesGoRoundTheWorkers) {
  // Connections that open and close one at a time (no keep-alive) tie every time: they must still
  // use every loop, not all start on the first.
  ConnectionBalancer balancer(4);
  std::vector<size_t> workers;
  for (int i = 0; i < 8; ++i) workers.push_back(Accept(balancer).worker());
  EXPECT_EQ(workers, (std::vector<size_t>{0, 1, 2, 3, 0, 1, 2, 3}));
}

TEST(ConnectionBalancer, AMovedSeatReleasesOnce) {
  ConnectionBalancer balancer(1);
  auto first = Accept(balancer);
  ConnectionBalancer::Seat moved = std::move(first);
  first.Release();
  EXPECT_EQ(balancer.Load(0), 1);
  ConnectionBalancer::Seat assigned = Accept(balancer);
  assigned = std::move(moved);  // drops the seat it held, keeps the moved one
  EXPECT_EQ(balancer.Load(0), 1);
  assigned.Release();
  EXPECT_EQ(balancer.Load(0), 0);
}

TEST(ConnectionBalancer, GivesEverySeatBackWhenConnectionsCloseOnOtherThreads) {
  // Four acceptors take seats while their connections close on other threads (as sessions end on
  // their own loops): every seat is given back exactly once.
  ConnectionBalancer balancer(3);
  std::mutex kept_mu;
  std::vector<ConnectionBalancer::Seat> kept;
  testing::RunThreads(4, [&](int thread) {
    std::vector<ConnectionBalancer::Seat> open;
    for (int i = 0; i < 3000; ++i) {
      open.push_back(Accept(balancer));
      if (open.size() > static_cast<size_t>(4 + thread)) open.erase(open.begin());  // oldest closes
    }
    std::lock_guard lock(kept_mu);
    for (auto& seat : open) kept.push_back(std::move(seat));
  });
  int64_t total = 0;
  for (int64_t load : Loads(balancer)) total += load;
  EXPECT_EQ(total, static_cast<int64_t>(kept.size()));
  kept.clear();
  EXPECT_EQ(Loads(balancer), (std::vector<int64_t>{0, 0, 0}));
}

TEST(ConnectionBalancer, ConcurrentListenersStayWithinOneConnectionEachOfEven) {
  // Listeners choose, then sit: a choice misses at most the seats the other listeners are taking
  // at that moment, so the spread is never worse than one connection per listener.
  constexpr int kListeners = 4;
  ConnectionBalancer balancer(3);
  std::mutex kept_mu;
  std::vector<ConnectionBalancer::Seat> kept;
  testing::RunThreads(kListeners, [&](int) {
    std::vector<ConnectionBalancer::Seat> open;
    for (int i = 0; i < 300; ++i) open.push_back(Accept(balancer));
    std::lock_guard lock(kept_mu);
    for (auto& seat : open) kept.push_back(std::move(seat));
  });
  const auto loads = Loads(balancer);
  EXPECT_EQ(loads[0] + loads[1] + loads[2], 300 * kListeners);
  EXPECT_LE(
      *std::max_element(loads.begin(), loads.end()) - *std::min_element(loads.begin(), loads.end()),
      kListeners);
}

}  // namespace
}  // namespace sluice::admission
