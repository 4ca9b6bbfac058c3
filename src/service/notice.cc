#include "sluice/service/notice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "sluice/common/duration.h"
#include "sluice/service/text.h"
#include "sluice/store/paste.h"

namespace sluice::service {
namespace {

Error Bad(std::string message, std::string reason) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message), std::move(reason));
}

bool IsId(std::string_view s) { return store::PasteId::Parse(s).has_value(); }

// One line of UTF-8 without control characters: it goes into log lines, audit rows and webhooks.
bool IsFieldText(std::string_view s) {
  if (s.empty() || s.size() > kMaxNoticeField) return false;
  if (std::any_of(s.begin(), s.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u < 0x20 || u == 0x7f;
      })) {
    return false;
  }
  return CheckPasteText(s) == TextProblem::kNone;
}

// The characters that end a URL in free text (RFC 3986 has none of them in a URL).
bool EndsUrl(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u <= 0x20 || u >= 0x7f || c == '<' || c == '>' || c == '"' || c == '\'' || c == '`' ||
         c == '(' || c == ')' || c == '[' || c == ']' || c == '{' || c == '}' || c == '|' ||
         c == '\\' || c == '^';
}

}  // namespace

std::optional<std::string> PasteIdOfLink(std::string_view link) {
  if (IsId(link)) return std::string(link);
  std::string_view rest = link;
  if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else {
    return std::nullopt;
  }
  const size_t path_at = rest.find_first_of("/?#");
  if (path_at == std::string_view::npos || path_at == 0) return std::nullopt;
  rest.remove_prefix(path_at);
  rest = rest.substr(0, rest.find('#'));
  std::string_view query;
  if (const size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  // The read routes of src/http/routes.cc that name a paste, and the fork page's from=.
  std::vector<std::string_view> segments;
  while (!rest.empty()) {
    rest.remove_prefix(1);  // the '/'
    const size_t slash = std::min(rest.find('/'), rest.size());
    segments.push_back(rest.substr(0, slash));
    rest.remove_prefix(slash);
  }
  if (!segments.empty() && segments.back().empty()) segments.pop_back();  // a trailing slash
  const size_t n = segments.size();
  if (n == 1 && IsId(segments[0])) return std::string(segments[0]);
  if (n == 2 && (segments[0] == "raw" || segments[0] == "documents" || segments[0] == "report") &&
      IsId(segments[1])) {
    return std::string(segments[1]);
  }
  if (n == 2 && (segments[1] == "diff" || segments[1] == "rendered") && IsId(segments[0])) {
    return std::string(segments[0]);
  }
  if (n == 4 && segments[0] == "api" && segments[1] == "v1" && segments[2] == "pastes" &&
      IsId(segments[3])) {
    return std::string(segments[3]);
  }
  if (n == 1 && segments[0] == "new") {
    while (!query.empty()) {
      const size_t amp = std::min(query.find('&'), query.size());
      const std::string_view pair = query.substr(0, amp);
      if (pair.starts_with("from=") && IsId(pair.substr(5))) return std::string(pair.substr(5));
      query.remove_prefix(std::min(amp + 1, query.size()));
    }
  }
  return std::nullopt;
}

std::vector<std::string> PasteLinksIn(std::string_view text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t http = text.find("http", at);
    if (http == std::string_view::npos) break;
    size_t end = http;
    while (end < text.size() && !EndsUrl(text[end])) ++end;
    std::string_view url = text.substr(http, end - http);
    // Punctuation that ends a sentence is not part of the link.
    while (!url.empty() && (url.back() == '.' || url.back() == ',' || url.back() == ';' ||
                            url.back() == ':' || url.back() == '!' || url.back() == '?')) {
      url.remove_suffix(1);
    }
    if (url.starts_with("http://") || url.starts_with("https://")) {
      if (auto id = PasteIdOfLink(url); id && std::find(out.begin(), out.end(), *id) == out.end()) {
        out.push_back(std::move(*id));
      }
    }
    at = std::max(end, http + 4);
  }
  return out;
}

Result<int64_t> ParseNoticeDeadline(std::string_view text, int64_t now) {
  const auto bad = [&] {
    return Bad(fmt::format("deadline '{}' must be RFC 3339 (2026-12-05T18:00:00Z) or a duration "
                           "(1h, 90m, 2d)",
                           QuotedClientText(text)),
               "bad_deadline");
  };
  if (text.empty() || text.size() > 40) return bad();
  if (text.size() > 1 && text.back() == 'd') {
    int64_t days = 0;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size() - 1, days);
    if (ec != std::errc() || p != text.data() + text.size() - 1 || days < 1 || days > 3660) {
      return bad();
    }
    return now + days * 86400;
  }
  if (Result<Duration> d = ParseDuration(text); d.ok()) {
    const int64_t seconds = std::chrono::duration_cast<std::chrono::seconds>(*d).count();
    if (seconds < 1 || seconds > int64_t{3660} * 86400) return bad();
    return now + seconds;
  }
  // RFC 3339: YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM); 't' and ' ' as the separator too.
  const std::string s(text);
  std::tm tm{};
  const char* p = strptime(s.c_str(), "%Y-%m-%d", &tm);
  if (p == nullptr || (*p != 'T' && *p != 't' && *p != ' ')) return bad();
  p = strptime(p + 1, "%H:%M:%S", &tm);
  if (p == nullptr) return bad();
  if (*p == '.') {
    ++p;
    if (*p < '0' || *p > '9') return bad();
    while (*p >= '0' && *p <= '9') ++p;
  }
  int64_t offset = 0;
  if (*p == 'Z' || *p == 'z') {
    ++p;
  } else if (*p == '+' || *p == '-') {
    const int sign = *p == '+' ? 1 : -1;
    int hh = 0, mm = 0;
    if (std::sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2 || hh > 23 || mm > 59 ||
        std::string_view(p + 1).size() != 5) {
      return bad();
    }
    offset = sign * (hh * 3600 + mm * 60);
    p += 6;
  } else {
    return bad();
  }
  if (*p != '\0') return bad();
  const int64_t at = static_cast<int64_t>(timegm(&tm)) - offset;
  if (at <= 0) return bad();
  return at;
}

Status CheckNoticeRequest(NoticeRequest& r) {
  if (!IsFieldText(r.sender)) {
    return Bad(
        fmt::format("sender is required: one line of text, at most {} bytes", kMaxNoticeField),
        "bad_sender");
  }
  if (!IsFieldText(r.reference)) {
    return Bad(fmt::format("reference is required: one line of text, at most {} bytes (the "
                           "sender's case number or Message-ID)",
                           kMaxNoticeField),
               "bad_reference");
  }
  if (std::find(kNoticeCategories.begin(), kNoticeCategories.end(), r.category) ==
      kNoticeCategories.end()) {
    return Bad(fmt::format("category must be one of {}", fmt::join(kNoticeCategories, ", ")),
               "bad_category");
  }
  if (!r.sender_kind.empty() && std::find(kNoticeSenderKinds.begin(), kNoticeSenderKinds.end(),
                                          r.sender_kind) == kNoticeSenderKinds.end()) {
    return Bad(fmt::format("sender_kind must be one of {}, or absent",
                           fmt::join(kNoticeSenderKinds, ", ")),
               "bad_sender_kind");
  }
  std::vector<std::string> unique;
  for (std::string& p : r.pastes) {
    if (!IsId(p)) {
      return Bad(fmt::format("'{}' is not a paste id", QuotedClientText(p)), "bad_pastes");
    }
    if (std::find(unique.begin(), unique.end(), p) == unique.end()) unique.push_back(std::move(p));
  }
  r.pastes = std::move(unique);
  if (r.pastes.empty()) return Bad("a notice names at least one paste", "bad_pastes");
  if (r.pastes.size() > kMaxNoticePastes) {
    return Bad(
        fmt::format("a notice names at most {} pastes; send several notices", kMaxNoticePastes),
        "too_many_pastes");
  }
  return Ok();
}

Result<NoticeRequest> ParseNoticeJson(std::string_view body, int64_t now) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Bad("the body must be a JSON object", "bad_json");
  }
  NoticeRequest r;
  for (const auto& [key, value] : j.items()) {
    if (key == "pastes") {
      if (!value.is_array()) return Bad("'pastes' must be an array of ids or links", "bad_pastes");
      if (value.size() > kMaxNoticePastes) {
        return Bad(
            fmt::format("a notice names at most {} pastes; send several notices", kMaxNoticePastes),
            "too_many_pastes");
      }
      for (const auto& item : value) {
        if (!item.is_string()) {
          return Bad("'pastes' must be an array of ids or links", "bad_pastes");
        }
        const std::string& text = item.get_ref<const std::string&>();
        std::optional<std::string> id = PasteIdOfLink(text);
        if (!id) {
          return Bad(fmt::format("'{}' is neither a paste id nor a link to a paste",
                                 QuotedClientText(text)),
                     "bad_pastes");
        }
        r.pastes.push_back(std::move(*id));
      }
      continue;
    }
    if (key != "sender" && key != "sender_kind" && key != "reference" && key != "category" &&
        key != "deadline") {
      return Bad(fmt::format("unknown field '{}'", QuotedClientText(key)), "bad_json");
    }
    if (!value.is_string()) {
      return Bad(fmt::format("'{}' must be a string", key), "bad_json");
    }
    const std::string& text = value.get_ref<const std::string&>();
    if (key == "sender") r.sender = text;
    if (key == "sender_kind") r.sender_kind = text;
    if (key == "reference") r.reference = text;
    if (key == "category") r.category = text;
    if (key == "deadline") {
      Result<int64_t> at = ParseNoticeDeadline(text, now);
      if (!at.ok()) return at.error();
      r.deadline_at = *at;
    }
  }
  if (r.category.empty()) r.category = "other";
  if (Status s = CheckNoticeRequest(r); !s.ok()) return s.error();
  return r;
}

}  // namespace sluice::service
