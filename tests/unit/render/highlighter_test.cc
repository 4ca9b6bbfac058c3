#include "sluice/render/highlighter.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::render {
namespace {

// What is left of a fragment once our own line and highlight spans are taken out: the paste's
// text, escaped, with nothing else in it.
// (By hand rather than std::regex, which g++ 12 under ASan warns about inside libstdc++.)
std::string StripOurSpans(const std::string& html) {
  std::string out;
  for (size_t at = 0; at < html.size();) {
    if (html.compare(at, 13, "<span class=\"") == 0) {
      at = html.find("\">", at) + 2;
    } else if (html.compare(at, 7, "</span>") == 0) {
      at += 7;
    } else {
      out += html[at++];
    }
  }
  return out;
}

std::string Unescape(std::string s) {
  const std::pair<const char*, const char*> entities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}};
  for (const auto& [from, to] : entities) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + 1)) {
      s.replace(at, std::string(from).size(), to);
    }
  }
  return s;
}

TEST(HighlighterTest, HostilePastesStayTextInEveryLanguage) {
  const std::string hostile =
      "</pre><script>alert(1)</script>\n\"><img src=x onerror=alert(2)>\n"
      "<!-- '&amp; \" --> <style>*{}</style>\n`${x}` /* */ # -- ' \" \n";
  for (const Language& language : Languages()) {
    auto html = Highlight(hostile, language.name);
    ASSERT_TRUE(html.ok()) << language.name;
    const std::string text = StripOurSpans(*html);
    for (const char c : std::string("<>\"'")) {
      EXPECT_EQ(text.find(c), std::string::npos)
          << language.name << ": raw " << c << " in " << *html;
    }
    std::string lines = Unescape(text);
    EXPECT_EQ(lines, hostile) << language.name;
  }
}

TEST(HighlighterTest, KeywordsGetClassesOneSpanPerLine) {
  auto html = Highlight("def f(x):\n    return x\n", "python");
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find("<span class=\"hl-keyword\">def</span>"), std::string::npos) << *html;
  EXPECT_NE(html->find("<span class=\"hl-keyword\">return</span>"), std::string::npos) << *html;
  EXPECT_NE(html->find("<span class=\"l\" id=\"L1\">"), std::string::npos) << *html;
  EXPECT_NE(html->find("<span class=\"l\" id=\"L2\">    "), std::string::npos) << *html;
  EXPECT_EQ(html->find("id=\"L3\""), std::string::npos) << *html;
}

TEST(HighlighterTest, UnknownLanguageIsInvalidArgument) {
  auto html = Highlight("x", "klingon");
  ASSERT_FALSE(html.ok());
  EXPECT_EQ(html.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(IsLanguage("auto"));
  EXPECT_FALSE(IsLanguage("text"));
  EXPECT_TRUE(IsLanguage("cpp"));
}

TEST(HighlighterTest, PlainLinesEscapesAndKeepsEveryLine) {
  EXPECT_EQ(PlainLines("a<b\r\n\n&"),
            "<span class=\"l\" id=\"L1\">a&lt;b</span>\n<span class=\"l\" id=\"L2\"></span>\n"
            "<span class=\"l\" id=\"L3\">&amp;</span>\n");
  EXPECT_EQ(PlainLines(""), "<span class=\"l\" id=\"L1\"></span>\n");
}

TEST(HighlighterTest, DetectsCommonLanguagesAndLeavesProseAlone) {
  EXPECT_EQ(DetectLanguage("#!/usr/bin/env python3\nprint(1)\n"), "python");
  EXPECT_EQ(DetectLanguage("#!/bin/sh\necho hi\n"), "bash");
  EXPECT_EQ(DetectLanguage("#include <vector>\nstd::vector<int> v;\n"), "cpp");
  EXPECT_EQ(DetectLanguage("#include <stdio.h>\nint main(void) { return 0; }\n"), "c");
  EXPECT_EQ(DetectLanguage("package main\n\nfunc main() {}\n"), "go");
  EXPECT_EQ(DetectLanguage("{\"a\": 1}\n"), "json");
  EXPECT_EQ(DetectLanguage("diff --git a/x b/x\n"), "diff");
  EXPECT_EQ(DetectLanguage("SELECT id FROM pastes WHERE x = 1;\n"), "sql");
  EXPECT_EQ(DetectLanguage("Meeting notes. Bring the slides, and the coffee.\n"), "");
}

}  // namespace
}  // namespace sluice::render
