#include "sluice/service/ids.h"

#include <gtest/gtest.h>

#include <set>

namespace sluice::service {
namespace {

TEST(MintPasteId, IsTwelveBase62Characters) {
  for (int i = 0; i < 1000; ++i) {
    const store::PasteId id = MintPasteId();
    ASSERT_EQ(id.view().size(), 12u);
    EXPECT_TRUE(store::PasteId::Parse(id.view()).has_value());
  }
}

TEST(MintPasteId, DoesNotRepeatAcrossManyMints) {
  std::set<std::string> seen;
  for (int i = 0; i < 20000; ++i) ASSERT_TRUE(seen.insert(MintPasteId().str()).second);
}

TEST(MintPasteId, UsesEveryCharacterWithRoughlyEqualFrequency) {
  // 120,000 characters over 62 symbols: about 1,935 each. A biased modulo (256 % 62) or a fixed
  // character would push some symbol far outside these generous bounds.
  std::map<char, int> counts;
  for (int i = 0; i < 10000; ++i) {
    const store::PasteId id = MintPasteId();
    for (char c : id.view()) ++counts[c];
  }
  EXPECT_EQ(counts.size(), 62u);
  for (const auto& [c, n] : counts) {
    EXPECT_GT(n, 1600) << c;
    EXPECT_LT(n, 2300) << c;
  }
}

TEST(MintDeleteToken, Is128BitsOfBase64Url) {
  const std::string token = MintDeleteToken();
  EXPECT_EQ(token.size(), 22u);  // ceil(128 / 6)
  for (char c : token)
    EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_');
  EXPECT_NE(MintDeleteToken(), token);
}

TEST(HashDeleteToken, IsSha256AndComparesOnlyEqualHashes) {
  const auto a = HashDeleteToken("abc");
  // SHA-256("abc") begins ba7816bf.
  EXPECT_EQ(a[0], 0xba);
  EXPECT_EQ(a[1], 0x78);
  EXPECT_EQ(a[2], 0x16);
  EXPECT_EQ(a[3], 0xbf);
  EXPECT_TRUE(SameTokenHash(a, HashDeleteToken("abc")));
  EXPECT_FALSE(SameTokenHash(a, HashDeleteToken("abd")));
}

TEST(PasteId, ParseRejectsWrongLengthAndForeignCharacters) {
  EXPECT_TRUE(store::PasteId::Parse("abcDEF012345").has_value());
  EXPECT_FALSE(store::PasteId::Parse("abcDEF01234").has_value());
  EXPECT_FALSE(store::PasteId::Parse("abcDEF0123456").has_value());
  EXPECT_FALSE(store::PasteId::Parse("../etc/passw").has_value());
  EXPECT_FALSE(store::PasteId::Parse("abcDEF01234-").has_value());
  EXPECT_FALSE(store::PasteId::Parse(std::string_view("abcDEF01234\0", 12)).has_value());
}

}  // namespace
}  // namespace sluice::service
