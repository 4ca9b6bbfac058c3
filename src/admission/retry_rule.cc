#include "sluice/admission/retry_rule.h"

namespace sluice::admission {

const char* RetryVerdictName(RetryVerdict verdict) {
  switch (verdict) {
    case RetryVerdict::kRetry:
      return "retry";
    case RetryVerdict::kNotIdempotent:
      return "not_idempotent";
    case RetryVerdict::kMaybeSent:
      return "maybe_sent";
    case RetryVerdict::kAttemptsExhausted:
      return "attempts_exhausted";
    case RetryVerdict::kNoTimeLeft:
      return "no_time_left";
    case RetryVerdict::kBudgetExhausted:
      return "budget_exhausted";
  }
  return "maybe_sent";
}

RetryVerdict ShouldRetry(const RetryContext& context) {
  if (!context.idempotent) return RetryVerdict::kNotIdempotent;
  if (context.error == nullptr || !context.error->never_sent ||
      context.error->code == ErrorCode::kDeadlineExceeded) {
    return RetryVerdict::kMaybeSent;
  }
  if (context.attempts >= 2) return RetryVerdict::kAttemptsExhausted;
  if (context.clock == nullptr ||
      !context.deadline.HasRoomFor(*context.clock, context.attempt_needs)) {
    return RetryVerdict::kNoTimeLeft;
  }
  // Last, because it spends: a retry the other rules refuse must not use up the budget.
  if (context.budget != nullptr && !context.budget->TryWithdrawRetry()) {
    return RetryVerdict::kBudgetExhausted;
  }
  return RetryVerdict::kRetry;
}

}  // namespace sluice::admission
