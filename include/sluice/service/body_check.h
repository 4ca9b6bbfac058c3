// Body checks: a body fetched from the blob store is served only if it is the one its row
// describes (size, and SHA-256 where the row has one). A store that answers with an empty, short
// or altered body must not have it served as the paste, nor cached.
#pragma once

#include <optional>
#include <string_view>

#include "sluice/store/paste.h"

namespace sluice::service {

/// SHA-256 of `body`.
store::BodyDigest DigestBody(std::string_view body);

/// How a body differs from its row. kUndecodable: the store could not even decode what it holds
/// (store::kBodyUndecodable).
enum class BodyMismatch { kSize, kChecksum, kUndecodable };

/// "size", "checksum" or "undecodable", for logs and metric labels.
const char* BodyMismatchName(BodyMismatch mismatch);

/// Nothing if `body` is the one `meta` describes: its size equals size_bytes and, when the row has
/// a checksum, its SHA-256 equals it. Rows written before checksums are checked by size alone.
std::optional<BodyMismatch> CheckBody(const store::PasteMeta& meta, std::string_view body);

}  // namespace sluice::service
