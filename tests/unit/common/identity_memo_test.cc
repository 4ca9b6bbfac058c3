#include "sluice/common/identity_memo.h"

#include <gtest/gtest.h>

#include <new>

namespace sluice {
namespace {

TEST(IdentityMemo, WorksOutEachStringOnceWhileItLives) {
  IdentityMemo<size_t, 8> memo;
  int made = 0;
  const auto length = [&](const std::string& s) {
    ++made;
    return s.size();
  };
  auto text = std::make_shared<const std::string>("hello");
  EXPECT_EQ(memo.Get(text, length), 5u);
  EXPECT_EQ(memo.Get(text, length), 5u);
  EXPECT_EQ(made, 1);
}

TEST(IdentityMemo, AnEqualStringElsewhereIsWorkedOutAgain) {
  IdentityMemo<size_t, 8> memo;
  int made = 0;
  const auto count = [&](const std::string&) { return static_cast<size_t>(++made); };
  auto first = std::make_shared<const std::string>("same");
  auto second = std::make_shared<const std::string>("same");
  EXPECT_EQ(memo.Get(first, count), 1u);
  EXPECT_EQ(memo.Get(second, count), 2u);
}

TEST(IdentityMemo, ANewStringAtAFreedOnesAddressIsNotServedTheOldValue) {
  IdentityMemo<std::string, 1> memo;
  const auto first_letter = [](const std::string& s) { return s.substr(0, 1); };
  // Both strings in the same storage, as an allocator reusing a freed block would place them.
  alignas(std::string) static unsigned char storage[sizeof(std::string)];
  const auto place = [](const char* text) {
    return std::shared_ptr<const std::string>(new (storage) std::string(text),
                                              [](const std::string* s) { s->~basic_string(); });
  };
  auto first = place("python");
  EXPECT_EQ(memo.Get(first, first_letter), "p");
  first.reset();
  auto second = place("rust");
  EXPECT_EQ(memo.Get(second, first_letter), "r");
}

}  // namespace
}  // namespace sluice
