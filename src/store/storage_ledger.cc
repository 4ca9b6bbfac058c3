#include "storage_ledger.h"

#include <algorithm>
#include <iterator>

namespace sluice::store {

Result<StorageReservation> LocalStorageLedger::Reserve(const StorageRequest& request) {
  std::lock_guard lock(mu_);
  for (auto it = held_.begin(); it != held_.end();) {
    it = it->second.expires_at <= request.now ? Drop(it) : std::next(it);
  }
  if (held_.contains(request.id)) {
    return MakeError(ErrorCode::kInternal, "this paste already holds a reservation",
                     "reservation_exists");
  }
  const uint64_t in_use = static_cast<uint64_t>(std::max<int64_t>(0, live_)) + held_bytes_;
  if (in_use + request.bytes > request.quota) return StorageQuotaReached(in_use, request.quota);
  held_.emplace(request.id, Held{request.bytes, request.expires_at});
  held_bytes_ += request.bytes;
  return StorageReservation(*this, request.id, request.bytes);
}

void LocalStorageLedger::Committed(int64_t live_delta, std::span<const PasteId> inserted) {
  std::lock_guard lock(mu_);
  live_ += live_delta;
  for (const PasteId& id : inserted) {
    if (auto it = held_.find(id); it != held_.end()) Drop(it);
  }
}

void LocalStorageLedger::Settle(const PasteId& id, bool) noexcept {
  // Spent or not, an entry still here is given back: an insert that committed took it already.
  std::lock_guard lock(mu_);
  if (auto it = held_.find(id); it != held_.end()) Drop(it);
}

std::map<PasteId, LocalStorageLedger::Held>::iterator LocalStorageLedger::Drop(
    std::map<PasteId, Held>::iterator it) {
  held_bytes_ -= it->second.bytes;
  return held_.erase(it);
}

}  // namespace sluice::store
