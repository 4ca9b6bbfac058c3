// The embedded store's body codec (include/sluice/store/body_codec.h): what it compresses and what
// it leaves, that every body comes back byte for byte, that damage on disk is an error and never a
// crash or a huge allocation, and that many threads may encode and decode at once (this binary
// also runs under ThreadSanitizer: Makefile, check-tsan).
#include "sluice/store/body_codec.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

namespace sluice::store {
namespace {

std::span<const unsigned char> Bytes(const std::string& s) {
  return {reinterpret_cast<const unsigned char*>(s.data()), s.size()};
}

std::string Text(size_t size, uint32_t seed) {
  // Code-like text: words from a small vocabulary, the way a paste repeats itself.
  static const char* const kWords[] = {"int ",  "return ", "const ", "std::string ", "if (",
                                       ") {\n", "}\n",     "for ",   "value",        " = ",
                                       "++i; ", "// ",     "auto ",  "nullptr",      "\n  "};
  std::mt19937 rng(seed);
  std::string out;
  while (out.size() < size) out += kWords[rng() % std::size(kWords)];
  out.resize(size);
  return out;
}

std::string Noise(size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

std::string RoundTrip(const std::string& body) {
  const EncodedBody stored = EncodeBody(std::make_shared<const std::string>(body));
  auto back = DecodeBody(Bytes(*stored.bytes), static_cast<int64_t>(stored.codec), body.size());
  EXPECT_TRUE(back.ok()) << back.error().message;
  return back.ok() ? *back : std::string();
}

TEST(BodyCodec, CompressesTextAndReturnsItByteForByte) {
  const std::string body = Text(10240, 1);
  const EncodedBody stored = EncodeBody(std::make_shared<const std::string>(body));
  EXPECT_EQ(stored.codec, BodyCodec::kLz4);
  EXPECT_LT(stored.bytes->size(), body.size() / 2);
  EXPECT_EQ(RoundTrip(body), body);
}

TEST(BodyCodec, KeepsWhatDoesNotCompressAsItIsWithoutACopy) {
  auto noise = std::make_shared<const std::string>(Noise(10240, 2));
  const EncodedBody stored = EncodeBody(noise);
  EXPECT_EQ(stored.codec, BodyCodec::kRaw);
  EXPECT_EQ(stored.bytes.get(), noise.get());
}

// Compression runs on an event loop: a body far over the default inline limit would hold it for
// milliseconds, so it is stored as received however well it would compress.
TEST(BodyCodec, KeepsBodiesOverAMebibyteAsTheyAre) {
  auto large = std::make_shared<const std::string>((size_t{1} << 20) + 1, 'a');
  const EncodedBody stored = EncodeBody(large);
  EXPECT_EQ(stored.codec, BodyCodec::kRaw);
  EXPECT_EQ(stored.bytes.get(), large.get());
  EXPECT_EQ(EncodeBody(std::make_shared<const std::string>(size_t{1} << 20, 'a')).codec,
            BodyCodec::kLz4);
}

TEST(BodyCodec, KeepsSmallBodiesAsTheyAre) {
  for (const std::string& body : {std::string(), std::string("x"), std::string(127, 'a')}) {
    const EncodedBody stored = EncodeBody(std::make_shared<const std::string>(body));
    EXPECT_EQ(stored.codec, BodyCodec::kRaw) << body.size();
    EXPECT_EQ(*stored.bytes, body);
  }
  EXPECT_EQ(EncodeBody(std::make_shared<const std::string>(128, 'a')).codec, BodyCodec::kLz4);
  EXPECT_EQ(EncodeBody(nullptr).bytes, nullptr);
}

TEST(BodyCodec, EverySizeAndShapeComesBack) {
  for (size_t size : {128u, 129u, 1000u, 4096u, 65535u, 65536u, 65537u, 300000u}) {
    EXPECT_EQ(RoundTrip(Text(size, 3)), Text(size, 3)) << size;
    EXPECT_EQ(RoundTrip(Noise(size, 4)), Noise(size, 4)) << size;
    EXPECT_EQ(RoundTrip(std::string(size, '\0')), std::string(size, '\0')) << size;
  }
}

TEST(BodyCodec, RawBodiesDecodeAsStored) {
  const std::string stored = "as received \xff\x00 bytes";
  EXPECT_EQ(*DecodeBody(Bytes(stored), 0, 0), stored);  // the row's size bounds only compressed
}

void ExpectCorrupt(const std::string& stored, int64_t codec, size_t max_size) {
  auto got = DecodeBody(Bytes(stored), codec, max_size);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, ErrorCode::kInternal);
  EXPECT_EQ(got.error().reason, "stored_body_corrupt");
}

TEST(BodyCodec, DamageOnDiskIsAnErrorNotACrash) {
  const std::string body = Text(10240, 5);
  const std::string good = *EncodeBody(std::make_shared<const std::string>(body)).bytes;
  ExpectCorrupt(good, 7, body.size());               // a form this binary does not know
  ExpectCorrupt(good.substr(0, 3), 1, body.size());  // shorter than the size header
  ExpectCorrupt(good.substr(0, good.size() / 2), 1, body.size());  // cut short
  ExpectCorrupt(good, 1, body.size() - 1);  // more than the row says it holds
  std::string huge = good;
  huge[3] = '\x7f';  // claims about 2 GB: refused before anything is allocated
  ExpectCorrupt(huge, 1, 65536);
  std::string shorter = good;
  shorter[0] = static_cast<char>(shorter[0] - 1);  // one byte fewer than the block holds
  ExpectCorrupt(shorter, 1, body.size());
  ExpectCorrupt(std::string(4, '\0') + Noise(100, 6), 1, 65536);

  // Any single flipped byte decodes to an error or to a body of the claimed size, never past it
  // (AddressSanitizer watches the buffers in make test).
  for (size_t at = 0; at < good.size(); at += 7) {
    std::string flipped = good;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x5a);
    auto got = DecodeBody(Bytes(flipped), 1, body.size());
    if (got.ok()) {
      EXPECT_LE(got->size(), body.size());
    }
  }
}

// Encoders and decoders on many threads at once, with bodies of different shapes and sizes: the
// read pool decodes while the event loops encode (src/store/sqlite/sqlite_meta_store.h,
// sqlite_meta_reads.cc).
TEST(BodyCodec, ManyThreadsEncodeAndDecodeAtOnce) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 150;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      std::mt19937 rng(static_cast<uint32_t>(t));
      for (int round = 0; round < kRounds; ++round) {
        const size_t size = rng() % 70000;
        const std::string body = (round % 3 == 0) ? Noise(size, rng()) : Text(size, rng());
        const EncodedBody stored = EncodeBody(std::make_shared<const std::string>(body));
        auto back = DecodeBody(Bytes(*stored.bytes), static_cast<int64_t>(stored.codec), size);
        if (!back.ok() || *back != body) failures.fetch_add(1);
        // And a damaged one now and then, beside the others.
        if (round % 10 == 0 && stored.codec == BodyCodec::kLz4) {
          std::string cut = stored.bytes->substr(0, stored.bytes->size() / 2);
          if (DecodeBody(Bytes(cut), 1, size).ok()) failures.fetch_add(1);
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace sluice::store
