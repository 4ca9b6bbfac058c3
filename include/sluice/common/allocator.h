// Which malloc the process runs on, and how much memory it holds. Release and dev builds link
// jemalloc (CMakeLists.txt, SLUICE_ALLOCATOR): under 64 concurrent durable creates glibc's malloc
// took about 8% of the server's CPU; with jemalloc a create cost 7% less CPU in interleaved runs
// (bench/results/allocator.md). The sanitizer builds keep the system allocator, which the
// sanitizers replace with their own.
#pragma once

#include <optional>
#include <string>

namespace sluice {

/// "jemalloc 5.3.0-..." or "glibc 2.36": the allocator that serves this process's malloc, found
/// at run time. A jemalloc build whose malloc is someone else's says "other ...", so a link that
/// silently fell back to glibc is caught (the cli.version_allocator test).
std::string AllocatorDescription();

/// Its first word, "jemalloc", "glibc" or "other": the build_info metric's label.
std::string AllocatorName();

/// The allocator's own counts, for /metrics: bytes handed to the program and bytes it holds from
/// the kernel (its arenas, free or not). Empty where the allocator cannot tell (a sanitizer's).
struct AllocatorBytes {
  double allocated = 0;
  double held = 0;
};
std::optional<AllocatorBytes> ReadAllocatorBytes();

}  // namespace sluice
