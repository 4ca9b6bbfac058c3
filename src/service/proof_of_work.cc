#include "sluice/service/proof_of_work.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "sluice/service/content_blocklist.h"
#include "sluice/service/envelope.h"
#include "sluice/service/ids.h"

namespace sluice::service {

namespace {

constexpr std::string_view kAlgorithm = "SHA-256";
constexpr std::string_view kExpiresMark = "?expires=";
// A payload longer than this is not one this server issued (its fields are about 250 bytes).
constexpr size_t kMaxPayloadBytes = 1024;

std::string Sha256Hex(std::string_view text) {
  store::BodyDigest digest{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
  return ContentBlocklist::Hex(digest);
}

// Where standard base64 (ALTCHA's btoa) and base64url differ: the two characters, and padding.
std::optional<std::string> DecodeEitherBase64(std::string_view text) {
  std::string url(text);
  while (!url.empty() && url.back() == '=') url.pop_back();
  std::replace(url.begin(), url.end(), '+', '-');
  std::replace(url.begin(), url.end(), '/', '_');
  return Base64UrlDecode(url);
}

// The expiry a salt names, or nullopt: the digits after the last "?expires=".
std::optional<int64_t> SaltExpiry(std::string_view salt) {
  const size_t at = salt.rfind(kExpiresMark);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view digits = salt.substr(at + kExpiresMark.size());
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || value <= 0) return std::nullopt;
  return value;
}

bool SameHex(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

std::string PowChallenge::ToJson() const {
  return nlohmann::json{{"algorithm", algorithm},
                        {"challenge", challenge},
                        {"maxnumber", maxnumber},
                        {"salt", salt},
                        {"signature", signature}}
      .dump();
}

std::optional<PowChallenge> PowChallenge::FromJson(std::string_view json) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, false);
  if (!doc.is_object()) return std::nullopt;
  const auto text = [&](const char* key) -> const std::string* {
    auto it = doc.find(key);
    return it != doc.end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
  };
  const auto max = doc.find("maxnumber");
  const std::string* algorithm = text("algorithm");
  const std::string* challenge = text("challenge");
  const std::string* salt = text("salt");
  const std::string* signature = text("signature");
  if (!algorithm || !challenge || !salt || !signature || max == doc.end() ||
      !max->is_number_unsigned()) {
    return std::nullopt;
  }
  return PowChallenge{*algorithm, *challenge, max->get<uint64_t>(), *salt, *signature};
}

std::string_view PowVerdictName(PowVerdict verdict) {
  switch (verdict) {
    case PowVerdict::kValid:
      return "valid";
    case PowVerdict::kMalformed:
      return "malformed";
    case PowVerdict::kExpired:
      return "expired";
    case PowVerdict::kForged:
      return "forged";
    case PowVerdict::kWrong:
      return "wrong";
    case PowVerdict::kReplayed:
      return "replayed";
    case PowVerdict::kBusy:
      return "busy";
  }
  return "malformed";
}

ProofOfWork::ProofOfWork(std::string key, ProofOfWorkOptions options, const Clock& clock)
    : key_(std::move(key)), options_(options), clock_(clock) {
  if (key_.size() < 16) throw std::invalid_argument("proof of work: the key is under 16 bytes");
}

std::string ProofOfWork::Sign(std::string_view challenge) const {
  store::BodyDigest mac{};
  unsigned int size = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(challenge.data()), challenge.size(), mac.data(),
       &size);
  return ContentBlocklist::Hex(mac);
}

PowChallenge ProofOfWork::Issue(uint64_t maxnumber) const {
  // 12 bytes of salt (96 bits: never issued twice), then 8 for the secret number.
  store::BodyDigest random{};
  FillRandom(random.data(), random.size());
  uint64_t bits = 0;
  for (size_t i = 24; i < 32; ++i) bits = (bits << 8) | random[i];
  // The modulo's bias is below 2^-40 for any maxnumber this server asks for (under 2^24).
  const uint64_t number = maxnumber == UINT64_MAX ? bits : bits % (maxnumber + 1);
  std::string salt = fmt::format("{}{}{}", ContentBlocklist::Hex(random).substr(0, 24),
                                 kExpiresMark, clock_.UnixSeconds() + options_.expiry.count());
  std::string challenge = Sha256Hex(fmt::format("{}{}", salt, number));
  std::string signature = Sign(challenge);
  return PowChallenge{std::string(kAlgorithm), std::move(challenge), maxnumber, std::move(salt),
                      std::move(signature)};
}

PowVerdict ProofOfWork::Redeem(std::string_view payload) {
  if (payload.size() > kMaxPayloadBytes) return PowVerdict::kMalformed;
  const std::optional<std::string> json = DecodeEitherBase64(payload);
  if (!json) return PowVerdict::kMalformed;
  const nlohmann::json doc = nlohmann::json::parse(*json, nullptr, false);
  if (!doc.is_object()) return PowVerdict::kMalformed;
  const auto field = [&](const char* key) { return doc.find(key); };
  const auto algorithm = field("algorithm");
  const auto challenge = field("challenge");
  const auto number = field("number");
  const auto salt = field("salt");
  const auto signature = field("signature");
  for (const auto& it : {algorithm, challenge, salt, signature}) {
    if (it == doc.end() || !it->is_string()) return PowVerdict::kMalformed;
  }
  if (number == doc.end() || !number->is_number_unsigned()) return PowVerdict::kMalformed;
  if (algorithm->get_ref<const std::string&>() != kAlgorithm) return PowVerdict::kMalformed;
  const std::string& salt_text = salt->get_ref<const std::string&>();
  const std::optional<int64_t> expires = SaltExpiry(salt_text);
  if (!expires) return PowVerdict::kMalformed;
  const int64_t now = clock_.UnixSeconds();
  if (now > *expires) return PowVerdict::kExpired;
  const std::string& challenge_text = challenge->get_ref<const std::string&>();
  if (!SameHex(Sign(challenge_text), signature->get_ref<const std::string&>())) {
    return PowVerdict::kForged;
  }
  if (!SameHex(Sha256Hex(fmt::format("{}{}", salt_text, number->get<uint64_t>())),
               challenge_text)) {
    return PowVerdict::kWrong;
  }
  std::lock_guard lock(mu_);
  ForgetExpired(now);
  if (spent_.contains(challenge_text)) return PowVerdict::kReplayed;
  if (spent_.size() >= options_.max_spent) return PowVerdict::kBusy;
  spent_.insert(challenge_text);
  spent_by_expiry_.emplace(*expires, challenge_text);
  return PowVerdict::kValid;
}

void ProofOfWork::ForgetExpired(int64_t now) {
  // A solution is refused as expired once `now` passes its expiry, so it need not be remembered
  // after that; each entry is erased once, so the work is paid for by the inserts.
  auto end = spent_by_expiry_.lower_bound(now);
  for (auto it = spent_by_expiry_.begin(); it != end; ++it) spent_.erase(it->second);
  spent_by_expiry_.erase(spent_by_expiry_.begin(), end);
}

size_t ProofOfWork::Spent() const {
  std::lock_guard lock(mu_);
  return spent_.size();
}

uint64_t PowDifficulty(uint64_t base, double solver_share_left) {
  int doublings = 0;
  for (double at = 0.5; doublings < 3 && solver_share_left < at; at /= 2) ++doublings;
  return base << doublings;
}

std::optional<uint64_t> SolvePow(const PowChallenge& challenge) {
  for (uint64_t n = 0; n <= challenge.maxnumber; ++n) {
    if (Sha256Hex(fmt::format("{}{}", challenge.salt, n)) == challenge.challenge) return n;
  }
  return std::nullopt;
}

std::string PowPayload(const PowChallenge& challenge, uint64_t number) {
  return Base64UrlEncode(nlohmann::json{
      {"algorithm", challenge.algorithm},
      {"challenge", challenge.challenge},
      {"number", number},
      {"salt", challenge.salt},
      {"signature",
       challenge.signature}}.dump());
}

}  // namespace sluice::service
