// KeyedLimiter: one token bucket (or a pair, e.g. creates and bytes) per client key, in bounded
// memory. Spec 004 keys creates on the address the balancer appended; see client_key.h.
//
// Memory: at most `max_keys` keys. A key whose buckets have refilled to their burst carries no
// information (it is the same as a key never seen), so such keys are forgotten first: idle keys
// expire lazily as new keys arrive, and a full table first evicts a refilled key among the eight
// least recently used. When those all still owe tokens, the least recently used is evicted anyway,
// and it comes back with full buckets. That is the trade-off:
// refusing new keys instead would let a flood of fresh addresses lock out every new honest client,
// which is worse than the reset. A key is touched on every take, refused ones included, so a key
// that is busy (the abuser hammering at its limit) stays at the front; to reset it an attacker must
// push `max_keys / shards` fresh keys through its shard between two of its own requests, and
// someone with that many addresses can already spread load across them. `debtor_evictions()`
// counts these resets so an operator can see them (and raise `max_keys`).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/admission/token_bucket.h"
#include "sluice/common/clock.h"

namespace sluice::admission {

struct KeyedLimiterOptions {
  /// One bucket per dimension for every key, e.g. {1/s burst 10 creates, 100 KB/s burst 2 MB}.
  /// Precondition: 1 to kMaxDimensions entries. Default: one bucket, 1/s burst 10.
  std::vector<TokenBucketPolicy> policies = {TokenBucketPolicy{}};
  /// The most keys held at once (split evenly over the shards). Default: 100'000.
  size_t max_keys = 100'000;
  /// Independent tables, each with its own mutex, so request threads rarely wait on each other.
  /// Precondition: > 0. Default: 16.
  size_t shards = 16;
};

/// A take answered for one key. A refused take spends nothing in any dimension.
struct KeyedDecision {
  TakeDecision decision;
  /// Which dimension refused (0 or 1), -1 when allowed. Maps to a reason: 0 → ip_create_count,
  /// 1 → ip_create_bytes.
  int refused_dimension = -1;
  bool allowed() const { return decision.allowed; }
};

/// Budgets of one key, spent nothing to read. A key not in the table reports full buckets.
struct KeyedBudget {
  std::array<double, 2> available{};
};

/// Per-key token buckets. Thread-safe: keys are spread over shards, each with a mutex.
class KeyedLimiter {
 public:
  static constexpr size_t kMaxDimensions = 2;

  /// `clock` must outlive the limiter.
  KeyedLimiter(KeyedLimiterOptions options, const Clock& clock);
  ~KeyedLimiter();

  KeyedLimiter(const KeyedLimiter&) = delete;
  KeyedLimiter& operator=(const KeyedLimiter&) = delete;

  /// Takes `first` from dimension 0 and `second` from dimension 1 (ignored with one policy), all
  /// or nothing.
  KeyedDecision TryTake(std::string_view key, double first = 1, double second = 0);
  /// Gives back a take whose request was then refused elsewhere (e.g. by a global bucket). A key
  /// evicted in between gets nothing back; it already has full buckets.
  void Refund(std::string_view key, double first, double second = 0);
  /// What the key has now, spending nothing and adding no key.
  KeyedBudget Peek(std::string_view key) const;

  /// The policies now (they change with SetPolicies).
  std::vector<TokenBucketPolicy> policies() const;
  /// Changes every key's rates and bursts from now on (a configuration reload). Each key keeps the
  /// tokens it has, refilled at the old rate up to now and capped at the new burst, so a client
  /// neither gains a fresh burst nor loses what it saved. Precondition: as many policies as at
  /// construction. Takes each shard's lock in turn: a take sees the old or the new policies of its
  /// shard, never a mix.
  void SetPolicies(std::vector<TokenBucketPolicy> policies);
  /// Keys held now, across shards.
  size_t size() const;
  /// Keys forgotten because they had refilled (free: nothing was lost).
  uint64_t expired() const { return expired_.load(std::memory_order_relaxed); }
  /// Keys evicted while still owing tokens: each came back with a full budget.
  uint64_t debtor_evictions() const { return debtor_evictions_.load(std::memory_order_relaxed); }

 private:
  class Shard;
  Shard& ShardFor(std::string_view key, size_t* hash) const;

  const KeyedLimiterOptions options_;  // the policies at construction; each shard holds the current
  const Clock& clock_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<uint64_t> expired_{0};
  std::atomic<uint64_t> debtor_evictions_{0};
};

}  // namespace sluice::admission
