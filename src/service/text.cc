#include "sluice/service/text.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace sluice::service {

namespace {

// UTF-8 validation as a shift-based DFA (after Per Vognsen's and Björn Höhrmann's). Each state is
// a bit offset (a multiple of 6) into a 64-bit row per input byte; the row holds, at every
// state's offset, the offset of the next state. One byte costs one table load, which does not
// depend on the state, and one shift, which does: about one cycle per byte in the chain of
// dependencies, where the branchy decoder it replaced paid branches and mispredictions on every
// multi-byte character (bench/results/profile/create-after.md).
//
// States: accept (a whole number of characters so far), error (sticky), and those part-way
// through a sequence, named by what the next byte may be (RFC 3629, section 4).
enum Utf8State : uint64_t {
  kAccept = 0,
  kError = 6,
  kTail1 = 12,    // one continuation byte left (80..BF)
  kTail2 = 18,    // two left
  kTail3 = 24,    // three left
  kAfterE0 = 30,  // A0..BF then one more: no overlong three-byte forms
  kAfterED = 36,  // 80..9F then one more: no surrogates
  kAfterF0 = 42,  // 90..BF then two more: no overlong four-byte forms
  kAfterF4 = 48,  // 80..8F then two more: nothing past U+10FFFF
};

constexpr uint64_t Next(Utf8State from, Utf8State to) { return static_cast<uint64_t>(to) << from; }

// The row of byte `b`: the next state from each state (every state not named goes to error).
constexpr uint64_t Row(unsigned b) {
  uint64_t row = Next(kAccept, kError) | Next(kError, kError) | Next(kTail1, kError) |
                 Next(kTail2, kError) | Next(kTail3, kError) | Next(kAfterE0, kError) |
                 Next(kAfterED, kError) | Next(kAfterF0, kError) | Next(kAfterF4, kError);
  auto set = [&row](Utf8State from, Utf8State to) {
    row &= ~(uint64_t{63} << from);
    row |= Next(from, to);
  };
  if (b < 0x80) {
    set(kAccept, kAccept);
  } else if (b < 0xC0) {  // continuation bytes
    set(kTail1, kAccept);
    set(kTail2, kTail1);
    set(kTail3, kTail2);
    if (b >= 0xA0) set(kAfterE0, kTail1);
    if (b < 0xA0) set(kAfterED, kTail1);
    if (b >= 0x90) set(kAfterF0, kTail2);
    if (b < 0x90) set(kAfterF4, kTail2);
  } else if (b >= 0xC2 && b <= 0xDF) {
    set(kAccept, kTail1);
  } else if (b == 0xE0) {
    set(kAccept, kAfterE0);
  } else if (b == 0xED) {
    set(kAccept, kAfterED);
  } else if (b >= 0xE1 && b <= 0xEF) {
    set(kAccept, kTail2);
  } else if (b == 0xF0) {
    set(kAccept, kAfterF0);
  } else if (b >= 0xF1 && b <= 0xF3) {
    set(kAccept, kTail3);
  } else if (b == 0xF4) {
    set(kAccept, kAfterF4);
  }  // C0, C1, F5..FF: error from every state
  return row;
}

constexpr std::array<uint64_t, 256> MakeRows() {
  std::array<uint64_t, 256> rows{};
  for (unsigned b = 0; b < 256; ++b) rows[b] = Row(b);
  return rows;
}
constexpr std::array<uint64_t, 256> kRows = MakeRows();

// The state after `n` bytes from `state`. NUL bytes pass as ASCII: the caller finds them apart.
uint64_t RunDfa(uint64_t state, const unsigned char* p, size_t n) {
  size_t i = 0;
  while (i < n) {
    // Most pastes are ASCII: between characters, skip eight ASCII bytes at a time.
    if (state == kAccept) {
      while (i + 8 <= n) {
        uint64_t word;
        std::memcpy(&word, p + i, 8);
        if ((word & 0x8080808080808080ULL) != 0) break;
        i += 8;
      }
    }
    // Then the DFA over a stretch of up to 64 bytes: one error check per stretch, not per byte.
    const size_t end = std::min(n, i + 64);
    for (; i + 4 <= end; i += 4) {
      state = (kRows[p[i]] >> (state & 63));
      state = (kRows[p[i + 1]] >> (state & 63));
      state = (kRows[p[i + 2]] >> (state & 63));
      state = (kRows[p[i + 3]] >> (state & 63));
    }
    for (; i < end; ++i) state = kRows[p[i]] >> (state & 63);
    if ((state & 63) == kError) return kError;
  }
  return state & 63;
}

// The length of the character at the start of `p` (1 to 4) when it is a valid one; otherwise 0,
// with `skip` set to the bytes to replace by one U+FFFD: the maximal subpart, the longest prefix
// of a valid sequence (the byte the DFA refused starts the next attempt), or one byte when the
// first byte starts no sequence at all. Nothing may follow the error state, so the bytes before
// it were a valid prefix: that is exactly the maximal subpart.
size_t CharacterLength(const unsigned char* p, size_t n, size_t& skip) {
  uint64_t state = kAccept;
  for (size_t i = 0; i < n && i < 4; ++i) {
    state = (kRows[p[i]] >> state) & 63;
    if (state == kAccept) return i + 1;
    if (state == kError) {
      skip = i == 0 ? 1 : i;
      return 0;
    }
  }
  skip = n < 4 ? n : 4;  // cut short by the end of the bytes
  return 0;
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::string_view kEllipsis = "\xE2\x80\xA6";     // U+2026

// A character a quote must show rather than obey: C0, DEL and C1 controls, the line and paragraph
// separators, and the bidirectional formatting characters (U+202A..202E, U+2066..2069), which
// make a page or a terminal show text in another order than its bytes (CVE-2021-42574).
std::optional<char32_t> ShownAsEscape(const unsigned char* p, size_t length) {
  if (length == 1 && (p[0] < 0x20 || p[0] == 0x7F)) return p[0];
  if (length == 2 && p[0] == 0xC2 && p[1] < 0xA0) return p[1];  // U+0080..009F
  if (length == 3 && p[0] == 0xE2) {
    const char32_t c = 0x2000 | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    if ((c >= 0x2028 && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069)) return c;
  }
  return std::nullopt;
}

}  // namespace

bool IsValidUtf8(std::string_view bytes) {
  return RunDfa(kAccept, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()) ==
         kAccept;
}

std::string ReplaceInvalidUtf8(std::string_view bytes) {
  if (IsValidUtf8(bytes)) return std::string(bytes);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::string out;
  out.reserve(bytes.size() + 8);
  for (size_t i = 0; i < bytes.size();) {
    size_t skip = 0;
    const size_t length = CharacterLength(p + i, bytes.size() - i, skip);
    if (length == 0) {
      out.append(kReplacement);
      i += skip;
    } else {
      out.append(bytes.substr(i, length));
      i += length;
    }
  }
  return out;
}

std::string QuotedClientText(std::string_view bytes, size_t max_bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::string out;
  out.reserve(std::min(bytes.size(), max_bytes) + kEllipsis.size());
  char escape[8];
  for (size_t i = 0; i < bytes.size();) {
    size_t skip = 0;
    const size_t length = CharacterLength(p + i, bytes.size() - i, skip);
    std::string_view piece;
    if (length == 0) {
      piece = kReplacement;
    } else if (const auto c = ShownAsEscape(p + i, length)) {
      const int written = std::snprintf(escape, sizeof escape, "\\u%04X", unsigned(*c));
      piece = std::string_view(escape, static_cast<size_t>(written));
    } else {
      piece = bytes.substr(i, length);
    }
    if (out.size() + piece.size() > max_bytes) {
      out.append(kEllipsis);
      break;
    }
    out.append(piece);
    i += length == 0 ? skip : length;
  }
  return out;
}

TextProblem CheckPasteText(std::string_view body) {
  if (body.empty()) return TextProblem::kEmpty;
  const auto* p = reinterpret_cast<const unsigned char*>(body.data());
  // The first NUL, found by the C library's vectorised scan; the problem reported is the one that
  // comes first in the text, so the bytes before the NUL decide between the two.
  const auto* nul = static_cast<const unsigned char*>(std::memchr(p, 0, body.size()));
  const size_t checked = nul ? static_cast<size_t>(nul - p) : body.size();
  // A sequence cut short by the NUL is invalid UTF-8 (the NUL is no continuation byte).
  if (RunDfa(kAccept, p, checked) != kAccept) return TextProblem::kInvalidUtf8;
  return nul ? TextProblem::kNulByte : TextProblem::kNone;
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
