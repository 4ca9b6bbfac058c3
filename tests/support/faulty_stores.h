// Test decorators over the store interfaces: count calls and fail them on demand, so tests can see
// that a rejected request never reached storage and that a failing store is not reported as absent.
#pragma once

#include <atomic>

#include "sluice/store/blob_store.h"
#include "sluice/store/meta_store.h"

namespace sluice::testing {

inline Error StoreDown() {
  return MakeError(ErrorCode::kUnavailable, "injected failure", "storage_unavailable");
}

class FaultyBlobStore final : public store::BlobStore {
 public:
  explicit FaultyBlobStore(store::BlobStore& inner) : inner_(inner) {}
  std::atomic<bool> fail{false};
  std::atomic<int> calls{0};

  boost::asio::awaitable<Status> Put(store::PasteId id, std::shared_ptr<const std::string> body,
                                     admission::Deadline d) override {
    ++calls;
    if (fail) co_return StoreDown();
    auto put = inner_.Put(id, std::move(body), d);
    co_return co_await std::move(put);
  }
  boost::asio::awaitable<Result<std::string>> Get(store::PasteId id,
                                                  admission::Deadline d) override {
    ++calls;
    if (fail) co_return StoreDown();
    co_return co_await inner_.Get(id, d);
  }
  boost::asio::awaitable<Status> Delete(store::PasteId id, admission::Deadline d) override {
    ++calls;
    if (fail) co_return StoreDown();
    co_return co_await inner_.Delete(id, d);
  }
  boost::asio::awaitable<Result<std::vector<store::BlobInfo>>> List(
      std::string after, size_t limit, admission::Deadline d) override {
    ++calls;
    if (fail) co_return StoreDown();
    auto page = inner_.List(std::move(after), limit, d);
    co_return co_await std::move(page);
  }

 private:
  store::BlobStore& inner_;
};

class FaultyMetaStore final : public store::MetaStore {
 public:
  explicit FaultyMetaStore(store::MetaStore& inner) : inner_(inner) {}
  std::atomic<bool> fail{false};
  std::atomic<int> calls{0};

  bool Fails() {
    ++calls;
    return fail.load();
  }

  boost::asio::awaitable<Status> Insert(store::PasteMeta m, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.Insert(m, d);
  }
  boost::asio::awaitable<Result<store::PasteMeta>> Get(store::PasteId id,
                                                       admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.Get(id, d);
  }
  boost::asio::awaitable<Status> MarkDeleted(store::PasteId id, int64_t now,
                                             admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.MarkDeleted(id, now, d);
  }
  boost::asio::awaitable<Result<std::vector<store::OutboxEntry>>> DueOutbox(
      int64_t now, size_t limit, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.DueOutbox(now, limit, d);
  }
  boost::asio::awaitable<Status> FinishOutbox(int64_t seq, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.FinishOutbox(seq, d);
  }
  boost::asio::awaitable<Status> RetryOutboxLater(int64_t seq, int64_t next,
                                                  admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.RetryOutboxLater(seq, next, d);
  }
  boost::asio::awaitable<Result<int64_t>> OldestOutboxAge(int64_t now,
                                                          admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.OldestOutboxAge(now, d);
  }
  boost::asio::awaitable<Result<std::vector<store::PasteId>>> Expired(
      int64_t now, size_t limit, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.Expired(now, limit, d);
  }
  boost::asio::awaitable<Status> Purge(std::vector<store::PasteId> ids,
                                       admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.Purge(std::move(ids), d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Result<std::vector<store::PasteId>>> Existing(
      std::vector<store::PasteId> ids, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.Existing(std::move(ids), d);
    co_return co_await std::move(op);
  }

 private:
  store::MetaStore& inner_;
};

}  // namespace sluice::testing
