#include "sluice/service/notice.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::service {
namespace {

constexpr int64_t kNow = 1'800'000'000;

TEST(PasteIdOfLink, ReadsEveryReadRouteAndNothingElse) {
  const std::string id = "AbCdEfGh1234";
  const std::vector<std::string> good = {id,
                                         "https://p.example/" + id,
                                         "http://p.example:8080/" + id + "/",
                                         "https://p.example/raw/" + id,
                                         "https://p.example/documents/" + id,
                                         "https://p.example/api/v1/pastes/" + id,
                                         "https://p.example/" + id + "/diff",
                                         "https://p.example/" + id + "/rendered",
                                         "https://p.example/new?lang=de&from=" + id,
                                         "https://p.example/" + id + "#secret-key",
                                         "https://p.example/report/" + id};
  for (const std::string& link : good) EXPECT_EQ(PasteIdOfLink(link), id) << link;
  const std::vector<std::string> bad = {"AbCdEfGh123",
                                        "ftp://p.example/" + id,
                                        "https://p.example/x/" + id,
                                        "https://p.example/abuse/case/4711",
                                        "https://p.example/" + id + "/other",
                                        "https://p.example/new?from=bad",
                                        "https:///" + id,
                                        ""};
  for (const std::string& link : bad) EXPECT_FALSE(PasteIdOfLink(link)) << link;
}

TEST(PasteLinksIn, FindsLinksInTextEachOnceInOrder) {
  const std::string text =
      "see https://p.example/AbCdEfGh0001, and <https://p.example/raw/AbCdEfGh0002>.\n"
      "again (https://p.example/AbCdEfGh0001) and href=\"https://p.example/AbCdEfGh0003/rendered\""
      " but not https://hoster.example/case/4711 nor httpx";
  EXPECT_EQ(PasteLinksIn(text),
            (std::vector<std::string>{"AbCdEfGh0001", "AbCdEfGh0002", "AbCdEfGh0003"}));
}

TEST(ParseNoticeDeadline, TakesRfc3339AndDurations) {
  EXPECT_EQ(*ParseNoticeDeadline("2026-12-31T23:00:00Z", kNow), 1798758000);
  EXPECT_EQ(*ParseNoticeDeadline("2026-12-31T23:00:00.250Z", kNow), 1798758000);
  EXPECT_EQ(*ParseNoticeDeadline("2027-01-01T00:00:00+01:00", kNow), 1798758000);
  EXPECT_EQ(*ParseNoticeDeadline("2026-12-31T22:00:00-01:00", kNow), 1798758000);
  EXPECT_EQ(*ParseNoticeDeadline("1h", kNow), kNow + 3600);
  EXPECT_EQ(*ParseNoticeDeadline("2d", kNow), kNow + 2 * 86400);
  for (const char* bad : {"", "soon", "2026-12-31", "2026-12-31T23:00:00", "0s", "-1h",
                          "2026-12-31T23:00:00+1:00", "2026-12-31T23:00:00Zjunk", "99999d"}) {
    auto at = ParseNoticeDeadline(bad, kNow);
    ASSERT_FALSE(at.ok()) << bad;
    EXPECT_EQ(at.error().reason, "bad_deadline") << bad;
  }
}

TEST(ParseNoticeJson, TakesAWholeNoticeAndDropsRepeatedPastes) {
  auto n = ParseNoticeJson(
      R"({"sender": "abuse@h.example", "sender_kind": "hosting", "reference": "C-1",
          "category": "malware",
          "pastes": ["https://p.example/AbCdEfGh1234", "AbCdEfGh1234", "AbCdEfGh1235"],
          "deadline": "2h"})",
      kNow);
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ(n->sender, "abuse@h.example");
  EXPECT_EQ(n->sender_kind, "hosting");
  EXPECT_EQ(n->category, "malware");
  EXPECT_EQ(n->pastes, (std::vector<std::string>{"AbCdEfGh1234", "AbCdEfGh1235"}));
  EXPECT_EQ(n->deadline_at, kNow + 7200);
  auto plain =
      ParseNoticeJson(R"({"sender": "s", "reference": "r", "pastes": ["AbCdEfGh1234"]})", kNow);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->category, "other");
  EXPECT_EQ(plain->sender_kind, "");
  EXPECT_FALSE(plain->deadline_at);
}

TEST(ParseNoticeJson, RefusesEachBadFieldByName) {
  const struct {
    const char* body;
    const char* reason;
  } cases[] = {
      {"", "bad_json"},
      {"[]", "bad_json"},
      {R"({"sender": "s", "reference": "r", "pastes": ["AbCdEfGh1234"], "x": "y"})", "bad_json"},
      {R"({"sender": 1, "reference": "r", "pastes": ["AbCdEfGh1234"]})", "bad_json"},
      {R"({"reference": "r", "pastes": ["AbCdEfGh1234"]})", "bad_sender"},
      {R"({"sender": "s\u0007", "reference": "r", "pastes": ["AbCdEfGh1234"]})", "bad_sender"},
      {R"({"sender": "s", "pastes": ["AbCdEfGh1234"]})", "bad_reference"},
      {R"({"sender": "s", "reference": "r", "pastes": []})", "bad_pastes"},
      {R"({"sender": "s", "reference": "r", "pastes": "AbCdEfGh1234"})", "bad_pastes"},
      {R"({"sender": "s", "reference": "r", "pastes": [7]})", "bad_pastes"},
      {R"({"sender": "s", "reference": "r", "pastes": ["https://x.example/a/b"]})", "bad_pastes"},
      {R"({"sender": "s", "reference": "r", "category": "nope", "pastes": ["AbCdEfGh1234"]})",
       "bad_category"},
      {R"({"sender": "s", "sender_kind": "neighbour", "reference": "r", "pastes": ["AbCdEfGh1234"]})",
       "bad_sender_kind"},
      {R"({"sender": "s", "sender_kind": 3, "reference": "r", "pastes": ["AbCdEfGh1234"]})",
       "bad_json"},
  };
  for (const auto& c : cases) {
    auto n = ParseNoticeJson(c.body, kNow);
    ASSERT_FALSE(n.ok()) << c.body;
    EXPECT_EQ(n.error().reason, c.reason) << c.body;
  }
  std::string many = R"({"sender": "s", "reference": "r", "pastes": [)";
  for (int i = 0; i <= static_cast<int>(kMaxNoticePastes); ++i) {
    many += (i ? "," : "") + std::string("\"AbCdEfGh") + std::to_string(1000 + i) + "\"";
  }
  many += "]}";
  auto n = ParseNoticeJson(many, kNow);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().reason, "too_many_pastes");
}

}  // namespace
}  // namespace sluice::service
