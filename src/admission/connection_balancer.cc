#include "sluice/admission/connection_balancer.h"

namespace sluice::admission {

void ConnectionBalancer::Seat::Release() {
  if (owner_ == nullptr) return;
  std::exchange(owner_, nullptr)->loads_[worker_].fetch_sub(1, std::memory_order_relaxed);
}

ConnectionBalancer::ConnectionBalancer(size_t workers)
    : workers_(workers), loads_(std::make_unique<std::atomic<int64_t>[]>(workers)) {}

size_t ConnectionBalancer::Choose() {
  // The mutex keeps the tie rotation one sequence for every chooser; loads are read as they are,
  // since seats come and go without it.
  std::lock_guard lock(choosing_);
  size_t best = next_tie_;
  int64_t best_load = Load(best);
  for (size_t step = 1; step < workers_; ++step) {
    const size_t worker = (next_tie_ + step) % workers_;
    const int64_t load = Load(worker);
    if (load < best_load) {
      best = worker;
      best_load = load;
    }
  }
  next_tie_ = (best + 1) % workers_;
  return best;
}

ConnectionBalancer::Seat ConnectionBalancer::Sit(size_t worker) {
  loads_[worker].fetch_add(1, std::memory_order_relaxed);
  return Seat(this, worker);
}

}  // namespace sluice::admission
