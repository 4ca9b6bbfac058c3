// Deadline: a point in time past which nobody waits for the answer. It propagates: each call gets
// the smaller of its own timeout and what is left of the request's budget (docs/overload.md,
// "Retries, breakers, timeouts"), so every hop can be within its own timeout and the request still
// within its budget. Shared by admission, the stores, the service and the edge, so it lives in
// common/.
#pragma once

#include <algorithm>

#include "sluice/common/clock.h"

namespace sluice {

/// An absolute deadline on the monotonic clock. A value type; copy freely.
class Deadline {
 public:
  /// A deadline that never expires, for background work that has its own stop condition.
  static Deadline Never() { return Deadline(TimePoint::max()); }
  static Deadline At(TimePoint at) { return Deadline(at); }
  static Deadline After(const Clock& clock, Duration budget) {
    return Deadline(SaturatingAdd(clock.Now(), budget));
  }

  TimePoint at() const { return at_; }
  bool IsNever() const { return at_ == TimePoint::max(); }

  /// Time left, zero once passed.
  Duration Remaining(const Clock& clock) const {
    if (IsNever()) return Duration::max();
    const TimePoint now = clock.Now();
    return now >= at_ ? Duration::zero() : at_ - now;
  }
  bool Expired(const Clock& clock) const { return !IsNever() && clock.Now() >= at_; }

  /// The deadline for one call: its own timeout, capped by this (the request's) deadline.
  Deadline ForCall(const Clock& clock, Duration call_timeout) const {
    return Deadline(std::min(at_, SaturatingAdd(clock.Now(), call_timeout)));
  }

  /// True if at least `needed` is left: the retry rule asks this before a second attempt.
  /// An expired deadline has room for nothing, not even a zero-length call.
  bool HasRoomFor(const Clock& clock, Duration needed) const {
    const Duration left = Remaining(clock);
    return left > Duration::zero() && left >= needed;
  }

  /// The earlier of two deadlines: a call made on behalf of two budgets honours both.
  static Deadline Earliest(const Deadline& a, const Deadline& b) {
    return Deadline(std::min(a.at_, b.at_));
  }

  friend bool operator==(const Deadline&, const Deadline&) = default;

 private:
  explicit Deadline(TimePoint at) : at_(at) {}
  static TimePoint SaturatingAdd(TimePoint t, Duration d) {
    if (d >= TimePoint::max() - t) return TimePoint::max();
    return t + d;
  }
  TimePoint at_;
};

}  // namespace sluice
