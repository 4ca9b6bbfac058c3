#include "sluice/render/render_cache.h"

namespace sluice::render {

std::shared_ptr<const Rendering> RenderCache::Get(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->rendering;
}

void RenderCache::Put(const std::string& key, std::shared_ptr<const Rendering> rendering) {
  const size_t size = rendering->html.size() + key.size();
  if (size > max_bytes_ / kLargestEntryShare) return;
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    bytes_ -= it->second->rendering->html.size() + key.size();
    lru_.erase(it->second);
    index_.erase(it);
  }
  while (bytes_ + size > max_bytes_ && !lru_.empty()) {
    const Entry& last = lru_.back();
    bytes_ -= last.rendering->html.size() + last.key.size();
    index_.erase(last.key);
    lru_.pop_back();
  }
  lru_.push_front(Entry{key, std::move(rendering)});
  index_[key] = lru_.begin();
  bytes_ += size;
}

void RenderCache::Erase(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return;
  bytes_ -= it->second->rendering->html.size() + key.size();
  lru_.erase(it->second);
  index_.erase(it);
}

size_t RenderCache::bytes_used() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace sluice::render
