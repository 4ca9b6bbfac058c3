#include "sluice/service/envelope.h"

#include <fmt/format.h>

#include <array>
#include <nlohmann/json.hpp>

#include "sluice/service/text.h"

namespace sluice::service {

namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

constexpr std::array<int8_t, 256> MakeDecodeTable() {
  std::array<int8_t, 256> table{};
  for (auto& v : table) v = -1;
  for (size_t i = 0; i < kAlphabet.size(); ++i) {
    table[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  }
  return table;
}
constexpr std::array<int8_t, 256> kDecode = MakeDecodeTable();

Error Bad(std::string why) {
  return MakeError(ErrorCode::kInvalidArgument, "not a valid encrypted paste envelope: " + why,
                   "bad_envelope");
}

// The six top-level fields and the three of "kdf", as bits of what has been seen.
constexpr unsigned kV = 1, kAlg = 2, kIv = 4, kZ = 8, kKdf = 16, kCt = 32, kAll = 63;
constexpr unsigned kName = 1, kIter = 2, kSalt = 4, kKdfAll = 7;

// A SAX reader, as src/http/json_create.cc's and for the same reasons: it refuses at the first
// event an envelope cannot have, so a hostile body (deep nesting, a million keys) costs one pass
// and no tree, and a duplicate key is refused rather than silently kept last.
class EnvelopeShape final : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override {
    if (depth_ == 1 && key_ == "kdf") {
      has_kdf_ = false;
      return true;
    }
    return Wrong("null");
  }
  bool boolean(bool) override { return Wrong("a boolean"); }
  bool number_integer(number_integer_t value) override {
    if (value < 0) return Wrong("a negative number");
    return number_unsigned(static_cast<number_unsigned_t>(value));
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (depth_ == 1 && key_ == "v") {
      if (value != kEnvelopeVersion) {
        return Refuse(fmt::format("unknown version {} (this server knows version {})",
                                  value > 1000000 ? 1000000 : value, kEnvelopeVersion));
      }
      return true;
    }
    if (depth_ == 2 && key_ == "iter") {
      if (value < kEnvelopeMinIterations || value > kEnvelopeMaxIterations) {
        return Refuse(fmt::format("'kdf.iter' must be within [{}, {}]", kEnvelopeMinIterations,
                                  kEnvelopeMaxIterations));
      }
      kdf_.iterations = static_cast<uint32_t>(value);
      return true;
    }
    return Wrong("a number");
  }
  bool number_float(number_float_t, const string_t&) override { return Wrong("a number"); }
  bool binary(binary_t&) override { return Wrong("binary"); }

  bool string(string_t& value) override {
    if (depth_ == 1) {
      if (key_ == "alg") {
        if (value != kEnvelopeAlg) return Refuse("'alg' must be \"A256GCM\"");
        return true;
      }
      if (key_ == "z") {
        if (value != "none" && value != "deflate-raw") {
          return Refuse("'z' must be \"none\" or \"deflate-raw\"");
        }
        out_.deflated = value == "deflate-raw";
        return true;
      }
      if (key_ == "iv") return Decode(value, "iv", kEnvelopeIvBytes, out_.iv);
      if (key_ == "ct") {
        if (!Decode(value, "ct", 0, out_.ciphertext)) return false;
        if (out_.ciphertext.size() < kEnvelopeTagBytes) {
          return Refuse("'ct' is shorter than the 16-byte tag");
        }
        return true;
      }
    }
    if (depth_ == 2) {
      if (key_ == "name") {
        if (value != kEnvelopeKdfName) return Refuse("'kdf.name' must be \"PBKDF2-SHA256\"");
        return true;
      }
      if (key_ == "salt") return Decode(value, "kdf.salt", kEnvelopeSaltBytes, kdf_.salt);
    }
    return Wrong("a string");
  }

  bool start_object(std::size_t) override {
    if (depth_ == 0 || (depth_ == 1 && key_ == "kdf")) {
      if (depth_ == 1) has_kdf_ = true;
      ++depth_;
      return true;
    }
    return Wrong("an object");
  }
  bool end_object() override {
    if (depth_ == 2 && kdf_seen_ != kKdfAll) {
      return Refuse("'kdf' needs exactly 'name', 'iter' and 'salt'");
    }
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return Wrong("an array"); }
  bool end_array() override { return true; }

  bool key(string_t& name) override {
    unsigned bit = 0;
    unsigned& seen = depth_ == 1 ? seen_ : kdf_seen_;
    if (depth_ == 1) {
      bit = name == "v"     ? kV
            : name == "alg" ? kAlg
            : name == "iv"  ? kIv
            : name == "z"   ? kZ
            : name == "kdf" ? kKdf
            : name == "ct"  ? kCt
                            : 0u;
    } else {
      bit = name == "name" ? kName : name == "iter" ? kIter : name == "salt" ? kSalt : 0u;
    }
    const std::string_view where = depth_ == 1 ? "" : "kdf.";
    if (bit == 0) {
      return Refuse(fmt::format("unknown field '{}{}' (version 1 has v, alg, iv, z, kdf, ct)",
                                where, QuotedClientText(name)));
    }
    if (seen & bit) return Refuse(fmt::format("duplicate field '{}{}'", where, name));
    seen |= bit;
    key_ = name;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) override {
    // nlohmann's message quotes the bytes it last read; the position is enough here.
    return Refuse(fmt::format("malformed JSON at byte {}", position));
  }

  const std::string& problem() const { return problem_; }
  bool complete() const { return seen_ == kAll; }
  Envelope Take() {
    if (has_kdf_) out_.kdf = std::move(kdf_);
    return std::move(out_);
  }

 private:
  bool Decode(std::string_view text, std::string_view field, size_t want, std::string& out) {
    auto bytes = Base64UrlDecode(text);
    if (!bytes) return Refuse(fmt::format("'{}' is not canonical unpadded base64url", field));
    if (want != 0 && bytes->size() != want) {
      return Refuse(fmt::format("'{}' must be {} bytes, not {}", field, want, bytes->size()));
    }
    out = std::move(*bytes);
    return true;
  }
  bool Wrong(std::string_view what) {
    if (depth_ == 0) return Refuse("the envelope must be a JSON object");
    const std::string_view where = depth_ == 1 ? "" : "kdf.";
    return Refuse(fmt::format("'{}{}' cannot be {}", where, key_, what));
  }
  bool Refuse(std::string why) {
    if (problem_.empty()) problem_ = std::move(why);
    return false;
  }

  Envelope out_;
  EnvelopeKdf kdf_;
  bool has_kdf_ = false;
  std::string key_;
  std::string problem_;
  int depth_ = 0;
  unsigned seen_ = 0;
  unsigned kdf_seen_ = 0;
};

}  // namespace

std::string Base64UrlEncode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = (static_cast<unsigned char>(bytes[i]) << 16) |
                       (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest == 1) {
    const uint32_t n = static_cast<unsigned char>(bytes[i]) << 16;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
  } else if (rest == 2) {
    const uint32_t n = (static_cast<unsigned char>(bytes[i]) << 16) |
                       (static_cast<unsigned char>(bytes[i + 1]) << 8);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
  }
  return out;
}

std::optional<std::string> Base64UrlDecode(std::string_view text) {
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : text) {
    const int8_t v = kDecode[static_cast<unsigned char>(c)];
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  // Leftover bits (2 or 4) must be zero: "AB" and "AC" would otherwise both decode to one byte.
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

Result<Envelope> CheckEnvelope(std::string_view text, uint64_t max_bytes) {
  if (text.size() > max_bytes) {
    return Bad(fmt::format("it is {} bytes, over the limit of {}", text.size(), max_bytes));
  }
  EnvelopeShape reader;
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(text, &reader, nlohmann::json::input_format_t::json, true);
  } catch (const std::exception&) {
    // sax_parse reports through parse_error; a defence against a library that throws anyway.
    return Bad("malformed JSON");
  }
  if (!ok) return Bad(reader.problem().empty() ? "malformed JSON" : reader.problem());
  if (!reader.complete()) return Bad("it needs exactly the fields v, alg, iv, z, kdf and ct");
  return reader.Take();
}

std::string EnvelopeAad(const Envelope& e) {
  std::string kdf = "null";
  if (e.kdf) {
    kdf = fmt::format(R"({{"name":"{}","iter":{},"salt":"{}"}})", kEnvelopeKdfName,
                      e.kdf->iterations, Base64UrlEncode(e.kdf->salt));
  }
  return fmt::format(R"({{"v":{},"alg":"{}","iv":"{}","z":"{}","kdf":{}}})", kEnvelopeVersion,
                     kEnvelopeAlg, Base64UrlEncode(e.iv), e.deflated ? "deflate-raw" : "none", kdf);
}

std::string SerializeEnvelope(const Envelope& e) {
  std::string out = EnvelopeAad(e);
  out.pop_back();
  out += R"(,"ct":")";
  out += Base64UrlEncode(e.ciphertext);
  out += "\"}";
  return out;
}

}  // namespace sluice::service
