// HTML escaping: the one function through which paste text (and anything else a client wrote)
// enters a page, whether the page is highlighted (src/render) or not (src/http).
#pragma once

#include <string>
#include <string_view>

namespace sluice {

/// Appends `text` with &, <, >, " and ' escaped, so it is text in element content and in quoted
/// attribute values alike.
void AppendHtmlEscaped(std::string& out, std::string_view text);

/// `text`, escaped as above.
std::string HtmlEscaped(std::string_view text);

/// The size of `text` escaped as above, without making it: a page can decide whether to carry it.
size_t HtmlEscapedSize(std::string_view text);

}  // namespace sluice
