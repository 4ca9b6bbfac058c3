#include "sluice/admission/token_bucket.h"

#include <algorithm>
#include <cmath>

namespace sluice::admission {
namespace {

// Floating-point refill can land a hair under a whole token after exactly the advertised wait.
// Allowing that hair keeps "wait retry_after, then succeed" true; the debt stays in the bucket
// (tokens may go a hair below zero), so the slack never accumulates past one epsilon.
constexpr double kEpsilon = 1e-9;

}  // namespace

int TakeDecision::RetryAfterSeconds() const {
  if (allowed) return 0;
  if (retry_after >= std::chrono::seconds(1'000'000'000)) return 1'000'000'000;
  const auto secs = std::chrono::ceil<std::chrono::seconds>(retry_after).count();
  return static_cast<int>(std::max<int64_t>(secs, 1));
}

void TokenBucketState::Refill(const TokenBucketPolicy& policy, TimePoint now) {
  if (now <= updated) return;
  tokens = std::min(policy.burst, tokens + policy.rate_per_second * ToSeconds(now - updated));
  updated = now;
}

TakeDecision TokenBucketState::Check(const TokenBucketPolicy& policy, double n) const {
  if (n > policy.burst) return TakeDecision{false, Duration::max(), true};
  if (tokens + kEpsilon >= n) return TakeDecision{true, Duration::zero(), false};
  const double wait_ns = std::ceil((n - tokens) / policy.rate_per_second * 1e9);
  return TakeDecision{false, Duration(static_cast<Duration::rep>(wait_ns)), false};
}

bool TokenBucketState::IsFullAt(const TokenBucketPolicy& policy, TimePoint now) const {
  TokenBucketState copy = *this;
  copy.Refill(policy, now);
  return copy.tokens + kEpsilon >= policy.burst;
}

TokenBucket::TokenBucket(TokenBucketPolicy policy, const Clock& clock)
    : clock_(clock), policy_(policy), state_(TokenBucketState::Full(policy, clock.Now())) {}

TakeDecision TokenBucket::TryTake(double n) {
  const TimePoint now = clock_.Now();
  std::lock_guard lock(mu_);
  state_.Refill(policy_, now);
  TakeDecision decision = state_.Check(policy_, n);
  if (decision.allowed) state_.tokens -= n;
  return decision;
}

TakeDecision TokenBucket::Peek(double n) const {
  const TimePoint now = clock_.Now();
  std::lock_guard lock(mu_);
  state_.Refill(policy_, now);
  return state_.Check(policy_, n);
}

double TokenBucket::Available() const {
  const TimePoint now = clock_.Now();
  std::lock_guard lock(mu_);
  state_.Refill(policy_, now);
  return std::max(0.0, state_.tokens);
}

void TokenBucket::Refund(double n) {
  std::lock_guard lock(mu_);
  state_.tokens = std::min(policy_.burst, state_.tokens + n);
}

void TokenBucket::Drain() {
  const TimePoint now = clock_.Now();
  std::lock_guard lock(mu_);
  state_.Refill(policy_, now);
  state_.tokens = std::min(state_.tokens, 0.0);  // a hair of debt stays a debt
}

TokenBucketPolicy TokenBucket::policy() const {
  std::lock_guard lock(mu_);
  return policy_;
}

void TokenBucket::SetPolicy(TokenBucketPolicy policy) {
  const TimePoint now = clock_.Now();
  std::lock_guard lock(mu_);
  state_.Refill(policy_, now);
  policy_ = policy;
  state_.tokens = std::min(state_.tokens, policy_.burst);
}

TokenBucket::BothDecision TokenBucket::TryTakeBoth(TokenBucket& first, double n_first,
                                                   TokenBucket& second, double n_second) {
  const TimePoint first_now = first.clock_.Now();
  const TimePoint second_now = second.clock_.Now();
  std::scoped_lock lock(first.mu_, second.mu_);
  first.state_.Refill(first.policy_, first_now);
  second.state_.Refill(second.policy_, second_now);
  const TakeDecision a = first.state_.Check(first.policy_, n_first);
  if (!a.allowed) return BothDecision{a, true};
  const TakeDecision b = second.state_.Check(second.policy_, n_second);
  if (!b.allowed) return BothDecision{b, false};
  first.state_.tokens -= n_first;
  second.state_.tokens -= n_second;
  return BothDecision{a, false};
}

}  // namespace sluice::admission
