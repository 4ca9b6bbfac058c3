// A count cap that finds itself (docs/overload.md, "Create"): additive increase while the
// dependency answers under the target latency, multiplicative decrease on a timeout, a drop or a
// slow answer, as in Netflix concurrency-limits' AIMDLimit. Usable wherever the static
// ConcurrencyLimiter is; the byte cap stays fixed, because memory does not grow with the limit.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "sluice/admission/concurrency_limiter.h"
#include "sluice/common/clock.h"

namespace sluice::admission {

struct AdaptiveConcurrencyOptions {
  /// The count limit before any sample. Default: 20.
  int64_t initial_limit = 20;
  /// The limit never goes below this, so a sick dependency still gets probed. Default: 1.
  int64_t min_limit = 1;
  /// The limit never goes above this. Precondition: <= 1'048'575. Default: 200.
  int64_t max_limit = 200;
  /// A success slower than this counts as overload. Default: 500 ms (half the 1 s PUT timeout,
  /// where shedding is about to begin: docs/overload.md, "Planning the caps").
  Duration target_latency = std::chrono::milliseconds(500);
  /// The limit is multiplied by this on overload. Precondition: in (0, 1). Default: 0.9.
  double backoff_ratio = 0.9;
  /// Fixed cap on bytes held by in-flight units. Default: 32 MiB.
  int64_t max_bytes = int64_t{32} << 20;
};

/// An AIMD concurrency limiter. Thread-safe: acquire is lock-free; a release that reports an
/// outcome takes a short mutex to update the limit.
///
/// Increase: +1 on a success under target, but only while at least half the limit is in use, so an
/// idle process does not grow a limit it never tested. Decrease: limit x backoff_ratio, at most
/// once per cohort: only a permit acquired after the last decrease can cause another, because the
/// whole cohort that was in flight when the dependency slowed reports its timeouts together and one
/// event should not be punished fifty times (TCP halves once per round trip for the same reason).
class AdaptiveConcurrencyLimiter final : public SlotLimiter {
 public:
  /// `clock` measures latency and must outlive the limiter.
  AdaptiveConcurrencyLimiter(AdaptiveConcurrencyOptions options, const Clock& clock);

  AcquireResult TryAcquire(int64_t bytes = 0) override;
  SlotGauges Gauges() const override;
  /// The count limit now.
  int64_t limit() const { return limit_.load(std::memory_order_relaxed); }
  /// A new ceiling, byte cap and target from now on (a configuration reload). The limit learned so
  /// far is kept, clamped under the new ceiling; permits already out are kept and, when the limit
  /// is now below them, finish while nothing new is admitted.
  void SetBounds(int64_t max_limit, int64_t max_bytes, Duration target_latency);

 private:
  void ReleaseSlot(const Permit& permit, Outcome outcome, std::optional<Duration> latency) override;
  void ReleaseBytes(int64_t bytes) override;

  AdaptiveConcurrencyOptions options_;  // guarded by mu_ (max_bytes: see max_bytes_)
  const Clock& clock_;
  internal::SlotCounter counter_;
  std::atomic<int64_t> limit_;
  std::atomic<int64_t> max_bytes_;
  std::atomic<uint64_t> refused_count_{0};
  std::atomic<uint64_t> refused_bytes_{0};

  std::mutex mu_;
  double estimate_;               // guarded by mu_; limit_ is its floor
  TimePoint last_decrease_at_{};  // guarded by mu_
  bool decreased_ = false;        // guarded by mu_
};

}  // namespace sluice::admission
