// The envelope of encrypted pastes: its shape check (the server's, src/service/envelope.cc) and
// the CLI's sealing and opening (src/app/envelope_crypto.cc), against the published vectors of
// docs/encryption.md (tests/vectors/envelope_v1.json, written by tools/envelope_vectors.py with
// another implementation), which the browser's script is tested against too.
#include "sluice/service/envelope.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "../../../src/app/envelope_crypto.h"

namespace sluice {
namespace {

using app::OpenEnvelope;
using service::Base64UrlDecode;
using service::Base64UrlEncode;
using service::CheckEnvelope;

constexpr uint64_t kMax = 1'000'000;

nlohmann::json Vectors() {
  std::ifstream in(SLUICE_ENVELOPE_VECTORS);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

std::optional<std::string> PasswordOf(const nlohmann::json& v) {
  if (v["password"].is_null()) return std::nullopt;
  return v["password"].get<std::string>();
}

TEST(EnvelopeVectors, EachPublishedVectorOpensToItsPlaintextByteForByte) {
  const auto vectors = Vectors()["vectors"];
  ASSERT_GE(vectors.size(), 6u);
  for (const auto& v : vectors) {
    SCOPED_TRACE(v["name"].get<std::string>());
    auto opened = OpenEnvelope(v["envelope"].get<std::string>(), v["key"].get<std::string>(),
                               PasswordOf(v), kMax);
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    EXPECT_EQ(*opened, FromHex(v["plaintext_hex"].get<std::string>()));
  }
}

TEST(EnvelopeVectors, SealingWithTheVectorsInputsWritesTheVectorsUncompressedEnvelopes) {
  // Compressed output depends on the deflate implementation's choices; uncompressed is exact.
  const nlohmann::json doc = Vectors();  // a range-for over Vectors()["..."] would dangle
  for (const auto& v : doc["vectors"]) {
    const std::string envelope = v["envelope"].get<std::string>();
    auto parsed = CheckEnvelope(envelope, kMax);
    ASSERT_TRUE(parsed.ok());
    if (parsed->deflated) continue;
    SCOPED_TRACE(v["name"].get<std::string>());
    app::SealInputs inputs;
    inputs.key = *Base64UrlDecode(v["key"].get<std::string>());
    inputs.iv = parsed->iv;
    inputs.kdf = parsed->kdf;
    inputs.compress = false;
    auto sealed =
        app::SealWithInputs(FromHex(v["plaintext_hex"].get<std::string>()), inputs, PasswordOf(v));
    ASSERT_TRUE(sealed.ok()) << sealed.error().message;
    EXPECT_EQ(*sealed, envelope);
  }
}

TEST(EnvelopeVectors, EachPublishedFailureFailsWithItsReason) {
  const nlohmann::json doc = Vectors();
  for (const auto& f : doc["failures"]) {
    SCOPED_TRACE(f["name"].get<std::string>());
    auto opened = OpenEnvelope(f["envelope"].get<std::string>(), f["key"].get<std::string>(),
                               PasswordOf(f), kMax);
    ASSERT_FALSE(opened.ok());
    EXPECT_EQ(opened.error().reason, f["error"].get<std::string>());
  }
}

TEST(EnvelopeCrypto, FreshSealsOpenWithAndWithoutAPasswordAndNeverRepeatTheKey) {
  const std::string text =
      std::string("awkward \r\n\xef\xbb\xbf\0 \xf0\x9f\x98\x80", 20) + std::string(100000, 'x');
  auto a = app::SealPaste(text, std::nullopt);
  auto b = app::SealPaste(text, std::string("hunter2"));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_NE(a->key, b->key);
  EXPECT_EQ(a->key.size(), 43u);
  EXPECT_LT(a->envelope.size(), text.size());  // compressed
  EXPECT_EQ(*OpenEnvelope(a->envelope, a->key, std::nullopt, kMax), text);
  EXPECT_EQ(*OpenEnvelope(b->envelope, b->key, std::string("hunter2"), kMax), text);
  EXPECT_EQ(OpenEnvelope(b->envelope, b->key, std::string("hunter3"), kMax).error().reason,
            "wrong_key");
  EXPECT_EQ(OpenEnvelope(b->envelope, b->key, std::nullopt, kMax).error().reason,
            "password_required");
  auto parsed = CheckEnvelope(b->envelope, kMax);
  ASSERT_TRUE(parsed.ok());
  ASSERT_TRUE(parsed->kdf.has_value());
  EXPECT_EQ(parsed->kdf->iterations, service::kEnvelopeDefaultIterations);
}

TEST(EnvelopeCrypto, ACompressedBombStopsAtTheCapInsteadOfInflating) {
  const std::string zeros(4'000'000, '0');
  auto sealed = app::SealPaste(zeros, std::nullopt);
  ASSERT_TRUE(sealed.ok());
  EXPECT_LT(sealed->envelope.size(), 20'000u);
  auto opened = OpenEnvelope(sealed->envelope, sealed->key, std::nullopt, 1'000'000);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().code, ErrorCode::kTooLarge);
  EXPECT_TRUE(OpenEnvelope(sealed->envelope, sealed->key, std::nullopt, 4'000'000).ok());
}

TEST(Base64Url, RoundTripsEveryLengthAndRefusesNonCanonicalSpellings) {
  std::string bytes;
  for (int n = 0; n < 40; ++n) {
    EXPECT_EQ(*Base64UrlDecode(Base64UrlEncode(bytes)), bytes);
    bytes += static_cast<char>(n * 37);
  }
  EXPECT_EQ(Base64UrlEncode("\xfb\xff"), "-_8");
  EXPECT_FALSE(Base64UrlDecode("A").has_value());     // 4n+1 characters
  EXPECT_FALSE(Base64UrlDecode("AB==").has_value());  // padding
  EXPECT_FALSE(Base64UrlDecode("A+/B").has_value());  // the other alphabet
  EXPECT_FALSE(Base64UrlDecode("AB").has_value());    // non-zero trailing bits
  EXPECT_TRUE(Base64UrlDecode("AA").has_value());
}

// A valid envelope with one field replaced by `json` (raw JSON text).
std::string With(const std::string& field, const std::string& json) {
  std::map<std::string, std::string> f = {
      {"v", "1"},        {"alg", "\"A256GCM\""}, {"iv", "\"AAAAAAAAAAAAAAAA\""},
      {"z", "\"none\""}, {"kdf", "null"},        {"ct", "\"AAAAAAAAAAAAAAAAAAAAAA\""}};
  if (json.empty()) {
    f.erase(field);
  } else {
    f[field] = json;
  }
  std::string out = "{";
  for (const auto& [k, v] : f) out += (out.size() > 1 ? "," : "") + ("\"" + k + "\":" + v);
  return out + "}";
}

TEST(EnvelopeShape, AWellFormedEnvelopeInAnyKeyOrderPasses) {
  EXPECT_TRUE(CheckEnvelope(With("v", "1"), kMax).ok());
  EXPECT_TRUE(
      CheckEnvelope(
          With("kdf", R"({"salt":"AAAAAAAAAAAAAAAAAAAAAA","iter":600000,"name":"PBKDF2-SHA256"})"),
          kMax)
          .ok());
}

TEST(EnvelopeShape, EachMalformedEnvelopeIsRefusedWithAReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {With("v", "2"), "unknown version 2"},
      {With("v", "1.0"), "'v' cannot be a number"},
      {With("v", "\"1\""), "'v' cannot be a string"},
      {With("alg", "\"A128GCM\""), "'alg'"},
      {With("z", "\"gzip\""), "'z'"},
      {With("iv", "\"AAAAAAAAAAAAAAAAA\""), "'iv' is not canonical"},
      {With("iv", "\"AAAAAAAAAAAAAAA\""), "'iv' must be 12 bytes, not 11"},
      {With("iv", "\"AAAAAAAAAAAAAAAAAAAA\""), "'iv' must be 12 bytes, not 15"},
      {With("iv", "\"AAAAAAAA+AAAAAAA\""), "'iv' is not canonical"},
      {With("ct", "\"AAAA\""), "shorter than the 16-byte tag"},
      {With("ct", ""), "needs exactly the fields"},
      {With("extra", "1"), "unknown field 'extra'"},
      {With("kdf", "{}"), "'kdf' needs exactly"},
      {With("kdf", R"({"name":"PBKDF2-SHA256","iter":99999,"salt":"AAAAAAAAAAAAAAAAAAAAAA"})"),
       "within [100000, 2000000]"},
      {With("kdf", R"({"name":"PBKDF2-SHA256","iter":2000001,"salt":"AAAAAAAAAAAAAAAAAAAAAA"})"),
       "within"},
      {With("kdf", R"({"name":"argon2","iter":100000,"salt":"AAAAAAAAAAAAAAAAAAAAAA"})"),
       "'kdf.name'"},
      {With("kdf", R"({"name":"PBKDF2-SHA256","iter":100000,"salt":"AAAA"})"),
       "'kdf.salt' must be 16 bytes"},
      {With("kdf",
            R"({"name":"PBKDF2-SHA256","iter":100000,"salt":"AAAAAAAAAAAAAAAAAAAAAA","x":1})"),
       "unknown field 'kdf.x'"},
      {With("kdf", "[]"), "'kdf' cannot be an array"},
      {With("kdf", "{\"name\":{}}"), "cannot be an object"},
      {R"({"v":1,"v":1})", "duplicate field 'v'"},
      {"[]", "must be a JSON object"},
      {"", "malformed JSON"},
      {With("v", "1").substr(0, 40), "malformed JSON"},
      {With("v", "1") + "x", "malformed JSON"},
  };
  for (const auto& [text, why] : cases) {
    SCOPED_TRACE(text);
    auto checked = CheckEnvelope(text, kMax);
    ASSERT_FALSE(checked.ok());
    EXPECT_EQ(checked.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(checked.error().reason, "bad_envelope");
    EXPECT_NE(checked.error().message.find(why), std::string::npos) << checked.error().message;
  }
  EXPECT_FALSE(CheckEnvelope(With("v", "1"), 10).ok());
}

TEST(EnvelopeShape, DeepNestingIsRefusedAtTheFirstWrongEventNotParsed) {
  const std::string deep = "{\"kdf\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto checked = CheckEnvelope(deep, kMax);
  ASSERT_FALSE(checked.ok());
  EXPECT_NE(checked.error().message.find("'kdf' cannot be an array"), std::string::npos);
}

TEST(EnvelopeShape, TheAadIsTheCanonicalHeaderAndTheSerialisationRoundTrips) {
  const std::string text = With("v", "1");
  auto parsed = CheckEnvelope(text, kMax);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(service::EnvelopeAad(*parsed),
            R"({"v":1,"alg":"A256GCM","iv":"AAAAAAAAAAAAAAAA","z":"none","kdf":null})");
  EXPECT_EQ(
      service::SerializeEnvelope(*parsed),
      R"({"v":1,"alg":"A256GCM","iv":"AAAAAAAAAAAAAAAA","z":"none","kdf":null,"ct":"AAAAAAAAAAAAAAAAAAAAAA"})");
}

}  // namespace
}  // namespace sluice
