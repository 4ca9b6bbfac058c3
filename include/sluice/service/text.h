// Validation of paste text and expiry choices, and client bytes made fit to quote back.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::service {

/// Why a body is not acceptable text, or nothing when it is.
enum class TextProblem { kNone, kEmpty, kInvalidUtf8, kNulByte };

/// Strict UTF-8: rejects overlong forms, surrogates (U+D800..DFFF), code points above U+10FFFF and
/// truncated sequences; also NUL bytes, which no text paste needs and many tools mishandle.
TextProblem CheckPasteText(std::string_view body);

/// Whether `bytes` is valid UTF-8 by CheckPasteText's rules (NUL bytes and emptiness aside).
bool IsValidUtf8(std::string_view bytes);

/// `bytes` as valid UTF-8: each ill-formed sequence replaced by one U+FFFD per maximal subpart
/// (Unicode 15.0, section 3.9, "U+FFFD Substitution of Maximal Subparts", as browsers decode),
/// everything else kept byte for byte. Valid input comes back unchanged.
std::string ReplaceInvalidUtf8(std::string_view bytes);

/// What QuotedClientText keeps of client bytes by default: enough to recognise a field name or a
/// value, too little to turn an error message into a copy of the request.
inline constexpr size_t kQuotedClientTextBytes = 64;

/// Client bytes (a query, a header, a JSON key or value, a form field, a file name, a path) made
/// fit to quote in an error message, a page or a log line: invalid UTF-8 replaced as by
/// ReplaceInvalidUtf8; control characters (C0, DEL, C1) and the characters that break lines or
/// reorder text around them (U+2028, U+2029, the bidirectional embeddings, overrides and
/// isolates) written as \u00XX-style escapes, so a reader sees them without a terminal or a page
/// obeying them; then at most `max_bytes` of the result, cut between characters (never inside one
/// or inside an escape) and ended with "…" when cut. Always valid UTF-8 of at most
/// `max_bytes` + 3 bytes.
std::string QuotedClientText(std::string_view bytes, size_t max_bytes = kQuotedClientTextBytes);

/// The expiries a user may choose: 10m, 1h, 1d, 1w, 30d.
const std::vector<std::pair<std::string_view, std::chrono::seconds>>& TtlAllowList();

/// Parses one of the allow-list names; nothing for anything else.
std::optional<std::chrono::seconds> ParseTtl(std::string_view text);

}  // namespace sluice::service
