#include "sluice/service/text.h"

#include <gtest/gtest.h>

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
