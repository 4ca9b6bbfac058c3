// A driver for the fuzz targets without libFuzzer, so that `make test` can run them in the g++
// AddressSanitizer+UBSan build it makes anyway instead of a second, clang-only build of the whole
// server (see fuzz/CMakeLists.txt). It replays every seed of the corpus directories it is given,
// then a fixed number of mutations of them: byte flips, insertions, deletions, duplicated spans,
// splices of two seeds and truncations, drawn from a fixed PRNG seed so that a failure reproduces
// by rerunning the same command. It has no coverage feedback: `make fuzz` (libFuzzer) is what
// explores; this keeps every target compiling and checks the seeds and their near neighbours on
// each change. Small on purpose: libFuzzer's own standalone driver needs clang.
//
//   [SLUICE_FUZZ_LAST_INPUT=FILE] fuzz_replay_<target> [--mutations N] DIR_OR_FILE...
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

using Input = std::vector<uint8_t>;

Input ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Input(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void CollectSeeds(const std::filesystem::path& path, std::vector<Input>& seeds) {
  if (std::filesystem::is_directory(path)) {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(path)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());  // the same order, hence the same mutations, each run
    for (const auto& file : files) seeds.push_back(ReadFile(file));
  } else {
    seeds.push_back(ReadFile(path));
  }
}

// Bytes that parsers of this project care about, so that mutations reach their branches more
// often than uniformly random bytes would.
constexpr std::string_view kInteresting = "\r\n\t :;=\"'\\/%&?#[]{}<>,.-0123456789\x00\x7f\xff";

Input Mutate(const std::vector<Input>& seeds, std::mt19937_64& rng) {
  auto pick = [&rng](size_t bound) {
    return bound == 0 ? size_t{0} : std::uniform_int_distribution<size_t>(0, bound - 1)(rng);
  };
  Input out = seeds[pick(seeds.size())];
  const size_t rounds = 1 + pick(4);
  for (size_t round = 0; round < rounds; ++round) {
    switch (pick(6)) {
      case 0:  // flip one bit
        if (!out.empty()) out[pick(out.size())] ^= uint8_t(1u << pick(8));
        break;
      case 1: {  // insert a few interesting bytes
        const size_t at = pick(out.size() + 1);
        const size_t count = 1 + pick(8);
        for (size_t i = 0; i < count; ++i) {
          out.insert(out.begin() + ptrdiff_t(at), uint8_t(kInteresting[pick(kInteresting.size())]));
        }
        break;
      }
      case 2: {  // delete a span
        if (out.empty()) break;
        const size_t at = pick(out.size());
        const size_t count = 1 + pick(std::min<size_t>(out.size() - at, 64));
        out.erase(out.begin() + ptrdiff_t(at), out.begin() + ptrdiff_t(at + count));
        break;
      }
      case 3: {  // duplicate a span, many times over: long lines, repeated headers
        if (out.empty()) break;
        const size_t at = pick(out.size());
        const size_t count = 1 + pick(std::min<size_t>(out.size() - at, 32));
        const Input span(out.begin() + ptrdiff_t(at), out.begin() + ptrdiff_t(at + count));
        const size_t times = 1 + pick(64);
        for (size_t i = 0; i < times; ++i) {
          out.insert(out.begin() + ptrdiff_t(at), span.begin(), span.end());
        }
        break;
      }
      case 4: {  // splice the tail of another seed
        const Input& other = seeds[pick(seeds.size())];
        const size_t keep = pick(out.size() + 1);
        const size_t from = pick(other.size() + 1);
        out.resize(keep);
        out.insert(out.end(), other.begin() + ptrdiff_t(from), other.end());
        break;
      }
      default:  // truncate
        out.resize(pick(out.size() + 1));
        break;
    }
  }
  return out;
}

// With SLUICE_FUZZ_LAST_INPUT=FILE, each input is written there before it runs, so that the one
// that crashed is on disk for `<target>_fuzz FILE` or a unit test.
void Run(const Input& input) {
  if (const char* path = std::getenv("SLUICE_FUZZ_LAST_INPUT")) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(input.data()), std::streamsize(input.size()));
  }
  LLVMFuzzerTestOneInput(input.data(), input.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  size_t mutations = 1000;
  std::vector<Input> seeds;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--mutations" && i + 1 < argc) {
      mutations = std::strtoull(argv[++i], nullptr, 10);
    } else {
      CollectSeeds(arg, seeds);
    }
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "usage: %s [--mutations N] DIR_OR_FILE...: no seed found\n", argv[0]);
    return 2;
  }
  seeds.push_back({});  // the empty input is every parser's first edge case
  for (const Input& seed : seeds) Run(seed);
  std::mt19937_64 rng(0x511ce);
  for (size_t i = 0; i < mutations; ++i) Run(Mutate(seeds, rng));
  std::printf("%zu seeds and %zu mutations replayed\n", seeds.size(), mutations);
  return 0;
}
