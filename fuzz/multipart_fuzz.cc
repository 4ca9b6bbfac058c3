// libFuzzer target: the multipart/form-data reader. The first line of the input is the
// Content-Type, the rest the body; every part's content must lie inside the body.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "../src/http/multipart.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string_view content_type = input.substr(0, newline);
  const std::string_view body = newline == std::string_view::npos ? "" : input.substr(newline + 1);
  const auto boundary = sluice::http::MultipartBoundary(content_type);
  if (!boundary) return 0;
  if (auto parts = sluice::http::ParseMultipart(body, *boundary)) {
    for (const auto& part : *parts) {
      if (part.content.data() < body.data() ||
          part.content.data() + part.content.size() > body.data() + body.size()) {
        std::abort();
      }
    }
  }
  return 0;
}
