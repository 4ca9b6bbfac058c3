#include "../../../src/http/access_log.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>

namespace sluice::http {
namespace {

admission::TrustedProxies Trusting(const std::string& entry) {
  const std::string entries[] = {entry};
  return *admission::TrustedProxies::Parse(entries);
}

bool Minted(const std::string& id) {
  return id.size() == 16 && id.find_first_not_of("0123456789abcdef") == std::string::npos;
}

TEST(ClientKeyPrefixTest, KeepsAnIpv4KeysSlash24) {
  EXPECT_EQ(ClientKeyPrefix("203.0.113.77"), "203.0.113.0/24");
}

TEST(ClientKeyPrefixTest, KeepsAnIpv6KeysSlash48) {
  EXPECT_EQ(ClientKeyPrefix("2001:db8:1:2::/64"), "2001:db8:1::/48");
  EXPECT_EQ(ClientKeyPrefix("2001:db8::/64"), "2001:db8::/48");
  EXPECT_EQ(ClientKeyPrefix("fe80::/64"), "fe80::/48");
  EXPECT_EQ(ClientKeyPrefix("::/64"), "::/48");
}

TEST(ClientKeyPrefixTest, SaysNothingOfAKeyItCannotRead) {
  EXPECT_EQ(ClientKeyPrefix(""), "?");
  EXPECT_EQ(ClientKeyPrefix("localhost"), "?");
}

TEST(RequestIdTest, ATrustedProxysWellFormedIdIsKept) {
  EXPECT_EQ(RequestIdFor("lb-1:abc.def", "10.0.0.5", Trusting("10.0.0.0/8")), "lb-1:abc.def");
}

TEST(RequestIdTest, AnyOtherPeersIdIsReplaced) {
  const std::string id = RequestIdFor("chosen", "192.0.2.1", Trusting("10.0.0.0/8"));
  EXPECT_TRUE(Minted(id)) << id;
  EXPECT_TRUE(Minted(RequestIdFor("chosen", "10.0.0.5", admission::TrustedProxies())));
}

TEST(RequestIdTest, AMalformedIdIsReplacedEvenFromATrustedProxy) {
  const auto trusted = Trusting("10.0.0.5");
  for (const std::string& bad : {std::string(), std::string("a b"), std::string(129, 'x'),
                                 std::string("a\"b"), std::string("a\nb")}) {
    EXPECT_TRUE(Minted(RequestIdFor(bad, "10.0.0.5", trusted))) << bad;
  }
  EXPECT_EQ(RequestIdFor(std::string(128, 'x'), "10.0.0.5", trusted), std::string(128, 'x'));
}

TEST(RequestIdTest, MintedIdsDiffer) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(RequestIdFor("", "", admission::TrustedProxies()));
  EXPECT_EQ(ids.size(), 1000u);
}

TEST(AccessLogWantsTest, EveryServerErrorWhateverTheSample) {
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(AccessLogWants(503, 0.0));
    EXPECT_FALSE(AccessLogWants(200, 0.0));
    EXPECT_TRUE(AccessLogWants(429, 1.0));
  }
}

}  // namespace
}  // namespace sluice::http
