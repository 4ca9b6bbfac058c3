// Token bucket: a rate with an exact burst, refilled continuously (docs/overload.md, "Create").
// Unlike a counter that resets each second, it cannot admit twice the limit across a window
// boundary, and a refusal can say exactly how long until the tokens exist, which becomes
// Retry-After. A byte bucket is the same type counting bytes.
#pragma once

#include <mutex>

#include "sluice/common/clock.h"

namespace sluice::admission {

/// How fast a bucket refills and how much it holds.
struct TokenBucketPolicy {
  /// Tokens added per second, continuously. Precondition: > 0. Default: 1.
  double rate_per_second = 1;
  /// The most tokens the bucket holds; also the largest single take that can ever succeed.
  /// Precondition: > 0. Default: 10.
  double burst = 10;
};

/// The answer to one take. A refused take spends nothing.
struct TakeDecision {
  bool allowed = false;
  /// When refused: how long until the tokens exist if nobody else takes them. Zero when allowed.
  /// Duration::max() when `exceeds_burst`.
  Duration retry_after{};
  /// When refused: the take is larger than the burst and can never succeed, however long one waits.
  bool exceeds_burst = false;

  /// `retry_after` in whole seconds for a Retry-After header: rounded up, at least 1.
  int RetryAfterSeconds() const;
};

/// The arithmetic of one bucket, without a lock or a clock: shared by TokenBucket and KeyedLimiter.
/// Not thread-safe; the owner holds the lock.
struct TokenBucketState {
  double tokens = 0;
  TimePoint updated{};

  static TokenBucketState Full(const TokenBucketPolicy& policy, TimePoint now) {
    return TokenBucketState{policy.burst, now};
  }
  /// Adds what accrued since `updated`. A `now` earlier than `updated` (two threads that read the
  /// clock in one order and took the lock in the other) adds nothing rather than going back.
  void Refill(const TokenBucketPolicy& policy, TimePoint now);
  /// What TryTake would answer, without spending. Call Refill first.
  TakeDecision Check(const TokenBucketPolicy& policy, double n) const;
  /// True once the bucket has refilled to its burst: such a state carries no information and is
  /// the same as a fresh one, so it can be forgotten.
  bool IsFullAt(const TokenBucketPolicy& policy, TimePoint now) const;
};

/// One token bucket. Thread-safe: one mutex, held for a few arithmetic operations.
class TokenBucket {
 public:
  /// Starts full. `clock` must outlive the bucket.
  TokenBucket(TokenBucketPolicy policy, const Clock& clock);

  TokenBucket(const TokenBucket&) = delete;
  TokenBucket& operator=(const TokenBucket&) = delete;

  /// Spends `n` tokens if they are all there; otherwise spends nothing and says how long to wait.
  TakeDecision TryTake(double n = 1);
  /// What TryTake(n) would answer now, spending nothing (GET /api/v1/limits).
  TakeDecision Peek(double n = 1) const;
  /// Tokens there now, spending nothing.
  double Available() const;
  /// Gives back tokens from a take whose request was then refused elsewhere; never above the burst.
  void Refund(double n);
  /// Spends every token there now; refilling goes on from zero at the policy's rate. For a bucket
  /// that stands in for another while that one is silent: what it holds is then only what refilled
  /// since the other last decided.
  void Drain();

  TokenBucketPolicy policy() const;
  /// Changes rate and burst from now on (e.g. to a local share of a global cap while the shared
  /// limiter store is down). Tokens already there are kept, capped at the new burst.
  void SetPolicy(TokenBucketPolicy policy);

  /// Takes `n_first` from `first` and `n_second` from `second` only if both allow, under both
  /// locks: a create refused by the byte bucket does not burn a count token. When refused,
  /// `refused_first` says which bucket said no (the first one checked wins a tie) and the decision
  /// is that bucket's. Precondition: `first` and `second` are different buckets.
  struct BothDecision {
    TakeDecision decision;
    bool refused_first = false;
  };
  static BothDecision TryTakeBoth(TokenBucket& first, double n_first, TokenBucket& second,
                                  double n_second);

 private:
  const Clock& clock_;
  mutable std::mutex mu_;
  TokenBucketPolicy policy_;
  mutable TokenBucketState state_;
};

}  // namespace sluice::admission
