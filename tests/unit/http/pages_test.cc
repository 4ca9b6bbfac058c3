// Every page, with hostile text in every field it shows, in every state its template has: no
// byte of that text is interpreted. The templates escape every slot unless its name ends in _html
// (tools/compile_templates.py); these tests hold the pages to it whatever a template or the code
// filling it does.
#include "../../../src/http/pages.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "../../../src/http/public_contact.h"

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
// The footer's form carries the page's path back: hostile too.
const Reader kReader{Lang::kEn, kHostile};

TEST(PagesTest, IndexPageEscapesTheFork) {
  // The create page without a fork shows no client text: a hostile TTL name selects nothing.
  EXPECT_EQ(IndexPage(kReader, kText, 1000, nullptr).find("<script>alert"), std::string::npos);
  for (const bool large : {false, true}) {
    CreatePrefill prefill{kText, kText, kText};
    if (large) {
      prefill.text = {};
      prefill.load_from = kText;
      prefill.size_bytes = 1 << 20;
    }
    ExpectNothingInterpreted(IndexPage(kReader, kText, 1000, &prefill),
                             large ? "fork, large" : "fork");
  }
}

// The create page sends no extra request unless the server has the rung on: only then does it name
// the proof of work's worker, which app.js's submit handler waits for (docs/overload.md).
TEST(PagesTest, IndexPageNamesTheProofOfWorkWorkerOnlyWhenTheRungIsOn) {
  const std::string off = IndexPage(kReader, "1w", 1000);
  EXPECT_EQ(off.find("data-pow-worker"), std::string::npos);
  EXPECT_EQ(off.find("pow-status"), std::string::npos);
  const std::string on = IndexPage(kReader, "1w", 1000, nullptr, true);
  EXPECT_NE(on.find("data-pow-worker=\"/static/pow.js?v="), std::string::npos) << on;
  // The status exists before the search starts, so a screen reader announces what it then says.
  EXPECT_NE(on.find("id=\"pow-status\" role=\"status\""), std::string::npos) << on;
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
          const std::string page = PastePage(kReader, view);
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
          const std::string page = DerivedPage(kReader, view);
          ExpectNothingInterpreted(page, "derived");
          EXPECT_NE(page.find(kSafeMarkup), std::string::npos);
        }
      }
    }
  }
}

TEST(PagesTest, EveryOtherPageEscapesItsFields) {
  for (const bool burn : {false, true}) {
    ExpectNothingInterpreted(EncryptedPastePage(kReader, {kText, 0, 10, burn, 1000}), "encrypted");
  }
  for (const std::optional<int64_t> retry : {std::optional<int64_t>(), std::optional<int64_t>(3)}) {
    for (const unsigned status : {400u, 404u, 429u, 503u}) {
      ExpectNothingInterpreted(ErrorPage(kReader, status, kText, kText, retry, 0), "error");
    }
  }
  // The operator's text on how to get access is shown as a paragraph of its own: escaped too.
  for (const char* reason : {"create_access_credential", "create_access_network"}) {
    const std::string page = ErrorPage(kReader, 403, reason, kText, std::nullopt, 0);
    ExpectNothingInterpreted(page, "error");
    EXPECT_NE(page.find("<p id=\"access\">&lt;script&gt;"), std::string::npos) << page;
  }
  for (const uint32_t views : {1u, 3u}) {
    ExpectNothingInterpreted(BurnConfirmPage(kReader, kText, views), "burn confirm");
    ExpectNothingInterpreted(BurnCreatedPage(kReader, kText, kText, views), "burn created");
  }
  ExpectNothingInterpreted(ReportFormPage(kReader, kText, kText), "report form");
  ExpectNothingInterpreted(ReportedPage(kReader, kText), "reported");
  ExpectNothingInterpreted(DeleteConfirmPage(kReader, kText, kText), "delete confirm");
  ExpectNothingInterpreted(DeletedPage(kReader, kText), "deleted");
}

// A report with something in every row, notices included, and a month past the last step.
service::TransparencyReport ReportWithEveryNumber(std::string label = "copyright") {
  service::TransparencyReport report;
  service::MonthFigures m{"2026-12"};
  m.notices = 2;
  m.notices_by_category = {{label, 2}};
  m.notices_by_sender = {{label, 2}};
  m.withholds = {{"votes", 3}, {"notice", 1}};
  m.takedowns = 4;
  m.restores = 1;
  m.dismissals = 2;
  m.timed_actions = 5;
  m.median = service::TimeQuantile{300, false};
  m.p95 = service::TimeQuantile{0, true};
  m.reuploads_blocked = 9;
  m.blocks = {{"network", 1}, {"content", 4}};
  report.months.push_back(m);
  report.months.push_back(service::MonthFigures{"2026-11"});  // nothing: not shown
  m.month = "2026-10";
  report.months.push_back(m);
  return report;
}

TEST(PagesTest, TransparencyPageEscapesLabelsAndShowsOnlyMonthsWithNumbers) {
  // A notice's category and sender are the notice intake's codes; the page escapes whatever the
  // store holds.
  const std::string page = TransparencyPage(kReader, ReportWithEveryNumber(kText));
  ExpectNothingInterpreted(page, "transparency");
  EXPECT_NE(page.find("id=\"month-2026-12\""), std::string::npos);
  EXPECT_NE(page.find("id=\"month-2026-10\""), std::string::npos);
  EXPECT_EQ(page.find("id=\"month-2026-11\""), std::string::npos) << "an empty month is left out";
  EXPECT_NE(page.find("\u2264 5 minutes"), std::string::npos);
  EXPECT_NE(page.find("&gt; 14 days"), std::string::npos);
  EXPECT_NE(page.find("Encrypted pastes cannot be matched"), std::string::npos);
  // The newest month is shown even when nothing was counted.
  service::TransparencyReport empty;
  empty.months.push_back(service::MonthFigures{"2026-12"});
  EXPECT_NE(TransparencyPage(kReader, empty).find("id=\"month-2026-12\""), std::string::npos);
}

TEST(PagesTest, AbusePageAndFooterEscapeTheContactSettings) {
  // The settings admit only mailto:, https:// and tel: URIs; the page escapes whatever it gets.
  ContactOptions hostile;
  hostile.contacts = {"mailto:" + kText, "https://x/" + kText};
  hostile.policy_text = kText;
  const auto contact = std::make_shared<const PublicContact>(hostile, "https://h/" + kText);
  for (const int64_t pending : {0, 7}) {
    ExpectNothingInterpreted(AbusePage(kReader, *contact, pending), "abuse");
  }
  ExpectNothingInterpreted(AbusePage(kReader, PublicContact({}, ""), 0), "abuse, no contact");
  PublicContact::Install(contact);
  ExpectNothingInterpreted(DeletedPage(kReader, "AAAA"), "footer");
  PublicContact::Install(std::make_shared<const PublicContact>(ContactOptions{}, ""));
}

TEST(PagesTest, StatusPageShowsNoScriptButItsOwn) {
  // Its fields are numbers; what it must not gain is an inline script (the CSP forbids them).
  for (const double quota : {0.0, 1e9}) {
    const std::string page = StatusPage(
        kReader, {{"sluice_storage_quota_bytes", quota}, {"sluice_storage_live_bytes", 5e8}}, 0);
    EXPECT_EQ(page.find("<script>"), std::string::npos);
    EXPECT_NE(page.find(quota > 0 ? "50.0% of the quota" : "none"), std::string::npos);
  }
}

// Every page in every state its template has, for `reader`, with ordinary (not hostile) values:
// what a reader of that language can be shown.
std::vector<std::pair<std::string, std::string>> EveryPage(const Reader& reader) {
  std::vector<std::pair<std::string, std::string>> pages;
  pages.emplace_back("index", IndexPage(reader, "1w", 1000));
  for (const bool large : {false, true}) {
    CreatePrefill prefill{"x", "AAAA", "python"};
    if (large) {
      prefill.text = {};
      prefill.load_from = "/raw/AAAA";
      prefill.size_bytes = 3 << 20;
    }
    pages.emplace_back("fork", IndexPage(reader, "1w", 1000, &prefill));
  }
  for (const bool created : {false, true}) {
    for (const std::optional<uint32_t> views_left :
         {std::optional<uint32_t>(), std::optional(0u), std::optional(1u), std::optional(5u)}) {
      for (const bool cut : {false, true}) {
        for (const bool shed : {false, true}) {
          for (const size_t lines : {size_t{1}, size_t{3}}) {
            PasteView view;
            view.id = "AAAA";
            view.url = "http://h/AAAA";
            view.raw_url = "/raw/AAAA";
            view.size_bytes = 1536;
            view.parent = "BBBB";
            if (created) view.created = CreatedNotice{"http://h/delete/AAAA?token=t"};
            view.views_left = views_left;
            view.cut = cut;
            view.shown_lines = lines;
            view.shed = shed;
            view.too_large = !shed;
            view.markdown = true;
            pages.emplace_back("paste", PastePage(reader, view));
          }
        }
      }
    }
  }
  for (const auto kind : {DerivedView::Kind::kDiff, DerivedView::Kind::kMarkdown}) {
    for (const bool plain : {false, true}) {
      for (const bool too_large : {false, true}) {
        for (const size_t lines : {size_t{1}, size_t{3}}) {
          for (const bool same : {false, true}) {
            DerivedView view;
            view.kind = kind;
            view.id = "AAAA";
            view.parent = "BBBB";
            view.rung_tag = "full";
            view.plain = plain;
            view.too_large = too_large;
            view.cut = true;
            view.shown_lines = lines;
            view.html = same ? "" : "<span>x</span>";
            pages.emplace_back("derived", DerivedPage(reader, view));
          }
        }
      }
    }
  }
  for (const bool burn : {false, true}) {
    pages.emplace_back("encrypted", EncryptedPastePage(reader, {"AAAA", 0, 10, burn, 1000}));
  }
  const char* const kReasons[] = {"ip_create_count",
                                  "ip_create_bytes",
                                  "global_count",
                                  "global_bytes",
                                  "origin_get_ip",
                                  "create_slots",
                                  "create_bytes",
                                  "read_slots",
                                  "fill_cap",
                                  "connections",
                                  "outcome_unknown",
                                  "body_mismatch",
                                  "burn_after_reading",
                                  "storage_quota",
                                  "body_missing",
                                  "under_review",
                                  "taken_down",
                                  "blocked",
                                  "create_access_credential",
                                  "create_access_network",
                                  "report_rate",
                                  "report_global_rate",
                                  "cross_site",
                                  "delete_rate",
                                  "other"};
  for (const unsigned status : {400u, 401u, 403u, 404u, 409u, 429u, 500u, 503u}) {
    for (const char* reason : kReasons) {
      pages.emplace_back("error", ErrorPage(reader, status, reason, "m", 3725, 0));
    }
  }
  for (const uint32_t views : {1u, 3u}) {
    pages.emplace_back("burn confirm", BurnConfirmPage(reader, "AAAA", views));
    pages.emplace_back("burn created",
                       BurnCreatedPage(reader, "http://h/AAAA", "http://h/d", views));
  }
  pages.emplace_back("report form", ReportFormPage(reader, "AAAA", "t"));
  pages.emplace_back("reported", ReportedPage(reader, "AAAA"));
  pages.emplace_back("delete confirm", DeleteConfirmPage(reader, "AAAA", "t"));
  pages.emplace_back("deleted", DeletedPage(reader, "AAAA"));
  ContactOptions contact;
  contact.contacts = {"mailto:abuse@paste.example"};
  contact.policy_text = "-";
  pages.emplace_back("abuse", AbusePage(reader, PublicContact(contact, "https://h"), 3));
  pages.emplace_back("abuse, no contact", AbusePage(reader, PublicContact({}, ""), 0));
  pages.emplace_back("transparency", TransparencyPage(reader, ReportWithEveryNumber()));
  for (const double quota : {0.0, 1e9}) {
    pages.emplace_back("status", StatusPage(reader,
                                            {{"sluice_storage_quota_bytes", quota},
                                             {"sluice_storage_live_bytes", 5e8},
                                             {"sluice_storage_created_bytes_24h", 300}},
                                            0));
  }
  return pages;
}

// The page without its scripts' message blocks, whose keys are the English msgids by design.
std::string WithoutScriptMessages(std::string page) {
  for (size_t at; (at = page.find("<script type=\"application/json\"")) != std::string::npos;) {
    page.erase(at, page.find("</script>", at) + 9 - at);
  }
  return page;
}

std::string Escaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The runs of words of a message between its slots ({{x}}, {x}) and tags (<code>): what a reader
// would see of it. Runs of one word are left out (a word may be the same in both languages).
std::vector<std::string> Phrases(std::string_view message) {
  std::vector<std::string> phrases;
  std::string run;
  auto flush = [&] {
    const size_t first = run.find_first_not_of(" .,:;()");
    const size_t last = run.find_last_not_of(" .,:;()");
    if (first != std::string::npos) {
      std::string phrase = run.substr(first, last - first + 1);
      if (phrase.find(' ') != std::string::npos) phrases.push_back(std::move(phrase));
    }
    run.clear();
  };
  for (size_t i = 0; i < message.size();) {
    const char c = message[i];
    const char close = c == '<' ? '>' : c == '{' ? '}' : 0;
    if (close != 0) {
      flush();
      i = message.find(close, i);
      i = i == std::string_view::npos ? message.size() : i + 1;
      while (i < message.size() && message[i] == '}') ++i;
      continue;
    }
    run += c;
    ++i;
  }
  flush();
  return phrases;
}

TEST(PagesTest, HtmlLangIsTheReadersLanguage) {
  for (size_t i = 0; i < i18n::kLangCount; ++i) {
    const Lang lang = static_cast<Lang>(i);
    const std::string page = IndexPage({lang, "/"}, "1w", 1000);
    EXPECT_NE(page.find(fmt::format("<html lang=\"{}\">", i18n::kLanguages[i].tag)),
              std::string::npos);
    // The switch offers every language, this one chosen.
    EXPECT_NE(page.find(fmt::format("<option value=\"{0}\" lang=\"{0}\" selected>",
                                    i18n::kLanguages[i].tag)),
              std::string::npos);
  }
}

TEST(PagesTest, EveryPageEscapesItsFieldsInEveryLanguage) {
  for (size_t i = 0; i < i18n::kLangCount; ++i) {
    const Reader reader{static_cast<Lang>(i), kHostile};
    SCOPED_TRACE(std::string(i18n::kLanguages[i].tag));
    ExpectNothingInterpreted(ReportedPage(reader, kText), "reported");
    ExpectNothingInterpreted(ErrorPage(reader, 429, kText, kText, 3, 0), "error");
    PasteView view = HostileView();
    view.cut = true;
    view.views_left = 5;
    ExpectNothingInterpreted(PastePage(reader, view), "paste");
  }
}

// No page in another language keeps a phrase of an English message that its catalog translates
// differently: a message the catalog lacks, a string built in C++ that skips the catalog, or a
// template's text outside {{#t}} all show up here (docs/translations.md).
TEST(PagesTest, NoPageInAnotherLanguageShowsEnglish) {
  const auto english = EveryPage({Lang::kEn, "/"});
  for (size_t i = 1; i < i18n::kLangCount; ++i) {
    const Lang lang = static_cast<Lang>(i);
    SCOPED_TRACE(std::string(i18n::kLanguages[i].tag));
    const auto pages = EveryPage({lang, "/"});
    ASSERT_EQ(pages.size(), english.size());
    for (const i18n::MessageForTest& m : i18n::MessagesForTest()) {
      const std::string_view msgstr = m.msgstr[i];
      for (const std::string& phrase : Phrases(m.msgid)) {
        if (!msgstr.empty() && msgstr.find(phrase) != std::string_view::npos) continue;
        for (size_t p = 0; p < pages.size(); ++p) {
          const std::string page = WithoutScriptMessages(pages[p].second);
          EXPECT_EQ(page.find(phrase), std::string::npos)
              << pages[p].first << " shows \"" << phrase << "\" of \"" << m.msgid << "\"";
          EXPECT_EQ(page.find(Escaped(phrase)), std::string::npos)
              << pages[p].first << " shows \"" << phrase << "\" of \"" << m.msgid << "\"";
        }
      }
    }
  }
}

TEST(PagesTest, DurationsAndSizesAreInTheReadersLanguage) {
  EXPECT_EQ(DurationInWords(3725), "1 hour 2 minutes");
  EXPECT_EQ(DurationInWords(3725, Lang::kDe), "1 Stunde 2 Minuten");
  EXPECT_EQ(DurationInWords(3725, Lang::kJa), "1 時間 2 分");
  EXPECT_EQ(SizeInWords(1536), "1.5 KiB");
  EXPECT_EQ(SizeInWords(1536, Lang::kFr), "1,5 Kio");
  EXPECT_EQ(SizeInWords(1, Lang::kZhHans), "1 字节");
}

}  // namespace
}  // namespace sluice::http
