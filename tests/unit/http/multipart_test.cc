#include "../../../src/http/multipart.h"

#include <gtest/gtest.h>

namespace sluice::http {
namespace {

TEST(MultipartBoundary, ReadsTheBoundaryOfFormDataOnly) {
  EXPECT_EQ(MultipartBoundary("multipart/form-data; boundary=abc123"), "abc123");
  EXPECT_EQ(MultipartBoundary("Multipart/Form-Data; charset=utf-8; boundary=\"q w\""), "q w");
  EXPECT_FALSE(MultipartBoundary("text/plain").has_value());
  EXPECT_FALSE(MultipartBoundary("multipart/form-data").has_value());
  EXPECT_FALSE(MultipartBoundary("multipart/mixed; boundary=x").has_value());
}

TEST(ParseMultipart, SplitsPartsAsCurlSendsThem) {
  const std::string body =
      "--XyZ\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"notes.txt\"\r\n"
      "Content-Type: text/plain\r\n\r\n"
      "line one\r\nline two\r\n"
      "--XyZ\r\n"
      "Content-Disposition: form-data; name=\"ttl\"\r\n\r\n"
      "1h\r\n"
      "--XyZ--\r\n";
  auto parts = ParseMultipart(body, "XyZ");
  ASSERT_TRUE(parts.has_value());
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].name, "file");
  EXPECT_EQ((*parts)[0].filename, "notes.txt");
  EXPECT_EQ((*parts)[0].content, "line one\r\nline two");
  EXPECT_EQ((*parts)[1].name, "ttl");
  EXPECT_EQ((*parts)[1].content, "1h");
}

TEST(ParseMultipart, RefusesBrokenFraming) {
  EXPECT_FALSE(ParseMultipart("no delimiter", "XyZ").has_value());
  EXPECT_FALSE(ParseMultipart(
                   "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nunterminated", "XyZ")
                   .has_value());
  EXPECT_FALSE(ParseMultipart("--XyZ\r\nX-Other: 1\r\n\r\nv\r\n--XyZ--", "XyZ").has_value());
}

}  // namespace
}  // namespace sluice::http
