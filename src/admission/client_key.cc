#include "sluice/admission/client_key.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace sluice::admission {
namespace {

constexpr std::array<uint8_t, 12> kV4MappedPrefix{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && s.size() <= 5 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<IpAddress> ParseBare(std::string_view text) {
  // INET6_ADDRSTRLEN is 46; anything longer is not an address, and the copy needs a terminator.
  char buf[64];
  if (text.empty() || text.size() >= sizeof(buf)) return std::nullopt;
  // inet_pton would stop at a NUL and take "1.2.3.4\0junk" for 1.2.3.4.
  if (text.find('\0') != std::string_view::npos) return std::nullopt;
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  IpAddress address;
  in_addr v4{};
  if (inet_pton(AF_INET, buf, &v4) == 1) {
    std::copy(kV4MappedPrefix.begin(), kV4MappedPrefix.end(), address.bytes.begin());
    std::memcpy(address.bytes.data() + 12, &v4, 4);
    return address;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, buf, &v6) == 1) {
    std::memcpy(address.bytes.data(), &v6, 16);
    return address;
  }
  return std::nullopt;
}

IpAddress Masked(IpAddress address, int prefix_bits) {
  for (int i = 0; i < 16; ++i) {
    const int keep = std::clamp(prefix_bits - 8 * i, 0, 8);
    address.bytes[i] &= static_cast<uint8_t>(keep == 0 ? 0 : 0xff << (8 - keep));
  }
  return address;
}

}  // namespace

bool IpAddress::IsV4() const {
  return std::equal(kV4MappedPrefix.begin(), kV4MappedPrefix.end(), bytes.begin());
}

std::optional<IpAddress> IpAddress::Parse(std::string_view text) {
  text = Trim(text);
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty() && !(rest.front() == ':' && AllDigits(rest.substr(1)))) return std::nullopt;
    return ParseBare(text.substr(1, close - 1));
  }
  // One colon means IPv4 with a port; IPv6 always has at least two.
  const size_t colon = text.find(':');
  if (colon != std::string_view::npos && text.find(':', colon + 1) == std::string_view::npos) {
    if (!AllDigits(text.substr(colon + 1))) return std::nullopt;
    std::optional<IpAddress> address = ParseBare(text.substr(0, colon));
    if (address && !address->IsV4()) return std::nullopt;
    return address;
  }
  return ParseBare(text);
}

std::optional<Cidr> Cidr::Parse(std::string_view text) {
  text = Trim(text);
  int bits = -1;
  if (const size_t slash = text.find('/'); slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    if (!AllDigits(digits) || digits.size() > 3) return std::nullopt;
    bits = 0;
    for (const char c : digits) bits = bits * 10 + (c - '0');
    text = text.substr(0, slash);
  }
  std::optional<IpAddress> address = ParseBare(text);
  if (!address) return std::nullopt;
  // The spelling says how the bits count: "::ffff:192.0.2.0/120" is an IPv6 block, whose bits
  // already count the 96 mapped ones; "192.0.2.0/24" counts them on top.
  const bool v4_spelling = text.find(':') == std::string_view::npos;
  const int width = v4_spelling ? 32 : 128;
  if (bits < 0) bits = width;
  if (bits > width) return std::nullopt;
  const int bits128 = v4_spelling ? bits + 96 : bits;
  return Cidr{Masked(*address, bits128), bits128};
}

Result<TrustedProxies> TrustedProxies::Parse(std::span<const std::string> entries) {
  TrustedProxies proxies;
  for (const std::string& entry : entries) {
    std::optional<Cidr> block = Cidr::Parse(entry);
    if (!block) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "bad trusted proxy: " + entry + " (an address or a CIDR block)");
    }
    proxies.blocks_.push_back(*block);
  }
  return proxies;
}

bool TrustedProxies::Contains(const IpAddress& address) const {
  return std::any_of(blocks_.begin(), blocks_.end(), [&](const Cidr& block) {
    return Masked(address, block.bits).bytes == block.base.bytes;
  });
}

std::string ClientKeyOf(const IpAddress& address) {
  char buf[INET6_ADDRSTRLEN + 4];
  if (address.IsV4()) {
    inet_ntop(AF_INET, address.bytes.data() + 12, buf, sizeof(buf));
    return buf;
  }
  const IpAddress prefix = Masked(address, 64);
  inet_ntop(AF_INET6, prefix.bytes.data(), buf, sizeof(buf));
  return std::string(buf) + "/64";
}

std::string ClientPrefix(std::string_view client_key) {
  std::string_view address_part = client_key;
  if (const size_t slash = address_part.find('/'); slash != std::string_view::npos) {
    address_part = address_part.substr(0, slash);
  }
  const std::optional<IpAddress> address = IpAddress::Parse(address_part);
  if (!address) return std::string(client_key);
  char buf[INET6_ADDRSTRLEN + 4];
  if (address->IsV4()) {
    const IpAddress network = Masked(*address, 96 + 24);
    inet_ntop(AF_INET, network.bytes.data() + 12, buf, sizeof(buf));
    return std::string(buf) + "/24";
  }
  const IpAddress network = Masked(*address, 48);
  inet_ntop(AF_INET6, network.bytes.data(), buf, sizeof(buf));
  return std::string(buf) + "/48";
}

std::string ClientKey(std::string_view peer, std::span<const std::string_view> forwarded_for,
                      const TrustedProxies& trusted) {
  const std::optional<IpAddress> peer_address = IpAddress::Parse(peer);
  if (!peer_address) return std::string(peer);
  const std::string peer_key = ClientKeyOf(*peer_address);
  if (!trusted.Contains(*peer_address)) return peer_key;

  // Walk the hops right to left: the right-most were appended by proxies we trust, and the first
  // one that is not trusted is the client as our own balancer saw it.
  std::optional<IpAddress> leftmost_trusted;
  for (auto header = forwarded_for.rbegin(); header != forwarded_for.rend(); ++header) {
    std::string_view list = *header;
    while (true) {
      const size_t comma = list.rfind(',');
      const std::string_view entry =
          Trim(comma == std::string_view::npos ? list : list.substr(comma + 1));
      if (!entry.empty()) {
        const std::optional<IpAddress> hop = IpAddress::Parse(entry);
        if (!hop) return peer_key;
        if (!trusted.Contains(*hop)) return ClientKeyOf(*hop);
        leftmost_trusted = hop;
      }
      if (comma == std::string_view::npos) break;
      list = list.substr(0, comma);
    }
  }
  return leftmost_trusted ? ClientKeyOf(*leftmost_trusted) : peer_key;
}

}  // namespace sluice::admission
