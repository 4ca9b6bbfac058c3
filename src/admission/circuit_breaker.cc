#include "sluice/admission/circuit_breaker.h"

#include <utility>

namespace sluice::admission {

const char* BreakerStateName(BreakerState state) {
  switch (state) {
    case BreakerState::kClosed:
      return "closed";
    case BreakerState::kOpen:
      return "open";
    case BreakerState::kHalfOpen:
      return "half_open";
  }
  return "closed";
}

CircuitBreaker::Pass::Pass(Pass&& other) noexcept
    : breaker_(std::exchange(other.breaker_, nullptr)), probe_(other.probe_) {}

CircuitBreaker::Pass& CircuitBreaker::Pass::operator=(Pass&& other) noexcept {
  if (this != &other) {
    Finish(Report::kTimedOut);
    breaker_ = std::exchange(other.breaker_, nullptr);
    probe_ = other.probe_;
  }
  return *this;
}

CircuitBreaker::Pass::~Pass() { Finish(Report::kTimedOut); }

void CircuitBreaker::Pass::Succeeded() { Finish(Report::kSucceeded); }
void CircuitBreaker::Pass::Refused() { Finish(Report::kRefused); }
void CircuitBreaker::Pass::NotPrimary() { Finish(Report::kNotPrimary); }
void CircuitBreaker::Pass::TimedOut() { Finish(Report::kTimedOut); }

void CircuitBreaker::Pass::Finish(Report report) {
  if (breaker_ == nullptr) return;
  std::exchange(breaker_, nullptr)->OnReport(probe_, report);
}

CircuitBreaker::CircuitBreaker(CircuitBreakerOptions options, const Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      refusals_to_open_(options_.refusals_to_open),
      open_for_(options_.open_for),
      failover_open_for_(options_.failover_open_for) {}

void CircuitBreaker::SetThresholds(int refusals_to_open, Duration open_for,
                                   Duration failover_open_for) {
  std::lock_guard lock(mu_);
  refusals_to_open_ = refusals_to_open;
  open_for_ = open_for;
  failover_open_for_ = failover_open_for;
}

CircuitBreaker::Admission CircuitBreaker::TryPass() {
  const TimePoint now = clock_.Now();
  std::optional<std::pair<BreakerState, BreakerState>> fired;
  Admission admission;
  {
    std::lock_guard lock(mu_);
    if (state_ == BreakerState::kOpen) {
      const TimePoint reopen_at =
          opened_at_ + (opened_by_failover_ ? failover_open_for_ : open_for_);
      if (now < reopen_at) {
        admission.retry_after = reopen_at - now;
        return admission;
      }
      MoveToLocked(BreakerState::kHalfOpen, &fired);
    }
    if (state_ == BreakerState::kHalfOpen) {
      if (!probe_out_) {
        probe_out_ = true;
        admission.pass = Pass(this, true);
      }
    } else {
      admission.pass = Pass(this, false);
    }
  }
  Notify(fired);
  return admission;
}

void CircuitBreaker::OnReport(bool probe, Pass::Report report) {
  const TimePoint now = clock_.Now();
  std::optional<std::pair<BreakerState, BreakerState>> fired;
  const bool refused = report == Pass::Report::kRefused || report == Pass::Report::kNotPrimary;
  {
    std::lock_guard lock(mu_);
    if (probe) {
      // Only the probe decides a half-open breaker; calls let through before it opened do not.
      probe_out_ = false;
      if (state_ == BreakerState::kHalfOpen) {
        if (report == Pass::Report::kSucceeded) {
          consecutive_refusals_ = 0;
          MoveToLocked(BreakerState::kClosed, &fired);
        } else if (refused) {
          OpenLocked(now, report, &fired);
        }
      }
    } else if (state_ == BreakerState::kClosed) {
      if (report == Pass::Report::kSucceeded) {
        consecutive_refusals_ = 0;
      } else if (refused && ++consecutive_refusals_ >= refusals_to_open_) {
        OpenLocked(now, report, &fired);
      }
    }
  }
  Notify(fired);
}

void CircuitBreaker::OpenLocked(TimePoint now, Pass::Report report,
                                std::optional<std::pair<BreakerState, BreakerState>>* fired) {
  // The last refusal decides the window: it is the freshest word on what the dependency is doing.
  opened_at_ = now;
  opened_by_failover_ = report == Pass::Report::kNotPrimary;
  MoveToLocked(BreakerState::kOpen, fired);
}

void CircuitBreaker::MoveToLocked(BreakerState to,
                                  std::optional<std::pair<BreakerState, BreakerState>>* fired) {
  if (state_ == to) return;
  // Two changes under one lock (open → half-open → ...) cannot happen in one call today; keep the
  // first "from" and the last "to" if they ever do.
  *fired = std::make_pair(fired->has_value() ? (*fired)->first : state_, to);
  state_ = to;
  ++transitions_;
}

void CircuitBreaker::Notify(
    const std::optional<std::pair<BreakerState, BreakerState>>& fired) const {
  if (fired && options_.on_transition) options_.on_transition(fired->first, fired->second);
}

BreakerState CircuitBreaker::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

uint64_t CircuitBreaker::transitions() const {
  std::lock_guard lock(mu_);
  return transitions_;
}

}  // namespace sluice::admission
