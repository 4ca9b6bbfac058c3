// ContentBlocklist: the digests of bodies that creates are refused (451 blocked_content), held in
// memory so that a create checks its body without a store round trip (docs/moderation.md,
// "Takedowns that stick"). The MetaStore holds the list; ModerationService keeps this copy.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/swappable.h"
#include "sluice/store/paste.h"

namespace sluice::service {

/// The blocked digests as this process last read them. Thread-safe. A lookup copies one
/// pointer under a mutex and binary-searches a sorted array: 32 bytes per entry and no per-entry
/// allocation (a node-based hash set costs about twice that at a million entries), and a lookup
/// of about 20 comparisons, nothing beside a create's SHA-256 of its body. A change copies the
/// array, which is fine at the rate operators take pastes down.
class ContentBlocklist {
 public:
  ContentBlocklist() : sorted_(std::vector<store::BodyDigest>{}) {}

  /// True when `digest` is blocked.
  bool Contains(const store::BodyDigest& digest) const;
  /// Nothing is blocked: a create need not even hash its body for it.
  bool empty() const { return size_.load(std::memory_order_acquire) == 0; }
  size_t size() const { return size_.load(std::memory_order_acquire); }
  /// The store's version of the list this copy was last read at; -1 before the first read.
  int64_t version() const { return version_.load(std::memory_order_acquire); }

  /// The whole list, as read from the store at `version`.
  void Replace(std::vector<store::BodyDigest> digests, int64_t version);
  /// A change made through this process, seen at once (the next read confirms it).
  void Add(const store::BodyDigest& digest);
  void Remove(const store::BodyDigest& digest);

  /// A create refused because its body is blocked: counted here, in memory, because refusals
  /// come at a flood's rate; ModerationService adds them to the transparency report's counters
  /// in batches (docs/moderation.md, "Transparency").
  void CountRefused() const { refused_.fetch_add(1, std::memory_order_relaxed); }
  /// The refusals counted since the last call, which are no longer counted here.
  int64_t TakeRefused() { return refused_.exchange(0, std::memory_order_relaxed); }
  /// Gives back refusals taken that could not be stored, so the next batch holds them.
  void ReturnRefused(int64_t n) { refused_.fetch_add(n, std::memory_order_relaxed); }

  /// 64 lowercase hex digits.
  static std::string Hex(const store::BodyDigest& digest);
  /// Exactly 64 hex digits, either case; nothing otherwise.
  static std::optional<store::BodyDigest> ParseHex(std::string_view text);

 private:
  Swappable<std::vector<store::BodyDigest>> sorted_;
  std::mutex change_mu_;  // orders Replace, Add and Remove, each a read-copy-store
  std::atomic<size_t> size_{0};
  std::atomic<int64_t> version_{-1};
  // A tally beside the list, not part of it: counting a refusal changes no lookup.
  mutable std::atomic<int64_t> refused_{0};
};

}  // namespace sluice::service
