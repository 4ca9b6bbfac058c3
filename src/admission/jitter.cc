#include "sluice/admission/jitter.h"

#include <random>

namespace sluice::admission {

Jitter::Jitter(uint64_t seed) : state_(seed) {}

uint64_t Jitter::Next() {
  // SplitMix64: each caller gets its own counter value, then mixes it; no lock, no shared RNG state
  // to race on.
  uint64_t z =
      state_.fetch_add(0x9e3779b97f4a7c15ULL, std::memory_order_relaxed) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int64_t Jitter::Between(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
  // span == 0 means the full 64-bit range. Modulo bias is below 2^-40 for any span we use.
  const uint64_t draw = span == 0 ? Next() : Next() % span;
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + draw);
}

Duration Jitter::Between(Duration lo, Duration hi) {
  return Duration(Between(static_cast<int64_t>(lo.count()), static_cast<int64_t>(hi.count())));
}

namespace {

uint64_t SeedOrRandom(uint64_t seed) {
  if (seed != 0) return seed;
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

JitteredRetryAfter::JitteredRetryAfter(RetryAfterOptions options)
    : options_(options), jitter_(SeedOrRandom(options.seed)) {}

int JitteredRetryAfter::NextSeconds() {
  return static_cast<int>(
      jitter_.Between(int64_t{options_.min_seconds}, int64_t{options_.max_seconds}));
}

}  // namespace sluice::admission
