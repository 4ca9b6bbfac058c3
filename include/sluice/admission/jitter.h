// Jitter: spreads out clients told to come back, so 310 creators refused in one second do not
// return together five seconds later as one wave (docs/overload.md, "Create"), and spreads a retry
// over tens of milliseconds so every process does not hit a dependency in the same millisecond
// (docs/overload.md, "Retries, breakers, timeouts").
#pragma once

#include <atomic>
#include <cstdint>

#include "sluice/common/clock.h"

namespace sluice::admission {

/// A small uniform random source (SplitMix64 over an atomic counter). Thread-safe and lock-free;
/// deterministic for a seed when used from one thread. Not for secrets: ids and delete tokens come
/// from a CSPRNG elsewhere.
class Jitter {
 public:
  explicit Jitter(uint64_t seed);

  /// Uniform integer in [lo, hi]. Precondition: lo <= hi.
  int64_t Between(int64_t lo, int64_t hi);
  /// Uniform duration in [lo, hi], to the nanosecond. Precondition: lo <= hi.
  Duration Between(Duration lo, Duration hi);

 private:
  uint64_t Next();
  std::atomic<uint64_t> state_;
};

struct RetryAfterOptions {
  /// Shortest Retry-After handed out, in seconds. Default: 5.
  int min_seconds = 5;
  /// Longest Retry-After handed out, in seconds. Precondition: >= min_seconds. Default: 15.
  int max_seconds = 15;
  /// Seed, fixed in tests. Default: 0, which means seed from the machine's random device.
  uint64_t seed = 0;
};

/// Retry-After values for 503s from the caps: whole seconds, uniform in [min, max]. Thread-safe.
class JitteredRetryAfter {
 public:
  explicit JitteredRetryAfter(RetryAfterOptions options = {});
  int NextSeconds();
  /// A new band from now on (a configuration reload). Precondition: min_seconds <= max_seconds.
  void SetBand(int min_seconds, int max_seconds);

 private:
  static uint64_t Pack(int min_seconds, int max_seconds);
  // min in the high half, max in the low: one load gives a band that was configured, never the
  // old minimum with the new maximum.
  std::atomic<uint64_t> band_;
  Jitter jitter_;
};

}  // namespace sluice::admission
