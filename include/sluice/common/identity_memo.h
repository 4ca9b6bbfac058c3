// What follows from an immutable shared string (a cached paste's body, a rendering), worked out
// once per event-loop thread instead of once per request, keyed by the string's identity. A hot
// read would otherwise redo it on every answer (bench/results/profile/README.md): per thread, so
// a hit takes no lock; direct-mapped and small, so it bounds itself. A weak pointer tells a live
// string from a new one at a freed one's address, so an entry whose string is gone is never
// served, only replaced.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace sluice {

/// Whether an entry made for `held` (seen at address `seen`) is for the live string `wanted`.
inline bool IdentifiesString(const std::weak_ptr<const std::string>& held, const std::string* seen,
                             const std::string* wanted) {
  return seen == wanted && wanted != nullptr && !held.expired();
}

/// The slot of a direct-mapped memo of `slots` entries that the string at `key` maps to.
inline size_t IdentitySlot(const void* key, size_t slots) {
  return (reinterpret_cast<uintptr_t>(key) >> 4) % slots;
}

/// One value per string. Not thread-safe: make it thread_local.
template <class Value, size_t kSlots = 64>
class IdentityMemo {
 public:
  template <class Make>
  const Value& Get(const std::shared_ptr<const std::string>& key, Make make) {
    Slot& slot = slots_[IdentitySlot(key.get(), kSlots)];
    if (!IdentifiesString(slot.held, slot.seen, key.get())) {
      slot.value = make(*key);
      slot.held = key;
      slot.seen = key.get();
    }
    return slot.value;
  }

 private:
  struct Slot {
    std::weak_ptr<const std::string> held;
    const std::string* seen = nullptr;
    Value value{};
  };
  std::array<Slot, kSlots> slots_;
};

}  // namespace sluice
