#include "json_create.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "field_text.h"
#include "sluice/service/text.h"

namespace sluice::http {

namespace {

// nlohmann's parse error names the line, column and what was expected in about 150 bytes; what
// it last read follows, and may be the rest of a long string.
constexpr size_t kQuotedParseError = 240;

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// A SAX reader rather than a DOM: it refuses at the first event the envelope cannot have, so a
// deeply nested or number-laden body costs one pass and no tree (nlohmann's DOM would build the
// whole tree, and keeps only the last of duplicate keys).
class EnvelopeReader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return NotAString("null"); }
  bool boolean(bool value) override {
    if (depth_ != 1 || (key_ != "burn" && key_ != "encrypted")) return NotAString("a boolean");
    (key_ == "burn" ? out_.burn : out_.encrypted) = value;
    key_.clear();
    return true;
  }
  bool number_integer(number_integer_t value) override {
    if (depth_ == 1 && key_ == "max_views") {
      if (value < 1) return Refuse("'max_views' must be a whole number of at least 1");
      return number_unsigned(static_cast<number_unsigned_t>(value));
    }
    return NotAString("a number");
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (depth_ != 1 || key_ != "max_views") return NotAString("a number");
    if (value < 1) return Refuse("'max_views' must be a whole number of at least 1");
    out_.max_views = value;
    key_.clear();
    return true;
  }
  // A number too large for a double arrives here as infinity: refused like any other number.
  bool number_float(number_float_t, const string_t&) override { return NotAString("a number"); }
  bool binary(binary_t&) override { return NotAString("binary"); }

  bool string(string_t& value) override {
    if (depth_ != 1) return NotAString("");
    if (IsFlag()) {
      return Refuse(fmt::format("'{}' must be a boolean (true or false), not a string", key_));
    }
    if (key_ == "max_views") return Refuse("'max_views' must be a number, not a string");
    // The service refuses NUL bytes too; naming the escape here tells the client which field.
    if (value.find('\0') != std::string::npos) {
      return Refuse(fmt::format("'{}' contains a NUL (\\u0000) escape", key_));
    }
    if (key_ == "content") out_.content = std::move(value);
    if (key_ == "ttl") out_.ttl = std::move(value);
    if (key_ == "language") out_.language = std::move(value);
    if (key_ == "parent") out_.parent = std::move(value);
    key_.clear();
    return true;
  }

  bool start_object(std::size_t) override {
    if (depth_ != 0) return NotAString("an object");
    ++depth_;
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return NotAString("an array"); }
  bool end_array() override { return true; }

  bool key(string_t& name) override {
    if (name != "content" && name != "ttl" && name != "language" && name != "burn" &&
        name != "encrypted" && name != "max_views" && name != "parent") {
      return Refuse(fmt::format(
          "unknown field '{}' (known: content, ttl, language, burn, encrypted, max_views, parent)",
          service::QuotedClientText(name)));
    }
    const unsigned bit = name == "content"     ? 1u
                         : name == "ttl"       ? 2u
                         : name == "language"  ? 4u
                         : name == "burn"      ? 8u
                         : name == "encrypted" ? 16u
                         : name == "max_views" ? 32u
                                               : 64u;
    if (seen_ & bit) return Refuse(fmt::format("duplicate field '{}'", name));
    seen_ |= bit;
    key_ = name;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    if (problem_.empty()) {
      // nlohmann's message names the position and what was wrong (a lone surrogate among them),
      // and ends with the bytes it last read, which are the client's.
      problem_ = fmt::format("malformed JSON at byte {}: {}", position,
                             service::QuotedClientText(e.what(), kQuotedParseError));
    }
    return false;
  }

  const std::string& problem() const { return problem_; }
  JsonCreate& result() { return out_; }
  bool has_content() const { return (seen_ & 1u) != 0; }

 private:
  bool NotAString(std::string_view what) {
    if (depth_ == 0) return Refuse("the body must be a JSON object");
    if (IsFlag()) return Refuse(fmt::format("'{}' must be true or false, not {}", key_, what));
    if (key_ == "max_views") {
      return Refuse(fmt::format("'max_views' must be a whole number, not {}", what));
    }
    return Refuse(fmt::format("'{}' must be a string, not {}", key_, what));
  }
  bool IsFlag() const { return depth_ == 1 && (key_ == "burn" || key_ == "encrypted"); }
  bool Refuse(std::string why) {
    if (problem_.empty()) problem_ = std::move(why);
    return false;
  }
  JsonCreate out_;
  std::string key_;
  std::string problem_;
  int depth_ = 0;
  unsigned seen_ = 0;
};

}  // namespace

bool IsJsonContentType(std::string_view content_type) {
  const std::string_view type = TrimBlanks(content_type.substr(0, content_type.find(';')));
  return EqualsIgnoringCase(type, "application/json") || EqualsIgnoringCase(type, "text/json");
}

Result<JsonCreate> DecodeJsonCreate(std::string_view body) {
  EnvelopeReader reader;
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(body, &reader, nlohmann::json::input_format_t::json, true);
  } catch (const std::exception& e) {
    // sax_parse reports through parse_error; this is a defence against a library that throws.
    return MakeError(
        ErrorCode::kInvalidArgument,
        fmt::format("malformed JSON: {}", service::QuotedClientText(e.what(), kQuotedParseError)),
        "bad_json");
  }
  if (!ok) {
    const std::string why = reader.problem().empty() ? "malformed JSON" : reader.problem();
    return MakeError(ErrorCode::kInvalidArgument, why, "bad_json");
  }
  if (!reader.has_content()) {
    return MakeError(ErrorCode::kInvalidArgument, "the field 'content' (a string) is required",
                     "bad_json");
  }
  return std::move(reader.result());
}

}  // namespace sluice::http
