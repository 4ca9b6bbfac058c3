#include "sluice/common/allocator.h"

#include <gnu/libc-version.h>
#include <malloc.h>

#include <cstdint>
#include <cstdlib>

#ifdef SLUICE_WITH_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

namespace sluice {

#ifdef SLUICE_WITH_JEMALLOC
namespace {

template <class T>
std::optional<T> ReadJemalloc(const char* name) {
  T value{};
  size_t size = sizeof(value);
  if (mallctl(name, &value, &size, nullptr, 0) != 0) return std::nullopt;
  return value;
}

// Debian's jemalloc is built without a prefix, so its malloc replaces glibc's only if the linker
// put it first. The per-thread count moves only when jemalloc served the call.
bool JemallocServesMalloc() {
  const auto before = ReadJemalloc<uint64_t>("thread.allocated");
  void* volatile block = std::malloc(64 * 1024);
  const auto after = ReadJemalloc<uint64_t>("thread.allocated");
  std::free(block);
  return before && after && *after >= *before + 64 * 1024;
}

}  // namespace

std::string AllocatorDescription() {
  const auto version = ReadJemalloc<const char*>("version");
  if (!version || !JemallocServesMalloc()) {
    // Another malloc came first (an LD_PRELOAD, a link order gone wrong): which one is unknown.
    return "other (jemalloc linked but not serving malloc)";
  }
  return std::string("jemalloc ") + *version;
}

std::optional<AllocatorBytes> ReadAllocatorBytes() {
  // The statistics are a snapshot refreshed by writing the epoch.
  uint64_t epoch = 1;
  size_t size = sizeof(epoch);
  if (mallctl("epoch", &epoch, &size, &epoch, size) != 0) return std::nullopt;
  const auto allocated = ReadJemalloc<size_t>("stats.allocated");
  const auto resident = ReadJemalloc<size_t>("stats.resident");
  if (!allocated || !resident) return std::nullopt;
  return AllocatorBytes{static_cast<double>(*allocated), static_cast<double>(*resident)};
}

#else

std::string AllocatorDescription() { return std::string("glibc ") + gnu_get_libc_version(); }

std::optional<AllocatorBytes> ReadAllocatorBytes() {
  // mallinfo2 walks every arena under its lock: fine for a scrape, not for a hot path.
  const struct mallinfo2 info = mallinfo2();
  if (info.arena == 0 && info.hblkhd == 0) return std::nullopt;  // a sanitizer's, which keeps none
  return AllocatorBytes{static_cast<double>(info.uordblks + info.hblkhd),
                        static_cast<double>(info.arena + info.hblkhd)};
}

#endif

std::string AllocatorName() {
  const std::string description = AllocatorDescription();
  return description.substr(0, description.find(' '));
}

}  // namespace sluice
