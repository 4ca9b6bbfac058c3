// The completion handler of every coroutine sluice spawns without waiting for it. Asio's
// `detached` drops an escaping exception without a word; this logs it, so a bug in a background
// task or a session shows up in the log instead of as a count that never comes down.
#pragma once

#include <spdlog/spdlog.h>

#include <exception>

namespace sluice::asio_glue {

/// For co_spawn: logs an exception that escaped the coroutine, naming `task` (a string literal).
inline auto LogIfThrown(const char* task) {
  return [task](std::exception_ptr thrown) {
    if (!thrown) return;
    try {
      std::rethrow_exception(thrown);
    } catch (const std::exception& e) {
      spdlog::error("{}: uncaught exception: {}", task, e.what());
    } catch (...) {
      spdlog::error("{}: uncaught exception of unknown type", task);
    }
  };
}

}  // namespace sluice::asio_glue
