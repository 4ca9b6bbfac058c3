// The JSON create's decoding (src/http/json_create.cc) and the language of a file name
// (src/http/file_language.cc), without a server.
#include "../../../src/http/json_create.h"

#include <gtest/gtest.h>

#include <string>

#include "../../../src/http/file_language.h"

namespace sluice::http {
namespace {

std::string Refusal(std::string_view body) {
  auto decoded = DecodeJsonCreate(body);
  EXPECT_FALSE(decoded.ok()) << body.substr(0, 80);
  if (decoded.ok()) return "";
  EXPECT_EQ(decoded.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(decoded.error().reason, "bad_json");
  return decoded.error().message;
}

TEST(JsonCreateTest, TakesTheThreeFields) {
  auto decoded =
      DecodeJsonCreate(R"({"content": "a\r\n\tb \ud83d\udc0d", "ttl": "1d", "language": "rust"})");
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(decoded->content, "a\r\n\tb \xf0\x9f\x90\x8d");
  EXPECT_EQ(decoded->ttl, "1d");
  EXPECT_EQ(decoded->language, "rust");
}

TEST(JsonCreateTest, OnlyContentIsRequired) {
  auto decoded = DecodeJsonCreate(R"({"content": ""})");
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->content, "");
  EXPECT_FALSE(decoded->ttl);
  EXPECT_FALSE(decoded->language);
  EXPECT_NE(Refusal(R"({"ttl": "1d"})").find("'content'"), std::string::npos);
  EXPECT_NE(Refusal("{}").find("'content'"), std::string::npos);
}

TEST(JsonCreateTest, EncryptedIsABooleanLikeBurn) {
  auto on = DecodeJsonCreate(R"({"content": "x", "encrypted": true, "burn": true})");
  ASSERT_TRUE(on.ok()) << on.error().message;
  EXPECT_TRUE(on->encrypted);
  EXPECT_TRUE(on->burn);
  EXPECT_FALSE(DecodeJsonCreate(R"({"content": "x"})")->encrypted);
  for (const char* body :
       {R"({"content": "x", "encrypted": "true"})", R"({"content": "x", "encrypted": 1})",
        R"({"content": "x", "encrypted": true, "encrypted": true})"}) {
    auto refused = DecodeJsonCreate(body);
    ASSERT_FALSE(refused.ok()) << body;
    EXPECT_EQ(refused.error().reason, "bad_json") << body;
  }
}

// "burn" and "encrypted" are the boolean fields (docs/usage.md, "Burn after reading").
TEST(JsonCreateTest, BurnIsABooleanAndOnlyABoolean) {
  auto on = DecodeJsonCreate(R"({"content": "x", "burn": true})");
  ASSERT_TRUE(on.ok()) << on.error().message;
  EXPECT_TRUE(on->burn);
  auto off = DecodeJsonCreate(R"({"burn": false, "content": "x"})");
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_FALSE(off->burn);
  EXPECT_FALSE(DecodeJsonCreate(R"({"content": "x"})")->burn);
  for (const char* body :
       {R"({"content": "x", "burn": "true"})", R"({"content": "x", "burn": 1})",
        R"({"content": "x", "burn": null})", R"({"content": "x", "burn": true, "burn": false})",
        R"({"content": true})"}) {
    auto refused = DecodeJsonCreate(body);
    ASSERT_FALSE(refused.ok()) << body;
    EXPECT_EQ(refused.error().reason, "bad_json") << body;
  }
}

TEST(JsonCreateTest, RefusesHostileBodiesWithAReason) {
  EXPECT_NE(Refusal(R"({"content": "a", "title": "x"})").find("unknown field 'title'"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"content": "a", "content": "b"})").find("duplicate field 'content'"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"content": "a\u0000b"})").find("NUL"), std::string::npos);
  EXPECT_NE(Refusal(R"({"content": "\ud800"})").find("surrogate"), std::string::npos);
  EXPECT_NE(Refusal(R"({"content": "\udc00x"})").find("surrogate"), std::string::npos);
  // nlohmann's lexer refuses a float beyond a double's range itself; any other number is refused
  // by type.
  EXPECT_NE(Refusal(R"({"content": 1e999999})").find("number overflow"), std::string::npos);
  EXPECT_NE(Refusal(R"({"content": 1})").find("not a number"), std::string::npos);
  EXPECT_NE(Refusal(R"({"content": "a", "ttl": 99999999999999999999999999})").find("'ttl'"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"content": ["a"]})").find("not an array"), std::string::npos);
  EXPECT_NE(Refusal(R"({"content": {"a": "b"}})").find("not an object"), std::string::npos);
  EXPECT_NE(Refusal(R"({"content": null})").find("not null"), std::string::npos);
  EXPECT_NE(Refusal(R"({"content": true})").find("not a boolean"), std::string::npos);
  EXPECT_NE(Refusal(R"(["content"])").find("JSON object"), std::string::npos);
  EXPECT_NE(Refusal(R"("content")").find("JSON object"), std::string::npos);
  EXPECT_NE(Refusal(R"({"content": "a"} {})").find("malformed"), std::string::npos);
  EXPECT_NE(Refusal(R"({"content": "a")").find("malformed"), std::string::npos);
  EXPECT_NE(Refusal("").find("malformed"), std::string::npos);
  EXPECT_NE(Refusal("{\"content\": \"\xff\"}").find("malformed"), std::string::npos);
}

TEST(JsonCreateTest, DeepNestingIsRefusedAtTheFirstLevelTooDeep) {
  const std::string deep = "{\"content\": " + std::string(1'000'000, '[') + "}";
  EXPECT_NE(Refusal(deep).find("not an array"), std::string::npos);
  const std::string deep_objects = "{\"content\": " + std::string(1'000'000, '{');
  EXPECT_NE(Refusal(deep_objects).find("not an object"), std::string::npos);
}

TEST(JsonCreateTest, KnowsJsonContentTypes) {
  EXPECT_TRUE(IsJsonContentType("application/json"));
  EXPECT_TRUE(IsJsonContentType("text/json"));
  EXPECT_TRUE(IsJsonContentType("Application/JSON ; charset=utf-8"));
  EXPECT_FALSE(IsJsonContentType(""));
  EXPECT_FALSE(IsJsonContentType("text/plain"));
  EXPECT_FALSE(IsJsonContentType("application/json-seq"));
  EXPECT_FALSE(IsJsonContentType("multipart/form-data; boundary=json"));
}

TEST(FileLanguageTest, ExtensionsNameLanguages) {
  EXPECT_EQ(LanguageForExtension("rs"), "rust");
  EXPECT_EQ(LanguageForExtension("PY"), "python");
  EXPECT_EQ(LanguageForExtension("python"), "python");
  EXPECT_EQ(LanguageForExtension("txt"), "text");
  EXPECT_EQ(LanguageForExtension("md"), "markdown");
  EXPECT_EQ(LanguageForExtension("docx"), "");
  EXPECT_EQ(LanguageForExtension(""), "");
  EXPECT_EQ(LanguageForExtension("auto"), "");
  EXPECT_EQ(FileExtension("src/main.rs"), "rs");
  EXPECT_EQ(FileExtension("a.tar.gz"), "gz");
  EXPECT_EQ(FileExtension(".bashrc"), "");
  EXPECT_EQ(FileExtension("dir.d/Makefile"), "");
  EXPECT_EQ(FileExtension("C:\\x\\y.cc"), "cc");
}

}  // namespace
}  // namespace sluice::http
