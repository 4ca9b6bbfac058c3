// Sealing and opening the envelope of an encrypted paste in the CLI (docs/encryption.md): the
// same format and test vectors as the browser's /static/crypt.js, with OpenSSL's AES-256-GCM and
// PBKDF2 and zlib's raw DEFLATE. The server links none of this: it only checks the envelope's
// shape (sluice/service/envelope.h). Single-threaded use; OpenSSL 3's EVP calls and zlib streams
// share no state between calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/common/result.h"
#include "sluice/service/envelope.h"

namespace sluice::app {

/// A new paste's envelope and the key that opens it.
struct SealedPaste {
  std::string envelope;  // SerializeEnvelope's text: what the server stores
  std::string key;       // the link's fragment: 43 characters of base64url (32 bytes)
};

/// Every random choice of a seal, fixed: what the test vectors name.
struct SealInputs {
  std::string key;  // 32 raw bytes
  std::string iv;   // 12 raw bytes
  /// Compress before encrypting when that makes the text smaller. Default: true.
  bool compress = true;
  /// With a password, the PBKDF2 parameters (salt of 16 raw bytes).
  std::optional<service::EnvelopeKdf> kdf;
};

/// The envelope of `plaintext` with fixed inputs (the vectors' way). InvalidArgument for inputs
/// of the wrong length, or a password without kdf parameters (and the reverse).
Result<std::string> SealWithInputs(std::string_view plaintext, const SealInputs& inputs,
                                   const std::optional<std::string>& password);

/// A fresh key, IV and (with a password) salt from the system's CSPRNG, 600,000 iterations.
Result<SealedPaste> SealPaste(std::string_view plaintext,
                              const std::optional<std::string>& password);

/// The plaintext of an envelope. Errors say which kind of failure it was, for a person:
/// InvalidArgument "bad_key" (the link's key is not 43 base64url characters), "bad_envelope" (not
/// a v1 envelope: CheckEnvelope's reason), "password_required" (the envelope has a password and
/// none was given), "wrong_key" (the tag did not verify: a wrong password, a key that is not this
/// paste's, or a damaged envelope; GCM cannot tell these apart), "damaged" (the tag verified but
/// the compressed data does not inflate), and TooLarge "too_large" when the text would inflate
/// past `max_plaintext_bytes` (inflation stops there: a small envelope cannot exhaust memory).
Result<std::string> OpenEnvelope(std::string_view envelope_text, std::string_view key_base64url,
                                 const std::optional<std::string>& password,
                                 uint64_t max_plaintext_bytes);

}  // namespace sluice::app
