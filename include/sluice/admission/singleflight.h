// Singleflight: concurrent requests for one key share one fill and its result, errors included
// (docs/overload.md, "Read": a hot id's misses collapse to about one primary read per process).
// Callback-based and pure; the Asio awaitable wrapper lives a layer up and posts each waiter to its
// own executor.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sluice::admission {

/// Collapses concurrent fills of one key. Thread-safe.
///
/// Everyone, leader included, receives the value through the waiter it passed to Join, exactly
/// once, on the thread that completes the flight, after the internal lock is released (so a waiter
/// may Join again). A key is in flight from the leader's Join until its Complete; the next Join
/// after that starts a new fill: results are shared, not cached. V is typically a Result<...> so
/// a failed fill is shared too, which is the point: forty waiters do not each retry a primary that
/// just failed.
template <class K, class V, class Hash = std::hash<K>>
class Singleflight {
 public:
  using Waiter = std::function<void(const V&)>;

  /// The leader's duty to fill. Move-only. Destroying it without Complete completes the flight
  /// with the group's `value_if_abandoned`, so no waiter is stranded by a forgotten error path.
  class Flight {
   public:
    Flight(Flight&& other) noexcept
        : group_(std::exchange(other.group_, nullptr)), key_(std::move(other.key_)) {}
    Flight& operator=(Flight&& other) noexcept {
      if (this != &other) {
        Abandon();
        group_ = std::exchange(other.group_, nullptr);
        key_ = std::move(other.key_);
      }
      return *this;
    }
    ~Flight() { Abandon(); }

    /// Hands `value` to every waiter of this flight. Later calls do nothing.
    void Complete(const V& value) {
      if (group_ == nullptr) return;
      std::exchange(group_, nullptr)->Finish(key_, value);
    }
    const K& key() const { return key_; }

   private:
    friend class Singleflight;
    Flight(Singleflight* group, K key) : group_(group), key_(std::move(key)) {}
    void Abandon() {
      if (group_ != nullptr) Complete(group_->value_if_abandoned_);
    }
    Singleflight* group_ = nullptr;
    K key_;
  };

  /// `value_if_abandoned` is what waiters receive when a leader drops its Flight unfinished,
  /// e.g. Result<T>(MakeError(ErrorCode::kInternal, "fill abandoned")).
  explicit Singleflight(V value_if_abandoned)
      : value_if_abandoned_(std::move(value_if_abandoned)) {}

  Singleflight(const Singleflight&) = delete;
  Singleflight& operator=(const Singleflight&) = delete;

  /// Precondition: no flight is in progress (every Flight completed or destroyed).
  ~Singleflight() = default;

  /// Adds `waiter` to the flight for `key`. Returns a Flight when the caller is the leader and
  /// must fill, nullopt when a fill is already in progress and the waiter will be called by it.
  [[nodiscard]] std::optional<Flight> Join(const K& key, Waiter waiter) {
    std::lock_guard lock(mu_);
    auto [it, leader] = flights_.try_emplace(key);
    it->second.push_back(std::move(waiter));
    if (!leader) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      return std::nullopt;
    }
    fills_.fetch_add(1, std::memory_order_relaxed);
    return Flight(this, key);
  }

  /// Joins that became leaders: real fills.
  uint64_t fills() const { return fills_.load(std::memory_order_relaxed); }
  /// Joins that shared someone else's fill.
  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  /// Keys in flight now.
  size_t in_flight() const {
    std::lock_guard lock(mu_);
    return flights_.size();
  }

 private:
  void Finish(const K& key, const V& value) {
    std::vector<Waiter> waiters;
    {
      std::lock_guard lock(mu_);
      auto it = flights_.find(key);
      if (it == flights_.end()) return;
      waiters = std::move(it->second);
      flights_.erase(it);
    }
    for (Waiter& waiter : waiters) {
      if (waiter) waiter(value);
    }
  }

  const V value_if_abandoned_;
  mutable std::mutex mu_;
  std::unordered_map<K, std::vector<Waiter>, Hash> flights_;
  std::atomic<uint64_t> fills_{0};
  std::atomic<uint64_t> hits_{0};
};

}  // namespace sluice::admission
