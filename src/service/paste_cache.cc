#include "sluice/service/paste_cache.h"

namespace sluice::service {

namespace {
// Covers the list node, the map slot and the row, so a flood of tiny pastes is bounded too.
constexpr size_t kEntryOverhead = 256;
}  // namespace

PasteCache::PasteCache(size_t capacity_bytes)
    : shard_capacity_(capacity_bytes / kShards), shards_(kShards) {}

PasteCache::PasteCache(size_t capacity_bytes, const Clock& clock, Duration max_age)
    : shard_capacity_(capacity_bytes / kShards),
      clock_(&clock),
      max_age_(max_age.count()),
      shards_(kShards) {}

PasteCache::Shard& PasteCache::ShardFor(const store::PasteId& id) {
  return shards_[IdHash()(id) % kShards];
}

std::optional<CachedPaste> PasteCache::Get(const store::PasteId& id) {
  Shard& shard = ShardFor(id);
  std::lock_guard lock(shard.mu);
  auto it = shard.index.find(id);
  if (it == shard.index.end() || !it->second->paste) return std::nullopt;
  const Duration max_age(max_age_.load(std::memory_order_relaxed));
  if (clock_ && max_age > Duration::zero() && Now() - it->second->stored > max_age) {
    shard.bytes -= it->second->charge;
    shard.lru.erase(it->second);
    shard.index.erase(it);
    return std::nullopt;
  }
  shard.lru.splice(shard.lru.begin(), shard.lru, it->second);
  return it->second->paste;
}

void PasteCache::Insert(Shard& shard, Entry entry) {
  if (entry.charge > shard_capacity_) return;
  shard.bytes += entry.charge;
  shard.lru.push_front(std::move(entry));
  shard.index[shard.lru.front().id] = shard.lru.begin();
  while (shard.bytes > shard_capacity_) {
    Entry& victim = shard.lru.back();
    shard.bytes -= victim.charge;
    shard.index.erase(victim.id);
    shard.lru.pop_back();
  }
}

void PasteCache::Put(const CachedPaste& paste) {
  Shard& shard = ShardFor(paste.meta.id);
  std::lock_guard lock(shard.mu);
  auto it = shard.index.find(paste.meta.id);
  if (it != shard.index.end()) {
    if (!it->second->paste) return;  // a tombstone wins over a racing fill
    shard.bytes -= it->second->charge;
    shard.lru.erase(it->second);
    shard.index.erase(it);
  }
  const size_t charge = kEntryOverhead + (paste.body ? paste.body->size() : 0);
  Insert(shard, Entry{paste.meta.id, paste, charge, Now()});
}

void PasteCache::MarkDeleted(const store::PasteId& id) {
  Shard& shard = ShardFor(id);
  std::lock_guard lock(shard.mu);
  auto it = shard.index.find(id);
  if (it != shard.index.end()) {
    shard.bytes -= it->second->charge;
    shard.lru.erase(it->second);
    shard.index.erase(it);
  }
  Insert(shard, Entry{id, std::nullopt, kEntryOverhead, Now()});
}

void PasteCache::Erase(const store::PasteId& id) {
  Shard& shard = ShardFor(id);
  std::lock_guard lock(shard.mu);
  auto it = shard.index.find(id);
  if (it == shard.index.end()) return;
  shard.bytes -= it->second->charge;
  shard.lru.erase(it->second);
  shard.index.erase(it);
}

size_t PasteCache::bytes_used() const {
  size_t total = 0;
  for (const Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    total += s.bytes;
  }
  return total;
}

size_t PasteCache::entries() const {
  size_t total = 0;
  for (const Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    total += s.index.size();
  }
  return total;
}

}  // namespace sluice::service
