// A set of IPv4 and IPv6 networks that answers "is this address in one of them" in O(log n), for
// sets of a million prefixes: the reputation lists operators already use (FireHOL's netsets,
// Spamhaus DROP), where a linear scan such as TrustedProxies's would cost a create milliseconds.
//
// The blocks are merged into disjoint, sorted ranges of addresses, so a lookup is one binary
// search; IPv4 ranges are held as 32-bit pairs (8 bytes a range), apart from IPv6's 128-bit ones,
// because the lists are mostly IPv4. Immutable once built, so one set is shared by every thread
// and a reload builds a new one beside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "sluice/admission/client_key.h"
#include "sluice/common/result.h"

namespace sluice::admission {

class PrefixSet {
 public:
  // g++'s 128-bit integer, which -Wpedantic flags without the __extension__ marker.
  __extension__ using Uint128 = unsigned __int128;

  /// The empty set.
  PrefixSet() = default;
  /// The union of `blocks`, in any order, overlapping or not.
  explicit PrefixSet(std::span<const Cidr> blocks);

  bool Contains(const IpAddress& address) const;
  /// Disjoint ranges left after merging (at most the number of blocks).
  size_t ranges() const { return v4_.size() + v6_.size(); }
  /// What the ranges take in memory.
  size_t MemoryBytes() const;

 private:
  struct V4Range {
    uint32_t first;
    uint32_t last;
  };
  struct V6Range {
    Uint128 first;
    Uint128 last;
  };
  std::vector<V4Range> v4_;
  std::vector<V6Range> v6_;
};

/// The blocks of a netset file: one address or CIDR block per line, what follows it on the line
/// ignored from a '#' (FireHOL's .netset and .ipset) or a ';' (Spamhaus DROP's text form), blank
/// and comment-only lines skipped. InvalidArgument naming the first line that is neither, by
/// number: a typo in an operator's list is said, not silently dropped with the rest kept.
Result<std::vector<Cidr>> ParseNetset(std::string_view text);

}  // namespace sluice::admission
