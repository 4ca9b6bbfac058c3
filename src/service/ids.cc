#include "sluice/service/ids.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstdlib>

namespace sluice::service {

namespace {

constexpr std::string_view kBase62 =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
constexpr std::string_view kBase64Url =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

}  // namespace

void FillRandom(unsigned char* out, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::getrandom(out + done, n - done, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      std::abort();  // no entropy source: minting guessable ids would be worse than stopping
    }
    done += static_cast<size_t>(got);
  }
}

namespace {

// `N` base62 characters, each equally likely.
template <size_t N>
std::array<char, N> RandomBase62() {
  std::array<char, N> chars{};
  size_t filled = 0;
  std::array<unsigned char, 32> pool{};
  while (filled < chars.size()) {
    FillRandom(pool.data(), pool.size());
    for (unsigned char b : pool) {
      // 248 = 4 * 62: rejecting the top 8 byte values keeps every character equally likely.
      if (b >= 248) continue;
      chars[filled++] = kBase62[b % 62];
      if (filled == chars.size()) break;
    }
  }
  return chars;
}

// `N` random bytes as base64url without padding.
template <size_t N>
std::string RandomBase64Url() {
  std::array<unsigned char, N> raw{};
  FillRandom(raw.data(), raw.size());
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char b : raw) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kBase64Url[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += kBase64Url[(acc << (6 - bits)) & 63];
  return out;
}

}  // namespace

bool IsTakenByAPage(std::string_view id) { return id == "transparency"; }

store::PasteId MintPasteId() {
  for (;;) {
    const auto chars = RandomBase62<store::PasteId::kLength>();
    const std::string_view id(chars.data(), chars.size());
    if (!IsTakenByAPage(id)) return *store::PasteId::Parse(id);
  }
}

std::string MintDeleteToken() { return RandomBase64Url<16>(); }

std::string MintCreatorTokenSecret() { return "slt_" + RandomBase64Url<32>(); }

std::string MintCreatorTokenId() {
  const auto chars = RandomBase62<8>();
  return std::string(chars.data(), chars.size());
}

store::TokenHash HashDeleteToken(std::string_view token) {
  store::TokenHash hash{};
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), hash.data());
  return hash;
}

bool SameTokenHash(const store::TokenHash& a, const store::TokenHash& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace sluice::service
