#include "sluice/service/text.h"

#include <cstdint>
#include <cstring>

namespace sluice::service {

TextProblem CheckPasteText(std::string_view body) {
  if (body.empty()) return TextProblem::kEmpty;
  const auto* p = reinterpret_cast<const unsigned char*>(body.data());
  const size_t n = body.size();
  size_t i = 0;
  while (i < n) {
    // Most pastes are ASCII: check eight bytes at a time for a high bit or a NUL.
    while (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, p + i, 8);
      const bool high_bit = (word & 0x8080808080808080ULL) != 0;
      const bool has_zero = ((word - 0x0101010101010101ULL) & ~word & 0x8080808080808080ULL) != 0;
      if (high_bit || has_zero) break;
      i += 8;
    }
    if (i >= n) break;
    const unsigned char c = p[i];
    if (c < 0x80) {
      if (c == 0) return TextProblem::kNulByte;
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    uint32_t min;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return TextProblem::kInvalidUtf8;  // a continuation byte first, or 0xF8..0xFF
    }
    if (i + len > n) return TextProblem::kInvalidUtf8;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return TextProblem::kInvalidUtf8;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return TextProblem::kInvalidUtf8;
    }
    i += len;
  }
  return TextProblem::kNone;
}

const std::vector<std::pair<std::string_view, std::chrono::seconds>>& TtlAllowList() {
  using std::chrono::seconds;
  static const std::vector<std::pair<std::string_view, seconds>> kList = {
      {"10m", seconds(600)},      {"1h", seconds(3600)},        {"1d", seconds(86400)},
      {"1w", seconds(7 * 86400)}, {"30d", seconds(30 * 86400)},
  };
  return kList;
}

std::optional<std::chrono::seconds> ParseTtl(std::string_view text) {
  for (const auto& [name, duration] : TtlAllowList()) {
    if (text == name) return duration;
  }
  return std::nullopt;
}

}  // namespace sluice::service
