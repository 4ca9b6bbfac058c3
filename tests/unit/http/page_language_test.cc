// The language of a page: the cookie's, else Accept-Language's best shipped match, else English
// (src/http/page_language.h).
#include "../../../src/http/page_language.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace sluice::http {
namespace {

class Fields : public HeaderFields {
 public:
  Fields(std::initializer_list<std::pair<const std::string, std::string>> f) : f_(f) {}
  std::string_view Get(std::string_view name) const override {
    const auto it = f_.find(std::string(name));
    return it == f_.end() ? std::string_view() : std::string_view(it->second);
  }
  std::vector<std::string_view> All(std::string_view name) const override {
    std::vector<std::string_view> out;
    const auto [first, last] = f_.equal_range(std::string(name));
    for (auto it = first; it != last; ++it) out.push_back(it->second);
    return out;
  }

 private:
  std::multimap<std::string, std::string> f_;
};

TEST(PageLanguageTest, TagsMatchByLanguageIgnoringRegionAndCase) {
  EXPECT_EQ(LanguageOfTag("de"), Lang::kDe);
  EXPECT_EQ(LanguageOfTag("de-CH"), Lang::kDe);
  EXPECT_EQ(LanguageOfTag("FR-ca"), Lang::kFr);
  EXPECT_EQ(LanguageOfTag("es-419"), Lang::kEs);
  EXPECT_EQ(LanguageOfTag("ja-JP"), Lang::kJa);
  EXPECT_EQ(LanguageOfTag("en-GB"), Lang::kEn);
}

TEST(PageLanguageTest, OnlySimplifiedChineseIsChinese) {
  for (const char* tag : {"zh", "zh-CN", "zh-Hans", "zh-hans-CN", "zh-SG"}) {
    EXPECT_EQ(LanguageOfTag(tag), Lang::kZhHans) << tag;
  }
  for (const char* tag : {"zh-TW", "zh-Hant", "zh-HK", "zh-Hant-TW"}) {
    EXPECT_EQ(LanguageOfTag(tag), std::nullopt) << tag;
  }
}

TEST(PageLanguageTest, WildcardAndUnknownAreNotALanguage) {
  EXPECT_EQ(LanguageOfTag("*"), std::nullopt);
  EXPECT_EQ(LanguageOfTag("pt-BR"), std::nullopt);
  EXPECT_EQ(LanguageOfTag(""), std::nullopt);
  EXPECT_EQ(LanguageOfAcceptLanguage("*"), Lang::kEn);
  EXPECT_EQ(LanguageOfAcceptLanguage("pt-BR, nl;q=0.8"), Lang::kEn);
  EXPECT_EQ(LanguageOfAcceptLanguage(""), Lang::kEn);
}

TEST(PageLanguageTest, HighestQValueWinsAndEarlierBreaksTies) {
  EXPECT_EQ(LanguageOfAcceptLanguage("fr;q=0.5, de;q=0.9, ja;q=0.7"), Lang::kDe);
  EXPECT_EQ(LanguageOfAcceptLanguage("ja, fr"), Lang::kJa);
  EXPECT_EQ(LanguageOfAcceptLanguage("pt-BR, de-AT;q=0.8, en;q=0.5"), Lang::kDe);
  // English is a language like the others: asked for first, it wins.
  EXPECT_EQ(LanguageOfAcceptLanguage("en-US,en;q=0.9,de;q=0.8"), Lang::kEn);
  EXPECT_EQ(LanguageOfAcceptLanguage("zh-CN,zh;q=0.9"), Lang::kZhHans);
}

TEST(PageLanguageTest, QZeroRefusesAndMalformedWeightsAreIgnored) {
  EXPECT_EQ(LanguageOfAcceptLanguage("de;q=0, fr;q=0.1"), Lang::kFr);
  EXPECT_EQ(LanguageOfAcceptLanguage("de;q=2, es;q=0.3"), Lang::kEs);
  EXPECT_EQ(LanguageOfAcceptLanguage("de;q=abc, es;q=0.3"), Lang::kEs);
  EXPECT_EQ(LanguageOfAcceptLanguage("de;level=1, es;q=0.3"), Lang::kEs);
  EXPECT_EQ(LanguageOfAcceptLanguage(",,;;q=,de"), Lang::kDe);
}

TEST(PageLanguageTest, TheCookieWinsOverAcceptLanguage) {
  EXPECT_EQ(PageLanguage(Fields{{"Accept-Language", "de"}, {"Cookie", "a=1; sluice_lang=ja"}}),
            Lang::kJa);
  // English chosen in the switch stays English for a German browser.
  EXPECT_EQ(PageLanguage(Fields{{"Accept-Language", "de"}, {"Cookie", "sluice_lang=en"}}),
            Lang::kEn);
  EXPECT_EQ(PageLanguage(Fields{{"Cookie", "sluice_lang=zh-Hans"}}), Lang::kZhHans);
}

TEST(PageLanguageTest, ACookieThatIsNoShippedLanguageIsIgnored) {
  for (const char* cookie :
       {"sluice_lang=xx", "sluice_lang=DE", "sluice_lang=", "sluice_lang=de-CH"}) {
    EXPECT_EQ(PageLanguage(Fields{{"Accept-Language", "fr"}, {"Cookie", cookie}}), Lang::kFr)
        << cookie;
  }
}

TEST(PageLanguageTest, EtagsNameTheLanguageButEnglishKeepsItsOwn) {
  EXPECT_EQ(PageEtag("AAAA-auto", Lang::kEn), "\"AAAA-auto\"");
  EXPECT_EQ(PageEtag("AAAA-auto", Lang::kDe), "\"AAAA-auto.de\"");
  EXPECT_EQ(PageEtag("AAAA-diff", Lang::kZhHans), "\"AAAA-diff.zh-Hans\"");
}

}  // namespace
}  // namespace sluice::http
