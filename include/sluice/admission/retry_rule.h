// The retry rule (docs/overload.md, "Retries, breakers, timeouts") as one function: retry only a
// call that provably never left (connect failed before send), at most once, only if the deadline
// still has room for the whole second attempt, only if the retry budget allows, and never a
// non-idempotent call. A timeout is never retried: the work may still be running, and a retry adds
// its twin.
#pragma once

#include "sluice/admission/deadline.h"
#include "sluice/admission/retry_budget.h"
#include "sluice/common/clock.h"
#include "sluice/common/result.h"

namespace sluice::admission {

/// Everything the rule looks at, for one failed attempt.
struct RetryContext {
  /// Attempts already made, the failed one included (1 after the first failure). Default: 1.
  int attempts = 1;
  /// Whether a second copy of the call is harmless. A create never is. Default: false.
  bool idempotent = false;
  /// How the attempt failed. Only `never_sent` (with a code other than kDeadlineExceeded) retries.
  /// Default: nullptr, which never retries.
  const Error* error = nullptr;
  /// The request's deadline and the clock to read it with. Default: Never, and no clock (which
  /// never retries).
  Deadline deadline = Deadline::Never();
  const Clock* clock = nullptr;
  /// What a second attempt needs: its own timeout plus the most jitter before it is sent.
  /// Default: zero.
  Duration attempt_needs{};
  /// Withdrawn from only when every other condition holds. Default: nullptr, no budget applies.
  RetryBudget* budget = nullptr;
};

/// Why the rule said what it said; each refusal has its own reason for metrics and logs.
enum class RetryVerdict {
  kRetry,
  kNotIdempotent,
  /// The request may have reached the other side (timeout, reset after send, an answer).
  kMaybeSent,
  kAttemptsExhausted,
  kNoTimeLeft,
  kBudgetExhausted,
};

const char* RetryVerdictName(RetryVerdict verdict);

/// Decides one retry. Spends one retry from the budget exactly when it answers kRetry.
/// Thread-safe if the budget is (it is). Precondition: `error` and `clock` are set.
RetryVerdict ShouldRetry(const RetryContext& context);

}  // namespace sluice::admission
