#include "s3_xml.h"

#include <charconv>
#include <ctime>

namespace sluice::store::s3 {
namespace {

// The text of the first <tag>...</tag> in `xml` at or after `from`, or nothing. `next` is set past
// the closing tag.
std::optional<std::string_view> Element(std::string_view xml, std::string_view tag, size_t from,
                                        size_t* next = nullptr) {
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  const size_t start = xml.find(open, from);
  if (start == std::string_view::npos) return std::nullopt;
  const size_t body = start + open.size();
  const size_t end = xml.find(close, body);
  if (end == std::string_view::npos) return std::nullopt;
  if (next) *next = end + close.size();
  return xml.substr(body, end - body);
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

std::optional<std::string> XmlUnescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out += text[i];
      continue;
    }
    const size_t semi = text.find(';', i);
    if (semi == std::string_view::npos) return std::nullopt;
    const std::string_view name = text.substr(i + 1, semi - i - 1);
    if (name == "amp") {
      out += '&';
    } else if (name == "lt") {
      out += '<';
    } else if (name == "gt") {
      out += '>';
    } else if (name == "quot") {
      out += '"';
    } else if (name == "apos") {
      out += '\'';
    } else if (name.size() > 1 && name[0] == '#') {
      const bool hex = name[1] == 'x' || name[1] == 'X';
      const std::string_view digits = name.substr(hex ? 2 : 1);
      uint32_t cp = 0;
      const auto [end, ec] =
          std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
      if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() ||
          cp > 0x10FFFF) {
        return std::nullopt;
      }
      AppendUtf8(out, cp);
    } else {
      return std::nullopt;
    }
    i = semi;
  }
  return out;
}

std::optional<int64_t> ParseIso8601(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS, then optional fraction, then Z.
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text.back() != 'Z') {
    return std::nullopt;
  }
  auto number = [&](size_t at, size_t len, int& out) {
    const auto [end, ec] = std::from_chars(text.data() + at, text.data() + at + len, out);
    return ec == std::errc() && end == text.data() + at + len;
  };
  std::tm tm{};
  int year = 0, month = 0;
  if (!number(0, 4, year) || !number(5, 2, month) || !number(8, 2, tm.tm_mday) ||
      !number(11, 2, tm.tm_hour) || !number(14, 2, tm.tm_min) || !number(17, 2, tm.tm_sec)) {
    return std::nullopt;
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  return static_cast<int64_t>(::timegm(&tm));
}

std::optional<ListPage> ParseListObjectsV2(std::string_view xml) {
  if (xml.find("<ListBucketResult") == std::string_view::npos) return std::nullopt;
  ListPage page;
  size_t at = 0;
  size_t next = 0;
  while (auto contents = Element(xml, "Contents", at, &next)) {
    at = next;
    auto key = Element(*contents, "Key", 0);
    if (!key) return std::nullopt;
    auto unescaped = XmlUnescape(*key);
    if (!unescaped) return std::nullopt;
    ListedObject object{std::move(*unescaped), 0, 0};
    if (auto modified = Element(*contents, "LastModified", 0)) {
      object.modified_at = ParseIso8601(*modified).value_or(0);
    }
    if (auto size = Element(*contents, "Size", 0)) {
      std::from_chars(size->data(), size->data() + size->size(), object.size);
    }
    page.objects.push_back(std::move(object));
  }
  auto truncated = Element(xml, "IsTruncated", 0);
  page.truncated = truncated && *truncated == "true";
  return page;
}

S3ErrorBody ParseErrorBody(std::string_view xml) {
  S3ErrorBody out;
  if (auto code = Element(xml, "Code", 0)) out.code = XmlUnescape(*code).value_or(std::string());
  if (auto message = Element(xml, "Message", 0)) {
    out.message = XmlUnescape(*message).value_or(std::string());
  }
  return out;
}

}  // namespace sluice::store::s3
