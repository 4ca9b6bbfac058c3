// The envelope of an end-to-end encrypted paste (docs/encryption.md): what the browser or the CLI
// stores in place of the text, and the only thing of it the server ever sees. The server checks
// its shape (CheckEnvelope) and never decrypts it; the clients build and open it
// (src/app/envelope_crypto.h in the CLI, /static/crypt.js in the browser) with the same
// canonical header as authenticated data (EnvelopeAad).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/common/result.h"

namespace sluice::service {

/// Version 1's fixed values and bounds (docs/encryption.md, "Format").
inline constexpr int kEnvelopeVersion = 1;
inline constexpr std::string_view kEnvelopeAlg = "A256GCM";
inline constexpr std::string_view kEnvelopeKdfName = "PBKDF2-SHA256";
inline constexpr size_t kEnvelopeIvBytes = 12;
inline constexpr size_t kEnvelopeSaltBytes = 16;
inline constexpr size_t kEnvelopeKeyBytes = 32;
inline constexpr size_t kEnvelopeTagBytes = 16;
/// PBKDF2 iterations a v1 envelope may ask for. The floor keeps a client from publishing a paste
/// whose password is cheap to guess; the ceiling keeps a hostile envelope from making a reader's
/// browser spin for minutes. Writers use kEnvelopeDefaultIterations (OWASP's 2023 figure).
inline constexpr uint32_t kEnvelopeMinIterations = 100'000;
inline constexpr uint32_t kEnvelopeMaxIterations = 2'000'000;
inline constexpr uint32_t kEnvelopeDefaultIterations = 600'000;

/// The password step of a v1 envelope: PBKDF2-SHA256 over the link's key and the password.
struct EnvelopeKdf {
  uint32_t iterations = kEnvelopeDefaultIterations;
  std::string salt;  // kEnvelopeSaltBytes raw bytes
};

/// A parsed v1 envelope, binary fields decoded.
struct Envelope {
  std::string iv;  // kEnvelopeIvBytes raw bytes
  /// The plaintext was compressed with raw DEFLATE (RFC 1951) before encryption.
  bool deflated = false;
  std::optional<EnvelopeKdf> kdf;
  /// Ciphertext followed by the 16-byte GCM tag.
  std::string ciphertext;
};

/// Parses and checks an envelope's shape without decrypting anything: one JSON object with
/// exactly the keys v, alg, iv, z, kdf and ct (each once, any order, JSON whitespace allowed),
/// v = 1, alg "A256GCM", z "none" or "deflate-raw", kdf null or exactly {name "PBKDF2-SHA256",
/// iter an integer within [kEnvelopeMinIterations, kEnvelopeMaxIterations], salt}, and iv, salt
/// and ct canonical unpadded base64url of 12, 16 and at least 16 bytes. The text itself must be
/// at most `max_bytes` long (the paste limit) and is read in one pass without building a tree.
/// InvalidArgument (reason "bad_envelope") with what is wrong otherwise; never throws.
Result<Envelope> CheckEnvelope(std::string_view text, uint64_t max_bytes);

/// The authenticated data of an envelope: its canonical serialisation without "ct", e.g.
/// {"v":1,"alg":"A256GCM","iv":"...","z":"none","kdf":null}. Swapping any header field of a
/// stored envelope then fails the tag.
std::string EnvelopeAad(const Envelope& envelope);

/// The canonical serialisation of a whole envelope: EnvelopeAad's text with ,"ct":"..." before
/// the closing brace. What writers store.
std::string SerializeEnvelope(const Envelope& envelope);

/// Unpadded base64url (RFC 4648, section 5), as the envelope and the link's key use it.
std::string Base64UrlEncode(std::string_view bytes);
/// Decodes canonical unpadded base64url only: the alphabet A-Z a-z 0-9 - _, no '=', no length of
/// 4n+1, and zero bits after the last byte (so each value has exactly one spelling).
std::optional<std::string> Base64UrlDecode(std::string_view text);

}  // namespace sluice::service
