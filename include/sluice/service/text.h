// Validation of paste text and expiry choices.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>
#include <vector>

namespace sluice::service {

/// Why a body is not acceptable text, or nothing when it is.
enum class TextProblem { kNone, kEmpty, kInvalidUtf8, kNulByte };

/// Strict UTF-8: rejects overlong forms, surrogates (U+D800..DFFF), code points above U+10FFFF and
/// truncated sequences; also NUL bytes, which no text paste needs and many tools mishandle.
TextProblem CheckPasteText(std::string_view body);

/// The expiries a user may choose: 10m, 1h, 1d, 1w, 30d.
const std::vector<std::pair<std::string_view, std::chrono::seconds>>& TtlAllowList();

/// Parses one of the allow-list names; nothing for anything else.
std::optional<std::chrono::seconds> ParseTtl(std::string_view text);

}  // namespace sluice::service
