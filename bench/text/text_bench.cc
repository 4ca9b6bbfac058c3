// CheckPasteText (src/service/text.cc) against the branchy decoder it replaced, kept here as the
// "before" of bench/results/profile/create-after.md: same inputs, same binary, bytes per second.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "sluice/service/text.h"

namespace sluice::service {
namespace {

// The validator before the DFA (commit 0a3fc58's src/service/text.cc), verbatim but for its name.
TextProblem BranchyCheckPasteText(std::string_view body) {
  if (body.empty()) return TextProblem::kEmpty;
  const auto* p = reinterpret_cast<const unsigned char*>(body.data());
  const size_t n = body.size();
  size_t i = 0;
  while (i < n) {
    while (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, p + i, 8);
      const bool high_bit = (word & 0x8080808080808080ULL) != 0;
      const bool has_zero = ((word - 0x0101010101010101ULL) & ~word & 0x8080808080808080ULL) != 0;
      if (high_bit || has_zero) break;
      i += 8;
    }
    if (i >= n) break;
    const unsigned char c = p[i];
    if (c < 0x80) {
      if (c == 0) return TextProblem::kNulByte;
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    uint32_t min;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return TextProblem::kInvalidUtf8;
    }
    if (i + len > n) return TextProblem::kInvalidUtf8;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return TextProblem::kInvalidUtf8;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return TextProblem::kInvalidUtf8;
    }
    i += len;
  }
  return TextProblem::kNone;
}

// 10,240 bytes of the text bench/wrk/create.lua sends (mostly multi-byte characters), or of ASCII.
std::string Body(bool multibyte) {
  const std::string unit = multibyte
                               ? "The quick brown fox \xE2\x80\x94 na\xC3\xAFve caf\xC3\xA9, "
                                 "\"Gr\xC3\xBC\xC3\x9F"
                                 "e\", \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E, "
                                 "\xE2\x9C\x93 ok \xF0\x9F\x9A\x80\n"
                               : "The quick brown fox jumps over the lazy dog, again and again.\n";
  std::string body;
  while (body.size() + unit.size() <= 10240) body += unit;
  body.append(10240 - body.size(), '.');
  return body;
}

template <TextProblem (*Check)(std::string_view)>
void Run(benchmark::State& state, bool multibyte) {
  const std::string body = Body(multibyte);
  if (Check(body) != TextProblem::kNone) state.SkipWithError("the body is not valid text");
  for (auto _ : state) benchmark::DoNotOptimize(Check(body));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(body.size()));
}

void BM_Before_Multibyte(benchmark::State& s) { Run<BranchyCheckPasteText>(s, true); }
void BM_After_Multibyte(benchmark::State& s) { Run<CheckPasteText>(s, true); }
void BM_Before_Ascii(benchmark::State& s) { Run<BranchyCheckPasteText>(s, false); }
void BM_After_Ascii(benchmark::State& s) { Run<CheckPasteText>(s, false); }
BENCHMARK(BM_Before_Multibyte);
BENCHMARK(BM_After_Multibyte);
BENCHMARK(BM_Before_Ascii);
BENCHMARK(BM_After_Ascii);

}  // namespace
}  // namespace sluice::service

BENCHMARK_MAIN();
