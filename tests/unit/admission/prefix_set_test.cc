// PrefixSet and ParseNetset (include/sluice/admission/prefix_set.h): the lists' own formats, the
// edges of the ranges, and the same answers as TrustedProxies's one-block-at-a-time scan for
// random sets and addresses.
#include "sluice/admission/prefix_set.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace sluice::admission {
namespace {

IpAddress Ip(std::string_view text) {
  std::optional<IpAddress> address = IpAddress::Parse(text);
  EXPECT_TRUE(address.has_value()) << text;
  return address.value_or(IpAddress{});
}

PrefixSet SetOf(std::string_view netset) {
  Result<std::vector<Cidr>> blocks = ParseNetset(netset);
  EXPECT_TRUE(blocks.ok()) << (blocks.ok() ? "" : blocks.error().message);
  return PrefixSet(blocks.ok() ? *blocks : std::vector<Cidr>{});
}

TEST(ParseNetsetTest, ReadsFireholAndSpamhausLinesAndSkipsComments) {
  const std::string text =
      "#\n# firehol_level1 (a FireHOL netset's header)\n#\n"
      "1.10.16.0/20\n"
      "\n"
      "  2.56.192.0/22  \n"
      "5.8.37.0/24 ; SBL284078\r\n"  // Spamhaus DROP's text form, with a CRLF
      "192.0.2.7\n"                  // a bare address: all its bits
      "2001:db8:1::/48 # a note\n"
      "; Spamhaus's own comment line\n"
      "10.1.2.3/8";  // no final newline, host bits set
  Result<std::vector<Cidr>> blocks = ParseNetset(text);
  ASSERT_TRUE(blocks.ok()) << blocks.error().message;
  ASSERT_EQ(blocks->size(), 6u);
  EXPECT_EQ((*blocks)[0].bits, 96 + 20);
  EXPECT_EQ((*blocks)[3].bits, 128);
  EXPECT_EQ((*blocks)[4].bits, 48);
  // The host bits an operator left set are cleared, as every list reader does.
  EXPECT_EQ((*blocks)[5].base.bytes, Ip("10.0.0.0").bytes);
}

TEST(ParseNetsetTest, NamesTheFirstBadLineByNumber) {
  for (const auto& [text, line] : std::vector<std::pair<std::string, std::string>>{
           {"1.2.3.0/24\nnot-an-address\n", "line 2 "},
           {"# header\n\n1.2.3.0/33\n", "line 3 "},
           {"2001:db8::/129\n", "line 1 "},
           {"1.2.3.4/\n", "line 1 "},
           {"1.2.3.4/24/8\n", "line 1 "},
           {"1.2.3.0/24 5.6.7.0/24\n", "line 1 "},
           {std::string("1.2.3.4\0/8\n", 11), "line 1 "},
           {"example.com\n", "line 1 "}}) {
    Result<std::vector<Cidr>> blocks = ParseNetset(text);
    ASSERT_FALSE(blocks.ok()) << text;
    EXPECT_EQ(blocks.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(blocks.error().message.find(line), std::string::npos) << blocks.error().message;
  }
}

TEST(ParseNetsetTest, ShowsAtMostEightyBytesOfTheLineAndNoControlCharacters) {
  const std::string line = "\x1b[31m" + std::string(500, 'x');
  Result<std::vector<Cidr>> blocks = ParseNetset(line + "\n");
  ASSERT_FALSE(blocks.ok());
  EXPECT_LT(blocks.error().message.size(), 160u);
  EXPECT_EQ(blocks.error().message.find('\x1b'), std::string::npos);
}

TEST(PrefixSetTest, TheEdgesOfEachRange) {
  const PrefixSet set = SetOf("10.0.0.0/24\n2001:db8:1::/48\n");
  EXPECT_FALSE(set.Contains(Ip("9.255.255.255")));
  EXPECT_TRUE(set.Contains(Ip("10.0.0.0")));
  EXPECT_TRUE(set.Contains(Ip("10.0.0.255")));
  EXPECT_FALSE(set.Contains(Ip("10.0.1.0")));
  EXPECT_TRUE(set.Contains(Ip("::ffff:10.0.0.7")));  // the mapped spelling is the same address
  EXPECT_FALSE(set.Contains(Ip("2001:db8:0:ffff:ffff:ffff:ffff:ffff")));
  EXPECT_TRUE(set.Contains(Ip("2001:db8:1::")));
  EXPECT_TRUE(set.Contains(Ip("2001:db8:1:ffff:ffff:ffff:ffff:ffff")));
  EXPECT_FALSE(set.Contains(Ip("2001:db8:2::")));
  EXPECT_FALSE(PrefixSet().Contains(Ip("10.0.0.1")));
}

TEST(PrefixSetTest, OverlappingAndTouchingBlocksBecomeOneRange) {
  const PrefixSet set = SetOf("10.0.0.0/25\n10.0.0.128/25\n10.0.0.0/24\n10.0.0.5\n10.0.2.0/24\n");
  EXPECT_EQ(set.ranges(), 2u);  // 10.0.0.0-10.0.0.255 and 10.0.2.0/24, with the gap between
  EXPECT_FALSE(set.Contains(Ip("10.0.1.9")));
  EXPECT_TRUE(set.Contains(Ip("10.0.2.9")));
}

TEST(PrefixSetTest, TheWholeSpaceOfEachFamilyAndItsTop) {
  const PrefixSet v4 = SetOf("0.0.0.0/0\n255.255.255.255\n");
  EXPECT_TRUE(v4.Contains(Ip("0.0.0.0")));
  EXPECT_TRUE(v4.Contains(Ip("255.255.255.255")));
  EXPECT_FALSE(v4.Contains(Ip("2001:db8::1")));
  EXPECT_EQ(v4.ranges(), 1u);
  const PrefixSet top = SetOf("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff\nffff::/16\n");
  EXPECT_TRUE(top.Contains(Ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")));
  EXPECT_TRUE(top.Contains(Ip("ffff::1")));
  EXPECT_FALSE(top.Contains(Ip("fffe::1")));
  EXPECT_EQ(top.ranges(), 1u);
}

TEST(PrefixSetTest, AnIpv6BlockOverTheMappedRangeCoversIpv4) {
  EXPECT_TRUE(SetOf("::/0\n").Contains(Ip("192.0.2.1")));
  EXPECT_TRUE(SetOf("::ffff:0:0/96\n").Contains(Ip("192.0.2.1")));
  EXPECT_TRUE(SetOf("::ffff:192.0.2.0/120\n").Contains(Ip("192.0.2.1")));
  EXPECT_FALSE(SetOf("::ffff:192.0.2.0/120\n").Contains(Ip("192.0.3.1")));
  EXPECT_FALSE(SetOf("2000::/3\n").Contains(Ip("192.0.2.1")));
}

// The peer: TrustedProxies tests one block at a time, the obvious way.
TEST(PrefixSetTest, AnswersAsABlockByBlockScanForRandomSets) {
  std::mt19937_64 random(20261204);
  auto address = [&](bool v4) {
    IpAddress a;
    if (v4) {
      a = Ip("0.0.0.0");
      // Few distinct leading bytes, so that blocks overlap and nest.
      a.bytes[12] = static_cast<uint8_t>(random() % 4);
      for (int i = 13; i < 16; ++i) a.bytes[i] = static_cast<uint8_t>(random());
    } else {
      a.bytes[0] = 0x20;
      a.bytes[1] = static_cast<uint8_t>(random() % 3);
      for (int i = 2; i < 16; ++i) a.bytes[i] = static_cast<uint8_t>(random());
    }
    return a;
  };
  for (int round = 0; round < 50; ++round) {
    std::vector<std::string> entries;
    const int blocks = 1 + static_cast<int>(random() % 200);
    for (int b = 0; b < blocks; ++b) {
      const bool v4 = random() % 3 != 0;
      const IpAddress base = address(v4);
      char text[64];
      const int bits = v4 ? static_cast<int>(random() % 33) : static_cast<int>(random() % 129);
      if (v4) {
        std::snprintf(text, sizeof text, "%d.%d.%d.%d/%d", base.bytes[12], base.bytes[13],
                      base.bytes[14], base.bytes[15], bits);
      } else {
        std::snprintf(text, sizeof text, "%x:%x:%x:%x:%x:%x:%x:%x/%d",
                      base.bytes[0] << 8 | base.bytes[1], base.bytes[2] << 8 | base.bytes[3],
                      base.bytes[4] << 8 | base.bytes[5], base.bytes[6] << 8 | base.bytes[7],
                      base.bytes[8] << 8 | base.bytes[9], base.bytes[10] << 8 | base.bytes[11],
                      base.bytes[12] << 8 | base.bytes[13], base.bytes[14] << 8 | base.bytes[15],
                      bits);
      }
      entries.emplace_back(text);
    }
    Result<TrustedProxies> scan = TrustedProxies::Parse(entries);
    ASSERT_TRUE(scan.ok());
    std::vector<Cidr> cidrs;
    for (const std::string& entry : entries) cidrs.push_back(*Cidr::Parse(entry));
    const PrefixSet set(cidrs);
    for (int probe = 0; probe < 2000; ++probe) {
      const IpAddress a = address(random() % 2 == 0);
      ASSERT_EQ(set.Contains(a), scan->Contains(a)) << "round " << round << " probe " << probe;
    }
  }
}

}  // namespace
}  // namespace sluice::admission
