// The language a page is shown in (docs/translations.md): the reader's choice, kept in a cookie by
// the footer's switch (POST /settings/language), else the browser's Accept-Language, else
// English. Only pages are translated; the JSON API and its error codes stay English.
//
// The messages themselves are compiled into the binary (page_catalog.h, page_templates.h), not
// read through libc's gettext: its language is the process's locale, one for every thread, while
// each request here has its own, and switching it per request (setlocale, uselocale with
// textdomain) is neither cheap nor, for setlocale, safe while other threads format text.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "page_catalog.h"
#include "request.h"

namespace sluice::http {

using i18n::Lang;

/// The cookie the language switch sets: a shipped language's tag ("de", "zh-Hans").
inline constexpr std::string_view kLanguageCookie = "sluice_lang";

/// The shipped language a BCP 47 tag asks for, ignoring case and regions: "de-CH" is German,
/// "zh", "zh-CN", "zh-SG" and "zh-Hans" are Simplified Chinese (not "zh-TW" or "zh-Hant");
/// nullopt for "*" and any other.
std::optional<Lang> LanguageOfTag(std::string_view tag);

/// The best shipped language of an Accept-Language value (RFC 9110 12.5.4): the highest q-value
/// wins, the earlier of equal ones; q=0 refuses a language. English when none is shipped.
Lang LanguageOfAcceptLanguage(std::string_view accept_language);

/// The language of a page for this request: the cookie's, if it names a shipped language, else
/// Accept-Language's.
Lang PageLanguage(const HeaderFields& headers);

/// Who a page is made for: the language it is shown in and the path the footer's language
/// switch brings the reader back to.
struct Reader {
  Lang lang = Lang::kEn;
  /// The page's own path, without its query ("/", "/ABC", "/ABC/diff").
  std::string_view path = "/";
};

/// The reader of the page answering `req`.
Reader ReaderOf(const Request& req);

/// The ETag of a page named `name` ("ID-diff") in `lang`, quoted: a page in another language is
/// another representation (RFC 9110 8.8.3), so a cache revalidating its English copy never gets
/// a 304 meant for the German one. English keeps the plain name.
std::string PageEtag(std::string_view name, Lang lang);

/// "de" for Lang::kDe: <html lang>, the cookie's value.
inline std::string_view LanguageTag(Lang lang) {
  return i18n::kLanguages[static_cast<size_t>(lang)].tag;
}

}  // namespace sluice::http
