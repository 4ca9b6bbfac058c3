// CircuitBreaker: stops sending to a dependency that refuses connections (docs/overload.md,
// "Retries, breakers, timeouts"). It opens on fast failures only; slowness is the caps' job, and a
// breaker counting timeouts would open on a slow-but-working dependency and send its load somewhere
// worse. Open for 5 s, then exactly one probe at a time: a probe that succeeds closes it, a probe
// refused re-opens it. A refusal that says the dependency is no longer the one to write to (a
// primary failing over) is a fact about where to go, not a blip to wait out: a breaker it opens
// stays open only `failover_open_for` (250 ms), so a probe finds the new primary soon after the
// promotion (docs/overload.md, "Retries, breakers, timeouts").
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>

#include "sluice/common/clock.h"

namespace sluice::admission {

enum class BreakerState { kClosed, kOpen, kHalfOpen };

/// "closed", "open", "half_open", for metrics and logs.
const char* BreakerStateName(BreakerState state);

struct CircuitBreakerOptions {
  /// Consecutive refusals that open a closed breaker; any success resets the count.
  /// Precondition: > 0. Default: 5.
  int refusals_to_open = 5;
  /// How long it stays open before one probe may go. Default: 5 s.
  Duration open_for = std::chrono::seconds(5);
  /// How long it stays open when the refusal that opened it was Pass::NotPrimary. Default: 250 ms.
  Duration failover_open_for = std::chrono::milliseconds(250);
  /// Called on every state change, on the thread that caused it, after the breaker's lock is
  /// released (so it may read the breaker). Must be thread-safe. Default: none.
  std::function<void(BreakerState from, BreakerState to)> on_transition;
};

/// One breaker per dependency. Thread-safe: one mutex, held for a few comparisons.
class CircuitBreaker {
 public:
  /// Permission for one call. Move-only. Report how the call went with exactly one of
  /// Succeeded/Refused/TimedOut; a pass destroyed unreported counts as TimedOut (no signal).
  /// Precondition: the breaker outlives its passes.
  class Pass {
   public:
    Pass(Pass&& other) noexcept;
    Pass& operator=(Pass&& other) noexcept;
    ~Pass();

    /// The dependency answered (any answer, errors included).
    void Succeeded();
    /// A fast failure: connection refused or reset before the request was sent.
    void Refused();
    /// The dependency said it is not, or no longer, the primary (it is read-only, shutting the
    /// session down, or no host reached takes writes). Counts as a refusal; a breaker it opens,
    /// or re-opens as the probe, stays open `failover_open_for` instead of `open_for`.
    void NotPrimary();
    /// We stopped waiting, or the call ended with no signal about the dependency. Neutral: it
    /// neither opens nor closes the breaker; a probe that times out frees the probe's place.
    void TimedOut();
    bool is_probe() const { return probe_; }

   private:
    friend class CircuitBreaker;
    enum class Report { kSucceeded, kRefused, kNotPrimary, kTimedOut };
    Pass(CircuitBreaker* breaker, bool probe) : breaker_(breaker), probe_(probe) {}
    void Finish(Report report);
    CircuitBreaker* breaker_ = nullptr;
    bool probe_ = false;
  };

  /// A pass, or how long until the breaker may let one through.
  struct Admission {
    std::optional<Pass> pass;
    /// When refused: time left open, or zero while a probe is out (the probe decides).
    Duration retry_after{};
    bool allowed() const { return pass.has_value(); }
  };

  /// `clock` must outlive the breaker.
  CircuitBreaker(CircuitBreakerOptions options, const Clock& clock);

  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  /// Asks before a call. Refused while open, and while half-open with the probe out.
  Admission TryPass();

  /// New thresholds from now on (docs/operations.md, "Reload"). The state stays: an open breaker
  /// stays open, until it has been open for the new `open_for` (or `failover_open_for`, if a
  /// NotPrimary opened it); a closed one keeps its run of refusals and opens at the next refusal
  /// once that run reaches the new count. Precondition: refusals_to_open > 0.
  void SetThresholds(int refusals_to_open, Duration open_for, Duration failover_open_for);

  BreakerState state() const;
  /// State changes since construction, for a counter on /metrics.
  uint64_t transitions() const;

 private:
  void OnReport(bool probe, Pass::Report report);
  // Opens (from closed or half-open) for the window of the refusal that opened it, under mu_.
  void OpenLocked(TimePoint now, Pass::Report report,
                  std::optional<std::pair<BreakerState, BreakerState>>* fired);
  // Changes state under mu_; the callback runs after unlock.
  void MoveToLocked(BreakerState to, std::optional<std::pair<BreakerState, BreakerState>>* fired);
  void Notify(const std::optional<std::pair<BreakerState, BreakerState>>& fired) const;

  // Only on_transition is read from here; the thresholds a reload changes are below, under mu_.
  const CircuitBreakerOptions options_;
  const Clock& clock_;
  mutable std::mutex mu_;
  int refusals_to_open_;
  Duration open_for_;
  Duration failover_open_for_;
  BreakerState state_ = BreakerState::kClosed;
  int consecutive_refusals_ = 0;
  TimePoint opened_at_{};
  // Whether a NotPrimary opened it: the window is then failover_open_for_. Read when asked, not
  // when opened, so that a reload shortens or lengthens the window of an open breaker too.
  bool opened_by_failover_ = false;
  bool probe_out_ = false;
  uint64_t transitions_ = 0;
};

}  // namespace sluice::admission
