#include "envelope_crypto.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <zlib.h>

#include <memory>

namespace sluice::app {

namespace {

using service::Envelope;
using service::EnvelopeKdf;
using service::kEnvelopeIvBytes;
using service::kEnvelopeKeyBytes;
using service::kEnvelopeSaltBytes;
using service::kEnvelopeTagBytes;

Error Invalid(std::string message, std::string reason) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message), std::move(reason));
}

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

const unsigned char* U(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}
unsigned char* U(std::string& s) { return reinterpret_cast<unsigned char*>(s.data()); }

/// The AES key: the link's key itself, or PBKDF2-SHA256(key || password, salt, iter).
Result<std::string> AesKey(std::string_view link_key, const std::optional<EnvelopeKdf>& kdf,
                           const std::optional<std::string>& password) {
  if (!kdf) return std::string(link_key);
  std::string secret(link_key);
  secret += *password;
  std::string out(kEnvelopeKeyBytes, '\0');
  const int ok =
      PKCS5_PBKDF2_HMAC(secret.data(), static_cast<int>(secret.size()), U(kdf->salt),
                        static_cast<int>(kdf->salt.size()), static_cast<int>(kdf->iterations),
                        EVP_sha256(), static_cast<int>(out.size()), U(out));
  OPENSSL_cleanse(secret.data(), secret.size());
  if (ok != 1) return MakeError(ErrorCode::kInternal, "PBKDF2 failed", "crypto");
  return out;
}

// Raw DEFLATE (windowBits -15), as CompressionStream("deflate-raw") writes it.
Result<std::string> Deflate(std::string_view in) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return MakeError(ErrorCode::kInternal, "deflateInit2 failed", "zlib");
  }
  std::string out(deflateBound(&z, in.size()), '\0');
  z.next_in = const_cast<Bytef*>(U(in));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = U(out);
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return MakeError(ErrorCode::kInternal, "deflate failed", "zlib");
  return out;
}

// Inflation in chunks that stops past `cap`: a few kilobytes of envelope can otherwise inflate to
// gigabytes (a zip bomb), and the tag says only that the creator wrote them.
Result<std::string> Inflate(std::string_view in, uint64_t cap) {
  z_stream z{};
  if (inflateInit2(&z, -15) != Z_OK) {
    return MakeError(ErrorCode::kInternal, "inflateInit2 failed", "zlib");
  }
  std::string out;
  z.next_in = const_cast<Bytef*>(U(in));
  z.avail_in = static_cast<uInt>(in.size());
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    const size_t produced = sizeof buf - z.avail_out;
    if (out.size() + produced > cap) {
      inflateEnd(&z);
      return MakeError(ErrorCode::kTooLarge,
                       fmt::format("the paste's text inflates past {} bytes; not opened", cap),
                       "too_large");
    }
    out.append(buf, produced);
    if (rc == Z_OK && produced == 0 && z.avail_in == 0) break;  // truncated stream
  }
  const bool trailing = z.avail_in != 0;
  inflateEnd(&z);
  if (rc != Z_STREAM_END || trailing) {
    return Invalid(
        "the paste's compressed text is damaged (its tag verified, so its creator wrote it so)",
        "damaged");
  }
  return out;
}

Result<std::string> RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(U(out), static_cast<int>(n)) != 1) {
    return MakeError(ErrorCode::kInternal, "the system's random source failed", "crypto");
  }
  return out;
}

}  // namespace

Result<std::string> SealWithInputs(std::string_view plaintext, const SealInputs& inputs,
                                   const std::optional<std::string>& password) {
  if (inputs.key.size() != kEnvelopeKeyBytes || inputs.iv.size() != kEnvelopeIvBytes) {
    return Invalid("the key must be 32 bytes and the IV 12", "bad_key");
  }
  if (inputs.kdf.has_value() != password.has_value()) {
    return Invalid("a password needs PBKDF2 parameters, and PBKDF2 parameters a password",
                   "bad_key");
  }
  if (inputs.kdf && (inputs.kdf->salt.size() != kEnvelopeSaltBytes ||
                     inputs.kdf->iterations < service::kEnvelopeMinIterations ||
                     inputs.kdf->iterations > service::kEnvelopeMaxIterations)) {
    return Invalid("the salt must be 16 bytes and the iterations within the bounds", "bad_key");
  }
  Envelope e;
  e.iv = inputs.iv;
  e.kdf = inputs.kdf;
  std::string compressed;
  if (inputs.compress && !plaintext.empty()) {
    auto deflated = Deflate(plaintext);
    if (!deflated.ok()) return deflated.error();
    if (deflated->size() < plaintext.size()) {
      compressed = std::move(*deflated);
      e.deflated = true;
    }
  }
  const std::string_view clear = e.deflated ? std::string_view(compressed) : plaintext;
  auto key = AesKey(inputs.key, e.kdf, password);
  if (!key.ok()) return key.error();
  const std::string aad = service::EnvelopeAad(e);

  CipherCtx ctx(EVP_CIPHER_CTX_new());
  e.ciphertext.assign(clear.size() + kEnvelopeTagBytes, '\0');
  int len = 0;
  int total = 0;
  bool ok =
      ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kEnvelopeIvBytes, nullptr) == 1 &&
      EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, U(*key), U(e.iv)) == 1 &&
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, U(aad), static_cast<int>(aad.size())) == 1;
  ok = ok && EVP_EncryptUpdate(ctx.get(), U(e.ciphertext), &len, U(clear),
                               static_cast<int>(clear.size())) == 1;
  total = len;
  ok = ok && EVP_EncryptFinal_ex(ctx.get(), U(e.ciphertext) + total, &len) == 1;
  total += len;
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kEnvelopeTagBytes,
                                 U(e.ciphertext) + total) == 1;
  OPENSSL_cleanse(key->data(), key->size());
  if (!ok) return MakeError(ErrorCode::kInternal, "AES-256-GCM encryption failed", "crypto");
  return service::SerializeEnvelope(e);
}

Result<SealedPaste> SealPaste(std::string_view plaintext,
                              const std::optional<std::string>& password) {
  SealInputs inputs;
  auto key = RandomBytes(kEnvelopeKeyBytes);
  auto iv = RandomBytes(kEnvelopeIvBytes);
  if (!key.ok()) return key.error();
  if (!iv.ok()) return iv.error();
  inputs.key = std::move(*key);
  inputs.iv = std::move(*iv);
  if (password) {
    auto salt = RandomBytes(kEnvelopeSaltBytes);
    if (!salt.ok()) return salt.error();
    inputs.kdf = EnvelopeKdf{service::kEnvelopeDefaultIterations, std::move(*salt)};
  }
  auto envelope = SealWithInputs(plaintext, inputs, password);
  if (!envelope.ok()) return envelope.error();
  return SealedPaste{std::move(*envelope), service::Base64UrlEncode(inputs.key)};
}

Result<std::string> OpenEnvelope(std::string_view envelope_text, std::string_view key_base64url,
                                 const std::optional<std::string>& password,
                                 uint64_t max_plaintext_bytes) {
  auto link_key = service::Base64UrlDecode(key_base64url);
  if (!link_key || link_key->size() != kEnvelopeKeyBytes) {
    return Invalid(
        "the link's key (after '#') is damaged: it must be 43 characters of base64url; copy the "
        "whole link",
        "bad_key");
  }
  // An envelope never needs more room than the text it carries, plus its header and base64's
  // third; compressed, less.
  auto envelope = service::CheckEnvelope(envelope_text, max_plaintext_bytes * 2 + 4096);
  if (!envelope.ok()) return envelope.error();
  if (envelope->kdf && !password) {
    return Invalid("this paste is protected by a password", "password_required");
  }
  const std::optional<std::string> used = envelope->kdf ? password : std::nullopt;
  auto key = AesKey(*link_key, envelope->kdf, used);
  if (!key.ok()) return key.error();
  const std::string aad = service::EnvelopeAad(*envelope);
  const std::string& ct = envelope->ciphertext;
  const size_t body = ct.size() - kEnvelopeTagBytes;
  std::string clear(body, '\0');
  std::string tag = ct.substr(body);
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  bool ok =
      ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kEnvelopeIvBytes, nullptr) == 1 &&
      EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr, U(*key), U(envelope->iv)) == 1 &&
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, U(aad), static_cast<int>(aad.size())) == 1;
  ok = ok && EVP_DecryptUpdate(ctx.get(), U(clear), &len, U(std::string_view(ct).substr(0, body)),
                               static_cast<int>(body)) == 1;
  const int written = len;
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kEnvelopeTagBytes, U(tag)) == 1;
  // The tag is checked here, and nothing decrypted is returned unless it verified.
  ok = ok && EVP_DecryptFinal_ex(ctx.get(), U(clear) + written, &len) == 1;
  OPENSSL_cleanse(key->data(), key->size());
  if (!ok) {
    OPENSSL_cleanse(clear.data(), clear.size());
    return Invalid(envelope->kdf ? "cannot decrypt: wrong password, or the link's key is not this "
                                   "paste's (or the paste is damaged)"
                                 : "cannot decrypt: the link's key is not this paste's, or the "
                                   "paste is damaged",
                   "wrong_key");
  }
  if (!envelope->deflated) {
    if (clear.size() > max_plaintext_bytes) {
      return MakeError(
          ErrorCode::kTooLarge,
          fmt::format("the paste's text is over {} bytes; not opened", max_plaintext_bytes),
          "too_large");
    }
    return clear;
  }
  return Inflate(clear, max_plaintext_bytes);
}

}  // namespace sluice::app
