// Who may create (include/sluice/admission/create_access.h): each mode against each kind of
// creator, the names a forward-auth header may give, and the budget key that keeps a name apart
// from every address. Nothing here depends on time.
#include "sluice/admission/create_access.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::admission {
namespace {

CreateAccessPolicy Policy(CreateAccess mode, std::vector<std::string> networks = {}) {
  std::vector<Cidr> blocks;
  for (const std::string& n : networks) blocks.push_back(*Cidr::Parse(n));
  return {mode, std::make_shared<const PrefixSet>(blocks)};
}

const Creator kAnonymousOutside{"203.0.113.7", {}, {}};
const Creator kAnonymousInside{"10.1.2.3", {}, {}};
const Creator kNamedOutside{"203.0.113.7", "alice@example.org", {}};

TEST(CreateAccessTest, AnyoneTakesEveryCreator) {
  const CreateAccessPolicy p = Policy(CreateAccess::kAnyone);
  EXPECT_EQ(DecideCreateAccess(p, kAnonymousOutside), AccessVerdict::kAllowed);
  EXPECT_EQ(DecideCreateAccess(p, Creator{"unix", {}, {}}), AccessVerdict::kAllowed);
}

TEST(CreateAccessTest, TokensTakesOnlyANamedCreatorAndAsksTheRestForACredential) {
  const CreateAccessPolicy p = Policy(CreateAccess::kTokens, {"10.0.0.0/8"});
  EXPECT_EQ(DecideCreateAccess(p, kNamedOutside), AccessVerdict::kAllowed);
  // The allow-list plays no part in tokens mode.
  EXPECT_EQ(DecideCreateAccess(p, kAnonymousInside), AccessVerdict::kCredentialRequired);
  EXPECT_EQ(DecideCreateAccess(p, kAnonymousOutside), AccessVerdict::kCredentialRequired);
}

TEST(CreateAccessTest, NetworksTakesOnlyAddressesInTheListWhateverTheName) {
  const CreateAccessPolicy p = Policy(CreateAccess::kNetworks, {"10.0.0.0/8", "2001:db8::/32"});
  EXPECT_EQ(DecideCreateAccess(p, kAnonymousInside), AccessVerdict::kAllowed);
  EXPECT_EQ(DecideCreateAccess(p, Creator{"2001:db8:1:2::/64", {}, {}}), AccessVerdict::kAllowed);
  EXPECT_EQ(DecideCreateAccess(p, kAnonymousOutside), AccessVerdict::kNetworkNotAllowed);
  EXPECT_EQ(DecideCreateAccess(p, kNamedOutside), AccessVerdict::kNetworkNotAllowed);
  EXPECT_EQ(DecideCreateAccess(p, Creator{"2001:db9::/64", {}, {}}),
            AccessVerdict::kNetworkNotAllowed);
  // A key that is no address (a Unix socket's peer) is in no network.
  EXPECT_EQ(DecideCreateAccess(p, Creator{"unix", {}, {}}), AccessVerdict::kNetworkNotAllowed);
}

TEST(CreateAccessTest, NetworksWithNoListRefusesEveryone) {
  const CreateAccessPolicy empty{CreateAccess::kNetworks, nullptr};
  EXPECT_EQ(DecideCreateAccess(empty, kAnonymousInside), AccessVerdict::kNetworkNotAllowed);
}

TEST(CreateAccessTest, TokensOrNetworksTakesEitherAndAsksTheRestForACredential) {
  const CreateAccessPolicy p = Policy(CreateAccess::kTokensOrNetworks, {"10.0.0.0/8"});
  EXPECT_EQ(DecideCreateAccess(p, kAnonymousInside), AccessVerdict::kAllowed);
  EXPECT_EQ(DecideCreateAccess(p, kNamedOutside), AccessVerdict::kAllowed);
  EXPECT_EQ(DecideCreateAccess(p, kAnonymousOutside), AccessVerdict::kCredentialRequired);
}

TEST(CreateAccessTest, ModeNamesRoundTripAndNothingElseParses) {
  for (CreateAccess mode : {CreateAccess::kAnyone, CreateAccess::kTokens, CreateAccess::kNetworks,
                            CreateAccess::kTokensOrNetworks}) {
    EXPECT_EQ(ParseCreateAccess(CreateAccessName(mode)), mode);
  }
  EXPECT_EQ(CreateAccessName(CreateAccess::kTokensOrNetworks), "tokens_or_networks");
  EXPECT_FALSE(ParseCreateAccess("Anyone"));
  EXPECT_FALSE(ParseCreateAccess(""));
}

TEST(CreateAccessTest, ForwardedUserTakesLoginsAndAddressesAndRefusesJunk) {
  EXPECT_TRUE(IsValidForwardedUser("alice"));
  EXPECT_TRUE(IsValidForwardedUser("alice.smith+paste@example.org"));
  EXPECT_TRUE(IsValidForwardedUser("svc_ci-01"));
  EXPECT_TRUE(IsValidForwardedUser(std::string(kMaxForwardedUserBytes, 'a')));
  EXPECT_FALSE(IsValidForwardedUser(""));
  EXPECT_FALSE(IsValidForwardedUser(std::string(kMaxForwardedUserBytes + 1, 'a')));
  EXPECT_FALSE(IsValidForwardedUser("alice smith"));
  EXPECT_FALSE(IsValidForwardedUser("alice,bob"));
  EXPECT_FALSE(IsValidForwardedUser("alice\r\nX-Evil: 1"));
  EXPECT_FALSE(IsValidForwardedUser("al\"ice"));
  EXPECT_FALSE(IsValidForwardedUser("jos\xc3\xa9"));
  EXPECT_FALSE(IsValidForwardedUser("user:alice"));
}

TEST(CreateAccessTest, ANameIsBudgetedApartFromEveryAddress) {
  EXPECT_EQ(kAnonymousOutside.BudgetKey(), "203.0.113.7");
  EXPECT_EQ(kNamedOutside.BudgetKey(), "user:alice@example.org");
  // Two names behind one address are two keys; one name from two addresses is one.
  const Creator bob{"203.0.113.7", "bob", {}};
  const Creator bob_elsewhere{"198.51.100.1", "bob", {}};
  EXPECT_NE(bob.BudgetKey(), kNamedOutside.BudgetKey());
  EXPECT_EQ(bob.BudgetKey(), bob_elsewhere.BudgetKey());
  // No address key parses as a name's key or the other way round.
  EXPECT_FALSE(Cidr::Parse(bob.BudgetKey()));
}

Creator WithToken(std::string address, std::string label, std::string id) {
  Creator c{std::move(address), {}, {}};
  c.token = PresentedToken{std::move(id), std::move(label), TokenBudget{{10, 100}, std::nullopt}};
  return c;
}

TEST(CreateAccessTest, ATokenHolderHoldsACredentialInEveryMode) {
  const Creator holder = WithToken("203.0.113.7", "ci", "AbCdEf12");
  EXPECT_TRUE(holder.HoldsCredential());
  EXPECT_EQ(DecideCreateAccess(Policy(CreateAccess::kAnyone), holder), AccessVerdict::kAllowed);
  EXPECT_EQ(DecideCreateAccess(Policy(CreateAccess::kTokens), holder), AccessVerdict::kAllowed);
  EXPECT_EQ(DecideCreateAccess(Policy(CreateAccess::kTokensOrNetworks, {"10.0.0.0/8"}), holder),
            AccessVerdict::kAllowed);
  // A token is no network: `networks` asks for the address, whatever the token.
  EXPECT_EQ(DecideCreateAccess(Policy(CreateAccess::kNetworks, {"10.0.0.0/8"}), holder),
            AccessVerdict::kNetworkNotAllowed);
}

TEST(CreateAccessTest, ATokenIsBudgetedByItsIdWithItsLabelShown) {
  const Creator a = WithToken("203.0.113.7", "ci", "AbCdEf12");
  const Creator a_elsewhere = WithToken("198.51.100.1", "ci", "AbCdEf12");
  const Creator b = WithToken("203.0.113.7", "ci", "ZzZzZz99");
  EXPECT_EQ(a.BudgetKey(), "token:ci/AbCdEf12");
  EXPECT_EQ(a.BudgetKey(), a_elsewhere.BudgetKey());  // one token, one budget, from anywhere
  EXPECT_NE(a.BudgetKey(), b.BudgetKey());            // two tokens of one label, two budgets
  // The token names the creator before a forward-auth name does.
  Creator named = a;
  named.forwarded_user = "alice";
  EXPECT_EQ(named.BudgetKey(), a.BudgetKey());
  EXPECT_FALSE(Cidr::Parse(a.BudgetKey()));
}

}  // namespace
}  // namespace sluice::admission
