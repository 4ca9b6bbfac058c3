// PasteService's storage quota (include/sluice/service/paste_service.h): the live bytes, the
// reservation of a create's declared length, and the bytes created per day.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "sluice/asio/completion.h"
#include "sluice/asio/spawn.h"
#include "sluice/asio/timer.h"
#include "sluice/service/body_check.h"
#include "sluice/service/envelope.h"
#include "sluice/service/ids.h"
#include "sluice/service/paste_service.h"
#include "sluice/service/text.h"

namespace sluice::service {

using admission::Deadline;
using boost::asio::awaitable;

namespace {

int64_t Nanos(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// How long a create may wait for the live bytes the first time (the start-up read failed): a
// failure or a timeout lets the create through rather than refusing on a number nobody has.
constexpr auto kStorageReadBudget = std::chrono::milliseconds(200);

}  // namespace

awaitable<std::optional<Error>> PasteService::CheckQuota(uint64_t declared_length) {
  const uint64_t quota = options_.Load()->max_storage_bytes;
  if (quota == 0) co_return std::nullopt;
  const bool stale =
      Nanos(clock_.Now()) - live_read_at_ns_.load() >
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.Load()->storage_refresh)
          .count();
  // One create at a time pays for the re-read (a point read of a few counter rows); the others
  // decide from the value they have, which this process's own creates and deletes keep current.
  // Other processes' creates reach it at the next re-read: across processes the quota can be
  // passed by what they create in one storage_refresh.
  if ((stale || !live_known_) && !refreshing_.exchange(true)) {
    auto refreshing = RefreshStorage();
    co_await std::move(refreshing);
  }
  if (!live_known_) co_return std::nullopt;  // never read: the reservation decides
  const uint64_t live = Storage().live_bytes;
  if (live + declared_length <= quota) co_return std::nullopt;
  co_return QuotaRefusal(store::StorageQuotaReached(live, quota));
}

Error PasteService::QuotaRefusal(Error e) {
  quota_refusals_.Inc();
  e.retry_after_seconds = admission_.JitteredRetryAfterSeconds();
  return e;
}

awaitable<Result<store::StorageReservation>> PasteService::ReserveStorage(
    uint64_t declared_length, std::shared_ptr<const ServiceOptions> options) {
  const int64_t now = clock_.UnixSeconds();
  // A second more than the lifetime: `now` is truncated to the second.
  const int64_t lifetime =
      std::chrono::ceil<std::chrono::seconds>(options->reservation_lifetime).count() + 1;
  store::StorageRequest request{MintPasteId(), declared_length, options->max_storage_bytes, now,
                                now + lifetime};
  auto reserving = meta_.ReserveStorage(request, Deadline::After(clock_, options->create_budget));
  Result<store::StorageReservation> held = co_await std::move(reserving);
  if (held.ok()) co_return held;
  if (held.error().code == ErrorCode::kInsufficientStorage) {
    co_return QuotaRefusal(held.error());
  }
  // Refused rather than let through: a create admitted past the quota cannot be taken back, and
  // a store that cannot take a reservation would most likely refuse the insert too.
  spdlog::warn("create: storage not reserved: {}", held.error().message);
  co_return WithRetryAfter(MakeError(
      ErrorCode::kUnavailable,
      "the paste index could not hold room for this paste; nothing was saved, try again later",
      held.error().reason.empty() ? "storage_unavailable" : held.error().reason));
}

awaitable<void> PasteService::RefreshStorage() {
  const TimePoint started = clock_.Now();
  auto reading = meta_.LiveBytes(Deadline::After(clock_, kStorageReadBudget));
  Result<uint64_t> live = co_await std::move(reading);
  if (live.ok()) {
    live_bytes_ = static_cast<int64_t>(*live);
    live_read_at_ns_ = Nanos(started);
    live_known_ = true;
  } else {
    spdlog::warn("storage: live bytes not read: {}", live.error().message);
  }
  refreshing_ = false;
}

void PasteService::CountLive(int64_t delta) { live_bytes_.fetch_add(delta); }

void PasteService::CountCreated(uint64_t bytes) {
  created_bytes_.Inc(bytes);
  const int64_t hour = clock_.UnixSeconds() / 3600;
  std::lock_guard lock(created_mu_);
  auto& [at, sum] = created_hours_[static_cast<size_t>(hour % 24)];
  if (at != hour) {
    at = hour;
    sum = 0;
  }
  sum += bytes;
}

uint64_t PasteService::CreatedLastDay() const {
  const int64_t hour = clock_.UnixSeconds() / 3600;
  std::lock_guard lock(created_mu_);
  uint64_t total = 0;
  for (const auto& [at, sum] : created_hours_) {
    if (at > hour - 24 && at <= hour) total += sum;
  }
  return total;
}

PasteService::StorageUsage PasteService::Storage() const {
  return StorageUsage{static_cast<uint64_t>(std::max<int64_t>(0, live_bytes_.load())),
                      live_known_.load(), options_.Load()->max_storage_bytes, CreatedLastDay()};
}

}  // namespace sluice::service
