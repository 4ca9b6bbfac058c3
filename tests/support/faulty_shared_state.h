// A SharedState decorator that goes silent on demand: down (Unavailable at once) or slow (past its
// deadline), so the fail-open rules can be tested without a Redis server.
#pragma once

#include <atomic>
#include <functional>

#include "sluice/store/shared_state.h"

namespace sluice::testing {

class FaultySharedState final : public store::SharedState {
 public:
  enum class Mode { kUp, kDown, kSlow };
  explicit FaultySharedState(store::SharedState& inner) : inner_(inner) {}
  std::atomic<Mode> mode{Mode::kUp};
  std::atomic<int> calls{0};
  std::atomic<int> refunds{0};
  /// While up: asked before each call, and when it answers true that call answers past its budget,
  /// as a Redis slow on some calls only. Set it between calls, never while one runs.
  std::function<bool()> slow_when;

  boost::asio::awaitable<Result<store::SharedTakeDecision>> TakeAll(
      std::vector<store::BucketTake> takes, admission::Deadline d) override {
    if (auto e = Fault()) co_return *e;
    auto inner = inner_.TakeAll(std::move(takes), d);
    co_return co_await std::move(inner);
  }
  boost::asio::awaitable<Status> Refund(std::vector<store::BucketTake> takes,
                                        admission::Deadline d) override {
    ++refunds;
    if (auto e = Fault()) co_return *e;
    auto inner = inner_.Refund(std::move(takes), d);
    co_return co_await std::move(inner);
  }
  boost::asio::awaitable<Result<std::vector<double>>> PeekAll(std::vector<store::BucketTake> b,
                                                              admission::Deadline d) override {
    if (auto e = Fault()) co_return *e;
    auto inner = inner_.PeekAll(std::move(b), d);
    co_return co_await std::move(inner);
  }
  boost::asio::awaitable<Result<std::optional<store::PasteMeta>>> GetMeta(
      store::PasteId id, admission::Deadline d) override {
    if (auto e = Fault()) co_return *e;
    auto inner = inner_.GetMeta(id, d);
    co_return co_await std::move(inner);
  }
  boost::asio::awaitable<Status> PutMeta(store::PasteMeta meta, std::chrono::seconds ttl,
                                         admission::Deadline d) override {
    if (auto e = Fault()) co_return *e;
    auto inner = inner_.PutMeta(meta, ttl, d);
    co_return co_await std::move(inner);
  }
  boost::asio::awaitable<Status> Invalidate(store::PasteMeta tombstone, std::chrono::seconds ttl,
                                            admission::Deadline d) override {
    if (auto e = Fault()) co_return *e;
    auto inner = inner_.Invalidate(tombstone, ttl, d);
    co_return co_await std::move(inner);
  }
  void SubscribeInvalidations(std::function<void(const store::PasteId&)> f) override {
    inner_.SubscribeInvalidations(std::move(f));
  }

 private:
  std::optional<Error> Fault() {
    ++calls;
    switch (mode.load()) {
      case Mode::kUp:
        if (slow_when && slow_when()) return SlowError();
        return std::nullopt;
      case Mode::kDown:
        return MakeError(ErrorCode::kUnavailable, "injected: cache down", "cache_unavailable");
      case Mode::kSlow:
        return SlowError();
    }
    return std::nullopt;
  }
  static Error SlowError() {
    return MakeError(ErrorCode::kDeadlineExceeded, "injected: past its budget", "cache_timeout");
  }
  store::SharedState& inner_;
};

}  // namespace sluice::testing
