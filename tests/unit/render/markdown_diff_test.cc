#include <gtest/gtest.h>

#include <string>

#include "sluice/render/diff.h"
#include "sluice/render/markdown.h"

namespace sluice::render {
namespace {

bool Has(const std::string& s, std::string_view needle) {
  return s.find(needle) != std::string::npos;
}

TEST(MarkdownTest, GithubExtensionsRender) {
  const std::string html = RenderMarkdown(
      "| a | b |\n|---|---|\n| 1 | 2 |\n\n~~gone~~ and https://example.org\n\n- [x] done\n- [ ] "
      "todo\n");
  EXPECT_TRUE(Has(html, "<table>")) << html;
  EXPECT_TRUE(Has(html, "<td>1</td>")) << html;
  EXPECT_TRUE(Has(html, "<del>gone</del>")) << html;
  EXPECT_TRUE(Has(html, "href=\"https://example.org\"")) << html;
  EXPECT_TRUE(Has(html, "type=\"checkbox\" checked=\"\" disabled=\"\" aria-label=\"done\""))
      << html;
  EXPECT_TRUE(Has(html, "type=\"checkbox\" disabled=\"\" aria-label=\"not done\"")) << html;
}

TEST(MarkdownTest, RawHtmlAndScriptLinksAreDropped) {
  const std::string html = RenderMarkdown(
      "<script>alert(1)</script>\n\ntext <b onclick=x>b</b> <img src=x onerror=alert(2)>\n\n"
      "[a](javascript:alert(3)) [b](JAVASCRIPT:alert(4)) [c](vbscript:x) "
      "[d](data:text/html,<script>x</script>) [e](&#106;avascript:alert(5))\n\n"
      "<iframe src=//evil></iframe>\n\n&lt;script&gt; &amp; &#x3c;\n");
  for (std::string_view bad : {"<script", "<b ", "onclick", "<img", "onerror",
                               "javascript:", "JAVASCRIPT:", "vbscript:", "data:text", "<iframe"}) {
    EXPECT_FALSE(Has(html, bad)) << bad << " in " << html;
  }
  EXPECT_TRUE(Has(html, "&lt;script&gt; &amp; &lt;")) << html;  // entities stay text
}

TEST(MarkdownTest, LinksAreMarkedAndImagesBecomeLinks) {
  const std::string html =
      RenderMarkdown("[x](https://a.example) <https://b.example>\n\n![pixel](//remote/p.gif)\n");
  EXPECT_FALSE(Has(html, "<img")) << html;
  EXPECT_TRUE(Has(html, "<a rel=\"nofollow noopener ugc\" href=\"//remote/p.gif\">pixel</a>"))
      << html;
  // Every link carries the rel, and no other <a is left.
  size_t links = 0, marked = 0;
  for (size_t at = html.find("<a "); at != std::string::npos; at = html.find("<a ", at + 1)) {
    ++links;
    if (html.compare(at, 34, "<a rel=\"nofollow noopener ugc\" hre") == 0) ++marked;
  }
  EXPECT_EQ(links, 3u) << html;
  EXPECT_EQ(marked, links) << html;
}

TEST(MarkdownTest, TenThousandNestedListsAndQuotesStayBounded) {
  std::string lists;
  for (int i = 0; i < 10000; ++i) lists += "- ";
  lists += "deep\n";
  const std::string html = RenderMarkdown(lists);
  EXPECT_TRUE(Has(html, "deep")) << html.substr(0, 200);
  EXPECT_LT(html.size(), size_t{1} << 20);
  const std::string quotes = RenderMarkdown(std::string(10000, '>') + " deep\n");
  EXPECT_TRUE(Has(quotes, "deep"));
}

// Applies a unified diff made by UnifiedDiff to `parent`: what the fork's reader trusts the diff
// to say.
std::string Apply(const std::string& parent, const std::string& diff) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < parent.size();) {
    const size_t end = parent.find('\n', at);
    lines.push_back(parent.substr(at, end - at));
    at = end == std::string::npos ? parent.size() : end + 1;
  }
  std::vector<std::string> out;
  size_t next = 0;  // the parent's next line not yet copied
  size_t at = diff.find("\n@@");
  while (at != std::string::npos) {
    ++at;
    const size_t eol = diff.find('\n', at);
    long old_start = 0, old_count = 0;
    std::sscanf(diff.c_str() + at, "@@ -%ld,%ld", &old_start, &old_count);
    const size_t first =
        old_count == 0 ? static_cast<size_t>(old_start) : static_cast<size_t>(old_start - 1);
    while (next < first) out.push_back(lines[next++]);
    at = eol + 1;
    while (at < diff.size() && diff[at] != '@') {
      const size_t end = diff.find('\n', at);
      const std::string text = diff.substr(at + 1, end - at - 1);
      if (diff[at] == ' ') {
        out.push_back(lines[next++]);
      } else if (diff[at] == '-') {
        ++next;
      } else if (diff[at] == '+') {
        out.push_back(text);
      }
      at = end + 1;
    }
    at = at < diff.size() ? at - 1 : std::string::npos;
  }
  while (next < lines.size()) out.push_back(lines[next++]);
  std::string joined;
  for (const std::string& l : out) joined += l + "\n";
  return joined;
}

TEST(DiffTest, EqualTextsHaveNoDiff) { EXPECT_EQ(UnifiedDiff("a\nb\n", "a\nb\n", "p", "c"), ""); }

TEST(DiffTest, AHunkNamesItsLinesInTheWholeText) {
  std::string parent, child;
  for (int i = 1; i <= 40; ++i) {
    parent += "line " + std::to_string(i) + "\n";
    child += (i == 20 ? std::string("changed") : "line " + std::to_string(i)) + "\n";
  }
  const std::string diff = UnifiedDiff(parent, child, "PARENT", "CHILD");
  EXPECT_EQ(diff,
            "--- PARENT\n+++ CHILD\n@@ -17,7 +17,7 @@\n line 17\n line 18\n line 19\n-line 20\n"
            "+changed\n line 21\n line 22\n line 23\n");
}

TEST(DiffTest, ApplyingTheDiffToTheParentGivesTheChild) {
  const std::string parent = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\n";
  const std::string cases[] = {
      "a\nb\nC\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\no\n",  // a change and an append
      "b\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\n",        // the first line gone
      "new\na\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\n",
      "x\ny\nz\n",  // everything different
      "a\nn\n",
  };
  for (const std::string& child : cases) {
    const std::string diff = UnifiedDiff(parent, child, "p", "c");
    EXPECT_EQ(Apply(parent, diff), child) << diff;
  }
}

TEST(DiffTest, TheJobBufferRoundTrips) {
  const std::string job = EncodeDiffJob("old\n", std::string("n\0w", 3), "P", "C");
  std::string_view a, b, c, d;
  ASSERT_TRUE(DecodeDiffJob(job, a, b, c, d));
  EXPECT_EQ(a, "old\n");
  EXPECT_EQ(b, std::string_view("n\0w", 3));
  EXPECT_EQ(c, "P");
  EXPECT_EQ(d, "C");
  EXPECT_FALSE(DecodeDiffJob(job.substr(0, job.size() - 1), a, b, c, d));
  EXPECT_FALSE(DecodeDiffJob(job + "x", a, b, c, d));
}

}  // namespace
}  // namespace sluice::render
