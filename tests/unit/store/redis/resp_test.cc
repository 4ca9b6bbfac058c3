// The RESP parser on its own: bytes in, replies or a protocol error out (src/store/redis/resp.h).
#include "../../../../src/store/redis/resp.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::store::resp {
namespace {

// Every complete reply in `bytes`, fed in one piece; `status` is how parsing stopped.
std::vector<Value> ParseAll(std::string_view bytes, Parser::Status* status = nullptr,
                            Limits limits = {}) {
  Parser p(limits);
  p.Feed(bytes);
  std::vector<Value> out;
  Value v;
  Parser::Status s;
  while ((s = p.Next(v)) == Parser::Status::kValue) out.push_back(v);
  if (status != nullptr) *status = s;
  return out;
}

Parser::Status StatusOf(std::string_view bytes, Limits limits = {}) {
  Parser::Status s;
  ParseAll(bytes, &s, limits);
  return s;
}

TEST(RespParserTest, ParsesEachType) {
  Parser::Status s;
  auto v = ParseAll("+OK\r\n-ERR no\r\n:-42\r\n$5\r\nhe\r\nl\r\n$-1\r\n*-1\r\n$0\r\n\r\n", &s);
  EXPECT_EQ(s, Parser::Status::kNeedMore);
  ASSERT_EQ(v.size(), 7u);
  EXPECT_EQ(v[0].type, Type::kSimple);
  EXPECT_EQ(v[0].str, "OK");
  EXPECT_EQ(v[1].type, Type::kError);
  EXPECT_EQ(v[1].str, "ERR no");
  EXPECT_EQ(v[2].type, Type::kInteger);
  EXPECT_EQ(v[2].integer, -42);
  EXPECT_EQ(v[3].type, Type::kBulk);
  EXPECT_EQ(v[3].str, "he\r\nl");  // a bulk string is binary-safe
  EXPECT_EQ(v[4].type, Type::kNil);
  EXPECT_EQ(v[5].type, Type::kNil);
  EXPECT_EQ(v[6].type, Type::kBulk);
  EXPECT_EQ(v[6].str, "");
}

TEST(RespParserTest, ParsesNestedArrays) {
  auto v = ParseAll("*3\r\n:1\r\n*2\r\n$1\r\na\r\n+b\r\n*0\r\n");
  ASSERT_EQ(v.size(), 1u);
  ASSERT_EQ(v[0].type, Type::kArray);
  ASSERT_EQ(v[0].elements.size(), 3u);
  EXPECT_EQ(v[0].elements[0].integer, 1);
  ASSERT_EQ(v[0].elements[1].elements.size(), 2u);
  EXPECT_EQ(v[0].elements[1].elements[0].str, "a");
  EXPECT_EQ(v[0].elements[1].elements[1].str, "b");
  EXPECT_TRUE(v[0].elements[2].elements.empty());
}

TEST(RespParserTest, AReplySplitAtEveryByteIsTheSameReply) {
  const std::string wire =
      "*3\r\n$7\r\nmessage\r\n$17\r\nsluice:invalidate\r\n$12\r\nabcdefabcdef\r\n";
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    Parser p;
    Value v;
    p.Feed(wire.substr(0, cut));
    if (cut < wire.size()) {
      ASSERT_EQ(p.Next(v), Parser::Status::kNeedMore) << cut;
      p.Feed(wire.substr(cut));
    }
    ASSERT_EQ(p.Next(v), Parser::Status::kValue) << cut;
    ASSERT_EQ(v.elements.size(), 3u);
    EXPECT_EQ(v.elements[2].str, "abcdefabcdef");
    EXPECT_EQ(p.Next(v), Parser::Status::kNeedMore);
    EXPECT_EQ(p.buffered(), 0u);
  }
}

TEST(RespParserTest, ByteAtATime) {
  Parser p;
  const std::string wire = ":1\r\n$3\r\nabc\r\n*2\r\n:2\r\n:3\r\n";
  std::vector<Value> got;
  Value v;
  for (char c : wire) {
    p.Feed(std::string_view(&c, 1));
    while (p.Next(v) == Parser::Status::kValue) got.push_back(v);
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].str, "abc");
  EXPECT_EQ(got[2].elements[1].integer, 3);
}

TEST(RespParserTest, MalformedInputIsAProtocolError) {
  for (const char* bad : {
           "?\r\n",                      // unknown type byte
           "%1\r\n",                     // RESP3 map: never asked for
           "_\r\n",                      // RESP3 null
           ":12a\r\n",                   // not a number
           ":\r\n",                      // empty integer
           ":99999999999999999999\r\n",  // overflows
           ":--1\r\n",
           "$-2\r\n",  // negative length other than -1
           "$x\r\n",
           "$3\r\nabcd\r\n",  // longer than announced
           "$3\r\nabc\rX",    // no CRLF after the announced bytes
           "*-5\r\n", "*1x\r\n",
           "+OK\n",              // LF without CR
           "+OK\rX",             // CR without LF
           "*2\r\n:1\r\n?\r\n",  // a bad element
       }) {
    Parser::Status s;
    ParseAll(bad, &s);
    EXPECT_EQ(s, Parser::Status::kError) << bad;
  }
}

TEST(RespParserTest, AfterAnErrorTheParserStaysFailed) {
  Parser p;
  Value v;
  p.Feed("?\r\n");
  ASSERT_EQ(p.Next(v), Parser::Status::kError);
  EXPECT_FALSE(p.error().empty());
  p.Feed("+OK\r\n");
  EXPECT_EQ(p.Next(v), Parser::Status::kError);
}

TEST(RespParserTest, LimitsAreEnforcedBeforeAllocating) {
  Limits small;
  small.max_bulk = 10;
  small.max_elements = 3;
  small.max_depth = 2;
  small.max_line = 8;
  EXPECT_EQ(StatusOf("$11\r\n", small), Parser::Status::kError);  // no body needed to refuse
  EXPECT_EQ(StatusOf("$10\r\n0123456789\r\n", small), Parser::Status::kNeedMore);
  EXPECT_EQ(StatusOf("*4\r\n", small), Parser::Status::kError);
  EXPECT_EQ(StatusOf("*1\r\n*1\r\n*1\r\n:1\r\n", small), Parser::Status::kError);
  EXPECT_EQ(StatusOf("*1\r\n*1\r\n:1\r\n", small), Parser::Status::kNeedMore);
  EXPECT_EQ(StatusOf("+123456789", small), Parser::Status::kError);  // a line without an end
  EXPECT_EQ(StatusOf("+1234567", small), Parser::Status::kNeedMore);
  EXPECT_EQ(StatusOf("*9223372036854775807\r\n"), Parser::Status::kError);
  EXPECT_EQ(StatusOf("$9223372036854775807\r\n"), Parser::Status::kError);
}

TEST(RespParserTest, DeepNestingIsRefusedByDefault) {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "*1\r\n";
  EXPECT_EQ(StatusOf(deep), Parser::Status::kError);
}

TEST(RespParserTest, TheHostilePayloadsParseAsValuesTheClientMustJudge) {
  // Well-formed RESP: refusing them is the client's job (tests/unit/state/redis_client_test.cc).
  auto v = ParseAll(
      "*3\r\n:1\r\n:2\r\n:3\r\n*1\r\n$7\r\nmessage\r\n"
      "*2\r\n$11\r\nunsubscribe\r\n$17\r\nsluice:invalidate\r\n");
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].elements.size(), 3u);
  EXPECT_EQ(v[1].elements.size(), 1u);
  EXPECT_EQ(v[2].elements.size(), 2u);
}

TEST(RespParserTest, IntegersAtTheirBounds) {
  EXPECT_EQ(ParseInteger("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(ParseInteger("-9223372036854775808"), INT64_MIN);
  EXPECT_EQ(ParseInteger("9223372036854775808"), std::nullopt);
  EXPECT_EQ(ParseInteger("-9223372036854775809"), std::nullopt);
  EXPECT_EQ(ParseInteger("-"), std::nullopt);
  EXPECT_EQ(ParseInteger("+1"), std::nullopt);
  EXPECT_EQ(ParseInteger("0"), 0);
}

TEST(RespParserTest, CommandsAreArraysOfBulkStrings) {
  std::string out;
  AppendCommand(out, {"SET", "k", std::string("a\0b", 3), ""});
  constexpr char kWire[] = "*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na\0b\r\n$0\r\n\r\n";
  EXPECT_EQ(out, std::string(kWire, sizeof kWire - 1));
  auto v = ParseAll(out);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].elements[2].str, std::string("a\0b", 3));
}

}  // namespace
}  // namespace sluice::store::resp
