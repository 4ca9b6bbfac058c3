#include "sluice/service/text.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <string>

namespace sluice::service {
namespace {

TEST(CheckPasteText, AcceptsAsciiAndMultibyteText) {
  EXPECT_EQ(CheckPasteText("hello\nworld\t!"), TextProblem::kNone);
  EXPECT_EQ(CheckPasteText("gr\xC3\xBC\xC3\x9F"
                           "e \xE2\x82\xAC \xF0\x9F\x98\x80"),
            TextProblem::kNone);
  EXPECT_EQ(CheckPasteText("\xF4\x8F\xBF\xBF"),
            TextProblem::kNone);  // U+10FFFF, the last code point
}

TEST(CheckPasteText, RejectsEmpty) { EXPECT_EQ(CheckPasteText(""), TextProblem::kEmpty); }

TEST(CheckPasteText, RejectsNulBytes) {
  EXPECT_EQ(CheckPasteText(std::string_view("a\0b", 3)), TextProblem::kNulByte);
}

TEST(CheckPasteText, RejectsMalformedSequences) {
  const char* bad[] = {
      "\x80",                  // lone continuation byte
      "\xC3",                  // truncated two-byte sequence
      "\xE2\x82",              // truncated three-byte sequence
      "\xC0\xAF",              // overlong '/'
      "\xE0\x80\xAF",          // overlong '/' in three bytes
      "\xF0\x80\x80\xAF",      // overlong '/' in four bytes
      "\xED\xA0\x80",          // U+D800, a surrogate
      "\xED\xBF\xBF",          // U+DFFF, a surrogate
      "\xF4\x90\x80\x80",      // U+110000, past the last code point
      "\xF8\x88\x80\x80\x80",  // five-byte form
      "\xFF",
      "ok\xC3(",  // continuation replaced by ASCII
  };
  for (const char* text : bad) EXPECT_EQ(CheckPasteText(text), TextProblem::kInvalidUtf8) << text;
}

// A decoder written from RFC 3629's rules, one code point at a time: what the table-driven
// validator must agree with on every input.
TextProblem ReferenceCheck(std::string_view text) {
  if (text.empty()) return TextProblem::kEmpty;
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == 0) return TextProblem::kNulByte;
    if (c < 0x80) {
      ++i;
      continue;
    }
    const size_t len = c >= 0xF8 ? 0 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (len == 0 || i + len > text.size()) return TextProblem::kInvalidUtf8;
    uint32_t cp = c & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) {
      const auto t = static_cast<unsigned char>(text[i + k]);
      if ((t & 0xC0) != 0x80) return TextProblem::kInvalidUtf8;
      cp = (cp << 6) | (t & 0x3F);
    }
    const uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return TextProblem::kInvalidUtf8;
    }
    i += len;
  }
  return TextProblem::kNone;
}

// Every sequence of one or two bytes, and of three that starts with a non-ASCII byte (an ASCII
// first byte leaves a two-byte case), between ASCII runs that cross the eight-byte fast path; and
// every lead byte of four with its second byte's whole range.
TEST(CheckPasteText, AgreesWithTheReferenceOnEveryShortSequence) {
  std::string text = "abcdefghij";
  const size_t prefix = text.size();
  size_t checked = 0;
  for (int len = 1; len <= 3; ++len) {
    const uint32_t end = 1u << (8 * len);
    for (uint32_t v = len == 3 ? 0x800000u : 0u; v < end; ++v) {
      text.resize(prefix);
      for (int k = len - 1; k >= 0; --k) text.push_back(static_cast<char>((v >> (8 * k)) & 0xFF));
      text += "klmnopqrst";
      ASSERT_EQ(CheckPasteText(text), ReferenceCheck(text)) << "value " << v << " length " << len;
      ++checked;
    }
  }
  for (uint32_t lead = 0xF0; lead <= 0xFF; ++lead) {
    for (uint32_t second = 0; second < 256; ++second) {
      for (uint32_t tail : {0x80u, 0xBFu, 0x41u}) {
        text.resize(prefix);
        for (uint32_t b : {lead, second, tail, 0x80u}) text.push_back(static_cast<char>(b));
        ASSERT_EQ(CheckPasteText(text), ReferenceCheck(text)) << lead << " " << second;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 8'000'000u);
}

// Long random texts of valid characters, then each with one byte changed or cut short, at every
// offset class (inside the fast path's words and across the validator's 64-byte stretches).
TEST(CheckPasteText, AgreesWithTheReferenceOnLongMutatedTexts) {
  const std::string_view pieces[] = {"a",
                                     "z ",
                                     "\n",
                                     "\xC3\xA9",
                                     "\xE2\x82\xAC",
                                     "\xED\x9F\xBF",
                                     "\xEE\x80\x80",
                                     "\xF0\x9F\x9A\x80",
                                     "\xF4\x8F\xBF\xBF",
                                     "0123456789abcdef"};
  uint64_t seed = 42;
  auto next = [&seed] {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return seed >> 33;
  };
  int invalid = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    const size_t target = 1 + next() % 300;
    while (text.size() < target) text += pieces[next() % std::size(pieces)];
    ASSERT_EQ(CheckPasteText(text), TextProblem::kNone) << round;
    std::string bad = text;
    switch (next() % 3) {
      case 0:
        bad[next() % bad.size()] = static_cast<char>(next() & 0xFF);
        break;
      case 1:
        bad.resize(next() % bad.size());
        break;
      default:
        bad.insert(next() % (bad.size() + 1), 1, static_cast<char>(0x80 | (next() & 0x7F)));
    }
    const TextProblem want = ReferenceCheck(bad);
    ASSERT_EQ(CheckPasteText(bad), want) << round;
    invalid += want == TextProblem::kInvalidUtf8;
  }
  EXPECT_GT(invalid, 500);  // the mutations do produce invalid text, so both paths are covered
}

TEST(CheckPasteText, ReportsWhicheverProblemComesFirst) {
  EXPECT_EQ(CheckPasteText(std::string_view("ok\0\xFF", 4)), TextProblem::kNulByte);
  EXPECT_EQ(CheckPasteText(std::string_view("ok\xFF\0", 4)), TextProblem::kInvalidUtf8);
  // A sequence cut short by the NUL: the NUL is no continuation byte.
  EXPECT_EQ(CheckPasteText(std::string_view("ok\xC3\0", 4)), TextProblem::kInvalidUtf8);
  EXPECT_EQ(CheckPasteText(std::string_view("\xC3\xA9\0", 3)), TextProblem::kNulByte);
}

// ---- client bytes quoted back --------------------------------------------------------------

constexpr std::string_view kFffd = "\xEF\xBF\xBD";

std::string Times(std::string_view piece, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += piece;
  return out;
}

TEST(ReplaceInvalidUtf8, KeepsValidTextByteForByte) {
  for (std::string_view valid : {std::string_view(""), std::string_view("plain"),
                                 std::string_view("gr\xC3\xBC\xC3\x9F"
                                                  "e \xF0\x9F\x98\x80"),
                                 std::string_view("a\0b\x01\x7F", 5)}) {
    EXPECT_EQ(ReplaceInvalidUtf8(valid), valid);
  }
}

TEST(ReplaceInvalidUtf8, ReplacesEachMaximalSubpartByOneReplacementCharacter) {
  // Unicode 15.0, table 3-8 and the cases around it: a valid prefix is one subpart, a byte that
  // starts nothing is one by itself.
  const std::pair<std::string_view, std::string> cases[] = {
      {"\x80", std::string(kFffd)},           // lone continuation
      {"\xC0\xAF", Times(kFffd, 2)},          // overlong 2-byte '/'
      {"\xE0\x80\xAF", Times(kFffd, 3)},      // overlong 3-byte
      {"\xF0\x80\x80\xAF", Times(kFffd, 4)},  // overlong 4-byte
      {"\xED\xA0\x80", Times(kFffd, 3)},      // U+D800 encoded
      {"\xF4\x90\x80\x80", Times(kFffd, 4)},  // past U+10FFFF
      {"\xF5\x80", Times(kFffd, 2)},          // never a lead byte
      {"\xFE\xFF", Times(kFffd, 2)},
      {"\xE2\x82", std::string(kFffd)},      // truncated at the end
      {"\xF0\x9F\x98", std::string(kFffd)},  // truncated 4-byte
      {"a\xE2\x82"
       "b",
       "a" + std::string(kFffd) + "b"},  // truncated mid-text
      {"\xC3\xA9\xFF\xC3\xA9", "\xC3\xA9" + std::string(kFffd) + "\xC3\xA9"},
  };
  for (const auto& [bytes, want] : cases) {
    EXPECT_EQ(ReplaceInvalidUtf8(bytes), want) << ::testing::PrintToString(std::string(bytes));
    EXPECT_EQ(CheckPasteText(ReplaceInvalidUtf8(bytes)), TextProblem::kNone);
  }
}

TEST(QuotedClientText, EscapesControlsAndTheCharactersThatReorderText) {
  EXPECT_EQ(QuotedClientText("a\tb\nc"), "a\\u0009b\\u000Ac");
  EXPECT_EQ(QuotedClientText(std::string_view("\0\x1B[2J\x7F", 6)), "\\u0000\\u001B[2J\\u007F");
  EXPECT_EQ(QuotedClientText("\xC2\x9B"
                             "x"),
            "\\u009Bx");  // C1 CSI
  EXPECT_EQ(QuotedClientText("\xE2\x80\xAE"
                             "gpj.exe"),
            "\\u202Egpj.exe");  // RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(QuotedClientText("\xE2\x81\xA6"
                             "x"),
            "\\u2066x");
  EXPECT_EQ(QuotedClientText("\xE2\x80\xA8"), "\\u2028");
  // Neighbours that are ordinary text stay as they are.
  EXPECT_EQ(QuotedClientText("\xC2\xA0\xE2\x80\xA6\xE2\x80\x94"),
            "\xC2\xA0\xE2\x80\xA6\xE2\x80\x94");
  EXPECT_EQ(QuotedClientText("caf\xC3\xA9 \xFF"), "caf\xC3\xA9 " + std::string(kFffd));
}

TEST(QuotedClientText, CutsBetweenCharactersAndSaysSo) {
  // The case: a 63-byte key ending in a two-byte character, cut at 64 bytes.
  const std::string key = std::string(62, 'k') + "\xC3\xA9";
  EXPECT_EQ(QuotedClientText(key, 64), key);
  const std::string longer = std::string(63, 'k') + "\xC3\xA9";
  EXPECT_EQ(QuotedClientText(longer, 64), std::string(63, 'k') + "\xE2\x80\xA6");
  // Never inside an escape either.
  EXPECT_EQ(QuotedClientText("abc\x01", 8), "abc\xE2\x80\xA6");
  EXPECT_EQ(QuotedClientText("abcdefghij", 4), "abcd\xE2\x80\xA6");
  EXPECT_EQ(QuotedClientText("abcd", 4), "abcd");
  EXPECT_EQ(QuotedClientText("", 0), "");
}

TEST(QuotedClientText, IsValidUtf8AndBoundedForAnyBytes) {
  uint64_t seed = 7;
  for (int round = 0; round < 5000; ++round) {
    std::string bytes;
    const size_t length = (seed >> 7) % 90;
    for (size_t i = 0; i < length; ++i) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      bytes.push_back(static_cast<char>(seed >> 56));
    }
    const size_t max_bytes = round % 70;
    const std::string quoted = QuotedClientText(bytes, max_bytes);
    ASSERT_LE(quoted.size(), max_bytes + 3) << round;
    ASSERT_NE(CheckPasteText(quoted + "."), TextProblem::kInvalidUtf8) << round;
    ASSERT_EQ(quoted.find('\0'), std::string::npos) << round;
    for (unsigned char c : quoted) ASSERT_TRUE(c >= 0x20 && c != 0x7F) << round;
    ASSERT_EQ(CheckPasteText(ReplaceInvalidUtf8(bytes) + "."),
              bytes.find('\0') == std::string::npos ? TextProblem::kNone : TextProblem::kNulByte)
        << round;
  }
}

TEST(ParseTtl, AcceptsOnlyTheAllowList) {
  EXPECT_EQ(ParseTtl("10m"), std::chrono::seconds(600));
  EXPECT_EQ(ParseTtl("1h"), std::chrono::seconds(3600));
  EXPECT_EQ(ParseTtl("1d"), std::chrono::seconds(86400));
  EXPECT_EQ(ParseTtl("1w"), std::chrono::seconds(604800));
  EXPECT_EQ(ParseTtl("30d"), std::chrono::seconds(2592000));
  for (const char* bad : {"", "2h", "1H", "10 m", "1w ", "-1h", "30d0", "forever"}) {
    EXPECT_FALSE(ParseTtl(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace sluice::service
