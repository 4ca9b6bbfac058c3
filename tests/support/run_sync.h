// Runs a coroutine to completion on a private io_context, for tests of awaitable interfaces.
#pragma once

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <exception>
#include <optional>

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

}  // namespace sluice::testing
