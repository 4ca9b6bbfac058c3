// PgMetaStore's storage accounting (postgres_meta_store.h): the live bytes, counted in the
// statements that change them, and the quota's reservations (sluice_reserve_storage, migrations
// in postgres_migrate.cc).
#include <spdlog/spdlog.h>

#include "pg_rows.h"
#include "postgres_meta_store.h"

namespace sluice::store::pg {

awaitable<Result<uint64_t>> PgMetaStore::LiveBytes(admission::Deadline deadline) {
  return Query<uint64_t>(PostgresPurpose::kCleanup, deadline,
                         "SELECT COALESCE(SUM(live_bytes), 0) FROM storage_usage", {},
                         [](const PGresult* r) -> Result<uint64_t> {
                           if (PQntuples(r) == 0) return uint64_t{0};
                           return static_cast<uint64_t>(std::max<int64_t>(0, Int(r, 0, 0)));
                         });
}

awaitable<Result<StorageReservation>> PgMetaStore::ReserveStorage(StorageRequest request,
                                                                  admission::Deadline deadline) {
  // On the write pool: a reservation is the first write of a create, fed by the same slots.
  // Made on the I/O thread when the answer arrives, so a grant whose caller already gave up is
  // destroyed there, unanswered, and so given back.
  const PasteId id = request.id;
  const uint64_t bytes = request.bytes;
  const uint64_t quota = request.quota;
  return Query<StorageReservation>(
      PostgresPurpose::kWrite, deadline,
      "SELECT granted, in_use FROM sluice_reserve_storage($1, $2, $3, $4, $5)",
      {P(id.view()), P(static_cast<int64_t>(bytes)), P(static_cast<int64_t>(quota)), P(request.now),
       P(request.expires_at)},
      [this, id, bytes, quota](const PGresult* r) -> Result<StorageReservation> {
        if (PQntuples(r) != 1) {
          return MakeError(ErrorCode::kUnavailable, "postgres: no answer from the reservation",
                           "storage_unavailable");
        }
        if (Text(r, 0, 0) != "t") {
          return StorageQuotaReached(static_cast<uint64_t>(std::max<int64_t>(0, Int(r, 0, 1))),
                                     quota);
        }
        {
          std::lock_guard lock(reserved_mu_);
          reserved_.insert(id);
        }
        return StorageReservation(*this, id, bytes);
      });
}

void PgMetaStore::Settle(const PasteId& id, bool spent) noexcept {
  {
    std::lock_guard lock(reserved_mu_);
    reserved_.erase(id);
  }
  if (spent) return;  // the insert's statement deleted the row
  try {
    boost::asio::co_spawn(io_, GiveBack(id), asio_glue::LogIfThrown("postgres: reservation"));
  } catch (const std::exception& e) {
    spdlog::warn("storage reservation {} not given back ({}); it counts until it expires",
                 id.view(), e.what());
  }
}

// A create that ended without its row gives its room back at once; if this fails (the server
// is unreachable, and so is every create), the row counts until its expiry.
awaitable<void> PgMetaStore::GiveBack(PasteId id) {
  auto releasing =
      Command(PostgresPurpose::kWrite, admission::Deadline::After(clock_, kGiveBackTimeout),
              "DELETE FROM storage_reservations WHERE id = $1", {P(id.view())});
  const Status released = co_await std::move(releasing);
  if (!released.ok()) {
    spdlog::debug("storage reservation {} not given back ({}); it counts until it expires",
                  id.view(), released.error().message);
  }
}

}  // namespace sluice::store::pg
