#include "sluice/admission/network.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "sluice/admission/client_key.h"

namespace sluice::admission {
namespace {

// A client key names an IPv6 client by its /64 ("2001:db8:1:2::/64"): its address part.
std::optional<IpAddress> AddressOfKey(std::string_view key) {
  if (const size_t slash = key.find('/'); slash != std::string_view::npos) {
    key = key.substr(0, slash);
  }
  return IpAddress::Parse(key);
}

uint32_t V4Of(const IpAddress& a) {
  return uint32_t{a.bytes[12]} << 24 | uint32_t{a.bytes[13]} << 16 | uint32_t{a.bytes[14]} << 8 |
         uint32_t{a.bytes[15]};
}

// The address's first 64 bits, most significant first.
uint64_t V6HighOf(const IpAddress& a) {
  uint64_t high = 0;
  for (int i = 0; i < 8; ++i) high = high << 8 | a.bytes[i];
  return high;
}

int V4Bits(NetworkPrefixes p) { return std::clamp(p.v4_bits, 1, 32); }
int V6Bits(NetworkPrefixes p) { return std::clamp(p.v6_bits, 1, kMaxPackedV6Bits); }

// The leading `bits` (1 to 64) of `value`, right-aligned.
uint64_t Leading(uint64_t value, int width, int bits) { return value >> (width - bits); }

constexpr uint64_t kV6Flag = uint64_t{1} << 63;
constexpr int kLengthShift = 56;
constexpr uint64_t kNetworkMask = (uint64_t{1} << kLengthShift) - 1;

}  // namespace

std::string ClientNetwork(std::string_view client_key, NetworkPrefixes prefixes) {
  const std::optional<IpAddress> address = AddressOfKey(client_key);
  if (!address) return std::string(client_key);
  char buf[INET6_ADDRSTRLEN + 4];
  if (address->IsV4()) {
    const int bits = V4Bits(prefixes);
    const uint32_t network = bits == 32 ? V4Of(*address) : V4Of(*address) & ~(~0u >> bits);
    const uint32_t wire = htonl(network);
    inet_ntop(AF_INET, &wire, buf, sizeof(buf));
    return std::string(buf) + "/" + std::to_string(bits);
  }
  const int bits = V6Bits(prefixes);
  IpAddress network = *address;
  for (int i = 0; i < 16; ++i) {
    const int keep = std::clamp(bits - 8 * i, 0, 8);
    network.bytes[i] &= static_cast<uint8_t>(keep == 0 ? 0 : 0xff << (8 - keep));
  }
  inet_ntop(AF_INET6, network.bytes.data(), buf, sizeof(buf));
  return std::string(buf) + "/" + std::to_string(bits);
}

std::optional<uint64_t> PackNetwork(std::string_view client_key, NetworkPrefixes prefixes) {
  const std::optional<IpAddress> address = AddressOfKey(client_key);
  if (!address) return std::nullopt;
  if (address->IsV4()) {
    const int bits = V4Bits(prefixes);
    return uint64_t(bits) << kLengthShift | Leading(V4Of(*address), 32, bits);
  }
  const int bits = V6Bits(prefixes);
  return kV6Flag | uint64_t(bits) << kLengthShift | Leading(V6HighOf(*address), 64, bits);
}

bool InPackedNetwork(std::string_view client_key, uint64_t packed) {
  const std::optional<IpAddress> address = AddressOfKey(client_key);
  if (!address) return false;
  const bool v6 = (packed & kV6Flag) != 0;
  const int bits = static_cast<int>((packed & ~kV6Flag) >> kLengthShift);
  if (v6 == address->IsV4() || bits < 1 || bits > (v6 ? kMaxPackedV6Bits : 32)) return false;
  const uint64_t mine =
      v6 ? Leading(V6HighOf(*address), 64, bits) : Leading(V4Of(*address), 32, bits);
  return mine == (packed & kNetworkMask);
}

}  // namespace sluice::admission
