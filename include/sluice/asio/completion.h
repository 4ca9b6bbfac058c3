// The thin Asio layer between blocking or batched work and the coroutines that wait for it.
// Everything that runs a blocking call off the event loop goes through here, so the hand-off back
// to the caller's executor (and the work guard that keeps it alive) exists in one place.
#pragma once

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <type_traits>
#include <utility>

namespace sluice::asio_glue {

namespace asio = boost::asio;

/// A move-only, type-erased completion of an awaiting coroutine. Calling it with the value posts
/// the resumption to the coroutine's own executor, whatever thread calls it. Must be called exactly
/// once.
template <typename T>
class Completion {
 public:
  Completion() = default;
  template <typename Handler>
  explicit Completion(Handler&& handler)
      : impl_(std::make_unique<Impl<std::decay_t<Handler>>>(std::forward<Handler>(handler))) {}

  explicit operator bool() const { return impl_ != nullptr; }

  void operator()(T value) {
    auto impl = std::move(impl_);
    impl->Resume(std::move(value));
  }

 private:
  struct Base {
    virtual ~Base() = default;
    virtual void Resume(T value) = 0;
  };
  template <typename Handler>
  struct Impl final : Base {
    explicit Impl(Handler h)
        : handler(std::move(h)),
          guard(asio::make_work_guard(asio::get_associated_executor(handler))) {}
    void Resume(T value) override {
      auto executor = asio::get_associated_executor(handler);
      asio::post(executor, [h = std::move(handler), v = std::move(value)]() mutable {
        std::move(h)(std::move(v));
      });
      guard.reset();
    }
    Handler handler;
    asio::executor_work_guard<asio::associated_executor_t<Handler>> guard;
  };
  std::unique_ptr<Base> impl_;
};

/// Suspends the calling coroutine until `start` (given a Completion<T>) completes it.
template <typename T, typename Start>
asio::awaitable<T> AwaitCompletion(Start start) {
  return asio::async_initiate<const asio::use_awaitable_t<>&, void(T)>(
      [start = std::move(start)](auto handler) mutable {
        start(Completion<T>(std::move(handler)));
      },
      asio::use_awaitable);
}

/// Runs `work` on `pool` and resumes the caller on its own executor with the result. The pool is
/// the bound on concurrent blocking calls: its threads play the part of a connection pool.
template <typename Work>
auto RunBlocking(asio::thread_pool& pool, Work work)
    -> asio::awaitable<std::invoke_result_t<Work&>> {
  // Not a coroutine on purpose: g++ 12 mishandles non-trivially destructible temporaries (such as
  // this lambda) inside a co_await expression and frees them twice.
  using T = std::invoke_result_t<Work&>;
  return AwaitCompletion<T>([&pool, work = std::move(work)](Completion<T> done) mutable {
    asio::post(pool, [work = std::move(work), done = std::move(done)]() mutable { done(work()); });
  });
}

}  // namespace sluice::asio_glue
