// The network a client belongs to, for counting abuse reports (docs/moderation.md, "Networks"):
// one subscriber usually holds a whole IPv4 /24 of a hoster or an IPv6 /48 of a site, so reports
// counted by client key (an IPv6 /64) would let one /48 cast 65,536 votes. Counted by network,
// the same reporters are one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::admission {

/// The prefix lengths that make a network of a client address.
struct NetworkPrefixes {
  /// IPv4 prefix length, 8 to 32. Default: 24.
  int v4_bits = 24;
  /// IPv6 prefix length, 16 to kMaxPackedV6Bits: a client key is already an IPv6 /64, so only a
  /// shorter prefix groups anything. Default: 48.
  int v6_bits = 48;
};

/// The longest IPv6 prefix PackNetwork can hold.
inline constexpr int kMaxPackedV6Bits = 56;

/// The network of a client key (client_key.h: "203.0.113.7", "2001:db8:1:2::/64") at `prefixes`,
/// as text: "203.0.113.0/24", "2001:db8:1::/48". A key that is not an address (a Unix socket peer)
/// is its own network. Pure function.
std::string ClientNetwork(std::string_view client_key, NetworkPrefixes prefixes);

/// The same network in 64 bits, for a column on every paste row (a paste's creator): 8 bytes where
/// the text takes 14 to 20. Bit 63 says IPv6, bits 56 to 62 hold the prefix length, the low 56
/// bits the network's leading bits, right-aligned. Reversible on purpose: a hash of a /24 would
/// hide nothing (there are 2^24 of them), and the exact network can be compared at its own length
/// after the prefixes are changed (InPackedNetwork). Nothing for a key that is not an address.
std::optional<uint64_t> PackNetwork(std::string_view client_key, NetworkPrefixes prefixes);

/// True if the address of `client_key` lies in the network `packed` (PackNetwork), compared at the
/// length `packed` was made with. False for a key that is not an address, or of the other family.
bool InPackedNetwork(std::string_view client_key, uint64_t packed);

}  // namespace sluice::admission
