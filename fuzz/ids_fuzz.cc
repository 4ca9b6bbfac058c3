// libFuzzer target: paste ids and expiry names, the two strings from a URL or a header that reach
// storage. A parsed id must be exactly its input, 12 base62 characters, nothing else.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sluice/service/text.h"
#include "sluice/store/paste.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto id = sluice::store::PasteId::Parse(text)) {
    if (id->view() != text || text.size() != 12) std::abort();
    for (char c : text) {
      const bool base62 =
          (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
      if (!base62) std::abort();
    }
  }
  if (auto ttl = sluice::service::ParseTtl(text)) {
    if (ttl->count() <= 0) std::abort();
  }
  return 0;
}
