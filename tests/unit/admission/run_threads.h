// Threads for the admission library's concurrency tests (run under ThreadSanitizer too).
#pragma once

#include <functional>
#include <thread>
#include <vector>

namespace sluice::admission::testing {

/// Runs `body(i)` on `n` threads at once, i = 0..n-1, and joins them.
inline void RunThreads(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) threads.emplace_back(body, i);
  for (std::thread& t : threads) t.join();
}

}  // namespace sluice::admission::testing
