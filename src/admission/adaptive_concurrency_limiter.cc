#include "sluice/admission/adaptive_concurrency_limiter.h"

#include <algorithm>
#include <cmath>

namespace sluice::admission {

AdaptiveConcurrencyLimiter::AdaptiveConcurrencyLimiter(AdaptiveConcurrencyOptions options,
                                                       const Clock& clock)
    : options_(options),
      clock_(clock),
      limit_(std::clamp(options.initial_limit, options.min_limit, options.max_limit)),
      max_bytes_(options.max_bytes),
      estimate_(static_cast<double>(limit_.load())) {}

void AdaptiveConcurrencyLimiter::SetBounds(int64_t max_limit, int64_t max_bytes,
                                           Duration target_latency) {
  std::lock_guard lock(mu_);
  options_.max_limit = std::max(max_limit, options_.min_limit);
  options_.max_bytes = max_bytes;
  options_.target_latency = target_latency;
  max_bytes_.store(max_bytes, std::memory_order_relaxed);
  estimate_ = std::min(estimate_, static_cast<double>(options_.max_limit));
  limit_.store(std::clamp(static_cast<int64_t>(std::floor(estimate_)), options_.min_limit,
                          options_.max_limit),
               std::memory_order_relaxed);
}

AcquireResult AdaptiveConcurrencyLimiter::TryAcquire(int64_t bytes) {
  const int64_t limit = limit_.load(std::memory_order_relaxed);
  if (auto refusal =
          counter_.TryAcquire(limit, max_bytes_.load(std::memory_order_relaxed), bytes)) {
    (*refusal == SlotRefusal::kCount ? refused_count_ : refused_bytes_)
        .fetch_add(1, std::memory_order_relaxed);
    return AcquireResult{std::nullopt, *refusal};
  }
  return AcquireResult{MakePermit(bytes, clock_.Now()), SlotRefusal::kCount};
}

SlotGauges AdaptiveConcurrencyLimiter::Gauges() const {
  const internal::SlotCounter::Snapshot now = counter_.Load();
  return SlotGauges{now.count,
                    now.bytes,
                    limit(),
                    max_bytes_.load(std::memory_order_relaxed),
                    refused_count_.load(std::memory_order_relaxed),
                    refused_bytes_.load(std::memory_order_relaxed)};
}

void AdaptiveConcurrencyLimiter::ReleaseSlot(const Permit& permit, Outcome outcome,
                                             std::optional<Duration> latency) {
  // Read in-use before giving the slot back: it is the concurrency this sample ran under.
  const int64_t in_use = counter_.Load().count;
  counter_.ReleaseCount();
  if (outcome == Outcome::kIgnore) return;

  const TimePoint now = clock_.Now();
  const Duration rtt = latency.value_or(now - permit.acquired_at());

  std::lock_guard lock(mu_);
  const bool overload = outcome != Outcome::kSuccess || rtt > options_.target_latency;
  if (overload) {
    if (decreased_ && permit.acquired_at() < last_decrease_at_) return;
    estimate_ =
        std::max(static_cast<double>(options_.min_limit), estimate_ * options_.backoff_ratio);
    decreased_ = true;
    last_decrease_at_ = now;
  } else {
    if (in_use * 2 < limit_.load(std::memory_order_relaxed)) return;
    estimate_ = std::min(static_cast<double>(options_.max_limit), estimate_ + 1);
  }
  limit_.store(std::clamp(static_cast<int64_t>(std::floor(estimate_)), options_.min_limit,
                          options_.max_limit),
               std::memory_order_relaxed);
}

void AdaptiveConcurrencyLimiter::ReleaseBytes(int64_t bytes) { counter_.ReleaseBytes(bytes); }

}  // namespace sluice::admission
