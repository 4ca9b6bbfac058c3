// Creator tokens as the metadata store keeps them (docs/admission.md, "Creator tokens"): the
// public id, the label, the SHA-256 of the secret (never the secret) and the token's own budget.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/store/paste.h"

namespace sluice::store {

/// One creator token. Rates are whole numbers so that every backend stores them exactly.
struct CreatorToken {
  /// Public and short (8 base62 characters): what `token list` shows and `token revoke` takes.
  std::string id;
  /// The operator's name for it (1 to 64 of the characters a forward-auth name may hold).
  std::string label;
  /// SHA-256 of the secret, the only form in which it is kept.
  TokenHash secret_sha256{};
  /// Creates per 1,000 seconds (10/s is 10,000), so a rate below one a second stays exact.
  int64_t rate_milli = 0;
  /// Creates at once.
  int64_t burst = 0;
  /// Create bytes a second and at once; 0: the server's per-address byte budget.
  int64_t bytes_rate = 0;
  int64_t bytes_burst = 0;
  /// Unix seconds; 0: never.
  int64_t expires_at = 0;
  int64_t created_at = 0;
  /// Unix seconds; 0: in force.
  int64_t revoked_at = 0;

  bool LiveAt(int64_t now) const {
    return revoked_at == 0 && (expires_at == 0 || expires_at > now);
  }
};

/// Every token, revoked ones included, and the version they were read at (one snapshot).
struct CreatorTokenList {
  int64_t version = 0;
  std::vector<CreatorToken> tokens;
};

/// The reason of the InsufficientStorage error of a store that holds max_creator_tokens live
/// tokens.
inline constexpr std::string_view kCreatorTokensFull = "creator_tokens_full";

}  // namespace sluice::store
