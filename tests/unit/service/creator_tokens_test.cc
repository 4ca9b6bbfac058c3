// Creator tokens (docs/admission.md, "Creator tokens"): a token's own buckets in AdmissionControl,
// and the in-memory copy of the tokens (CreatorTokens) that a create looks its secret up in.
#include "sluice/service/creator_tokens.h"

#include <gtest/gtest.h>

#include "../../support/run_sync.h"
#include "sluice/service/admission_control.h"
#include "sluice/service/ids.h"
#include "sluice/store/backends.h"

namespace sluice::service {
namespace {

using testing::RunSync;

class TokenBudgetTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  MetricsRegistry metrics_;

  static AdmissionOptions Small() {
    AdmissionOptions o;
    o.ip_create_count = {1, 3};
    o.ip_create_bytes = {1000, 5000};
    o.global_create_count = {100, 100};
    o.global_create_bytes = {1e6, 1e6};
    o.create_slots = 50;
    o.create_slots_per_client = 50;
    o.create_slots_per_network = 50;
    o.create_slot_bytes = 1'000'000;
    return o;
  }
  static admission::TokenBudget Budget(double rate, double burst) {
    return admission::TokenBudget{{rate, burst}, std::nullopt};
  }
  // Creates admitted in a row for `key` (each slot given back at once), up to `most`.
  int AdmittedInARow(AdmissionControl& a, const std::string& key,
                     std::optional<admission::TokenBudget> own, int most, std::string* refusal) {
    for (int i = 0; i < most; ++i) {
      auto admitted = RunSync(a.AdmitCreate(key, 10, nullptr, own));
      if (!admitted.ok()) {
        if (refusal) *refusal = admitted.error().reason;
        return i;
      }
    }
    return most;
  }
};

TEST_F(TokenBudgetTest, ATokenHasItsOwnBucketAtItsOwnRateAndBurst) {
  AdmissionControl a(Small(), clock_, metrics_);
  std::string refusal;
  // Burst 20, not the address's 3.
  EXPECT_EQ(AdmittedInARow(a, "token:ci/AAAAAAAA", Budget(10, 20), 100, &refusal), 20);
  EXPECT_EQ(refusal, "token_create_count");
  // 10/s, not the address's 1/s: half a second gives back 5.
  clock_.Advance(std::chrono::milliseconds(500));
  EXPECT_EQ(AdmittedInARow(a, "token:ci/AAAAAAAA", Budget(10, 20), 100, nullptr), 5);
  // Another token has its own bucket, full.
  EXPECT_EQ(AdmittedInARow(a, "token:ci/BBBBBBBB", Budget(10, 20), 100, nullptr), 20);
}

TEST_F(TokenBudgetTest, ATokenSpendsNothingOfItsAddressesBucketNorTheAddressOfIt) {
  AdmissionControl a(Small(), clock_, metrics_);
  // The address, alone, has its burst of 3.
  ASSERT_EQ(AdmittedInARow(a, "203.0.113.7", std::nullopt, 3, nullptr), 3);
  // Its bucket is empty, yet a token used from it creates on the token's budget.
  EXPECT_EQ(AdmittedInARow(a, "token:ci/AAAAAAAA", Budget(10, 20), 20, nullptr), 20);
  std::string refusal;
  EXPECT_EQ(AdmittedInARow(a, "203.0.113.7", std::nullopt, 1, &refusal), 0);
  EXPECT_EQ(refusal, "ip_create_count");
  // And the token's creates took nothing from an address that had not created.
  EXPECT_EQ(AdmittedInARow(a, "203.0.113.8", std::nullopt, 3, nullptr), 3);
}

TEST_F(TokenBudgetTest, ATokenStaysInsideTheGlobalCapAndGetsItsTokensBack) {
  AdmissionOptions o = Small();
  o.global_create_count = {1, 5};
  AdmissionControl a(o, clock_, metrics_);
  std::string refusal;
  EXPECT_EQ(AdmittedInARow(a, "token:ci/AAAAAAAA", Budget(1000, 1000), 100, &refusal), 5);
  EXPECT_EQ(refusal, "global_count");
  // The refused create's token went back to the token's bucket: after a second the global cap
  // admits one, and the token still has 1000 - 5 of its own.
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(AdmittedInARow(a, "token:ci/AAAAAAAA", Budget(1000, 1000), 100, nullptr), 1);
}

TEST_F(TokenBudgetTest, ATokensOwnByteBudgetReplacesTheAddresses) {
  AdmissionControl a(Small(), clock_, metrics_);
  // 6000 bytes is over the address's 5000-byte burst ...
  auto refused = RunSync(a.AdmitCreate("token:big/AAAAAAAA", 6000, nullptr, Budget(10, 20)));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().reason, "token_create_bytes");
  // ... and within a token's own.
  admission::TokenBudget big = Budget(10, 20);
  big.bytes = admission::TokenBucketPolicy{1e6, 2e7};
  EXPECT_TRUE(RunSync(a.AdmitCreate("token:big/BBBBBBBB", 6000, nullptr, big)).ok());
}

TEST_F(TokenBudgetTest, TheReservedShareKeepsPartOfTheGlobalBurstForTokens) {
  AdmissionOptions o = Small();
  o.global_create_count = {1, 10};
  o.token_reserved_share = 0.5;
  AdmissionControl a(o, clock_, metrics_);
  // Anonymous creates, each from its own address: they stop where 5 of the 10 would be left.
  int anonymous = 0;
  std::string refusal;
  for (int i = 0; i < 20; ++i) {
    anonymous += AdmittedInARow(a, "198.51.100." + std::to_string(i), std::nullopt, 1, &refusal);
  }
  EXPECT_EQ(anonymous, 5);
  EXPECT_EQ(refusal, "global_count");
  // The rest is a token's to take.
  EXPECT_EQ(AdmittedInARow(a, "token:ci/AAAAAAAA", Budget(100, 100), 100, &refusal), 5);
  EXPECT_EQ(refusal, "global_count");
}

TEST_F(TokenBudgetTest, NoReservedShareByDefault) {
  AdmissionOptions o = Small();
  o.global_create_count = {1, 10};
  AdmissionControl a(o, clock_, metrics_);
  int anonymous = 0;
  for (int i = 0; i < 20; ++i) {
    anonymous += AdmittedInARow(a, "198.51.100." + std::to_string(i), std::nullopt, 1, nullptr);
  }
  EXPECT_EQ(anonymous, 10);
}

class CreatorTokensTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  MetricsRegistry metrics_;
  std::unique_ptr<store::MetaStore> meta_ = store::MakeMemoryMetaStore();

  static CreatorTokenRequest Ci() {
    CreatorTokenRequest r;
    r.label = "ci";
    r.rate = 10;
    r.burst = 100;
    return r;
  }
};

TEST_F(CreatorTokensTest, AMintedSecretIsFoundWithItsBudgetAndOnlyItsHashIsStored) {
  CreatorTokens tokens(*meta_, clock_, metrics_, {});
  auto minted = RunSync(tokens.Create(Ci()));
  ASSERT_TRUE(minted.ok()) << minted.error().message;
  EXPECT_TRUE(CreatorTokens::IsSecretText(minted->secret));
  auto found = tokens.Find(minted->secret);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->id, minted->token.id);
  EXPECT_EQ(found->label, "ci");
  EXPECT_DOUBLE_EQ(found->budget.count.rate_per_second, 10);
  EXPECT_DOUBLE_EQ(found->budget.count.burst, 100);
  EXPECT_FALSE(found->budget.bytes.has_value());
  auto stored =
      RunSync(meta_->CreatorTokens(admission::Deadline::After(clock_, std::chrono::seconds(1))));
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->tokens.size(), 1u);
  const auto& row = stored->tokens[0];
  EXPECT_EQ(row.secret_sha256, HashDeleteToken(minted->secret));
  // Nothing of the row holds the secret's text.
  for (const std::string& field : {row.id, row.label}) {
    EXPECT_EQ(field.find(minted->secret.substr(4, 8)), std::string::npos);
  }
}

TEST_F(CreatorTokensTest, UnknownMalformedRevokedAndExpiredSecretsAreNotFound) {
  CreatorTokens tokens(*meta_, clock_, metrics_, {});
  CreatorTokenRequest brief = Ci();
  brief.expires_in = 60;
  auto minted = RunSync(tokens.Create(brief));
  ASSERT_TRUE(minted.ok());
  EXPECT_FALSE(tokens.Find("slt_" + std::string(43, 'A')).has_value());  // well formed, unknown
  EXPECT_FALSE(tokens.Find("not-a-token").has_value());
  EXPECT_FALSE(tokens.Find(minted->secret + "x").has_value());
  EXPECT_TRUE(tokens.Find(minted->secret).has_value());
  clock_.Advance(std::chrono::seconds(60));
  EXPECT_FALSE(tokens.Find(minted->secret).has_value());  // expired, with nothing reread

  auto second = RunSync(tokens.Create(Ci()));
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(tokens.Find(second->secret).has_value());
  auto revoked = RunSync(tokens.Revoke(second->token.id));
  ASSERT_TRUE(revoked.ok());
  EXPECT_TRUE(*revoked);
  EXPECT_FALSE(tokens.Find(second->secret).has_value());
}

TEST_F(CreatorTokensTest, AnotherProcessesRevocationCountsAtTheNextRefresh) {
  // Two processes sharing one store: `here` mints, `there` revokes.
  CreatorTokens here(*meta_, clock_, metrics_, {});
  MetricsRegistry other_metrics;
  CreatorTokens there(*meta_, clock_, other_metrics, {});
  auto minted = RunSync(here.Create(Ci()));
  ASSERT_TRUE(minted.ok());
  EXPECT_FALSE(there.Find(minted->secret).has_value());  // not read yet
  ASSERT_TRUE(RunSync(there.Refresh()).ok());
  EXPECT_TRUE(there.Find(minted->secret).has_value());
  ASSERT_TRUE(RunSync(there.Revoke(minted->token.id)).ok());
  EXPECT_TRUE(here.Find(minted->secret).has_value());  // until its next poll
  ASSERT_TRUE(RunSync(here.Refresh()).ok());
  EXPECT_FALSE(here.Find(minted->secret).has_value());
}

TEST_F(CreatorTokensTest, BadRequestsAndTheCapAreRefused) {
  CreatorTokensOptions options;
  options.max_tokens = 1;
  CreatorTokens tokens(*meta_, clock_, metrics_, options);
  CreatorTokenRequest bad = Ci();
  bad.label = "has space";
  EXPECT_EQ(RunSync(tokens.Create(bad)).error().code, ErrorCode::kInvalidArgument);
  bad = Ci();
  bad.rate = 0;
  EXPECT_EQ(RunSync(tokens.Create(bad)).error().code, ErrorCode::kInvalidArgument);
  bad = Ci();
  bad.burst = 0.5;
  EXPECT_EQ(RunSync(tokens.Create(bad)).error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(RunSync(tokens.Create(Ci())).ok());
  auto full = RunSync(tokens.Create(Ci()));
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().reason, store::kCreatorTokensFull);
}

TEST_F(CreatorTokensTest, ATokensCreatesAreCountedByLabelNeverBySecret) {
  CreatorTokens tokens(*meta_, clock_, metrics_, {});
  auto minted = RunSync(tokens.Create(Ci()));
  ASSERT_TRUE(minted.ok());
  tokens.NoteCreate(minted->token.id);
  tokens.NoteCreate(minted->token.id);
  EXPECT_EQ(
      metrics_.GetCounter("sluice_creator_token_creates_total", "", {{"token", "ci"}}).value(), 2u);
  const std::string rendered = metrics_.Render();
  EXPECT_EQ(rendered.find(minted->secret), std::string::npos);
  EXPECT_EQ(rendered.find(minted->secret.substr(4)), std::string::npos);
}

}  // namespace
}  // namespace sluice::service
