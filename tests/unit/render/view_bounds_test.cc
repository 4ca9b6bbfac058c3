#include "sluice/render/view_bounds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sluice/render/highlighter.h"

namespace sluice::render {
namespace {

size_t Lines(const std::string& html) {
  return static_cast<size_t>(std::count(html.begin(), html.end(), '\n'));
}

// The finding that made the bounds: a paste of line breaks only was a page 33 times its size.
TEST(ViewBoundsTest, APasteOfLineBreaksIsCutAtTheLineBound) {
  const std::string text(1'000'000, '\n');
  const ViewBounds bounds{.max_bytes = size_t{2} << 20, .max_lines = 20'000};
  const Rendering plain = PlainRendering(text, bounds);
  EXPECT_EQ(plain.lines, 20'000u);
  EXPECT_EQ(Lines(plain.html), 20'000u);
  EXPECT_TRUE(plain.cut);
  EXPECT_LE(plain.html.size(), bounds.max_bytes);
  EXPECT_TRUE(plain.html.ends_with("<span class=\"l\" id=\"L20000\"></span>\n"));

  const ViewHead head = HeadForView(text, bounds);
  EXPECT_EQ(head.lines, 20'000u);
  EXPECT_EQ(head.text.size(), 20'000u);
  EXPECT_TRUE(head.cut);
}

// Escaping is counted: one line of a million '<' is 4 MB escaped, so it is cut inside the line,
// on a character, and the fragment stays well formed.
TEST(ViewBoundsTest, OneLineLongerThanTheBoundIsCutOnACharacterInsideIt) {
  const ViewBounds bounds{.max_bytes = 4096, .max_lines = 100};
  const Rendering lt = PlainRendering(std::string(1'000'000, '<'), bounds);
  EXPECT_EQ(lt.lines, 1u);
  EXPECT_TRUE(lt.cut);
  EXPECT_LE(lt.html.size(), bounds.max_bytes);
  EXPECT_GT(lt.html.size(), bounds.max_bytes - 8);
  EXPECT_TRUE(lt.html.ends_with("&lt;</span>\n"));

  std::string euros;
  for (int i = 0; i < 5000; ++i) euros += "\xE2\x82\xAC";  // U+20AC, three bytes each
  const Rendering e = PlainRendering(euros, bounds);
  const size_t open = sizeof("<span class=\"l\" id=\"L1\">") - 1;
  const size_t text_bytes = e.html.size() - open - (sizeof("</span>\n") - 1);
  EXPECT_EQ(text_bytes % 3, 0u) << "a character was split";
  const ViewHead head = HeadForView(euros, bounds);
  EXPECT_EQ(head.text.size() % 3, 0u);
  EXPECT_LE(head.text.size(), bounds.max_bytes);
  EXPECT_TRUE(head.cut);
}

TEST(ViewBoundsTest, APasteWithinTheBoundsIsWholeAndEqualsPlainLines) {
  const ViewBounds bounds{.max_bytes = 4096, .max_lines = 100};
  for (const std::string text : {"", "a", "a\n", "a\r\nb\r\n", "<x>\n\n&\n", "one\ntwo"}) {
    const Rendering plain = PlainRendering(text, bounds);
    EXPECT_FALSE(plain.cut) << text;
    EXPECT_EQ(plain.html, PlainLines(text)) << text;
    const ViewHead head = HeadForView(text, bounds);
    EXPECT_FALSE(head.cut) << text;
    EXPECT_EQ(head.text, text);
  }
}

TEST(ViewBoundsTest, TheLastLineThatFitsEndsTheViewAndTheRestIsCut) {
  const ViewBounds bounds{.max_bytes = 100, .max_lines = 1000};
  std::string text;
  for (int i = 0; i < 20; ++i) text += "0123456789\n";
  const Rendering plain = PlainRendering(text, bounds);
  EXPECT_TRUE(plain.cut);
  EXPECT_LE(plain.html.size(), 100u);
  EXPECT_EQ(Lines(plain.html), plain.lines);
  EXPECT_GE(plain.lines, 1u);
  // Every line shown is whole.
  EXPECT_EQ(plain.html, PlainLines(text.substr(0, 11 * plain.lines)));

  const ViewHead head = HeadForView(text, bounds);
  EXPECT_EQ(head.text.size(), 99u);  // nine whole lines of 11 bytes
  EXPECT_EQ(head.lines, 9u);
}

TEST(ViewBoundsTest, AFragmentIsCutAfterItsLastWholeLineOrRefusedWhenNoLineFits) {
  const ViewBounds bounds{.max_bytes = 20, .max_lines = 1000};
  std::optional<Rendering> cut = CutLineFragment("<a>1</a>\n<a>2</a>\n<a>3</a>\n", false, bounds);
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->html, "<a>1</a>\n<a>2</a>\n");
  EXPECT_EQ(cut->lines, 2u);
  EXPECT_TRUE(cut->cut);

  std::optional<Rendering> whole = CutLineFragment("<a>1</a>\n", true, bounds);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->lines, 1u);
  EXPECT_TRUE(whole->cut) << "its source was already a head";

  EXPECT_FALSE(CutLineFragment(std::string(100, 'x') + "\n", false, bounds));
}

}  // namespace
}  // namespace sluice::render
