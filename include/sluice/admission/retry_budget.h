// RetryBudget: retries allowed as a fraction of requests over a sliding window, plus a small floor
// so a quiet process can still retry a connect failure (docs/overload.md, "Retries, breakers,
// timeouts"). With a 10% budget our own retries cannot amplify a failing dependency's load by more
// than about 1.1x, whatever the rule above it decides. The idea is Finagle's RetryBudget, also in
// Envoy and gRPC.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "sluice/common/clock.h"

namespace sluice::admission {

struct RetryBudgetOptions {
  /// Retries allowed per first attempt in the window. Default: 0.1.
  double ratio = 0.1;
  /// Retries allowed per second of window even with no requests. Default: 10 (100 in 10 s).
  double min_retries_per_second = 10;
  /// How far back requests and retries count. Default: 10 s.
  Duration window = std::chrono::seconds(10);
  /// The window moves in this many steps; more is smoother and costs a little memory.
  /// Precondition: > 0. Default: 10.
  int buckets = 10;
};

/// A sliding-window retry budget. Thread-safe: one mutex, held for a few additions.
///
/// Over the window (counted in whole buckets), retries withdrawn never exceed
/// ratio x requests recorded + min_retries_per_second x window seconds.
class RetryBudget {
 public:
  /// `clock` must outlive the budget.
  RetryBudget(RetryBudgetOptions options, const Clock& clock);

  /// Counts one first attempt (not a retry). Call on every dependency call.
  void RecordRequest();
  /// Spends one retry if the budget has one.
  bool TryWithdrawRetry();
  /// Retries still allowed now (for the retry-budget balance gauge). May be fractional.
  double Balance() const;

  /// A new ratio from now on (docs/operations.md, "Reload"). The budget keeps what it has counted:
  /// the requests and retries of the window stay, and the balance is those counts weighed at the
  /// new ratio, so a lowered ratio may leave nothing to withdraw until retries age out of the
  /// window. Precondition: ratio >= 0.
  void SetRatio(double ratio);

  /// The options now (a copy: a reload may change the ratio).
  RetryBudgetOptions options() const;

 private:
  struct Bucket {
    int64_t index = -1;  // which bucket-width slice of time this one holds now
    int64_t requests = 0;
    int64_t retries = 0;
  };
  int64_t IndexNow() const;
  Bucket& Current(int64_t index);
  double BalanceLocked(int64_t index) const;

  const Clock& clock_;
  const TimePoint origin_;
  const Duration bucket_width_;
  mutable std::mutex mu_;
  RetryBudgetOptions options_;  // under mu_: SetRatio changes it
  std::vector<Bucket> buckets_;
};

}  // namespace sluice::admission
