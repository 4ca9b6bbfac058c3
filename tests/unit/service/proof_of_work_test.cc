// ProofOfWork (include/sluice/service/proof_of_work.h): a solution buys one create, within its
// expiry, only for a challenge this server signed; the payload is ALTCHA's.
#include "sluice/service/proof_of_work.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "sluice/common/clock.h"
#include "sluice/service/envelope.h"

namespace sluice::service {
namespace {

constexpr char kKey[] = "proof-of-work-test-key-0123456789";

class ProofOfWorkTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  ProofOfWork pow_{kKey, ProofOfWorkOptions{std::chrono::seconds(300), 1000}, clock_};

  std::string Solved(uint64_t maxnumber = 2000) {
    const PowChallenge c = pow_.Issue(maxnumber);
    const std::optional<uint64_t> n = SolvePow(c);
    EXPECT_TRUE(n.has_value());
    return PowPayload(c, n.value_or(0));
  }

  // A payload whose JSON is `edit`ed after it was solved.
  std::string Edited(const std::function<void(nlohmann::json&)>& edit) {
    const PowChallenge c = pow_.Issue(500);
    nlohmann::json doc = {{"algorithm", c.algorithm},
                          {"challenge", c.challenge},
                          {"number", *SolvePow(c)},
                          {"salt", c.salt},
                          {"signature", c.signature}};
    edit(doc);
    return Base64UrlEncode(doc.dump());
  }
};

TEST_F(ProofOfWorkTest, ASolutionBuysOneCreate) {
  const std::string payload = Solved();
  EXPECT_EQ(pow_.Redeem(payload), PowVerdict::kValid);
  EXPECT_EQ(pow_.Redeem(payload), PowVerdict::kReplayed);
  EXPECT_EQ(pow_.Spent(), 1u);
}

TEST_F(ProofOfWorkTest, TheChallengeIsAltchasShape) {
  const PowChallenge c = pow_.Issue(1234);
  const nlohmann::json doc = nlohmann::json::parse(c.ToJson());
  EXPECT_EQ(doc["algorithm"], "SHA-256");
  EXPECT_EQ(doc["maxnumber"], 1234);
  EXPECT_EQ(doc["challenge"].get<std::string>().size(), 64u);
  EXPECT_EQ(doc["signature"].get<std::string>().size(), 64u);
  EXPECT_NE(doc["salt"].get<std::string>().find("?expires="), std::string::npos);
  // The number is the challenge's preimage with the salt, as ALTCHA's solver looks for it.
  const uint64_t n = *SolvePow(c);
  EXPECT_LE(n, 1234u);
  const std::string text = c.salt + std::to_string(n);
  std::array<unsigned char, 32> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
  std::string hex;
  for (unsigned char b : digest) hex += fmt::format("{:02x}", b);
  EXPECT_EQ(hex, c.challenge);
  EXPECT_EQ(PowChallenge::FromJson(c.ToJson())->signature, c.signature);
  EXPECT_FALSE(PowChallenge::FromJson("{\"algorithm\":\"SHA-256\"}").has_value());
}

TEST_F(ProofOfWorkTest, StandardBase64AsBrowsersSendItIsTaken) {
  // ALTCHA's widget sends btoa(JSON): '+', '/' and '=' padding.
  const PowChallenge c = pow_.Issue(300);
  const std::string url = PowPayload(c, *SolvePow(c));
  std::string standard = url;
  for (char& ch : standard) ch = ch == '-' ? '+' : ch == '_' ? '/' : ch;
  while (standard.size() % 4 != 0) standard += '=';
  EXPECT_EQ(pow_.Redeem(standard), PowVerdict::kValid);
}

TEST_F(ProofOfWorkTest, ExpiredAtTheSaltsTimeAndForgottenAfterIt) {
  const std::string payload = Solved();
  const std::string later = Solved();
  EXPECT_EQ(pow_.Redeem(payload), PowVerdict::kValid);
  clock_.Advance(std::chrono::seconds(300));
  EXPECT_EQ(pow_.Redeem(payload), PowVerdict::kReplayed);  // still inside its expiry
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(pow_.Redeem(payload), PowVerdict::kExpired);
  EXPECT_EQ(pow_.Redeem(later), PowVerdict::kExpired);
  // The next valid redeem forgets what expired: the memory holds only the unexpired.
  EXPECT_EQ(pow_.Redeem(Solved()), PowVerdict::kValid);
  EXPECT_EQ(pow_.Spent(), 1u);
}

TEST_F(ProofOfWorkTest, ForgedWrongAndMalformedAreRefusedBeforeAnythingIsRemembered) {
  EXPECT_EQ(
      pow_.Redeem(Edited([](nlohmann::json& d) { d["number"] = d["number"].get<uint64_t>() + 1; })),
      PowVerdict::kWrong);
  // A challenge of the client's own making, with its own preimage: the signature gives it away.
  EXPECT_EQ(pow_.Redeem(Edited([](nlohmann::json& d) { d["challenge"] = std::string(64, 'a'); })),
            PowVerdict::kForged);
  // A later expiry written into the salt breaks the hash the signature covers.
  EXPECT_EQ(pow_.Redeem(
                Edited([](nlohmann::json& d) { d["salt"] = d["salt"].get<std::string>() + "0"; })),
            PowVerdict::kWrong);
  EXPECT_EQ(pow_.Redeem(Edited([](nlohmann::json& d) { d["algorithm"] = "SHA-1"; })),
            PowVerdict::kMalformed);
  EXPECT_EQ(pow_.Redeem(Edited([](nlohmann::json& d) { d["number"] = -1; })),
            PowVerdict::kMalformed);
  EXPECT_EQ(pow_.Redeem(Edited([](nlohmann::json& d) { d.erase("signature"); })),
            PowVerdict::kMalformed);
  EXPECT_EQ(pow_.Redeem(Edited([](nlohmann::json& d) { d["salt"] = "no-expiry"; })),
            PowVerdict::kMalformed);
  EXPECT_EQ(pow_.Redeem("not base64 at all!"), PowVerdict::kMalformed);
  EXPECT_EQ(pow_.Redeem(Base64UrlEncode("[1,2,3]")), PowVerdict::kMalformed);
  EXPECT_EQ(pow_.Redeem(std::string(5000, 'A')), PowVerdict::kMalformed);
  EXPECT_EQ(pow_.Redeem(""), PowVerdict::kMalformed);
  EXPECT_EQ(pow_.Spent(), 0u);
}

TEST_F(ProofOfWorkTest, AnotherKeysChallengeIsForged) {
  ProofOfWork other{"another-key-entirely-0123456789", {}, clock_};
  const PowChallenge c = other.Issue(500);
  EXPECT_EQ(pow_.Redeem(PowPayload(c, *SolvePow(c))), PowVerdict::kForged);
  // Two processes of a fleet with one key take each other's challenges.
  ProofOfWork same{kKey, {}, clock_};
  const PowChallenge d = same.Issue(500);
  EXPECT_EQ(pow_.Redeem(PowPayload(d, *SolvePow(d))), PowVerdict::kValid);
}

TEST_F(ProofOfWorkTest, AFullMemoryRefusesRatherThanForgets) {
  ProofOfWork small{kKey, ProofOfWorkOptions{std::chrono::seconds(60), 2}, clock_};
  const auto solved = [&] {
    const PowChallenge c = small.Issue(100);
    return PowPayload(c, *SolvePow(c));
  };
  const std::string first = solved();
  EXPECT_EQ(small.Redeem(first), PowVerdict::kValid);
  EXPECT_EQ(small.Redeem(solved()), PowVerdict::kValid);
  EXPECT_EQ(small.Redeem(solved()), PowVerdict::kBusy);
  EXPECT_EQ(small.Redeem(first), PowVerdict::kReplayed);  // never forgotten while unexpired
  clock_.Advance(std::chrono::seconds(61));
  EXPECT_EQ(small.Redeem(solved()), PowVerdict::kValid);
}

TEST_F(ProofOfWorkTest, EachSolutionIsSpentOnceAcrossThreads) {
  std::vector<std::string> payloads;
  for (int i = 0; i < 20; ++i) payloads.push_back(Solved(100));
  std::atomic<int> valid{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (const auto& p : payloads) {
        if (pow_.Redeem(p) == PowVerdict::kValid) ++valid;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(valid.load(), 20);
}

TEST(PowDifficultyTest, DoublesAtEachHalvingOfTheShareLeft) {
  EXPECT_EQ(PowDifficulty(1000, 1.0), 1000u);
  EXPECT_EQ(PowDifficulty(1000, 0.5), 1000u);
  EXPECT_EQ(PowDifficulty(1000, 0.49), 2000u);
  EXPECT_EQ(PowDifficulty(1000, 0.25), 2000u);
  EXPECT_EQ(PowDifficulty(1000, 0.2), 4000u);
  EXPECT_EQ(PowDifficulty(1000, 0.1), 8000u);
  EXPECT_EQ(PowDifficulty(1000, 0.0), 8000u);
}

}  // namespace
}  // namespace sluice::service
