#include "s3_xml.h"

#include <algorithm>
#include <charconv>

#include "sluice/common/html.h"

namespace sluice::store::s3 {
namespace {

// The text of the first <tag>...</tag> in `xml` at or after `from`, or nothing. `next` is set past
// the closing tag.
std::optional<std::string_view> Element(std::string_view xml, std::string_view tag, size_t from,
                                        size_t* next = nullptr) {
  // Appended, not "<" + std::string(tag): at -O3 g++ 12 warns (-Wrestrict, a false positive) on
  // the inlined insert of operator+, and the release build treats warnings as errors.
  std::string open("<");
  open.append(tag).append(">");
  std::string close("</");
  close.append(tag).append(">");
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

namespace {

// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's days_from_civil): pure
// arithmetic, where timegm would be a C library call of unknown thread safety.
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool IsLeap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// Unix seconds of a UTC calendar time, or nothing if a field is out of range. A leap second (:60)
// is read as :59: a second early is harmless for what this dates.
std::optional<int64_t> UnixSeconds(int year, int month, int day, int hour, int minute, int second) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (year < 1 || year > 9999 || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 ||
      second > 60 || hour < 0 || minute < 0 || second < 0) {
    return std::nullopt;
  }
  if (day > kDays[month - 1] + (month == 2 && IsLeap(year) ? 1 : 0)) return std::nullopt;
  return DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day)) * 86400 +
         hour * 3600 + minute * 60 + std::min(second, 59);
}

// Exactly `len` decimal digits at `at`.
bool Digits(std::string_view text, size_t at, size_t len, int& out) {
  if (at + len > text.size()) return false;
  for (size_t i = at; i < at + len; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  out = 0;
  for (size_t i = at; i < at + len; ++i) out = out * 10 + (text[i] - '0');
  return true;
}

}  // namespace

std::optional<int64_t> ParseIso8601(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS, then an optional fraction, then Z or +HH:MM / -HH:MM.
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != 't') || text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!Digits(text, 0, 4, year) || !Digits(text, 5, 2, month) || !Digits(text, 8, 2, day) ||
      !Digits(text, 11, 2, hour) || !Digits(text, 14, 2, minute) || !Digits(text, 17, 2, second)) {
    return std::nullopt;
  }
  size_t at = 19;
  if (text[at] == '.' || text[at] == ',') {
    const size_t first = ++at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;
    if (at == first) return std::nullopt;
  }
  int offset = 0;
  const std::string_view zone = text.substr(at);
  if (zone == "Z" || zone == "z") {
    offset = 0;
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
    int oh = 0, om = 0;
    if (!Digits(zone, 1, 2, oh) || !Digits(zone, 4, 2, om) || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset = (zone[0] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
  } else {
    return std::nullopt;
  }
  auto local = UnixSeconds(year, month, day, hour, minute, second);
  if (!local) return std::nullopt;
  return *local - offset;
}

std::optional<int64_t> ParseRfc1123(std::string_view text) {
  // "Sun, 06 Nov 1994 08:49:37 GMT" (RFC 9110 section 5.6.7; a one-digit day as RFC 5322 allows).
  static constexpr std::string_view kWeekdays[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
  static constexpr std::string_view kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (text.size() < 5 || text.substr(3, 2) != ", ") return std::nullopt;
  bool weekday = false;
  for (std::string_view w : kWeekdays) weekday = weekday || text.substr(0, 3) == w;
  if (!weekday) return std::nullopt;
  text.remove_prefix(5);
  int day = 0;
  const size_t day_len = text.size() > 1 && text[1] == ' ' ? 1 : 2;
  if (!Digits(text, 0, day_len, day) || text.size() < day_len + 1 || text[day_len] != ' ') {
    return std::nullopt;
  }
  text.remove_prefix(day_len + 1);
  // "Nov 1994 08:49:37 GMT"
  if (text.size() != 21 || text[3] != ' ' || text[8] != ' ' || text[11] != ':' || text[14] != ':' ||
      text[17] != ' ') {
    return std::nullopt;
  }
  int month = 0;
  for (int i = 0; i < 12; ++i) {
    if (text.substr(0, 3) == kMonths[i]) month = i + 1;
  }
  int year = 0, hour = 0, minute = 0, second = 0;
  if (month == 0 || !Digits(text, 4, 4, year) || !Digits(text, 9, 2, hour) ||
      !Digits(text, 12, 2, minute) || !Digits(text, 15, 2, second)) {
    return std::nullopt;
  }
  const std::string_view zone = text.substr(18);
  if (zone != "GMT" && zone != "UTC") return std::nullopt;
  return UnixSeconds(year, month, day, hour, minute, second);
}

std::optional<int64_t> ParseLastModified(std::string_view text) {
  // Whitespace around the value is the XML writer's, not part of the date.
  while (!text.empty() && (text.front() == ' ' || text.front() == '\n' || text.front() == '\t' ||
                           text.front() == '\r')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\t' ||
                           text.back() == '\r')) {
    text.remove_suffix(1);
  }
  if (auto iso = ParseIso8601(text)) return iso;
  return ParseRfc1123(text);
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
    ListedObject object{std::move(*unescaped), std::nullopt, 0};
    if (auto modified = Element(*contents, "LastModified", 0)) {
      object.modified_at = ParseLastModified(*modified);
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

// HTML's escaping is XML's: the same four entities, and the quote as &#39;, a character
// reference that every XML reader (and s3_xml's own XmlUnescape) reads.
std::string XmlEscape(std::string_view text) { return HtmlEscaped(text); }

std::string DeleteObjectsBody(const std::vector<std::string>& keys) {
  std::string out =
      R"(<?xml version="1.0" encoding="UTF-8"?>)"
      R"(<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>true</Quiet>)";
  for (const std::string& key : keys) {
    out += "<Object><Key>";
    out += XmlEscape(key);
    out += "</Key></Object>";
  }
  out += "</Delete>";
  return out;
}

std::optional<DeleteResult> ParseDeleteResult(std::string_view xml) {
  // The root may carry attributes (xmlns), so only its opening is looked for. It must be closed:
  // an answer cut before an <Error> would otherwise read as one with no error at all.
  const size_t root = xml.find("<DeleteResult");
  if (root == std::string_view::npos) return std::nullopt;
  const size_t root_end = xml.find('>', root);
  if (root_end == std::string_view::npos) return std::nullopt;
  DeleteResult result;
  if (xml[root_end - 1] == '/') return result;  // <DeleteResult .../>: nothing failed
  const size_t close = xml.rfind("</DeleteResult>");
  if (close == std::string_view::npos || close < root_end) return std::nullopt;
  xml = xml.substr(root_end + 1, close - root_end - 1);
  size_t at = 0;
  size_t next = 0;
  // Each turn moves `at` past a closing tag, so the scan ends after at most one pass per <Error>.
  while (auto error = Element(xml, "Error", at, &next)) {
    at = next;
    auto code = Element(*error, "Code", 0);
    if (!code) return std::nullopt;
    auto unescaped_code = XmlUnescape(*code);
    if (!unescaped_code || unescaped_code->empty()) return std::nullopt;
    DeleteError entry;
    entry.code = std::move(*unescaped_code);
    if (auto key = Element(*error, "Key", 0)) {
      auto unescaped_key = XmlUnescape(*key);
      if (!unescaped_key) return std::nullopt;
      entry.key = std::move(*unescaped_key);
    }
    if (auto message = Element(*error, "Message", 0)) {
      entry.message = XmlUnescape(*message).value_or(std::string());
    }
    result.errors.push_back(std::move(entry));
  }
  // An <Error> left that never closes is one we could not read, not one that did not happen.
  if (xml.find("<Error", at) != std::string_view::npos) return std::nullopt;
  return result;
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
