#include "sluice/common/duration.h"

#include <gtest/gtest.h>

#include <chrono>

namespace sluice {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST(DurationTest, ParsesEveryUnit) {
  EXPECT_EQ(*ParseDuration("7ns"), nanoseconds(7));
  EXPECT_EQ(*ParseDuration("100us"), microseconds(100));
  EXPECT_EQ(*ParseDuration("250ms"), milliseconds(250));
  EXPECT_EQ(*ParseDuration("5s"), seconds(5));
  EXPECT_EQ(*ParseDuration("2m"), seconds(120));
  EXPECT_EQ(*ParseDuration("1h"), seconds(3600));
  EXPECT_EQ(*ParseDuration("0s"), Duration::zero());
}

TEST(DurationTest, KeepsDecimalsToTheMicrosecond) {
  EXPECT_EQ(*ParseDuration("1.5s"), milliseconds(1500));
  EXPECT_EQ(*ParseDuration("500us"), microseconds(500));
  EXPECT_EQ(*ParseDuration("0.5ms"), microseconds(500));
  EXPECT_EQ(*ParseDuration("2.25m"), seconds(135));
  EXPECT_EQ(*ParseDuration("0.000001s"), microseconds(1));
}

TEST(DurationTest, RefusesGarbageWithAMessageNamingTheTextAndTheUnits) {
  for (const char* bad : {"", "5", "s", "-5s", "+5s", "5 s", " 5s", "5s ", "5sec", "1e3s", "five s",
                          "..s", "1.2.3s", "5d", "5S", "inf s", "nans", "99999999999h"}) {
    const Result<Duration> parsed = ParseDuration(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(parsed.error().message.find("'" + std::string(bad) + "'"), std::string::npos)
        << parsed.error().message;
    EXPECT_NE(parsed.error().message.find("ns, us, ms, s, m, h"), std::string::npos);
  }
}

}  // namespace
}  // namespace sluice
