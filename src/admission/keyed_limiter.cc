#include "sluice/admission/keyed_limiter.h"

#include <algorithm>
#include <functional>

namespace sluice::admission {
namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace

// One table with an intrusive recency list threaded through the map's own nodes, so a take costs
// one lookup and a few pointer writes, and a new key one allocation.
class KeyedLimiter::Shard {
 public:
  static constexpr int kEvictionScan = 8;

  struct Node {
    std::array<TokenBucketState, kMaxDimensions> buckets;
    Node* prev = nullptr;  // towards the most recently used
    Node* next = nullptr;  // towards the least recently used
    std::string_view key;  // points into the map's own key, stable for the node's life
  };

  Shard(size_t capacity, std::vector<TokenBucketPolicy> initial)
      : current_policies(std::move(initial)), capacity_(capacity) {
    map_.reserve(std::min<size_t>(capacity, 1024));
  }

  std::mutex mu;
  // Guarded by mu: a copy per shard, so a reload changes them without a lock every take shares.
  std::vector<TokenBucketPolicy> current_policies;

  // Refills every key at the old policies up to `now`, then caps it at the new bursts.
  void Replace(std::vector<TokenBucketPolicy> next, TimePoint now) {
    for (auto& [key, node] : map_) {
      for (size_t d = 0; d < current_policies.size(); ++d) {
        node.buckets[d].Refill(current_policies[d], now);
        node.buckets[d].tokens = std::min(node.buckets[d].tokens, next[d].burst);
      }
    }
    current_policies = std::move(next);
  }

  Node* Find(std::string_view key) {
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : &it->second;
  }

  // Makes room, then adds `key` with full buckets at the front.
  Node* Insert(std::string_view key, const std::vector<TokenBucketPolicy>& policies, TimePoint now,
               uint64_t* expired, uint64_t* debtors) {
    // Forget up to two refilled keys per insert even below capacity, so the table shrinks back
    // as clients go idle instead of staying at its high-water mark.
    for (int i = 0; i < 2 && tail_ != nullptr && IsFull(*tail_, policies, now); ++i) {
      Erase(tail_);
      ++*expired;
    }
    while (map_.size() >= capacity_ && tail_ != nullptr) {
      // Prefer a refilled key near the cold end (losing it loses nothing); only if the last few
      // all still owe tokens, evict the least recently used of them.
      Node* victim = tail_;
      int scanned = 0;
      for (Node* n = tail_; n != nullptr && scanned < kEvictionScan; n = n->prev, ++scanned) {
        if (IsFull(*n, policies, now)) {
          victim = n;
          break;
        }
      }
      if (IsFull(*victim, policies, now)) {
        ++*expired;
      } else {
        ++*debtors;
      }
      Erase(victim);
    }
    auto [it, inserted] = map_.try_emplace(std::string(key));
    Node* node = &it->second;
    node->key = it->first;
    for (size_t d = 0; d < policies.size(); ++d) {
      node->buckets[d] = TokenBucketState::Full(policies[d], now);
    }
    PushFront(node);
    return node;
  }

  void Touch(Node* node) {
    if (node == head_) return;
    Unlink(node);
    PushFront(node);
  }

  size_t size() const { return map_.size(); }

 private:
  static bool IsFull(const Node& node, const std::vector<TokenBucketPolicy>& policies,
                     TimePoint now) {
    for (size_t d = 0; d < policies.size(); ++d) {
      if (!node.buckets[d].IsFullAt(policies[d], now)) return false;
    }
    return true;
  }

  void Erase(Node* node) {
    Unlink(node);
    map_.erase(map_.find(node->key));
  }

  void Unlink(Node* node) {
    (node->prev ? node->prev->next : head_) = node->next;
    (node->next ? node->next->prev : tail_) = node->prev;
    node->prev = node->next = nullptr;
  }

  void PushFront(Node* node) {
    node->prev = nullptr;
    node->next = head_;
    if (head_ != nullptr) head_->prev = node;
    head_ = node;
    if (tail_ == nullptr) tail_ = node;
  }

  const size_t capacity_;
  std::unordered_map<std::string, Node, StringHash, std::equal_to<>> map_;
  Node* head_ = nullptr;
  Node* tail_ = nullptr;
};

KeyedLimiter::KeyedLimiter(KeyedLimiterOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock) {
  const size_t shards = std::max<size_t>(1, options_.shards);
  const size_t per_shard = std::max<size_t>(1, options_.max_keys / shards);
  shards_.reserve(shards);
  for (size_t i = 0; i < shards; ++i) {
    shards_.push_back(std::make_unique<Shard>(per_shard, options_.policies));
  }
}

KeyedLimiter::~KeyedLimiter() = default;

KeyedLimiter::Shard& KeyedLimiter::ShardFor(std::string_view key, size_t* hash) const {
  *hash = StringHash{}(key);
  // High bits pick the shard; the map inside uses the whole hash for its buckets.
  return *shards_[(*hash >> 32) % shards_.size()];
}

KeyedDecision KeyedLimiter::TryTake(std::string_view key, double first, double second) {
  const std::array<double, kMaxDimensions> amounts{first, second};
  size_t hash = 0;
  Shard& shard = ShardFor(key, &hash);
  const TimePoint now = clock_.Now();
  uint64_t expired = 0;
  uint64_t debtors = 0;
  KeyedDecision result;
  {
    std::lock_guard lock(shard.mu);
    const auto& policies = shard.current_policies;
    Shard::Node* node = shard.Find(key);
    if (node == nullptr) {
      node = shard.Insert(key, policies, now, &expired, &debtors);
    } else {
      shard.Touch(node);
    }
    for (size_t d = 0; d < policies.size(); ++d) {
      node->buckets[d].Refill(policies[d], now);
      TakeDecision decision = node->buckets[d].Check(policies[d], amounts[d]);
      if (!decision.allowed) {
        result = KeyedDecision{decision, static_cast<int>(d)};
        break;
      }
    }
    if (result.refused_dimension < 0) {
      for (size_t d = 0; d < policies.size(); ++d) node->buckets[d].tokens -= amounts[d];
      result.decision.allowed = true;
    }
  }
  if (expired != 0) expired_.fetch_add(expired, std::memory_order_relaxed);
  if (debtors != 0) debtor_evictions_.fetch_add(debtors, std::memory_order_relaxed);
  return result;
}

void KeyedLimiter::Refund(std::string_view key, double first, double second) {
  const std::array<double, kMaxDimensions> amounts{first, second};
  size_t hash = 0;
  Shard& shard = ShardFor(key, &hash);
  std::lock_guard lock(shard.mu);
  Shard::Node* node = shard.Find(key);
  if (node == nullptr) return;
  for (size_t d = 0; d < shard.current_policies.size(); ++d) {
    auto& tokens = node->buckets[d].tokens;
    tokens = std::min(shard.current_policies[d].burst, tokens + amounts[d]);
  }
}

KeyedBudget KeyedLimiter::Peek(std::string_view key) const {
  KeyedBudget budget;
  size_t hash = 0;
  Shard& shard = ShardFor(key, &hash);
  const TimePoint now = clock_.Now();
  std::lock_guard lock(shard.mu);
  const auto& policies = shard.current_policies;
  for (size_t d = 0; d < policies.size(); ++d) budget.available[d] = policies[d].burst;
  Shard::Node* node = shard.Find(key);
  if (node == nullptr) return budget;
  for (size_t d = 0; d < policies.size(); ++d) {
    TokenBucketState copy = node->buckets[d];
    copy.Refill(policies[d], now);
    budget.available[d] = std::max(0.0, copy.tokens);
  }
  return budget;
}

std::vector<TokenBucketPolicy> KeyedLimiter::policies() const {
  std::lock_guard lock(shards_.front()->mu);
  return shards_.front()->current_policies;
}

void KeyedLimiter::SetPolicies(std::vector<TokenBucketPolicy> policies) {
  policies.resize(options_.policies.size(), options_.policies.back());
  const TimePoint now = clock_.Now();
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->mu);
    shard->Replace(policies, now);
  }
}

size_t KeyedLimiter::size() const {
  size_t total = 0;
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->mu);
    total += shard->size();
  }
  return total;
}

}  // namespace sluice::admission
