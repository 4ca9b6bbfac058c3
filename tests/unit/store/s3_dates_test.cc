// LastModified as S3 and the stores that imitate it write it: ISO 8601 (what S3 documents) and
// RFC 1123 (what some peers send), and what must not be read as a date at all. The reaper deletes
// by age, so a misread date is a lost paste (src/worker/janitor.cc).
#include <gtest/gtest.h>

#include "../../../src/store/s3/s3_xml.h"

namespace sluice::store::s3 {
namespace {

constexpr int64_t kExample = 1440938160;  // 2015-08-30T12:36:00Z

TEST(S3Dates, Iso8601WithAndWithoutFraction) {
  EXPECT_EQ(ParseIso8601("2015-08-30T12:36:00.000Z"), kExample);
  EXPECT_EQ(ParseIso8601("2015-08-30T12:36:00Z"), kExample);
  EXPECT_EQ(ParseIso8601("2015-08-30T12:36:00.123456789Z"), kExample);
  EXPECT_EQ(ParseIso8601("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseIso8601("2024-02-29T00:00:00Z"), 1709164800);  // a leap day
}

TEST(S3Dates, Iso8601Offsets) {
  EXPECT_EQ(ParseIso8601("2015-08-30T14:36:00+02:00"), kExample);
  EXPECT_EQ(ParseIso8601("2015-08-30T07:36:00.5-05:00"), kExample);
}

TEST(S3Dates, Iso8601MalformedOrOutOfRangeIsNothing) {
  for (const char* bad :
       {"", "2015-08-30", "2015-08-30T12:36:00", "2015-08-30T12:36:00.Z", "2015-08-30T12:36:00.0xZ",
        "2015-13-30T12:36:00Z", "2015-02-29T12:36:00Z", "2015-08-32T12:36:00Z",
        "2015-08-30T24:00:00Z", "2015-08-30T12:60:00Z", "2015-08-30T12:36:61Z",
        "2015-08-30T12:36:00+2:00", "2015-08-30T12:36:00 GMT", "20x5-08-30T12:36:00Z",
        "2015-08-30T12:36:00ZZ", "-015-08-30T12:36:00Z", "2015-08-30T1 :36:00Z"}) {
    EXPECT_FALSE(ParseIso8601(bad).has_value()) << bad;
  }
}

TEST(S3Dates, Rfc1123) {
  EXPECT_EQ(ParseRfc1123("Sun, 30 Aug 2015 12:36:00 GMT"), kExample);
  EXPECT_EQ(ParseRfc1123("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
  EXPECT_EQ(ParseRfc1123("Sun, 6 Nov 1994 08:49:37 GMT"), 784111777);
  EXPECT_EQ(ParseRfc1123("Sun, 06 Nov 1994 08:49:37 UTC"), 784111777);
}

TEST(S3Dates, Rfc1123MalformedIsNothing) {
  for (const char* bad :
       {"", "Sun, 06 Nov 1994 08:49:37", "Sun 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 94 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
        "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 31 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 CET", "Xyz, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 25:49:37 GMT", "Sun, 060 Nov 1994 08:49:37 GMT"}) {
    EXPECT_FALSE(ParseRfc1123(bad).has_value()) << bad;
  }
}

TEST(S3Dates, LastModifiedTakesEitherFormAndNothingElse) {
  EXPECT_EQ(ParseLastModified("2015-08-30T12:36:00.000Z"), kExample);
  EXPECT_EQ(ParseLastModified("Sun, 30 Aug 2015 12:36:00 GMT"), kExample);
  EXPECT_EQ(ParseLastModified("\n  2015-08-30T12:36:00Z  "), kExample);
  EXPECT_FALSE(ParseLastModified("").has_value());
  EXPECT_FALSE(ParseLastModified("yesterday").has_value());
  EXPECT_FALSE(ParseLastModified("1440938160").has_value());
}

TEST(S3Dates, ListedObjectWithoutAReadableDateHasNone) {
  auto page = ParseListObjectsV2(
      "<ListBucketResult><IsTruncated>false</IsTruncated>"
      "<Contents><Key>p/a</Key><LastModified>Sun, 30 Aug 2015 12:36:00 "
      "GMT</LastModified></Contents>"
      "<Contents><Key>p/b</Key><Size>3</Size></Contents>"
      "<Contents><Key>p/c</Key><LastModified>garbage</LastModified></Contents>"
      "<Contents><Key>p/d</Key><LastModified></LastModified></Contents>"
      "</ListBucketResult>");
  ASSERT_TRUE(page.has_value());
  ASSERT_EQ(page->objects.size(), 4u);
  EXPECT_EQ(page->objects[0].modified_at, kExample);
  EXPECT_FALSE(page->objects[1].modified_at.has_value());
  EXPECT_FALSE(page->objects[2].modified_at.has_value());
  EXPECT_FALSE(page->objects[3].modified_at.has_value());
}

}  // namespace
}  // namespace sluice::store::s3
