// PasteCache: recently created or read pastes (row and body) held in process memory, so a hot read
// costs no store call and no thread hop. Bounded by bytes; least recently used entries go first.
// It holds only bodies the service vouches for: the creator's own, or one fetched from the blob
// store that matched its row's size and checksum (src/service/paste_service_read.cc), so a hit is
// served without checking again.
#pragma once

#include <atomic>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sluice/common/clock.h"
#include "sluice/store/paste.h"

namespace sluice::service {

/// A paste as the read path serves it. The body is shared, never copied, between cache and readers.
struct CachedPaste {
  store::PasteMeta meta;
  std::shared_ptr<const std::string> body;
};

/// An LRU cache of pastes in sharded, mutex-guarded maps. Thread-safe.
class PasteCache {
 public:
  /// `capacity_bytes` bounds the bodies held (plus a small fixed charge per entry). Default in the
  /// server: 64 MiB. Zero disables caching.
  explicit PasteCache(size_t capacity_bytes);
  /// As above, and a paste older than `max_age` (by `clock`, which must outlive the cache) is a
  /// miss: with several processes, a delete on another one reaches this cache by a message that can
  /// be lost, so an entry is trusted only this long. Tombstones do not age out.
  PasteCache(size_t capacity_bytes, const Clock& clock, Duration max_age);

  /// A new `max_age` from now on (docs/operations.md, "Reload"), for the entries already held too:
  /// each is dated from when it was stored. Only a cache built with a clock ages its entries.
  void SetMaxAge(Duration max_age) { max_age_.store(max_age.count(), std::memory_order_relaxed); }

  std::optional<CachedPaste> Get(const store::PasteId& id);
  /// Caches `paste` unless the id was marked deleted: a read that raced a delete cannot resurrect
  /// it.
  void Put(const CachedPaste& paste);
  /// Drops the entry and remembers the id as deleted for as long as the tombstone stays cached.
  void MarkDeleted(const store::PasteId& id);
  /// Drops the entry without a tombstone (an expired row purged for good).
  void Erase(const store::PasteId& id);

  size_t bytes_used() const;
  size_t entries() const;

 private:
  struct Entry {
    store::PasteId id;
    std::optional<CachedPaste> paste;  // empty: a tombstone
    size_t charge;
    TimePoint stored{};
  };
  struct IdHash {
    size_t operator()(const store::PasteId& id) const {
      return std::hash<std::string_view>()(id.view());
    }
  };
  struct Shard {
    mutable std::mutex mu;
    std::list<Entry> lru;  // front: most recent
    std::unordered_map<store::PasteId, std::list<Entry>::iterator, IdHash> index;
    size_t bytes = 0;
  };
  static constexpr size_t kShards = 16;

  Shard& ShardFor(const store::PasteId& id);
  void Insert(Shard& shard, Entry entry);

  TimePoint Now() const { return clock_ ? clock_->Now() : TimePoint{}; }

  const size_t shard_capacity_;
  const Clock* const clock_ = nullptr;
  std::atomic<Duration::rep> max_age_{0};
  std::vector<Shard> shards_;
};

}  // namespace sluice::service
