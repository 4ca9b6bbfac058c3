#include "sluice/admission/network.h"

#include <gtest/gtest.h>

namespace sluice::admission {
namespace {

TEST(NetworkTest, KeysOfOneSubscriberShareANetwork) {
  const NetworkPrefixes defaults;
  EXPECT_EQ(ClientNetwork("203.0.113.7", defaults), "203.0.113.0/24");
  EXPECT_EQ(ClientNetwork("203.0.113.250", defaults), "203.0.113.0/24");
  EXPECT_EQ(ClientNetwork("2001:db8:1:2::/64", defaults), "2001:db8:1::/48");
  EXPECT_EQ(ClientNetwork("2001:db8:1:ffff::/64", defaults), "2001:db8:1::/48");
  EXPECT_EQ(ClientNetwork("2001:db8:2::/64", defaults), "2001:db8:2::/48");
  EXPECT_EQ(ClientNetwork("198.51.100.9", {16, 32}), "198.51.0.0/16");
  EXPECT_EQ(ClientNetwork("198.51.100.9", {32, 48}), "198.51.100.9/32");
  EXPECT_EQ(ClientNetwork("2001:db8:ab:cd00::/64", {24, 56}), "2001:db8:ab:cd00::/56");
  EXPECT_EQ(ClientNetwork("/run/sluice.sock", defaults), "/run/sluice.sock");
}

TEST(NetworkTest, APackedNetworkMatchesItsOwnAddressesAtItsOwnLength) {
  const auto v4 = PackNetwork("203.0.113.7", {});
  ASSERT_TRUE(v4);
  EXPECT_TRUE(InPackedNetwork("203.0.113.200", *v4));
  EXPECT_FALSE(InPackedNetwork("203.0.114.7", *v4));
  EXPECT_FALSE(InPackedNetwork("::ffff:203.0.112.1", *v4));
  const auto v6 = PackNetwork("2001:db8:1:2::/64", {});
  ASSERT_TRUE(v6);
  EXPECT_NE(*v4, *v6);
  EXPECT_TRUE(InPackedNetwork("2001:db8:1:9999::/64", *v6));
  EXPECT_FALSE(InPackedNetwork("2001:db8:2::/64", *v6));
  EXPECT_FALSE(InPackedNetwork("203.0.113.7", *v6)) << "the other family never matches";
  EXPECT_FALSE(InPackedNetwork("2001:db8:1::/64", *v4));
  // Recorded at /16, compared at /16 whatever the prefixes are now.
  const auto wide = PackNetwork("198.51.100.9", {16, 48});
  ASSERT_TRUE(wide);
  EXPECT_TRUE(InPackedNetwork("198.51.7.7", *wide));
  EXPECT_FALSE(InPackedNetwork("198.52.100.9", *wide));
  const auto whole = PackNetwork("198.51.100.9", {32, 56});
  EXPECT_TRUE(InPackedNetwork("198.51.100.9", *whole));
  EXPECT_FALSE(InPackedNetwork("198.51.100.8", *whole));
  const auto fine = PackNetwork("2001:db8:ab:cd12::/64", {24, 56});
  EXPECT_TRUE(InPackedNetwork("2001:db8:ab:cdff::/64", *fine));
  EXPECT_FALSE(InPackedNetwork("2001:db8:ab:ce00::/64", *fine));
  EXPECT_FALSE(PackNetwork("/run/sluice.sock", {}));
  EXPECT_FALSE(InPackedNetwork("/run/sluice.sock", *v4));
  EXPECT_FALSE(InPackedNetwork("203.0.113.7", 0)) << "no length: no network";
}

}  // namespace
}  // namespace sluice::admission
