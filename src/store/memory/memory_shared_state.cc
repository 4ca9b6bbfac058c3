// The in-process SharedState: the semantics of the Redis one (all-or-nothing takes, a tombstone
// wins over a racing fill, invalidations reach every subscriber) without a server, so the service
// layer's tests can run hermetically and under the sanitizers.
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "sluice/store/shared_state.h"

namespace sluice::store {

namespace {

class MemorySharedState final : public SharedState {
 public:
  explicit MemorySharedState(const Clock& clock) : clock_(clock) {}

  boost::asio::awaitable<Result<SharedTakeDecision>> TakeAll(
      std::vector<BucketTake> takes, admission::Deadline /*deadline*/) override {
    co_return TakeAllNow(takes);
  }

  boost::asio::awaitable<Status> Refund(std::vector<BucketTake> takes,
                                        admission::Deadline /*deadline*/) override {
    std::lock_guard lock(mu_);
    const TimePoint now = clock_.Now();
    for (const BucketTake& t : takes) {
      auto it = buckets_.find(t.key);
      if (it == buckets_.end()) continue;  // forgotten when full: nothing to give back
      it->second.Refill(t.policy, now);
      it->second.tokens = std::min(t.policy.burst, it->second.tokens + t.cost);
    }
    co_return Ok();
  }

  boost::asio::awaitable<Result<std::vector<double>>> PeekAll(
      std::vector<BucketTake> buckets, admission::Deadline /*deadline*/) override {
    std::lock_guard lock(mu_);
    const TimePoint now = clock_.Now();
    std::vector<double> tokens;
    tokens.reserve(buckets.size());
    for (const BucketTake& b : buckets) tokens.push_back(RefilledLocked(b, now).tokens);
    co_return tokens;
  }

  boost::asio::awaitable<Result<std::optional<PasteMeta>>> GetMeta(
      PasteId id, admission::Deadline /*deadline*/) override {
    std::lock_guard lock(mu_);
    auto it = meta_.find(id.str());
    if (it == meta_.end()) co_return std::optional<PasteMeta>();
    if (clock_.Now() >= it->second.expires) {
      meta_.erase(it);
      co_return std::optional<PasteMeta>();
    }
    co_return std::optional<PasteMeta>(it->second.meta);
  }

  boost::asio::awaitable<Status> PutMeta(PasteMeta meta, std::chrono::seconds ttl,
                                         admission::Deadline /*deadline*/) override {
    std::lock_guard lock(mu_);
    const TimePoint now = clock_.Now();
    auto it = meta_.find(meta.id.str());
    if (it != meta_.end() && now < it->second.expires) co_return Ok();
    meta_.insert_or_assign(meta.id.str(), Entry{meta, now + ttl});
    co_return Ok();
  }

  boost::asio::awaitable<Status> Invalidate(PasteMeta row, std::chrono::seconds ttl,
                                            admission::Deadline /*deadline*/) override {
    std::vector<std::function<void(const PasteId&)>> subscribers;
    {
      std::lock_guard lock(mu_);
      meta_.insert_or_assign(row.id.str(), Entry{row, clock_.Now() + ttl});
      subscribers = subscribers_;
    }
    for (auto& notify : subscribers) notify(row.id);
    co_return Ok();
  }

  void SubscribeInvalidations(std::function<void(const PasteId&)> on_invalidated) override {
    std::lock_guard lock(mu_);
    subscribers_.push_back(std::move(on_invalidated));
  }

 private:
  struct Entry {
    PasteMeta meta;
    TimePoint expires;
  };

  // The bucket `b` names as of `now`, refilled (full if never seen); a copy. Needs mu_.
  admission::TokenBucketState RefilledLocked(const BucketTake& b, TimePoint now) const {
    auto it = buckets_.find(b.key);
    admission::TokenBucketState s =
        it == buckets_.end() ? admission::TokenBucketState::Full(b.policy, now) : it->second;
    s.Refill(b.policy, now);
    return s;
  }

  SharedTakeDecision TakeAllNow(const std::vector<BucketTake>& takes) {
    std::lock_guard lock(mu_);
    const TimePoint now = clock_.Now();
    std::vector<admission::TokenBucketState> states;
    states.reserve(takes.size());
    for (size_t i = 0; i < takes.size(); ++i) {
      const BucketTake& t = takes[i];
      const admission::TokenBucketState s = RefilledLocked(t, now);
      const admission::TakeDecision d = s.Check(t.policy, t.cost);
      if (!d.allowed) {
        return SharedTakeDecision{false, static_cast<int>(i), s.tokens, d.retry_after,
                                  d.exceeds_burst};
      }
      states.push_back(s);
    }
    for (size_t i = 0; i < takes.size(); ++i) {
      states[i].tokens -= takes[i].cost;
      buckets_[takes[i].key] = states[i];
    }
    return SharedTakeDecision{true, -1, 0, Duration::zero(), false};
  }

  const Clock& clock_;
  std::mutex mu_;
  std::unordered_map<std::string, admission::TokenBucketState> buckets_;
  std::unordered_map<std::string, Entry> meta_;
  std::vector<std::function<void(const PasteId&)>> subscribers_;
};

}  // namespace

std::unique_ptr<SharedState> MakeMemorySharedState(const Clock& clock) {
  return std::make_unique<MemorySharedState>(clock);
}

}  // namespace sluice::store
