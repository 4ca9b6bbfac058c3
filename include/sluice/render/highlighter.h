// Syntax highlighting of paste text on the server, with GNU source-highlight's language
// definitions. The output is an HTML fragment in which every character of the paste went through
// HTML escaping here, never through the library: the library only says which element a run of text
// is, and the class names are ours, so the page's CSS themes apply.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/result.h"

namespace sluice::render {

/// One language offered on the create page.
struct Language {
  /// The name in links and forms ("python"); "auto" and "text" are not languages.
  std::string name;
  /// What a person reads ("Python").
  std::string label;
};

/// The languages this build can highlight, in the order the create page lists them.
const std::vector<Language>& Languages();

/// True if `name` is in Languages().
bool IsLanguage(std::string_view name);

/// Guesses the language of `text` from its first lines (a shebang, a mode line, telltale
/// keywords); "" when nothing is convincing, and the paste is then shown as plain text.
std::string DetectLanguage(std::string_view text);

/// Highlights `text` as `language`. Blocking CPU work of unbounded cost. NOT thread-safe: the
/// library's definition loader keeps global state, so one thread per process may call it. The
/// server calls it only inside HighlightWorkers' processes (highlight_workers.h).
/// Returns InvalidArgument for an unknown language and Internal when the library throws (a regex
/// too complex for a hostile input); retrying the same text does not help.
/// The fragment is one `<span class="l" id="LN">` per line (N from 1, the anchor of `#LN`), each
/// followed by a newline; inside, runs are
/// `<span class="hl-ELEMENT">` with the text escaped.
Result<std::string> Highlight(std::string_view text, std::string_view language);

/// The same fragment shape as Highlight, with no highlighting: the plain rung.
std::string PlainLines(std::string_view text);

}  // namespace sluice::render
