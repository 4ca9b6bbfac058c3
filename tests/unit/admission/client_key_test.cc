#include "sluice/admission/client_key.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::admission {
namespace {

TrustedProxies Trust(std::vector<std::string> entries) {
  Result<TrustedProxies> parsed = TrustedProxies::Parse(entries);
  EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.error().message);
  return parsed.ok() ? *parsed : TrustedProxies();
}

std::string Key(std::string_view peer, std::vector<std::string_view> xff,
                const TrustedProxies& trusted) {
  return ClientKey(peer, xff, trusted);
}

TEST(ClientKeyTest, UntrustedPeerIsTheKeyWhateverTheClientWrote) {
  const TrustedProxies trusted = Trust({"10.0.0.0/8"});
  EXPECT_EQ(Key("203.0.113.9", {"1.2.3.4"}, trusted), "203.0.113.9");
  EXPECT_EQ(Key("203.0.113.9", {}, TrustedProxies()), "203.0.113.9");
}

TEST(ClientKeyTest, TrustedPeerUsesTheEntryTheBalancerAppendedNotTheLeftMost) {
  const TrustedProxies trusted = Trust({"10.0.0.0/8"});
  // The client wrote "6.6.6.6"; our balancer appended the address it saw, 198.51.100.7.
  EXPECT_EQ(Key("10.0.0.1", {"6.6.6.6, 198.51.100.7"}, trusted), "198.51.100.7");
}

TEST(ClientKeyTest, SkipsAChainOfTrustedProxiesFromTheRight) {
  const TrustedProxies trusted = Trust({"10.0.0.0/8", "192.168.1.1"});
  EXPECT_EQ(Key("10.0.0.1", {"6.6.6.6,198.51.100.7, 192.168.1.1 ,10.2.3.4"}, trusted),
            "198.51.100.7");
}

TEST(ClientKeyTest, SeveralHeadersAreOneListInArrivalOrder) {
  const TrustedProxies trusted = Trust({"10.0.0.0/8"});
  EXPECT_EQ(Key("10.0.0.1", {"6.6.6.6", "198.51.100.7"}, trusted), "198.51.100.7");
  EXPECT_EQ(Key("10.0.0.1", {"6.6.6.6, 198.51.100.7", "10.9.9.9"}, trusted), "198.51.100.7");
}

TEST(ClientKeyTest, MalformedAppendedEntryFallsBackToThePeer) {
  const TrustedProxies trusted = Trust({"10.0.0.0/8"});
  EXPECT_EQ(Key("10.0.0.1", {"198.51.100.7, not-an-ip"}, trusted), "10.0.0.1");
  EXPECT_EQ(Key("10.0.0.1", {"198.51.100.7, 1.2.3.4.5"}, trusted), "10.0.0.1");
  EXPECT_EQ(Key("10.0.0.1", {"198.51.100.7, unknown"}, trusted), "10.0.0.1");
}

TEST(ClientKeyTest, GarbageLeftOfTheAppendedEntryIsNeverRead) {
  const TrustedProxies trusted = Trust({"10.0.0.0/8"});
  EXPECT_EQ(Key("10.0.0.1", {"<script>, , 198.51.100.7"}, trusted), "198.51.100.7");
}

TEST(ClientKeyTest, TrustedPeerWithoutHeaderIsThePeer) {
  const TrustedProxies trusted = Trust({"10.0.0.0/8"});
  EXPECT_EQ(Key("10.0.0.1", {}, trusted), "10.0.0.1");
  EXPECT_EQ(Key("10.0.0.1", {""}, trusted), "10.0.0.1");
}

TEST(ClientKeyTest, AllHopsTrustedUsesTheLeftMostTrustedHop) {
  const TrustedProxies trusted = Trust({"10.0.0.0/8"});
  EXPECT_EQ(Key("10.0.0.1", {"10.0.0.7, 10.0.0.8"}, trusted), "10.0.0.7");
}

TEST(ClientKeyTest, Ipv6CollapsesToItsSlash64) {
  EXPECT_EQ(Key("2001:db8:1:2:aaaa:bbbb:cccc:dddd", {}, TrustedProxies()), "2001:db8:1:2::/64");
  EXPECT_EQ(Key("2001:db8:1:2::1", {}, TrustedProxies()),
            Key("2001:db8:1:2:ffff::9", {}, TrustedProxies()));
  EXPECT_NE(Key("2001:db8:1:2::1", {}, TrustedProxies()),
            Key("2001:db8:1:3::1", {}, TrustedProxies()));
  const TrustedProxies trusted = Trust({"::1"});
  EXPECT_EQ(Key("::1", {"2001:db8:abcd:12::77"}, trusted), "2001:db8:abcd:12::/64");
}

TEST(ClientKeyTest, Ipv4MappedIpv6BecomesIpv4) {
  EXPECT_EQ(Key("::ffff:1.2.3.4", {}, TrustedProxies()), "1.2.3.4");
  const TrustedProxies trusted = Trust({"10.0.0.0/8"});
  // A dual-stack socket reports the IPv4 balancer in mapped form; it is still trusted.
  EXPECT_EQ(Key("::ffff:10.0.0.1", {"198.51.100.7"}, trusted), "198.51.100.7");
}

TEST(ClientKeyTest, PortsAndBracketsAreDropped) {
  EXPECT_EQ(Key("1.2.3.4:5678", {}, TrustedProxies()), "1.2.3.4");
  EXPECT_EQ(Key("[2001:db8::1]:443", {}, TrustedProxies()), "2001:db8::/64");
  const TrustedProxies trusted = Trust({"10.0.0.0/8"});
  EXPECT_EQ(Key("10.0.0.1", {"198.51.100.7:1234"}, trusted), "198.51.100.7");
  EXPECT_EQ(Key("10.0.0.1", {"[2001:db8:5:6::1]"}, trusted), "2001:db8:5:6::/64");
}

TEST(ClientKeyTest, UnparseablePeerIsReturnedAsItIs) {
  EXPECT_EQ(Key("/run/sluice.sock", {"1.2.3.4"}, TrustedProxies()), "/run/sluice.sock");
}

TEST(TrustedProxiesTest, ParsesAddressesAndBlocksOfBothFamilies) {
  const TrustedProxies trusted = Trust({"10.0.0.0/8", "192.168.1.1", "fd00::/8", " ::1 "});
  EXPECT_TRUE(trusted.Contains(*IpAddress::Parse("10.255.0.1")));
  EXPECT_FALSE(trusted.Contains(*IpAddress::Parse("11.0.0.1")));
  EXPECT_TRUE(trusted.Contains(*IpAddress::Parse("192.168.1.1")));
  EXPECT_FALSE(trusted.Contains(*IpAddress::Parse("192.168.1.2")));
  EXPECT_TRUE(trusted.Contains(*IpAddress::Parse("fd12:3456::1")));
  EXPECT_FALSE(trusted.Contains(*IpAddress::Parse("fe80::1")));
  EXPECT_TRUE(trusted.Contains(*IpAddress::Parse("::1")));
  // An IPv4 block does not swallow IPv6 addresses whose low bits happen to match.
  EXPECT_FALSE(Trust({"0.0.0.0/0"}).Contains(*IpAddress::Parse("2001:db8::1")));
  EXPECT_TRUE(Trust({"0.0.0.0/0"}).Contains(*IpAddress::Parse("8.8.8.8")));
}

TEST(TrustedProxiesTest, RejectsJunkNamingTheEntry) {
  for (const std::string bad : {"10.0.0.0/33", "fd00::/129", "balancer.local", "10.0.0.0/x", ""}) {
    const std::vector<std::string> entries{bad};
    Result<TrustedProxies> parsed = TrustedProxies::Parse(entries);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(parsed.error().message.find(bad), std::string::npos);
  }
}

TEST(IpAddressTest, RejectsWhatIsNotAnAddress) {
  for (const char* bad : {"", "1.2.3", "1.2.3.4:", "1.2.3.4:http", "[::1", "[::1]x", "::1%eth0",
                          "01.2.3.4.5", "example.com", "1.2.3.4:123456"}) {
    EXPECT_FALSE(IpAddress::Parse(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace sluice::admission
