// What the command line shows a person. Text a server chose (an error message, a reason, a link,
// a line of the token file, an admin answer) is shown escaped: control characters, line breaks
// and bidirectional overrides become visible \u00XX escapes (service::QuotedClientText), so a
// server can neither drive the terminal (set its title, clear the screen) nor forge a line of
// output. A paste's own text, which `sluice get` prints byte for byte, is the one exception, as
// with curl.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sluice::app {

/// The exit statuses of the client commands: done, refused or failed, usage (a bad flag value,
/// a link that is not one, an unreadable file).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

/// How much of a server's text a message quotes; past it the text ends with "...".
inline constexpr size_t kShownServerTextBytes = 4096;

/// `text` fit for a terminal: escaped as above and cut at `max_bytes`.
std::string ForTerminal(std::string_view text, size_t max_bytes = kShownServerTextBytes);

/// JSON text (one value, pretty-printed or not) fit for a terminal and still the same JSON: the
/// characters ForTerminal escapes can only stand inside its strings, where \u00XX means the same
/// character. Line breaks between values are kept.
std::string JsonForTerminal(std::string_view json);

/// "COMMAND: MESSAGE" and a line break on stderr, the message passed through ForTerminal whole:
/// whatever part of it came from a server.
void Tell(std::string_view command, std::string_view message);

}  // namespace sluice::app
