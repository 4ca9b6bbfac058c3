#include "sluice/admission/retry_budget.h"

#include <algorithm>

namespace sluice::admission {

RetryBudget::RetryBudget(RetryBudgetOptions options, const Clock& clock)
    : clock_(clock),
      origin_(clock.Now()),
      bucket_width_(std::max<Duration>(Duration(1), options.window / std::max(1, options.buckets))),
      options_(options),
      buckets_(static_cast<size_t>(std::max(1, options.buckets))) {}

void RetryBudget::SetRatio(double ratio) {
  std::lock_guard lock(mu_);
  options_.ratio = ratio;
}

RetryBudgetOptions RetryBudget::options() const {
  std::lock_guard lock(mu_);
  return options_;
}

int64_t RetryBudget::IndexNow() const {
  const Duration since = clock_.Now() - origin_;
  return since < Duration::zero() ? 0 : since / bucket_width_;
}

RetryBudget::Bucket& RetryBudget::Current(int64_t index) {
  Bucket& bucket = buckets_[static_cast<size_t>(index % static_cast<int64_t>(buckets_.size()))];
  if (bucket.index != index) bucket = Bucket{index, 0, 0};
  return bucket;
}

double RetryBudget::BalanceLocked(int64_t index) const {
  const auto n = static_cast<int64_t>(buckets_.size());
  int64_t requests = 0;
  int64_t retries = 0;
  for (const Bucket& bucket : buckets_) {
    if (bucket.index > index - n && bucket.index <= index) {
      requests += bucket.requests;
      retries += bucket.retries;
    }
  }
  const double window_seconds =
      static_cast<double>(bucket_width_.count()) * static_cast<double>(n) * 1e-9;
  return options_.ratio * static_cast<double>(requests) +
         options_.min_retries_per_second * window_seconds - static_cast<double>(retries);
}

void RetryBudget::RecordRequest() {
  // The clock is read under the lock so bucket indexes never go back.
  std::lock_guard lock(mu_);
  const int64_t index = IndexNow();
  ++Current(index).requests;
}

bool RetryBudget::TryWithdrawRetry() {
  // The clock is read under the lock so bucket indexes never go back.
  std::lock_guard lock(mu_);
  const int64_t index = IndexNow();
  if (BalanceLocked(index) < 1) return false;
  ++Current(index).retries;
  return true;
}

double RetryBudget::Balance() const {
  // The clock is read under the lock so bucket indexes never go back.
  std::lock_guard lock(mu_);
  const int64_t index = IndexNow();
  return BalanceLocked(index);
}

}  // namespace sluice::admission
