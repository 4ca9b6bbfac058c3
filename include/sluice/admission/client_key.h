// Client-key derivation for per-client limits (docs/overload.md, "Create"): the address the trusted
// balancer appended to X-Forwarded-For, never a hop the client wrote, and IPv6 keyed on its /64
// because one subscriber usually holds a whole /64 and could otherwise walk around its bucket.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/result.h"

namespace sluice::admission {

/// An IPv4 or IPv6 address, IPv4 held as IPv4-mapped IPv6 so one comparison serves both.
/// A value type.
struct IpAddress {
  std::array<uint8_t, 16> bytes{};

  bool IsV4() const;
  /// Parses "1.2.3.4", "2001:db8::1", "::ffff:1.2.3.4", and the socket/proxy spellings
  /// "1.2.3.4:5678", "[2001:db8::1]" and "[2001:db8::1]:443" (the port is dropped). Surrounding
  /// spaces are ignored. Anything else (names, zone ids, junk) is nullopt.
  static std::optional<IpAddress> Parse(std::string_view text);
};

/// A network: an address with its low bits cleared and how many bits lead, counted over the
/// 128-bit form (an IPv4 /24 is 96 + 24 = 120 bits). A value type.
struct Cidr {
  IpAddress base;
  int bits = 128;
  /// Parses "10.0.0.0/8", "fd00::/8" and a bare address (all its bits). Bits below the prefix
  /// that are set are cleared ("10.1.2.3/8" is 10.0.0.0/8), as every list writer expects. Spaces
  /// around it are ignored; anything else is nullopt.
  static std::optional<Cidr> Parse(std::string_view text);
};

/// A set of trusted proxy addresses and CIDR blocks ("10.0.0.0/8", "::1", "fd00::/8").
/// Immutable after Parse, so thread-safe to share.
class TrustedProxies {
 public:
  /// Nobody is trusted: every key is the socket peer.
  TrustedProxies() = default;
  /// Fails with kInvalidArgument naming the first entry that is not an address or CIDR block.
  static Result<TrustedProxies> Parse(std::span<const std::string> entries);

  bool Contains(const IpAddress& address) const;
  bool empty() const { return blocks_.empty(); }

 private:
  std::vector<Cidr> blocks_;
};

/// The limiter key of a request.
///
/// `peer` is the address on the socket. `forwarded_for` holds every X-Forwarded-For header value
/// in arrival order (each a comma-separated list). If the peer is not a trusted proxy, the key is
/// the peer: whatever the client wrote is ignored. If it is, the key is the right-most entry that
/// is not itself trusted (the one our balancer appended); the left-most entries are client-written
/// and never used. If that entry is malformed, or there is no header, the key falls back to the
/// peer; if every entry is trusted, the left-most (still a trusted hop) is used.
///
/// The key is "1.2.3.4" for IPv4 (IPv4-mapped IPv6 included) and "2001:db8:1:2::/64" for IPv6.
/// An unparseable peer (e.g. a Unix socket path) is returned as it is. Pure function.
std::string ClientKey(std::string_view peer, std::span<const std::string_view> forwarded_for,
                      const TrustedProxies& trusted);

/// The key of one address: IPv4 as is, IPv6 collapsed to its /64.
std::string ClientKeyOf(const IpAddress& address);

/// The network a client key belongs to, as abuse is watched by (docs/overload.md, "Abuse or
/// growth"): "203.0.113.0/24" for an IPv4 key, "2001:db8:1::/48" for an IPv6 one (a site's usual
/// allocation), so that a carrier or a hoster with many addresses shows up as one. A key that is
/// not an address (a Unix socket peer) is its own prefix. Pure function.
std::string ClientPrefix(std::string_view client_key);

}  // namespace sluice::admission
