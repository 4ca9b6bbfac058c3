// Runs a coroutine to completion on a private io_context, for tests of awaitable interfaces.
#pragma once

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <future>

namespace sluice::testing {

template <typename T>
T RunSync(boost::asio::awaitable<T> task) {
  boost::asio::io_context io;
  auto future = boost::asio::co_spawn(io, std::move(task), boost::asio::use_future);
  io.run();
  return future.get();
}

}  // namespace sluice::testing
