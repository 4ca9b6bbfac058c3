// DeleteObjects (POST /BUCKET?delete) as the S3 store writes and reads it, without a peer: the
// request body and its Content-MD5, and the answer, which decides whether the expiry sweep counts
// a batch of bodies as gone (src/store/s3/s3_blob_store.cc, DeleteMany). An answer misread as
// "all gone" would leave bodies nobody looks for again; so whatever cannot be read is no answer.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../../src/store/s3/s3_xml.h"
#include "../../../src/store/s3/sigv4.h"

namespace sluice::store::s3 {
namespace {

TEST(S3DeleteObjects, BodyIsQuietAndListsEachKeyInOrder) {
  const std::string body = DeleteObjectsBody({"pastes/AAAAAAAAAAA1", "pastes/zzzzzzzzzzz2"});
  EXPECT_EQ(body, R"(<?xml version="1.0" encoding="UTF-8"?>)"
                  R"(<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>true</Quiet>)"
                  R"(<Object><Key>pastes/AAAAAAAAAAA1</Key></Object>)"
                  R"(<Object><Key>pastes/zzzzzzzzzzz2</Key></Object></Delete>)");
}

TEST(S3DeleteObjects, KeysAreEscapedSoAPrefixCannotBreakTheDocument) {
  const std::string body = DeleteObjectsBody({R"(a&b<c>"d'/</Key></Object>id)"});
  EXPECT_NE(body.find("<Key>a&amp;b&lt;c&gt;&quot;d&#39;/&lt;/Key&gt;&lt;/Object&gt;id</Key>"),
            std::string::npos)
      << body;
  // What we escape, the reader gives back byte-exact.
  EXPECT_EQ(XmlUnescape(XmlEscape(R"(a&b<c>"d'/é)")), R"(a&b<c>"d'/é)");
  EXPECT_EQ(XmlEscape("plain/key-1.x"), "plain/key-1.x");
}

TEST(S3DeleteObjects, ContentMd5IsBase64OfTheDigest) {
  EXPECT_EQ(Md5Base64(""), "1B2M2Y8AsgTpgAmY7PhCfg==");
  // md5("The quick brown fox jumps over the lazy dog") = 9e107d9d372bb6826bd81d3542a419d6
  EXPECT_EQ(Md5Base64("The quick brown fox jumps over the lazy dog"), "nhB9nTcrtoJr2B01QqQZ1g==");
}

TEST(S3DeleteObjects, QuietAnswerWithNoErrorsMeansAllGone) {
  auto result = ParseDeleteResult(
      R"(<?xml version="1.0" encoding="UTF-8"?>)"
      R"(<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></DeleteResult>)");
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->errors.empty());
  // A self-closed root, as some writers put an empty one.
  ASSERT_TRUE(ParseDeleteResult(R"(<DeleteResult xmlns="x"/>)").has_value());
}

TEST(S3DeleteObjects, DeletedEntriesOfAPeerThatIgnoresQuietAreNoErrors) {
  // s3rver lists every key as <Deleted> whatever Quiet says.
  auto result = ParseDeleteResult(
      "<DeleteResult><Deleted><Key>p/a</Key></Deleted><Deleted><Key>p/b</Key></Deleted>"
      "</DeleteResult>");
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->errors.empty());
}

TEST(S3DeleteObjects, ErrorsGiveKeyCodeAndMessageInOrder) {
  auto result = ParseDeleteResult(
      "<DeleteResult><Deleted><Key>p/ok</Key></Deleted>"
      "<Error><Key>p/a&amp;b</Key><Code>AccessDenied</Code><Message>Access &lt;Denied&gt;</Message>"
      "</Error>"
      "<Error><Key>p/gone</Key><Code>NoSuchKey</Code><Message>The specified key does not exist."
      "</Message></Error>"
      "<Error><Code>InternalError</Code></Error></DeleteResult>");
  ASSERT_TRUE(result.has_value());
  ASSERT_EQ(result->errors.size(), 3u);
  EXPECT_EQ(result->errors[0].key, "p/a&b");
  EXPECT_EQ(result->errors[0].code, "AccessDenied");
  EXPECT_EQ(result->errors[0].message, "Access <Denied>");
  EXPECT_EQ(result->errors[1].key, "p/gone");
  EXPECT_EQ(result->errors[1].code, "NoSuchKey");
  EXPECT_EQ(result->errors[2].key, "");  // no Key: still an error, never skipped
  EXPECT_EQ(result->errors[2].code, "InternalError");
}

TEST(S3DeleteObjects, WhatIsNotADeleteResultIsNoAnswer) {
  for (const char* bad : {
           "",
           "not xml at all",
           "<Error><Code>AccessDenied</Code><Message>denied</Message></Error>",  // a 200 error body
           "<ListBucketResult></ListBucketResult>",
           // An <Error> we cannot read must not read as "no error".
           "<DeleteResult><Error><Key>p/a</Key></Error></DeleteResult>",
           "<DeleteResult><Error><Key>p/a</Key><Code></Code></Error></DeleteResult>",
           "<DeleteResult><Error><Key>p/a&bogus;</Key><Code>AccessDenied</Code></Error>"
           "</DeleteResult>",
           "<DeleteResult><Error><Key>p/a</Key><Code>Access&#xZZ;</Code></Error></DeleteResult>",
           "<DeleteResult><Error><Key>p/a</Key><Code>AccessDenied</Code></DeleteResult>",
       }) {
    EXPECT_FALSE(ParseDeleteResult(bad).has_value()) << bad;
  }
}

TEST(S3DeleteObjects, ACutAnswerIsNoAnswer) {
  // Cut anywhere, even right before an <Error>, the answer must not read as "nothing failed".
  const std::string whole =
      "<DeleteResult><Error><Key>p/a</Key><Code>AccessDenied</Code></Error></DeleteResult>";
  for (size_t cut = 0; cut < whole.size(); ++cut) {
    EXPECT_FALSE(ParseDeleteResult(std::string_view(whole).substr(0, cut)).has_value())
        << "cut at " << cut << ": " << whole.substr(0, cut);
  }
  auto result = ParseDeleteResult(whole);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->errors.size(), 1u);
}

TEST(S3DeleteObjects, GarbageAndOversizedAnswersDoNotCrash) {
  // A long answer of unclosed and nested elements: bounded work, no crash, and no success.
  std::string garbage = "<DeleteResult>";
  for (int i = 0; i < 100000; ++i) garbage += "<Error><Error><Key>&amp;";
  EXPECT_FALSE(ParseDeleteResult(garbage).has_value());
  garbage += "</DeleteResult>";
  EXPECT_FALSE(ParseDeleteResult(garbage).has_value());
  std::string many = "<DeleteResult>";
  for (int i = 0; i < 20000; ++i) many += "<Error><Key>k</Key><Code>SlowDown</Code></Error>";
  many += "</DeleteResult>";
  auto result = ParseDeleteResult(many);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->errors.size(), 20000u);
  std::string bytes;
  for (int i = 0; i < 65536; ++i) bytes += static_cast<char>((i * 7919) & 0xff);
  (void)ParseDeleteResult(bytes);
  (void)ParseDeleteResult("<DeleteResult>" + bytes);
  (void)ParseDeleteResult("<DeleteResult><Error>" + bytes + "</Error></DeleteResult>");
}

}  // namespace
}  // namespace sluice::store::s3
