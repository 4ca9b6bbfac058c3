// RenderCache: highlighted renderings kept by bytes, least recently used out first. The first rung
// of the view's ladder: a hit serves full quality without a highlighter slot.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "sluice/render/view_bounds.h"

namespace sluice::render {

/// A bounded LRU of rendered fragments, keyed by paste id and language. Thread-safe.
class RenderCache {
 public:
  /// One entry may hold at most this share of the budget: a single rendering must not empty the
  /// cache of every other (a 27 MB Markdown page once evicted all twenty entries it held).
  static constexpr size_t kLargestEntryShare = 8;

  /// `max_bytes` 0 turns the cache off.
  explicit RenderCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  /// The rendering, or null.
  std::shared_ptr<const Rendering> Get(const std::string& key);
  /// Keeps `rendering` unless it alone is larger than max_bytes / kLargestEntryShare; evicts the
  /// least recently used to fit.
  void Put(const std::string& key, std::shared_ptr<const Rendering> rendering);
  /// Drops every language's rendering of a paste (after a delete).
  void Erase(const std::string& key);

  size_t bytes_used() const;

  static std::string Key(std::string_view id, std::string_view language) {
    return std::string(id) + '\n' + std::string(language);
  }

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const Rendering> rendering;
  };
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t bytes_ = 0;
};

}  // namespace sluice::render
