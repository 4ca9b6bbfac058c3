// ConnectionBalancer: which event loop a new connection lives on. SO_REUSEPORT hashes each
// connection's addresses to a listener, so 64 keep-alive connections land 40 on one loop and 24 on
// the other as often as 32 and 32 (bench/results/loop-balance.md). Under load every loop gets the
// same share of the CPU, so a connection on the crowded loop gets less of it; and a proxy's pool of
// four keep-alive connections lands all on one loop one time in eight, leaving the other cores
// idle. Each accepted connection goes instead to the loop holding fewest open connections, as
// Envoy's "exact" connection balance does, so the split is even whatever the hash
// (docs/architecture.md, "The HTTP edge").
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

namespace sluice::admission {

/// Open connections per worker, and the choice of the least loaded. Thread-safe: a choice takes a
/// mutex (once per connection, beside an accept(2)); a seat is one atomic increment and its release
/// one decrement.
class ConnectionBalancer {
 public:
  /// A connection's place on its worker. Move-only; releases on destruction, on any thread.
  /// Precondition: the ConnectionBalancer outlives it.
  class Seat {
   public:
    Seat(Seat&& other) noexcept
        : owner_(std::exchange(other.owner_, nullptr)), worker_(other.worker_) {}
    Seat& operator=(Seat&& other) noexcept {
      if (this != &other) {
        Release();
        owner_ = std::exchange(other.owner_, nullptr);
        worker_ = other.worker_;
      }
      return *this;
    }
    Seat(const Seat&) = delete;
    Seat& operator=(const Seat&) = delete;
    ~Seat() { Release(); }

    size_t worker() const { return worker_; }
    void Release();

   private:
    friend class ConnectionBalancer;
    Seat(ConnectionBalancer* owner, size_t worker) : owner_(owner), worker_(worker) {}
    ConnectionBalancer* owner_;
    size_t worker_;
  };

  /// Precondition: workers > 0.
  explicit ConnectionBalancer(size_t workers);
  ConnectionBalancer(const ConnectionBalancer&) = delete;
  ConnectionBalancer& operator=(const ConnectionBalancer&) = delete;

  /// The worker with fewest open seats. Ties go round the workers in turn, so that an idle
  /// server's first connections, and a burst of them, do not all start on worker 0, and two
  /// listeners choosing at once from equal loads choose apart. A listener sits right after it
  /// chooses; between the two, another may choose from the same loads, so the spread stays within
  /// one connection per listener.
  size_t Choose();
  /// A seat on `worker`, held as long as the connection is open. Precondition: worker < workers().
  Seat Sit(size_t worker);

  size_t workers() const { return workers_; }
  /// Seats open on `worker` now (a gauge's reading; it may change as soon as it is read).
  int64_t Load(size_t worker) const { return loads_[worker].load(std::memory_order_relaxed); }

 private:
  const size_t workers_;
  std::unique_ptr<std::atomic<int64_t>[]> loads_;
  std::mutex choosing_;
  size_t next_tie_ = 0;  // guarded by choosing_
};

}  // namespace sluice::admission
