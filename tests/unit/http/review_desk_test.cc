// The review page's sign-in (src/http/review_desk.h) on a manual clock: sessions that expire and
// cannot be forged, form tokens bound to who they were shown to, and the sign-in budgets.
#include "../../../src/http/review_desk.h"

#include <gtest/gtest.h>

#include "sluice/service/ids.h"

namespace sluice::http {
namespace {

ReviewDesk::Key TokenDigest(std::string_view token) { return service::HashDeleteToken(token); }

TEST(ReviewDesk, ASessionLastsItsLifetimeAndNoLonger) {
  ManualClock clock;
  ReviewDesk desk(TokenDigest("an-admin-token-0123456789"), clock);
  const std::string cookie = desk.OpenSession();
  const std::optional<std::string> id = desk.SessionOf(cookie);
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(id->size(), 32u);
  clock.Advance(ReviewDesk::kSessionLifetime - std::chrono::seconds(1));
  EXPECT_EQ(desk.SessionOf(cookie), id);
  clock.Advance(std::chrono::seconds(1));
  EXPECT_FALSE(desk.SessionOf(cookie).has_value());
}

TEST(ReviewDesk, ACookieIsNeitherTheTokenNorForgeable) {
  ManualClock clock;
  const std::string token = "an-admin-token-0123456789";
  ReviewDesk desk(TokenDigest(token), clock);
  const std::string cookie = desk.OpenSession();
  EXPECT_EQ(cookie.find(token), std::string::npos);
  const size_t dot = cookie.find('.');
  // A later expiry under the same MAC, a flipped MAC digit, the token itself, nonsense.
  std::string later = cookie;
  later[dot - 1] = later[dot - 1] == '9' ? '8' : '9';
  std::string flipped = cookie;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  for (const std::string& forged : {later, flipped, token, std::string(), std::string("1.2.3"),
                                    cookie + "0", "99999999999999999999" + cookie.substr(dot)}) {
    EXPECT_FALSE(desk.SessionOf(forged).has_value()) << forged;
  }
  // Another token (a new token file) is another key: every old session ends.
  ReviewDesk rotated(TokenDigest("another-admin-token-0123"), clock);
  EXPECT_FALSE(rotated.SessionOf(cookie).has_value());
  // The same token file on another process: the same key, the session holds.
  ReviewDesk fleet(TokenDigest(token), clock);
  EXPECT_TRUE(fleet.SessionOf(cookie).has_value());
}

TEST(ReviewDesk, AFormTokenIsItsOwnersOnly) {
  ManualClock clock;
  ReviewDesk desk(TokenDigest("an-admin-token-0123456789"), clock);
  const std::string alice = desk.FormToken("user:alice");
  EXPECT_EQ(alice.size(), 64u);
  EXPECT_TRUE(desk.IsFormToken("user:alice", alice));
  EXPECT_FALSE(desk.IsFormToken("user:bob", alice));
  EXPECT_FALSE(desk.IsFormToken("user:alice", ""));
  EXPECT_FALSE(desk.IsFormToken("user:alice", alice.substr(0, 63)));
  // A form token is never a session's MAC: the two are made under different labels.
  const std::string cookie = desk.OpenSession();
  const std::string id = *desk.SessionOf(cookie);
  EXPECT_NE(cookie.substr(cookie.rfind('.') + 1), desk.FormToken("session:" + id));
}

TEST(ReviewDesk, WithoutATokenTheKeyIsThisProcesssOwn) {
  ManualClock clock;
  ReviewDesk one(std::nullopt, clock);
  ReviewDesk two(std::nullopt, clock);
  const std::string cookie = one.OpenSession();
  EXPECT_TRUE(one.SessionOf(cookie).has_value());
  EXPECT_FALSE(two.SessionOf(cookie).has_value());
}

TEST(ReviewDesk, SignInsAreBudgetedPerClientAndForEveryone) {
  ManualClock clock;
  ReviewDesk desk(TokenDigest("an-admin-token-0123456789"), clock);
  const auto per_client = ReviewDesk::kLoginPerClient;
  for (int i = 0; i < static_cast<int>(per_client.burst); ++i) {
    EXPECT_TRUE(desk.AdmitLogin("203.0.113.5").allowed) << i;
  }
  const admission::TakeDecision refused = desk.AdmitLogin("203.0.113.5");
  EXPECT_FALSE(refused.allowed);
  EXPECT_NEAR(ToSeconds(refused.retry_after), 1 / per_client.rate_per_second, 0.5);
  clock.Advance(std::chrono::seconds(static_cast<int>(1 / per_client.rate_per_second)));
  EXPECT_TRUE(desk.AdmitLogin("203.0.113.5").allowed);

  // Many strangers: the global bucket, refilled to its burst by the wait above less the one take
  // since, then refused whatever their addresses.
  int admitted = 0;
  for (int i = 0; i < 100; ++i) {
    if (desk.AdmitLogin("198.51.100." + std::to_string(i)).allowed) ++admitted;
  }
  EXPECT_EQ(admitted, static_cast<int>(ReviewDesk::kLoginGlobal.burst) - 1);
  // A client never seen is refused too, until the global bucket refills (one a second).
  EXPECT_FALSE(desk.AdmitLogin("192.0.2.1").allowed);
  clock.Advance(std::chrono::seconds(1));
  EXPECT_TRUE(desk.AdmitLogin("192.0.2.1").allowed);
}

}  // namespace
}  // namespace sluice::http
