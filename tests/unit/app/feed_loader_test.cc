// LoadFeeds (src/app/feed_loader.h): every feed read from its file; at a reload a feed whose file
// is broken or gone keeps the networks it had, and one that never loaded is left out, each named.
#include "../../../src/app/feed_loader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace sluice::app {
namespace {

namespace fs = std::filesystem;

class FeedLoaderTest : public ::testing::Test {
 protected:
  FeedLoaderTest()
      : dir_(fs::temp_directory_path() /
             ("feed_loader_test_" +
              std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::create_directories(dir_);
  }
  ~FeedLoaderTest() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  static admission::FeedSpec Spec(std::string name, std::string path) {
    return {std::move(name), {admission::FeedActionKind::kRefuse, ""}, std::move(path)};
  }

  fs::path dir_;
};

TEST_F(FeedLoaderTest, LoadsEveryFeedInOrder) {
  const std::vector<admission::FeedSpec> specs = {
      Spec("a", Write("a.netset", "# a\n192.0.2.0/24\n2001:db8::/32\n")),
      Spec("b", Write("b.txt", "; b\n198.51.100.0/24 ; SBL1\n"))};
  const FeedLoad load = LoadFeeds(specs, nullptr);
  EXPECT_TRUE(load.failures.empty());
  ASSERT_EQ(load.feeds.feeds().size(), 2u);
  EXPECT_EQ(load.feeds.feeds()[0].entries, 2u);
  EXPECT_EQ(load.feeds.Match("2001:db8:1:2::/64"), 0);
  EXPECT_EQ(load.feeds.Match("198.51.100.9"), 1);
}

TEST_F(FeedLoaderTest, ABrokenFileAtAReloadKeepsItsFeedsNetworksAndTheOthersTakeTheirNewOnes) {
  const std::string a = Write("a.netset", "192.0.2.0/24\n");
  const std::string b = Write("b.netset", "198.51.100.0/24\n");
  const std::vector<admission::FeedSpec> specs = {Spec("a", a), Spec("b", b)};
  const FeedLoad first = LoadFeeds(specs, nullptr);
  ASSERT_TRUE(first.failures.empty());

  Write("a.netset", "192.0.2.0/24\nnot-a-network\n");
  Write("b.netset", "203.0.113.0/24\n");
  const FeedLoad second = LoadFeeds(specs, &first.feeds);
  ASSERT_EQ(second.failures.size(), 1u);
  EXPECT_NE(second.failures[0].find("a: "), std::string::npos) << second.failures[0];
  EXPECT_NE(second.failures[0].find("line 2"), std::string::npos) << second.failures[0];
  EXPECT_EQ(second.feeds.Match("192.0.2.1"), 0);      // a's old networks
  EXPECT_EQ(second.feeds.Match("203.0.113.1"), 1);    // b's new ones
  EXPECT_EQ(second.feeds.Match("198.51.100.1"), -1);  // b's old ones are gone

  fs::remove(a);
  const FeedLoad third = LoadFeeds(specs, &second.feeds);
  ASSERT_EQ(third.failures.size(), 1u);
  EXPECT_NE(third.failures[0].find("cannot read"), std::string::npos) << third.failures[0];
  EXPECT_EQ(third.feeds.Match("192.0.2.1"), 0);
}

TEST_F(FeedLoaderTest, AFeedThatNeverLoadedIsLeftOutAndNamed) {
  const std::vector<admission::FeedSpec> specs = {Spec("gone", (dir_ / "missing").string()),
                                                  Spec("b", Write("b.netset", "10.0.0.0/8\n"))};
  const FeedLoad load = LoadFeeds(specs, nullptr);
  ASSERT_EQ(load.failures.size(), 1u);
  EXPECT_EQ(load.failures[0].rfind("gone: ", 0), 0u) << load.failures[0];
  ASSERT_EQ(load.feeds.feeds().size(), 1u);
  EXPECT_EQ(load.feeds.Match("10.1.1.1"), 0);
}

}  // namespace
}  // namespace sluice::app
