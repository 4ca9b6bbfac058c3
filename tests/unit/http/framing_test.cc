#include "../../../src/http/framing.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::http {
namespace {

using State = HeadScan::State;

HeadScan Scan(std::string_view bytes) { return ScanHead(bytes, HeadLimits{}); }

TEST(ScanHeadTest, AWholeHeadIsCompleteAndEndsAfterItsEmptyLine) {
  const std::string head = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  const HeadScan scan = Scan(head + "next");
  ASSERT_EQ(scan.state, State::kComplete);
  EXPECT_EQ(scan.skip, 0u);
  EXPECT_EQ(scan.length, head.size());
}

TEST(ScanHeadTest, APartialHeadNeedsMore) {
  EXPECT_EQ(Scan("").state, State::kNeedMore);
  EXPECT_EQ(Scan("GE").state, State::kNeedMore);
  EXPECT_EQ(Scan("GET / HTTP/1.1\r\nHost: x\r\n").state, State::kNeedMore);
  EXPECT_EQ(Scan("GET / HTTP/1.1\r\nHost: x\r\n\r").state, State::kNeedMore);
}

TEST(ScanHeadTest, EmptyLinesBeforeTheRequestLineAreSkipped) {
  const std::string head = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  const HeadScan scan = Scan("\r\n\r\n" + head);
  ASSERT_EQ(scan.state, State::kComplete);
  EXPECT_EQ(scan.skip, 4u);
  EXPECT_EQ(scan.length, head.size());
  EXPECT_EQ(Scan("\r\n").state, State::kNeedMore);
  EXPECT_EQ(Scan("\r\n\r").state, State::kNeedMore);
}

TEST(ScanHeadTest, ARequestLineOverItsLimitIs414EvenBeforeItEnds) {
  const std::string target(9000, 'a');
  EXPECT_EQ(Scan("GET /" + target).status, 414u);
  EXPECT_EQ(Scan("GET /" + target + " HTTP/1.1\r\nHost: x\r\n\r\n").status, 414u);
  // Just under the line limit, in a head under the head limit: fine.
  const std::string fits(8000, 'a');
  EXPECT_EQ(Scan("GET /" + fits + " HTTP/1.1\r\nHost: x\r\n\r\n").state, State::kComplete);
}

TEST(ScanHeadTest, AHeadOverItsLimitIs431HoweverManyFields) {
  std::string head = "GET / HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 200; ++i)
    head += "X-H" + std::to_string(1000 + i) + ": " + std::string(90, 'a') + "\r\n";
  EXPECT_EQ(Scan(head).status, 431u);  // refused before its end arrives
  EXPECT_EQ(Scan(head + "\r\n").status, 431u);
  // Exactly at the limit passes; one byte more does not.
  std::string exact = "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: ";
  exact += std::string(16 * 1024 - exact.size() - 4, 'a') + "\r\n\r\n";
  ASSERT_EQ(exact.size(), 16u * 1024);
  EXPECT_EQ(Scan(exact).state, State::kComplete);
  exact.insert(exact.find("X-Pad: ") + 7, "a");
  EXPECT_EQ(Scan(exact).status, 431u);
  // Empty lines count too: an endless stream of them is cut.
  EXPECT_EQ(Scan(std::string(100, '\n')).status, 400u);  // bare LFs are refused outright
  std::string crlfs;
  while (crlfs.size() < 16 * 1024) crlfs += "\r\n";
  EXPECT_EQ(Scan(crlfs).status, 431u);
}

TEST(ScanHeadTest, AFoldedFieldLineIsRefused) {
  EXPECT_EQ(Scan("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n").status, 400u);
  EXPECT_EQ(Scan("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tb\r\n\r\n").status, 400u);
  // Seen before the head ends.
  EXPECT_EQ(Scan("GET / HTTP/1.1\r\n Host: x\r\n").status, 400u);
  // Spaces inside a value are not folds.
  EXPECT_EQ(Scan("GET / HTTP/1.1\r\nHost: x\r\nX-A: a  b\r\n\r\n").state, State::kComplete);
}

TEST(ScanHeadTest, LineEndsInTheBodyAreNotTheHeadsBusiness) {
  const std::string head = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n";
  const HeadScan scan = Scan(head + "a\nb\n\x01");
  ASSERT_EQ(scan.state, State::kComplete);
  EXPECT_EQ(scan.length, head.size());
}

TEST(ScanHeadTest, BareLfAndBytesThatAreNotHttpAreRefusedAtOnce) {
  EXPECT_EQ(Scan("GET / HTTP/1.1\nHost: x\n\n").status, 400u);
  EXPECT_EQ(Scan("GET / HTTP/1.1\r\nHost: x\n").status, 400u);
  EXPECT_EQ(Scan(std::string("\x16\x03\x01\x02\x00", 5)).status, 400u);
  EXPECT_EQ(Scan("G\x01T / HTTP/1.1\r\n").status, 400u);
}

TEST(TransferCodingsTest, OnlyChunkedAloneFramesABody) {
  EXPECT_FALSE(CheckTransferCodings({"chunked"}));
  EXPECT_FALSE(CheckTransferCodings({"Chunked"}));
  EXPECT_FALSE(CheckTransferCodings({" chunked , "}));  // empty list elements are ignored
}

TEST(TransferCodingsTest, ChunkedNotLastIs400) {
  for (std::string_view te : {"xchunked", "gzip", "chunked, gzip", "chunkedx", "identity"}) {
    auto problem = CheckTransferCodings({te});
    ASSERT_TRUE(problem) << te;
    EXPECT_EQ(problem->status, 400u) << te;
  }
  auto two_lines = CheckTransferCodings({"chunked", "identity"});
  ASSERT_TRUE(two_lines);
  EXPECT_EQ(two_lines->status, 400u);
}

TEST(TransferCodingsTest, AnotherCodingBeforeChunkedIs501) {
  for (std::string_view te : {"identity, chunked", "gzip, chunked", "x-custom;q=1, chunked"}) {
    auto problem = CheckTransferCodings({te});
    ASSERT_TRUE(problem) << te;
    EXPECT_EQ(problem->status, 501u) << te;
  }
  auto two_lines = CheckTransferCodings({"gzip", "chunked"});
  ASSERT_TRUE(two_lines);
  EXPECT_EQ(two_lines->status, 501u);
}

TEST(TransferCodingsTest, MalformedListsAndChunkedTwiceAre400) {
  for (std::string_view te : {"", ",", "chunked, chunked", "gz ip, chunked", "\"chunked\"",
                              "chunked;x=1", "g@zip, chunked"}) {
    auto problem = CheckTransferCodings({te});
    ASSERT_TRUE(problem) << te;
    EXPECT_EQ(problem->status, 400u) << te;
  }
}

TEST(ContentLengthTest, OnlyOneDecimalNumberIsALength) {
  EXPECT_TRUE(IsSingleLength("5"));
  EXPECT_TRUE(IsSingleLength(" 0 "));
  EXPECT_FALSE(IsSingleLength("5, 5"));
  EXPECT_FALSE(IsSingleLength("5,5"));
  EXPECT_FALSE(IsSingleLength(""));
  EXPECT_FALSE(IsSingleLength("+5"));
  EXPECT_FALSE(IsSingleLength("0x5"));
}

}  // namespace
}  // namespace sluice::http
