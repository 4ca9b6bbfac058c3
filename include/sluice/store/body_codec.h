// How the embedded store keeps a small body on disk: as received, or LZ4-compressed when that
// saves enough. Pastes are text (code, logs, configuration), which LZ4 halves at about 500 MB/s
// per core; every byte not stored is a byte the commit does not write to the WAL, the checkpoint
// does not copy and the flush does not wait for (bench/results/creates-compression.md).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "sluice/common/result.h"

namespace sluice::store {

/// The form of a stored body, as the column `inline_bodies.codec` of meta.db records it.
enum class BodyCodec : int64_t {
  kRaw = 0,  ///< the bytes as received
  kLz4 = 1,  ///< 4 bytes of the raw size (little-endian), then one LZ4 block
};

struct EncodedBody {
  std::shared_ptr<const std::string> bytes;
  BodyCodec codec = BodyCodec::kRaw;
};

/// The body in the form to store: compressed if that saves at least an eighth, else `body` itself
/// (shared, not copied). Bodies under 128 bytes and over 1 MiB are kept as they are. Thread-safe;
/// runs on the calling thread.
EncodedBody EncodeBody(std::shared_ptr<const std::string> body);

/// The body `stored` holds in form `codec`. A stored body that does not decode, or would decode to
/// more than `max_size` bytes, is an Internal error with reason kBodyUndecodable
/// (include/sluice/store/blob_store.h), never a crash or an allocation of what a damaged header
/// claims. Thread-safe.
Result<std::string> DecodeBody(std::span<const unsigned char> stored, int64_t codec,
                               size_t max_size);

}  // namespace sluice::store
