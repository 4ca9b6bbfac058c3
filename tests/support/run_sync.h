// Runs a coroutine to completion on a private io_context, for tests of awaitable interfaces.
#pragma once

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <exception>
#include <optional>
#include <stdexcept>

#include "sluice/common/clock.h"

namespace sluice::testing {

template <typename T>
T RunSync(boost::asio::awaitable<T> task) {
  boost::asio::io_context io;
  std::optional<T> result;
  std::exception_ptr failure;
  boost::asio::co_spawn(
      io, [&]() -> boost::asio::awaitable<void> { result.emplace(co_await std::move(task)); },
      [&](std::exception_ptr e) { failure = e; });
  io.run();
  if (failure) std::rethrow_exception(failure);
  return std::move(*result);
}

/// RunSync for a coroutine that returns nothing.
inline void RunSync(boost::asio::awaitable<void> task) {
  boost::asio::io_context io;
  std::exception_ptr failure;
  boost::asio::co_spawn(io, std::move(task), [&](std::exception_ptr e) { failure = e; });
  io.run();
  if (failure) std::rethrow_exception(failure);
}

/// Runs a coroutine to completion on a private io_context while `clock` drives its timers: whenever
/// nothing is ready to run, time jumps to the next alarm (include/sluice/asio/timer.h). Throws if
/// the coroutine waits on something other than the clock, rather than hanging.
template <typename T>
T RunSync(boost::asio::awaitable<T> task, ManualClock& clock) {
  boost::asio::io_context io;
  std::optional<T> result;
  std::exception_ptr failure;
  bool done = false;
  boost::asio::co_spawn(
      io, [&]() -> boost::asio::awaitable<void> { result.emplace(co_await std::move(task)); },
      [&](std::exception_ptr e) {
        failure = e;
        done = true;
      });
  for (;;) {
    io.restart();
    io.poll();
    if (done) break;
    const std::optional<TimePoint> next = clock.NextAlarm();
    if (!next) throw std::logic_error("RunSync: the task waits, and not on the clock");
    clock.Advance(*next - clock.Now());
  }
  if (failure) std::rethrow_exception(failure);
  return std::move(*result);
}

}  // namespace sluice::testing
