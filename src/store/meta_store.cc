#include "sluice/store/meta_store.h"

#include <fmt/format.h>
#include <unistd.h>

#include <random>
#include <utility>

namespace sluice::store {

boost::asio::awaitable<Status> MetaStore::InsertWithBody(PasteMeta meta,
                                                         std::shared_ptr<const std::string> body,
                                                         admission::Deadline) {
  co_return MakeError(ErrorCode::kInternal,
                      fmt::format("paste {}: this store keeps no body of {} bytes beside its row",
                                  meta.id.view(), body ? body->size() : 0),
                      "no_colocated_bodies");
}

Error StorageQuotaReached(uint64_t in_use, uint64_t quota) {
  return MakeError(ErrorCode::kInsufficientStorage,
                   fmt::format("the server's storage quota is reached ({} of {} bytes in use or "
                               "held by creates in flight); nothing was saved, try again later",
                               in_use, quota),
                   std::string(kStorageQuota));
}

Error NoticesFull(int64_t max_notices) {
  return MakeError(ErrorCode::kInsufficientStorage,
                   fmt::format("the store holds max_notices ({}) notices and every one still "
                               "waits on the operator: take down or restore their pastes, or "
                               "raise max_notices",
                               max_notices),
                   std::string(kNoticesFull));
}

std::string NewLeaseHolder() {
  std::random_device random;
  const uint64_t bits = (uint64_t{random()} << 32) | random();
  return fmt::format("{}-{:016x}", ::getpid(), bits);
}

StorageReservation& StorageReservation::operator=(StorageReservation&& other) noexcept {
  if (this != &other) {
    Settle(false);
    ledger_ = std::exchange(other.ledger_, nullptr);
    id_ = std::exchange(other.id_, std::nullopt);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void StorageReservation::Settle(bool spent) noexcept {
  if (ledger_ == nullptr) return;
  Ledger* ledger = std::exchange(ledger_, nullptr);
  ledger->Settle(*id_, spent);
  id_.reset();
  bytes_ = 0;
}

}  // namespace sluice::store
