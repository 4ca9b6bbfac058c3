// Every page, with hostile text in every field it shows, in every state its template has: no
// byte of that text is interpreted. The templates escape every slot unless its name ends in _html
// (tools/compile_templates.py); these tests hold the pages to it whatever a template or the code
// filling it does.
#include "../../../src/http/pages.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::http {
namespace {

constexpr std::string_view kHostile = "<script>alert(1)</script>\"'&";
constexpr std::string_view kEscaped = "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;";

// The markup a safe slot is handed: what the highlighter or cmark makes, shown as it is.
constexpr std::string_view kSafeMarkup = "<span class=\"kw\">int</span> x;";

void ExpectNothingInterpreted(const std::string& page, std::string_view what) {
  SCOPED_TRACE(std::string(what));
  EXPECT_EQ(page.find("<script>alert"), std::string::npos) << page;
  EXPECT_EQ(page.find("</script>\""), std::string::npos) << page;
  // The text is there, shown: escaped, each of its HTML-significant characters.
  EXPECT_NE(page.find(kEscaped), std::string::npos) << page;
}

const std::string kText(kHostile);

TEST(PagesTest, IndexPageEscapesTheFork) {
  // The create page without a fork shows no client text: a hostile TTL name selects nothing.
  EXPECT_EQ(IndexPage(kText, 1000, nullptr).find("<script>alert"), std::string::npos);
  for (const bool large : {false, true}) {
    CreatePrefill prefill{kText, kText, kText};
    if (large) {
      prefill.text = {};
      prefill.load_from = kText;
      prefill.size_bytes = 1 << 20;
    }
    ExpectNothingInterpreted(IndexPage(kText, 1000, &prefill), large ? "fork, large" : "fork");
  }
}

PasteView HostileView() {
  PasteView view;
  view.id = kText;
  view.url = kText;
  view.raw_url = kText;
  view.language_label = kText;
  view.rung_tag = kText;
  view.parent = kText;
  view.lines = kSafeMarkup;
  return view;
}

TEST(PagesTest, PastePageEscapesEveryFieldInEveryState) {
  for (const bool created : {false, true}) {
    for (const std::optional<uint32_t> views_left :
         {std::optional<uint32_t>(), std::optional(0u), std::optional(1u), std::optional(5u)}) {
      for (const bool cut : {false, true}) {
        for (const bool shed : {false, true}) {
          PasteView view = HostileView();
          if (created) view.created = CreatedNotice{kText};
          view.views_left = views_left;
          view.cut = cut;
          view.shown_lines = 3;
          view.shed = shed;
          view.too_large = !shed;
          view.markdown = true;
          const std::string page = PastePage(view);
          ExpectNothingInterpreted(page, "paste");
          // The highlighter's fragment is the one slot shown as it is.
          EXPECT_NE(page.find(kSafeMarkup), std::string::npos);
        }
      }
    }
  }
}

TEST(PagesTest, DerivedPageEscapesEveryFieldInEveryState) {
  for (const auto kind : {DerivedView::Kind::kDiff, DerivedView::Kind::kMarkdown}) {
    for (const bool plain : {false, true}) {
      for (const bool too_large : {false, true}) {
        for (const bool cut : {false, true}) {
          DerivedView view;
          view.kind = kind;
          view.id = kText;
          view.parent = kText;
          view.rung_tag = kText;
          view.plain = plain;
          view.too_large = too_large;
          view.cut = cut;
          view.shown_lines = 1;
          view.html = kSafeMarkup;
          const std::string page = DerivedPage(view);
          ExpectNothingInterpreted(page, "derived");
          EXPECT_NE(page.find(kSafeMarkup), std::string::npos);
        }
      }
    }
  }
}

TEST(PagesTest, EveryOtherPageEscapesItsFields) {
  for (const bool burn : {false, true}) {
    ExpectNothingInterpreted(EncryptedPastePage({kText, 0, 10, burn, 1000}), "encrypted");
  }
  for (const std::optional<int64_t> retry : {std::optional<int64_t>(), std::optional<int64_t>(3)}) {
    for (const unsigned status : {400u, 404u, 429u, 503u}) {
      ExpectNothingInterpreted(ErrorPage(status, kText, kText, retry, 0), "error");
    }
  }
  for (const uint32_t views : {1u, 3u}) {
    ExpectNothingInterpreted(BurnConfirmPage(kText, views), "burn confirm");
    ExpectNothingInterpreted(BurnCreatedPage(kText, kText, views), "burn created");
  }
  ExpectNothingInterpreted(ReportFormPage(kText, kText), "report form");
  ExpectNothingInterpreted(ReportedPage(kText), "reported");
  ExpectNothingInterpreted(DeleteConfirmPage(kText, kText), "delete confirm");
  ExpectNothingInterpreted(DeletedPage(kText), "deleted");
}

TEST(PagesTest, StatusPageShowsNoScriptButItsOwn) {
  // Its fields are numbers; what it must not gain is an inline script (the CSP forbids them).
  for (const double quota : {0.0, 1e9}) {
    const std::string page =
        StatusPage({{"sluice_storage_quota_bytes", quota}, {"sluice_storage_live_bytes", 5e8}}, 0);
    EXPECT_EQ(page.find("<script>"), std::string::npos);
    EXPECT_NE(page.find(quota > 0 ? "50.0% of the quota" : "none"), std::string::npos);
  }
}

}  // namespace
}  // namespace sluice::http
