// The S3 backend's hand-written parts that need no peer: SigV4 against published AWS vectors, and
// the minimal XML reader against the shapes S3 answers with.
#include <gtest/gtest.h>

#include "../../../src/store/s3/s3_xml.h"
#include "../../../src/store/s3/sigv4.h"
#include "sluice/store/s3.h"

namespace sluice::store::s3 {
namespace {

constexpr char kEmptySha[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// The AWS SigV4 test suite's get-vanilla case (credentials AKIDEXAMPLE, service "service").
SigV4Request GetVanilla() {
  SigV4Request r;
  r.method = "GET";
  r.encoded_path = "/";
  r.headers = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}};
  r.payload_sha256 = kEmptySha;
  return r;
}

TEST(SigV4, GetVanillaCanonicalRequestMatchesTheTestSuite) {
  EXPECT_EQ(
      CanonicalRequest(GetVanilla()),
      "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" +
          std::string(kEmptySha));
}

TEST(SigV4, GetVanillaStringToSignMatchesTheTestSuite) {
  EXPECT_EQ(StringToSign("20150830T123600Z", "20150830/us-east-1/service/aws4_request",
                         CanonicalRequest(GetVanilla())),
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
            "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
}

TEST(SigV4, GetVanillaAuthorizationMatchesTheTestSuite) {
  const SigV4Key key{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1",
                     "service"};
  EXPECT_EQ(Authorization(GetVanilla(), key, "20150830T123600Z"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=host;x-amz-date, "
            "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

TEST(SigV4, QueryParametersAreEncodedAndSortedAsTheTestSuiteDoes) {
  SigV4Request r = GetVanilla();
  r.method = "POST";
  r.query = {{"Param1", "value1"}};
  EXPECT_EQ(CanonicalRequest(r),
            "POST\n/\nParam1=value1\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
            "host;x-amz-date\n" +
                std::string(kEmptySha));
  EXPECT_EQ(CanonicalQuery({{"prefix", "pastes/"}, {"list-type", "2"}, {"b", "a b"}}),
            "b=a%20b&list-type=2&prefix=pastes%2F");
}

// The worked example of the S3 documentation (GET Object with a Range header, signed payload
// hash of the empty body).
TEST(SigV4, S3DocumentationGetObjectExample) {
  SigV4Request r;
  r.method = "GET";
  r.encoded_path = "/test.txt";
  r.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
               {"Range", "bytes=0-9"},
               {"x-amz-content-sha256", kEmptySha},
               {"x-amz-date", "20130524T000000Z"}};
  r.payload_sha256 = kEmptySha;
  const SigV4Key key{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                     "us-east-1", "s3"};
  const std::string auth = Authorization(r, key, "20130524T000000Z");
  EXPECT_NE(auth.find("SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"),
            std::string::npos)
      << auth;
  EXPECT_TRUE(
      auth.ends_with("Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"))
      << auth;
}

TEST(SigV4, HeaderValuesAreTrimmedAndInnerSpacesFolded) {
  SigV4Request r = GetVanilla();
  r.headers.emplace_back("My-Header1", "  value1   with  spaces ");
  EXPECT_NE(CanonicalRequest(r).find("\nmy-header1:value1 with spaces\n"), std::string::npos);
}

TEST(SigV4, UriEncodeKeepsUnreservedAndOptionallySlash) {
  EXPECT_EQ(UriEncode("pastes/Ab-_.~9", true), "pastes/Ab-_.~9");
  EXPECT_EQ(UriEncode("pastes/Ab", false), "pastes%2FAb");
  EXPECT_EQ(UriEncode("a b+\xe1\x88\xb4", true), "a%20b%2B%E1%88%B4");
}

TEST(SigV4, AmzDateIsUtc) { EXPECT_EQ(AmzDate(1440938160), "20150830T123600Z"); }

TEST(S3Xml, ListPageKeysAreUnescapedAndTruncationRead) {
  const std::string xml =
      R"(<?xml version="1.0" encoding="UTF-8"?>)"
      R"(<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name>)"
      R"(<Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>)"
      R"(<IsTruncated>true</IsTruncated>)"
      R"(<Contents><Key>p/a&amp;b&lt;&#62;&#x41;</Key>)"
      R"(<LastModified>2015-08-30T12:36:00.000Z</LastModified><ETag>&quot;x&quot;</ETag>)"
      R"(<Size>5</Size><StorageClass>STANDARD</StorageClass></Contents>)"
      R"(<Contents><Key>p/b</Key><LastModified>2015-08-30T12:36:01Z</LastModified>)"
      R"(<Size>7</Size></Contents></ListBucketResult>)";
  auto page = ParseListObjectsV2(xml);
  ASSERT_TRUE(page.has_value());
  EXPECT_TRUE(page->truncated);
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "p/a&b<>A");
  EXPECT_EQ(page->objects[0].modified_at, 1440938160);
  EXPECT_EQ(page->objects[0].size, 5u);
  EXPECT_EQ(page->objects[1].key, "p/b");
  EXPECT_EQ(page->objects[1].modified_at, 1440938161);
}

TEST(S3Xml, EmptyLastPageIsNotTruncated) {
  auto page = ParseListObjectsV2(
      "<ListBucketResult><Name>b</Name><KeyCount>0</KeyCount>"
      "<IsTruncated>false</IsTruncated></ListBucketResult>");
  ASSERT_TRUE(page.has_value());
  EXPECT_FALSE(page->truncated);
  EXPECT_TRUE(page->objects.empty());
}

TEST(S3Xml, NotAListAndMalformedEntitiesAreRefused) {
  EXPECT_FALSE(ParseListObjectsV2("<Error><Code>AccessDenied</Code></Error>").has_value());
  EXPECT_FALSE(ParseListObjectsV2("<ListBucketResult><Contents><Key>a&bogus;</Key></Contents>"
                                  "</ListBucketResult>")
                   .has_value());
  EXPECT_FALSE(XmlUnescape("a&amp").has_value());
}

TEST(S3Xml, ErrorBodyGivesCodeAndMessage) {
  const S3ErrorBody e = ParseErrorBody(
      "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>Please reduce your request "
      "rate &amp; retry.</Message><RequestId>1</RequestId></Error>");
  EXPECT_EQ(e.code, "SlowDown");
  EXPECT_EQ(e.message, "Please reduce your request rate & retry.");
}

TEST(S3Settings, BlobUrlNamesOnlyABucket) {
  EXPECT_EQ(ParseS3BlobUrl("s3://my-bucket.example"), "my-bucket.example");
  EXPECT_EQ(ParseS3BlobUrl("s3://my-bucket/"), "my-bucket");
  EXPECT_FALSE(ParseS3BlobUrl("s3://my-bucket/some/prefix").has_value());
  EXPECT_FALSE(ParseS3BlobUrl("s3://UPPER").has_value());
  EXPECT_FALSE(ParseS3BlobUrl("file:///tmp").has_value());
  EXPECT_FALSE(ParseS3BlobUrl("").has_value());
}

}  // namespace
}  // namespace sluice::store::s3
