// A BlobStore of two tiers by body size: small bodies in one store, larger ones in the other (the
// embedded backend: SQLite rows up to 64 KB, files above; docs/architecture.md, "Durability").
// A body is in one tier only, chosen by its size when it is written; readers do not know the size,
// so a read asks the small tier first (an indexed lookup) and the large one when it has nothing.
#include <algorithm>

#include "sluice/store/backends.h"

namespace sluice::store {
namespace {

using boost::asio::awaitable;

class TieredBlobStore final : public BlobStore {
 public:
  TieredBlobStore(std::unique_ptr<BlobStore> small, std::unique_ptr<BlobStore> large,
                  size_t small_max_bytes)
      : small_(std::move(small)), large_(std::move(large)), small_max_bytes_(small_max_bytes) {}

  // Not a coroutine: the body's shared_ptr passes straight to the tier (g++ 12 and temporaries in
  // co_await, src/asio/completion.h).
  awaitable<Status> Put(PasteId id, std::shared_ptr<const std::string> body,
                        admission::Deadline deadline) override {
    BlobStore& tier = body->size() <= small_max_bytes_ ? *small_ : *large_;
    return tier.Put(id, std::move(body), deadline);
  }

  awaitable<Result<std::string>> Get(PasteId id, admission::Deadline deadline) override {
    Result<std::string> found = co_await small_->Get(id, deadline);
    if (found.ok() || found.error().code != ErrorCode::kNotFound) co_return found;
    co_return co_await large_->Get(id, deadline);
  }

  // Both tiers: a body written under a different size limit (a restart with another setting) may
  // be in either, and absent is success in each.
  awaitable<Status> Delete(PasteId id, admission::Deadline deadline) override {
    Status small = co_await small_->Delete(id, deadline);
    Status large = co_await large_->Delete(id, deadline);
    co_return small.ok() ? large : small;
  }

  awaitable<Status> DeleteMany(std::vector<PasteId> ids, admission::Deadline deadline) override {
    Status small = co_await small_->DeleteMany(ids, deadline);
    Status large = co_await large_->DeleteMany(std::move(ids), deadline);
    co_return small.ok() ? large : small;
  }

  awaitable<Status> DeleteManyBeforePurge(std::vector<PasteId> ids,
                                          admission::Deadline deadline) override {
    Status small = co_await small_->DeleteManyBeforePurge(ids, deadline);
    Status large = co_await large_->DeleteManyBeforePurge(std::move(ids), deadline);
    co_return small.ok() ? large : small;
  }

  // A body in both tiers (written under another limit) is listed once; Delete removes both.
  awaitable<Result<std::vector<BlobInfo>>> List(std::string after, size_t limit,
                                                admission::Deadline deadline) override {
    auto small = co_await small_->List(after, limit, deadline);
    if (!small.ok()) co_return small;
    auto large = co_await large_->List(after, limit, deadline);
    if (!large.ok()) co_return large;
    co_return MergeListings(std::move(*small), std::move(*large), limit);
  }

 private:
  const std::unique_ptr<BlobStore> small_;
  const std::unique_ptr<BlobStore> large_;
  const size_t small_max_bytes_;
};

}  // namespace

std::vector<BlobInfo> MergeListings(std::vector<BlobInfo> a, std::vector<BlobInfo> b,
                                    size_t limit) {
  std::vector<BlobInfo> out;
  out.reserve(std::min(limit, a.size() + b.size()));
  auto x = a.begin();
  auto y = b.begin();
  while (out.size() < limit && (x != a.end() || y != b.end())) {
    if (y == b.end() || (x != a.end() && x->id.view() < y->id.view())) {
      out.push_back(*x++);
    } else if (x == a.end() || y->id.view() < x->id.view()) {
      out.push_back(*y++);
    } else {
      out.push_back(*x++);
      ++y;
    }
  }
  return out;
}

std::unique_ptr<BlobStore> MakeTieredBlobStore(std::unique_ptr<BlobStore> small,
                                               std::unique_ptr<BlobStore> large,
                                               size_t small_max_bytes) {
  return std::make_unique<TieredBlobStore>(std::move(small), std::move(large), small_max_bytes);
}

}  // namespace sluice::store
