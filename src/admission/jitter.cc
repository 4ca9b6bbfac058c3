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

uint64_t JitteredRetryAfter::Pack(int min_seconds, int max_seconds) {
  return (uint64_t{static_cast<uint32_t>(min_seconds)} << 32) | static_cast<uint32_t>(max_seconds);
}

JitteredRetryAfter::JitteredRetryAfter(RetryAfterOptions options)
    : band_(Pack(options.min_seconds, options.max_seconds)), jitter_(SeedOrRandom(options.seed)) {}

void JitteredRetryAfter::SetBand(int min_seconds, int max_seconds) {
  band_.store(Pack(min_seconds, max_seconds), std::memory_order_relaxed);
}

int JitteredRetryAfter::NextSeconds() {
  const uint64_t band = band_.load(std::memory_order_relaxed);
  const auto lo = static_cast<int32_t>(static_cast<uint32_t>(band >> 32));
  const auto hi = static_cast<int32_t>(static_cast<uint32_t>(band));
  return static_cast<int>(jitter_.Between(int64_t{lo}, int64_t{hi}));
}

}  // namespace sluice::admission
