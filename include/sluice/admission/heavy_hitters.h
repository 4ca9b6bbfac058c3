// HeavyHitters: who creates and who is refused most, in bounded memory (docs/overload.md, "Abuse
// or growth"). It counts strings; what they are (client keys, prefixes) is the caller's business.
//
// Space-saving (Metwally, Agrawal, El Abbadi 2005) rather than count-min: with k counters it keeps
// the keys themselves, so it can list a top-k without a second structure; it is deterministic (no
// hash seeds, so a test's answer does not depend on luck); and its error is bounded per key: a
// key's count is over-estimated by at most the smallest counter, itself at most N/k for N events.
// Any key with more than N/k events is guaranteed a counter. Count-min would need a heap of
// candidates beside it and only bounds the error with a probability.
//
// "The last minute": two generations of counters, the current one and the one before, turned
// every `window` on the injected clock. A read weighs the older generation by the part of it
// still inside the last window (the sliding-window estimate), so counts fade out instead of
// dropping to zero at a boundary.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/clock.h"

namespace sluice::admission {

struct HeavyHittersOptions {
  /// Counters per generation, over all shards. Memory is about this many keys twice (two
  /// generations). Precondition: >= shards. Default: 64.
  size_t capacity = 64;
  /// Independent sketches, each with its own mutex, a key always in the same one; each holds
  /// capacity / shards counters, so the error bound stays about N/capacity. One by default: an
  /// update is a few tens of ns under its mutex, next to a create's milliseconds, and with two
  /// threads four shards measured no faster (bench/results/heavy-hitters.txt). Default: 1.
  size_t shards = 1;
  /// How long "recent" is. Default: 60 s.
  Duration window = std::chrono::seconds(60);
};

/// What a key did, estimated over the last window.
struct HeavyHitter {
  std::string key;
  /// Events seen since the key got its counter: lower bounds, rounded.
  uint64_t creates = 0;
  uint64_t refusals = 0;
  /// How much more the key may have done before it got its counter (space-saving's error bound):
  /// its true total lies in [creates + refusals, creates + refusals + error].
  uint64_t error = 0;
};

/// Thread-safe.
class HeavyHitters {
 public:
  enum class Event { kCreate, kRefusal };

  /// `clock` must outlive the sketch.
  HeavyHitters(HeavyHittersOptions options, const Clock& clock);
  ~HeavyHitters();
  HeavyHitters(const HeavyHitters&) = delete;
  HeavyHitters& operator=(const HeavyHitters&) = delete;

  /// Counts one event of `key`. At most one small allocation (a key new to its shard).
  void Note(std::string_view key, Event event);

  /// The `n` keys with the most events (creates and refusals together) over the last window,
  /// most first; ties by key, so the answer is deterministic.
  std::vector<HeavyHitter> Top(size_t n) const;

  /// Counters held now over both generations: at most 2 x capacity, however many keys were seen.
  size_t counters() const;

  const HeavyHittersOptions& options() const { return options_; }

 private:
  class Shard;
  Shard& ShardFor(std::string_view key) const;

  const HeavyHittersOptions options_;
  const Clock& clock_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace sluice::admission
