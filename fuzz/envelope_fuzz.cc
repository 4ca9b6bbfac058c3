// libFuzzer target: the shape check of an encrypted paste's envelope (src/service/envelope.cc),
// the one parser a create marked encrypted runs on the whole body. Any input either passes with
// fields of the documented sizes or is refused with reason bad_envelope; an envelope that passes
// serialises canonically and checks again to the same fields; base64url decoding round-trips.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sluice/service/envelope.h"

namespace s = sluice::service;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto checked = s::CheckEnvelope(text, 1'000'000);
  if (!checked.ok()) {
    if (checked.error().reason != "bad_envelope" || checked.error().message.empty()) std::abort();
  } else {
    const s::Envelope& e = *checked;
    if (e.iv.size() != s::kEnvelopeIvBytes || e.ciphertext.size() < s::kEnvelopeTagBytes) {
      std::abort();
    }
    if (e.kdf && (e.kdf->salt.size() != s::kEnvelopeSaltBytes ||
                  e.kdf->iterations < s::kEnvelopeMinIterations ||
                  e.kdf->iterations > s::kEnvelopeMaxIterations)) {
      std::abort();
    }
    const std::string canonical = s::SerializeEnvelope(e);
    auto again = s::CheckEnvelope(canonical, 4'000'000);
    if (!again.ok() || s::SerializeEnvelope(*again) != canonical) std::abort();
    if (again->iv != e.iv || again->ciphertext != e.ciphertext || again->deflated != e.deflated) {
      std::abort();
    }
  }
  if (auto bytes = s::Base64UrlDecode(text)) {
    if (s::Base64UrlEncode(*bytes) != text) std::abort();
  }
  return 0;
}
