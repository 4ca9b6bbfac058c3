// KeyedSlots: at most N units in flight per key (docs/overload.md, "Read": "a per-IP share of the
// fill cap, two or three slots per address, so one address can never hold more than about 1% of the
// slots"). Used beside a global ConcurrencyLimiter, which bounds the total and so the number of
// keys held here.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace sluice::admission {

/// Per-key in-flight counts. Thread-safe: one mutex, held for a map lookup. Memory is bounded by
/// the units in flight: a key with nothing in flight is forgotten.
class KeyedSlots {
 public:
  /// A unit admitted for one key. Move-only; releases on destruction, on any thread.
  /// Precondition: the KeyedSlots outlives it.
  class Slot {
   public:
    Slot(Slot&& other) noexcept
        : owner_(std::exchange(other.owner_, nullptr)), key_(std::move(other.key_)) {}
    Slot& operator=(Slot&& other) noexcept {
      if (this != &other) {
        Release();
        owner_ = std::exchange(other.owner_, nullptr);
        key_ = std::move(other.key_);
      }
      return *this;
    }
    ~Slot() { Release(); }
    void Release() {
      if (owner_ != nullptr) std::exchange(owner_, nullptr)->ReleaseKey(key_);
    }

   private:
    friend class KeyedSlots;
    Slot(KeyedSlots* owner, std::string key) : owner_(owner), key_(std::move(key)) {}
    KeyedSlots* owner_;
    std::string key_;
  };

  /// Precondition: max_per_key > 0.
  explicit KeyedSlots(int64_t max_per_key) : max_per_key_(max_per_key) {}
  KeyedSlots(const KeyedSlots&) = delete;
  KeyedSlots& operator=(const KeyedSlots&) = delete;

  /// A slot for `key`, or nothing when the key already holds max_per_key. Never waits.
  std::optional<Slot> TryAcquire(std::string_view key) {
    std::lock_guard lock(mu_);
    auto [it, inserted] = in_flight_.try_emplace(std::string(key), 0);
    if (it->second >= max_per_key_) return std::nullopt;
    ++it->second;
    return Slot(this, it->first);
  }

  /// A new share from now on (a configuration reload). A key already above it keeps its units
  /// until they end and gets no new one until it is under. Precondition: max_per_key > 0.
  void SetMaxPerKey(int64_t max_per_key) {
    std::lock_guard lock(mu_);
    max_per_key_ = max_per_key;
  }
  int64_t max_per_key() const {
    std::lock_guard lock(mu_);
    return max_per_key_;
  }

  int64_t InFlight(std::string_view key) const {
    std::lock_guard lock(mu_);
    auto it = in_flight_.find(std::string(key));
    return it == in_flight_.end() ? 0 : it->second;
  }
  size_t keys() const {
    std::lock_guard lock(mu_);
    return in_flight_.size();
  }

 private:
  void ReleaseKey(const std::string& key) {
    std::lock_guard lock(mu_);
    auto it = in_flight_.find(key);
    if (it != in_flight_.end() && --it->second <= 0) in_flight_.erase(it);
  }

  mutable std::mutex mu_;
  int64_t max_per_key_;  // guarded by mu_
  std::unordered_map<std::string, int64_t> in_flight_;
};

}  // namespace sluice::admission
