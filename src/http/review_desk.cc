#include "review_desk.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>

namespace sluice::http {

namespace {

std::string HexOf(const unsigned char* bytes, size_t n) {
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) fmt::format_to(std::back_inserter(out), "{:02x}", bytes[i]);
  return out;
}

bool IsHex(std::string_view s, size_t size) {
  return s.size() == size && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// One-line label so that a session's MAC can never stand for a form token or the other way round.
void Hmac(const ReviewDesk::Key& key, std::string_view message, unsigned char (&out)[32]) {
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out,
           &len) == nullptr ||
      len != 32) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
}

}  // namespace

ReviewDesk::ReviewDesk(const std::optional<Key>& admin_token_sha256, const Clock& clock)
    : clock_(clock),
      per_client_(
          admission::KeyedLimiterOptions{
              .policies = {kLoginPerClient}, .max_keys = 10'000, .shards = 4},
          clock),
      global_(kLoginGlobal, clock) {
  if (admin_token_sha256) {
    // Derived, not the digest itself: the cookie's MAC key is then useless as a bearer token's
    // digest, and a new token file is a new key.
    unsigned char derived[32];
    Hmac(*admin_token_sha256, "sluice review page session key v1", derived);
    std::copy(std::begin(derived), std::end(derived), key_.begin());
  } else if (RAND_bytes(key_.data(), static_cast<int>(key_.size())) != 1) {
    throw std::runtime_error("no randomness for the review page's key");
  }
}

std::string ReviewDesk::Mac(std::string_view label, std::string_view text) const {
  unsigned char out[32];
  Hmac(key_, fmt::format("{}|{}", label, text), out);
  return HexOf(out, sizeof out);
}

std::string ReviewDesk::OpenSession() const {
  unsigned char id[16];
  if (RAND_bytes(id, sizeof id) != 1) throw std::runtime_error("no randomness for a session");
  const std::string body =
      fmt::format("{}.{}", clock_.UnixSeconds() + std::chrono::seconds(kSessionLifetime).count(),
                  HexOf(id, sizeof id));
  return body + "." + Mac("session", body);
}

std::optional<std::string> ReviewDesk::SessionOf(std::string_view cookie) const {
  const size_t first = cookie.find('.');
  const size_t second = first == std::string_view::npos ? first : cookie.find('.', first + 1);
  if (second == std::string_view::npos || first == 0 || first > 19) return std::nullopt;
  const std::string_view expiry = cookie.substr(0, first);
  const std::string_view id = cookie.substr(first + 1, second - first - 1);
  const std::string_view mac = cookie.substr(second + 1);
  if (expiry.find_first_not_of("0123456789") != std::string_view::npos || !IsHex(id, 32) ||
      !IsHex(mac, 64)) {
    return std::nullopt;
  }
  const std::string expected = Mac("session", cookie.substr(0, second));
  if (CRYPTO_memcmp(expected.data(), mac.data(), expected.size()) != 0) return std::nullopt;
  if (std::stoll(std::string(expiry)) <= clock_.UnixSeconds()) return std::nullopt;
  return std::string(id);
}

std::string ReviewDesk::FormToken(std::string_view who) const { return Mac("form", who); }

bool ReviewDesk::IsFormToken(std::string_view who, std::string_view presented) const {
  const std::string expected = FormToken(who);
  return presented.size() == expected.size() &&
         CRYPTO_memcmp(expected.data(), presented.data(), expected.size()) == 0;
}

admission::TakeDecision ReviewDesk::AdmitLogin(std::string_view client_key) {
  const admission::KeyedDecision own = per_client_.TryTake(client_key);
  if (!own.allowed()) return own.decision;
  const admission::TakeDecision all = global_.TryTake();
  if (!all.allowed) per_client_.Refund(client_key, 1);
  return all;
}

}  // namespace sluice::http
