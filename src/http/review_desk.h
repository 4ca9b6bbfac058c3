// Who may use the review page (docs/moderation.md, "The review page"): the operator signed in with
// the admin token, or named by a trusted forward-auth proxy. The admin JSON API keeps its bearer
// token; a browser cannot hold that token safely, so a sign-in turns it into a session cookie that
// is not the token: an HMAC, under a key derived from the token, over the session's expiry and a
// random id. Nothing is kept on the server, so every process that reads the same token file takes
// the same cookie, and replacing the token ends every session. The forms' CSRF token is an HMAC of
// the session's id (or the forward-auth name) under the same key.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/admission/keyed_limiter.h"
#include "sluice/admission/token_bucket.h"
#include "sluice/common/clock.h"

namespace sluice::http {

/// The review page's sessions, form tokens and sign-in budget. Thread-safe.
class ReviewDesk {
 public:
  using Key = std::array<unsigned char, 32>;
  /// How long a session lasts from its sign-in; there is no renewal, so a stolen cookie is
  /// worth at most this long.
  static constexpr std::chrono::hours kSessionLifetime{12};
  /// Sign-in attempts: each client key's own bucket, and all clients' together. The global one
  /// bounds what a stranger with many addresses costs (one SHA-256 per attempt) and can at worst
  /// make token sign-ins wait; the forward-auth path and open sessions never draw on either.
  static constexpr admission::TokenBucketPolicy kLoginPerClient{1.0 / 30, 5};
  static constexpr admission::TokenBucketPolicy kLoginGlobal{1, 20};

  /// `admin_token_sha256`: the admin token's digest, from which the key is derived; without one
  /// (no token file: only forward-auth can sign in) the key is random, made once per process.
  ReviewDesk(const std::optional<Key>& admin_token_sha256, const Clock& clock);

  /// A new session's cookie value: "EXPIRY.ID.MAC" (Unix seconds, 32 hex digits, 64 hex digits).
  std::string OpenSession() const;
  /// The session's id when `cookie` is one OpenSession made under this key and it has not
  /// expired; nullopt otherwise (malformed, forged, expired).
  std::optional<std::string> SessionOf(std::string_view cookie) const;
  /// The CSRF token of the forms shown to `who` (a session's id, or "user:" and a forward-auth
  /// name): 64 hex digits.
  std::string FormToken(std::string_view who) const;
  /// True when `presented` is `who`'s form token; compared in constant time.
  bool IsFormToken(std::string_view who, std::string_view presented) const;
  /// Spends one sign-in attempt of `client_key` and of everyone's; refused spends nothing.
  admission::TakeDecision AdmitLogin(std::string_view client_key);

 private:
  std::string Mac(std::string_view label, std::string_view text) const;

  Key key_{};
  const Clock& clock_;
  admission::KeyedLimiter per_client_;
  admission::TokenBucket global_;
};

}  // namespace sluice::http
