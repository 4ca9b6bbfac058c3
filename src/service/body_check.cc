#include "sluice/service/body_check.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

namespace sluice::service {

store::BodyDigest DigestBody(std::string_view body) {
  store::BodyDigest digest{};
  SHA256(reinterpret_cast<const unsigned char*>(body.data()), body.size(), digest.data());
  return digest;
}

const char* BodyMismatchName(BodyMismatch mismatch) {
  switch (mismatch) {
    case BodyMismatch::kSize:
      return "size";
    case BodyMismatch::kChecksum:
      return "checksum";
    case BodyMismatch::kUndecodable:
      return "undecodable";
  }
  return "unknown";
}

std::optional<BodyMismatch> CheckBody(const store::PasteMeta& meta, std::string_view body) {
  // Size first: it is free, and it alone catches an empty or truncated answer.
  if (body.size() != meta.size_bytes) return BodyMismatch::kSize;
  if (meta.body_sha256 && DigestBody(body) != *meta.body_sha256) return BodyMismatch::kChecksum;
  return std::nullopt;
}

}  // namespace sluice::service
