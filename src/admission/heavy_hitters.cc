#include "sluice/admission/heavy_hitters.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <mutex>
#include <unordered_map>

namespace sluice::admission {
namespace {

// One generation of space-saving counters with a min-heap over their totals, so that both the
// increment of a tracked key and the takeover of the smallest counter by a new key cost
// O(log k), whatever the stream.
class Sketch {
 public:
  explicit Sketch(size_t capacity) : capacity_(std::max<size_t>(1, capacity)) {
    // Never reallocated: the index's keys are views into the counters' own strings.
    counters_.reserve(capacity_);
    heap_.reserve(capacity_);
    index_.reserve(capacity_);
  }

  struct Counter {
    std::string key;
    uint64_t total = 0;  // events counted, including the inherited error: what the heap orders
    uint64_t creates = 0;
    uint64_t refusals = 0;
    uint64_t error = 0;
    size_t heap_pos = 0;
  };

  void Note(std::string_view key, HeavyHitters::Event event) {
    size_t at = 0;
    if (auto it = index_.find(key); it != index_.end()) {
      at = it->second;
    } else if (counters_.size() < capacity_) {
      at = counters_.size();
      counters_.push_back(Counter{std::string(key), 0, 0, 0, 0, heap_.size()});
      heap_.push_back(at);
      index_.emplace(counters_[at].key, at);
      SiftUp(counters_[at].heap_pos);  // a zero goes to the root, then down as it counts
    } else {
      // The smallest counter changes hands: the newcomer may have had up to its count before.
      at = heap_.front();
      Counter& c = counters_[at];
      index_.erase(c.key);
      c.key.assign(key);
      c.error = c.total;
      c.creates = c.refusals = 0;
      index_.emplace(c.key, at);
    }
    Counter& c = counters_[at];
    ++c.total;
    ++(event == HeavyHitters::Event::kCreate ? c.creates : c.refusals);
    SiftDown(c.heap_pos);
  }

  void Clear() {
    index_.clear();
    counters_.clear();
    heap_.clear();
  }

  const std::vector<Counter>& counters() const { return counters_; }

 private:
  bool Less(size_t a, size_t b) const {
    return counters_[heap_[a]].total < counters_[heap_[b]].total;
  }

  void Swap(size_t a, size_t b) {
    std::swap(heap_[a], heap_[b]);
    counters_[heap_[a]].heap_pos = a;
    counters_[heap_[b]].heap_pos = b;
  }

  void SiftUp(size_t pos) {
    while (pos > 0) {
      const size_t parent = (pos - 1) / 2;
      if (!Less(pos, parent)) return;
      Swap(pos, parent);
      pos = parent;
    }
  }

  // Totals only grow, so a counted event only ever moves its counter away from the root.
  void SiftDown(size_t pos) {
    for (;;) {
      const size_t left = 2 * pos + 1;
      if (left >= heap_.size()) return;
      size_t smallest = left;
      if (left + 1 < heap_.size() && Less(left + 1, left)) smallest = left + 1;
      if (!Less(smallest, pos)) return;
      Swap(pos, smallest);
      pos = smallest;
    }
  }

  const size_t capacity_;
  std::vector<Counter> counters_;
  std::vector<size_t> heap_;  // indices into counters_, smallest total first
  std::unordered_map<std::string_view, size_t> index_;
};

}  // namespace

class HeavyHitters::Shard {
 public:
  Shard(size_t capacity, Duration window, TimePoint start)
      : window_(window),
        start_(start),
        current_(std::make_unique<Sketch>(capacity)),
        previous_(std::make_unique<Sketch>(capacity)) {}

  void Note(std::string_view key, Event event, TimePoint now) {
    std::lock_guard lock(mu_);
    Turn(now);
    current_->Note(key, event);
  }

  // Adds this shard's estimates to `out`: the current generation, plus the previous one weighed
  // by the share of it that is still within the last window.
  void Collect(TimePoint now, std::unordered_map<std::string, std::array<double, 3>>& out) {
    std::lock_guard lock(mu_);
    Turn(now);
    const double into = std::chrono::duration<double>(now - start_).count() /
                        std::chrono::duration<double>(window_).count();
    const double weight = std::clamp(1.0 - into, 0.0, 1.0);
    for (const auto& c : current_->counters()) {
      auto& sums = out[c.key];
      sums[0] += double(c.creates);
      sums[1] += double(c.refusals);
      sums[2] += double(c.error);
    }
    if (weight <= 0) return;
    for (const auto& c : previous_->counters()) {
      auto& sums = out[c.key];
      sums[0] += weight * double(c.creates);
      sums[1] += weight * double(c.refusals);
      sums[2] += weight * double(c.error);
    }
  }

  size_t counters() {
    std::lock_guard lock(mu_);
    return current_->counters().size() + previous_->counters().size();
  }

 private:
  // Called with mu_ held.
  void Turn(TimePoint now) {
    if (now < start_ + window_) return;
    const auto windows = (now - start_) / window_;
    if (windows == 1) {
      std::swap(current_, previous_);
    } else {
      previous_->Clear();  // idle for two windows or more: nothing is recent
    }
    current_->Clear();
    start_ += windows * window_;
  }

  std::mutex mu_;
  const Duration window_;
  TimePoint start_;
  std::unique_ptr<Sketch> current_;
  std::unique_ptr<Sketch> previous_;
};

HeavyHitters::HeavyHitters(HeavyHittersOptions options, const Clock& clock)
    : options_(options), clock_(clock) {
  const size_t shards = std::max<size_t>(1, options_.shards);
  const size_t per_shard = std::max<size_t>(1, options_.capacity / shards);
  const Duration window = std::max(options_.window, Duration(std::chrono::milliseconds(1)));
  shards_.reserve(shards);
  for (size_t i = 0; i < shards; ++i) {
    shards_.push_back(std::make_unique<Shard>(per_shard, window, clock.Now()));
  }
}

HeavyHitters::~HeavyHitters() = default;

HeavyHitters::Shard& HeavyHitters::ShardFor(std::string_view key) const {
  return *shards_[std::hash<std::string_view>{}(key) % shards_.size()];
}

void HeavyHitters::Note(std::string_view key, Event event) {
  ShardFor(key).Note(key, event, clock_.Now());
}

std::vector<HeavyHitter> HeavyHitters::Top(size_t n) const {
  const TimePoint now = clock_.Now();
  std::unordered_map<std::string, std::array<double, 3>> sums;
  for (const auto& shard : shards_) shard->Collect(now, sums);
  std::vector<HeavyHitter> all;
  all.reserve(sums.size());
  for (auto& [key, s] : sums) {
    HeavyHitter h{key, static_cast<uint64_t>(std::llround(s[0])),
                  static_cast<uint64_t>(std::llround(s[1])),
                  static_cast<uint64_t>(std::llround(s[2]))};
    if (h.creates + h.refusals == 0) continue;  // faded out
    all.push_back(std::move(h));
  }
  // By what the key surely did (the lower bound), not by its error: a newcomer that inherited a
  // big counter with one event of its own is not a heavy hitter.
  auto order = [](const HeavyHitter& a, const HeavyHitter& b) {
    const uint64_t ta = a.creates + a.refusals;
    const uint64_t tb = b.creates + b.refusals;
    if (ta != tb) return ta > tb;
    return a.key < b.key;
  };
  if (all.size() > n) {
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(), order);
    all.resize(n);
  } else {
    std::sort(all.begin(), all.end(), order);
  }
  return all;
}

size_t HeavyHitters::counters() const {
  size_t total = 0;
  for (const auto& shard : shards_) total += shard->counters();
  return total;
}

}  // namespace sluice::admission
