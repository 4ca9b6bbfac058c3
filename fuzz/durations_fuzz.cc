// libFuzzer target: the duration parser that reads every time setting of the configuration and
// `sluice plan --latency`. A parsed duration is never negative.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sluice/common/duration.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = sluice::ParseDuration(text);
  if (parsed.ok() && parsed->count() < 0) std::abort();
  return 0;
}
