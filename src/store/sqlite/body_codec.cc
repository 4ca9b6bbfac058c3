#include "sluice/store/body_codec.h"

#include <lz4.h>

#include <limits>

#include "sluice/store/blob_store.h"

namespace sluice::store {
namespace {

constexpr size_t kSizeHeader = 4;
// Below this a body is mostly the header and the row around it: nothing worth saving.
constexpr size_t kSmallestWorthCompressing = 128;
// Above this a body is stored as received: compression runs on the caller's thread, an event loop,
// and 1 MiB is about 2 ms of it on the benchmark machine. Bodies this large only reach the table
// when an operator raises inline_body_bytes far above its 64 KiB default.
constexpr size_t kLargestCompressed = size_t{1} << 20;

Error Corrupt(std::string_view why) {
  return MakeError(ErrorCode::kInternal, std::string("stored body does not decode: ") += why,
                   std::string(kBodyUndecodable));
}

}  // namespace

EncodedBody EncodeBody(std::shared_ptr<const std::string> body) {
  if (!body || body->size() < kSmallestWorthCompressing || body->size() > kLargestCompressed) {
    return {std::move(body), BodyCodec::kRaw};
  }
  const int raw_size = static_cast<int>(body->size());
  // Worth it only if it saves an eighth: a body that barely compresses would cost a decode on
  // every cold read for nothing.
  const int keep_below = raw_size - raw_size / 8;
  auto stored = std::make_shared<std::string>(kSizeHeader + static_cast<size_t>(keep_below), '\0');
  // LZ4's state is the caller's (the *_extState call), one per thread: liblz4 itself keeps no
  // state between calls (lz4.c: LZ4_compress_fast_extState initialises the state it is given).
  thread_local LZ4_stream_t state;
  const int written = LZ4_compress_fast_extState(&state, body->data(), stored->data() + kSizeHeader,
                                                 raw_size, keep_below, 1);
  if (written <= 0) return {std::move(body), BodyCodec::kRaw};  // did not fit: not worth it
  const auto size = static_cast<uint32_t>(raw_size);
  for (size_t i = 0; i < kSizeHeader; ++i) (*stored)[i] = static_cast<char>(size >> (8 * i));
  stored->resize(kSizeHeader + static_cast<size_t>(written));
  return {std::move(stored), BodyCodec::kLz4};
}

Result<std::string> DecodeBody(std::span<const unsigned char> stored, int64_t codec,
                               size_t max_size) {
  if (codec == static_cast<int64_t>(BodyCodec::kRaw)) {
    return std::string(reinterpret_cast<const char*>(stored.data()), stored.size());
  }
  if (codec != static_cast<int64_t>(BodyCodec::kLz4)) return Corrupt("unknown codec");
  if (stored.size() < kSizeHeader) return Corrupt("shorter than its header");
  uint32_t size = 0;
  for (size_t i = 0; i < kSizeHeader; ++i) size |= static_cast<uint32_t>(stored[i]) << (8 * i);
  if (size > max_size || size > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
    return Corrupt("claims more bytes than a body may have");
  }
  const size_t compressed = stored.size() - kSizeHeader;
  if (compressed > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return Corrupt("too long");
  }
  std::string body(size, '\0');
  // The _safe decoder never reads or writes outside the buffers it is given, whatever the input.
  const int got =
      LZ4_decompress_safe(reinterpret_cast<const char*>(stored.data() + kSizeHeader), body.data(),
                          static_cast<int>(compressed), static_cast<int>(size));
  if (got < 0 || static_cast<uint32_t>(got) != size) return Corrupt("not a whole LZ4 block");
  return body;
}

}  // namespace sluice::store
