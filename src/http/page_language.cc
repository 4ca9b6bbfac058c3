#include "page_language.h"

#include <strings.h>

#include <algorithm>
#include <cctype>

namespace sluice::http {

namespace {

// Language tags compare without regard to case (RFC 5646 2.1.1).
bool SameSubtag(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A q-value in thousandths (RFC 9110 12.4.2: "0", "0.5", "1.000"); -1 if it is not one.
int QValue(std::string_view q) {
  if (q.empty() || (q[0] != '0' && q[0] != '1')) return -1;
  int value = (q[0] - '0') * 1000;
  if (q.size() == 1) return value;
  if (q[1] != '.' || q.size() > 5) return -1;
  int scale = 100;
  for (char c : q.substr(2)) {
    if (c < '0' || c > '9') return -1;
    value += (c - '0') * scale;
    scale /= 10;
  }
  return value > 1000 ? -1 : value;
}

}  // namespace

std::optional<Lang> LanguageOfTag(std::string_view tag) {
  tag = Trim(tag);
  const std::string_view primary = tag.substr(0, tag.find('-'));
  if (SameSubtag(primary, "zh")) {
    // Chinese is shipped in Simplified script only: the regions and script that write it.
    if (primary.size() == tag.size()) return Lang::kZhHans;
    const std::string_view sub = tag.substr(3, tag.find('-', 3) - 3);
    for (std::string_view simplified : {"hans", "cn", "sg", "my"}) {
      if (SameSubtag(sub, simplified)) return Lang::kZhHans;
    }
    return std::nullopt;
  }
  for (size_t i = 0; i < i18n::kLangCount; ++i) {
    if (SameSubtag(primary, i18n::kLanguages[i].tag)) return static_cast<Lang>(i);
  }
  return std::nullopt;
}

Lang LanguageOfAcceptLanguage(std::string_view accept_language) {
  Lang best = Lang::kEn;
  int best_q = 0;
  while (!accept_language.empty()) {
    const size_t comma = std::min(accept_language.find(','), accept_language.size());
    std::string_view range = accept_language.substr(0, comma);
    accept_language.remove_prefix(std::min(comma + 1, accept_language.size()));
    int q = 1000;
    if (const size_t semicolon = range.find(';'); semicolon != std::string_view::npos) {
      std::string_view param = Trim(range.substr(semicolon + 1));
      range = range.substr(0, semicolon);
      if (param.size() < 2 || std::tolower(static_cast<unsigned char>(param[0])) != 'q' ||
          param[1] != '=') {
        continue;  // not a weight: a malformed range is ignored, not trusted
      }
      q = QValue(Trim(param.substr(2)));
    }
    if (q <= best_q) continue;  // q=0 refuses; an equal one loses to the earlier
    if (const std::optional<Lang> lang = LanguageOfTag(range)) {
      best = *lang;
      best_q = q;
    }
  }
  return best;
}

Lang PageLanguage(const HeaderFields& headers) {
  if (const std::optional<std::string_view> chosen = CookieValue(headers, kLanguageCookie)) {
    for (size_t i = 0; i < i18n::kLangCount; ++i) {
      if (*chosen == i18n::kLanguages[i].tag) return static_cast<Lang>(i);
    }
  }
  return LanguageOfAcceptLanguage(headers.Get("Accept-Language"));
}

std::string PageEtag(std::string_view name, Lang lang) {
  std::string etag = "\"";
  etag.append(name);
  if (lang != Lang::kEn) {
    etag.push_back('.');
    etag.append(LanguageTag(lang));
  }
  etag.push_back('"');
  return etag;
}

Reader ReaderOf(const Request& req) { return {PageLanguage(req.headers), req.path}; }

}  // namespace sluice::http
