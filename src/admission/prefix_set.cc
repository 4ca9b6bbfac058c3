#include "sluice/admission/prefix_set.h"

#include <algorithm>
#include <string>

namespace sluice::admission {
namespace {

using U128 = PrefixSet::Uint128;

U128 ToU128(const IpAddress& address) {
  U128 value = 0;
  for (const uint8_t byte : address.bytes) value = (value << 8) | byte;
  return value;
}

// The IPv4-mapped range, ::ffff:0.0.0.0 to ::ffff:255.255.255.255.
constexpr U128 kMappedFirst = U128{0xffff} << 32;
constexpr U128 kMappedLast = kMappedFirst | 0xffffffffu;

// Sorts `ranges` and merges those that overlap or touch, in place.
template <typename Range>
void Merge(std::vector<Range>& ranges) {
  using Value = decltype(Range::last);
  constexpr Value kTop = static_cast<Value>(-1);
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.first < b.first; });
  size_t kept = 0;
  for (const Range& range : ranges) {
    if (kept > 0) {
      Range& previous = ranges[kept - 1];
      // A range that reaches the top of the space holds every later one (and last + 1 would wrap).
      if (previous.last == kTop || range.first <= previous.last + 1) {
        previous.last = std::max(previous.last, range.last);
        continue;
      }
    }
    ranges[kept++] = range;
  }
  ranges.resize(kept);
  ranges.shrink_to_fit();
}

template <typename Range, typename Value>
bool InRanges(const std::vector<Range>& ranges, Value value) {
  // The first range starting after `value`; the one before it is the only candidate.
  auto after = std::upper_bound(ranges.begin(), ranges.end(), value,
                                [](Value v, const Range& r) { return v < r.first; });
  return after != ranges.begin() && value <= std::prev(after)->last;
}

std::string_view LineWithoutComment(std::string_view line) {
  const size_t comment = line.find_first_of("#;");
  if (comment != std::string_view::npos) line = line.substr(0, comment);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace

PrefixSet::PrefixSet(std::span<const Cidr> blocks) {
  for (const Cidr& block : blocks) {
    const U128 first = ToU128(block.base);
    const U128 size_minus_one = block.bits >= 128 ? U128{0} : (~U128{0} >> block.bits);
    const U128 last = first | size_minus_one;
    if (block.base.IsV4() && block.bits >= 96) {
      v4_.push_back({static_cast<uint32_t>(first), static_cast<uint32_t>(last)});
      continue;
    }
    v6_.push_back({first, last});
    // An IPv6 block over the mapped range (::/0, ::/80) covers IPv4 addresses too, which are
    // looked up among the IPv4 ranges only.
    if (first <= kMappedLast && last >= kMappedFirst) {
      v4_.push_back({static_cast<uint32_t>(std::max(first, kMappedFirst)),
                     static_cast<uint32_t>(std::min(last, kMappedLast))});
    }
  }
  Merge(v4_);
  Merge(v6_);
}

bool PrefixSet::Contains(const IpAddress& address) const {
  const U128 value = ToU128(address);
  if (address.IsV4()) return InRanges(v4_, static_cast<uint32_t>(value));
  return InRanges(v6_, value);
}

size_t PrefixSet::MemoryBytes() const {
  return v4_.capacity() * sizeof(V4Range) + v6_.capacity() * sizeof(V6Range);
}

Result<std::vector<Cidr>> ParseNetset(std::string_view text) {
  std::vector<Cidr> blocks;
  size_t number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++number;
    const std::string_view entry = LineWithoutComment(line);
    if (entry.find_first_not_of(" \t") == std::string_view::npos) continue;
    std::optional<Cidr> block = Cidr::Parse(entry);
    if (!block) {
      // At most 80 bytes of the line: the error is logged, and the file is anyone's.
      std::string shown(line.substr(0, 80));
      std::replace_if(
          shown.begin(), shown.end(),
          [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }, '?');
      return MakeError(
          ErrorCode::kInvalidArgument,
          "line " + std::to_string(number) + " is not an address or a CIDR block: " + shown);
    }
    blocks.push_back(*block);
  }
  return blocks;
}

}  // namespace sluice::admission
