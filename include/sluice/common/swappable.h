// Swappable<T>: an immutable value that a configuration reload replaces whole (docs/operations.md,
// "Reload"). A reader takes the current one once per request and keeps it for the request, so a
// request never sees half of an old setting and half of a new one, and a reload never waits for
// requests. A mutex held for a pointer copy rather than std::atomic<std::shared_ptr>: libstdc++
// 12 implements that one with a lock bit inside the pointer, so it costs the same, and a plain
// mutex is one ThreadSanitizer understands.
#pragma once

#include <memory>
#include <mutex>
#include <utility>

namespace sluice {

template <typename T>
class Swappable {
 public:
  explicit Swappable(T initial) : current_(std::make_shared<const T>(std::move(initial))) {}
  Swappable(const Swappable&) = delete;
  Swappable& operator=(const Swappable&) = delete;

  /// The value now; it stays valid (and unchanged) for as long as the caller holds it.
  std::shared_ptr<const T> Load() const {
    std::lock_guard lock(mu_);
    return current_;
  }
  /// Replaces the value for every later Load; readers holding the old one keep it.
  void Store(T next) {
    std::shared_ptr<const T> fresh = std::make_shared<const T>(std::move(next));
    {
      std::lock_guard lock(mu_);
      current_.swap(fresh);
    }
    // The old value, if this was its last holder, is destroyed here, outside the lock.
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const T> current_;
};

}  // namespace sluice
