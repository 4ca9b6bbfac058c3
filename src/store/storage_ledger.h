// LocalStorageLedger: storage reservations (MetaStore::ReserveStorage) decided in the process, for
// the stores whose every write goes through this process: the memory store, and the embedded SQLite
// store, which one process at a time opens (the data dir's lock, src/app/data_dir_lock.cc) and
// writes through one committer. There the live bytes are known exactly in memory, so a reservation
// costs a mutex and no statement; across processes the store itself must decide
// (src/store/postgres).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <span>

#include "sluice/common/result.h"
#include "sluice/store/meta_store.h"

namespace sluice::store {

/// The live bytes of one store and the reservations against them. Thread-safe.
class LocalStorageLedger final : public StorageReservation::Ledger {
 public:
  /// `live`: the store's live bytes when it opens.
  explicit LocalStorageLedger(uint64_t live = 0) : live_(static_cast<int64_t>(live)) {}

  /// MetaStore::ReserveStorage, decided here.
  Result<StorageReservation> Reserve(const StorageRequest& request);

  /// After a transaction commits: it changed the live bytes by `live_delta`, and it inserted the
  /// rows `inserted`, whose reservations its bytes replace. Both in one step under the lock, so a
  /// reservation decided meanwhile never sees the bytes twice or not at all.
  void Committed(int64_t live_delta, std::span<const PasteId> inserted);

  void Settle(const PasteId& id, bool spent) noexcept override;

 private:
  struct Held {
    uint64_t bytes;
    int64_t expires_at;
  };
  /// Forgets one reservation; the caller holds mu_.
  std::map<PasteId, Held>::iterator Drop(std::map<PasteId, Held>::iterator it);

  std::mutex mu_;
  int64_t live_;
  uint64_t held_bytes_ = 0;
  // At most the creates in flight (the create slots bound them), so a pass over it is cheap.
  std::map<PasteId, Held> held_;
};

}  // namespace sluice::store
