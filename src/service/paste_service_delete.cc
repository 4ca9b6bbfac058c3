// PasteService's delete (include/sluice/service/paste_service.h): the token's check, the tombstone
// in every cache, and the outbox that deletes the body.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "paste_errors.h"
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

awaitable<Status> PasteService::Delete(std::string_view id_text, std::string_view token,
                                       std::string_view client_key) {
  // Before the delete budget: a delete in the window spends nothing (ReadOnlyRefusal).
  if (std::optional<Error> closed = ReadOnlyRefusal()) co_return std::move(*closed);
  if (!client_key.empty()) {
    if (Status admitted = admission_.AdmitDelete(client_key); !admitted.ok()) co_return admitted;
  }
  const auto id = store::PasteId::Parse(id_text);
  if (!id) co_return PasteNotFound();
  const Deadline deadline = Deadline::After(clock_, options_.Load()->delete_budget);
  Result<store::PasteMeta> meta = co_await meta_.Get(*id, deadline);
  if (!meta.ok()) {
    if (meta.error().code == ErrorCode::kNotFound) {
      auto forgetting = ForgetRowless(*id, deadline);
      co_await std::move(forgetting);
      // One answer for "never existed" and "wrong token": existence is not for sale.
      co_return PasteNotFound();
    }
    co_return WithRetryAfter(meta.error());
  }
  if (!SameTokenHash(meta->token_hash, HashDeleteToken(token))) co_return PasteNotFound();
  if (meta->deleted) co_return Ok();
  if (meta->expires_at <= clock_.UnixSeconds()) co_return PasteNotFound();
  if (Status s = co_await meta_.MarkDeleted(*id, clock_.UnixSeconds(), deadline); !s.ok()) {
    co_return WithRetryAfter(s.error());
  }
  CountLive(-static_cast<int64_t>(meta->size_bytes));
  cache_.MarkDeleted(*id);
  if (shared_) {
    // The tombstone replaces the row in the shared cache and the message drops it from every
    // process's local cache. If the cache is unreachable the delete still stands; other processes
    // stop serving the paste when their entries age out (shared_meta_ttl, local_cache_ttl).
    store::PasteMeta tombstone = *meta;
    tombstone.deleted = true;
    auto telling = shared_->Invalidate(tombstone, SharedTtl(tombstone),
                                       Deadline::After(clock_, options_.Load()->cache_timeout));
    if (Status told = co_await std::move(telling); !told.ok()) {
      shared_errors_.Inc();
      spdlog::warn("delete {}: shared cache not invalidated: {}", id->view(), told.error().message);
    }
  }
  co_return Ok();
}

awaitable<void> PasteService::ForgetRowless(store::PasteId id, Deadline deadline) {
  // No row, so no token to check (its hash was in the row) and no paste to serve: a copy a cache
  // still holds was created or read before the row went, by a promotion that lost it (an
  // asynchronous standby) or a purge. Dropped without a tombstone, which would never age out: any
  // later read asks the store, which has no row. Anyone may cause this, for any id, but it only
  // ever drops what the store of record says does not exist.
  cache_.Erase(id);
  if (!shared_) co_return;
  // The shared cache may hold the row too (a fill by any process keeps it up to shared_meta_ttl),
  // and every process would fill from it: replaced by a tombstone, and every process told, as a
  // delete does. Only when it is there and live, so a delete of a random id costs one cache read.
  auto asking = SharedMeta(id, deadline);
  std::optional<store::PasteMeta> cached = co_await std::move(asking);
  if (!cached || cached->deleted) co_return;
  store::PasteMeta tombstone = *std::move(cached);
  tombstone.deleted = true;
  tombstone.moderation = store::Moderation::kNone;  // no row: not found, not withheld
  auto telling = shared_->Invalidate(tombstone, SharedTtl(tombstone),
                                     Deadline::After(clock_, options_.Load()->cache_timeout));
  if (Status told = co_await std::move(telling); !told.ok()) {
    shared_errors_.Inc();
    spdlog::warn(
        "delete {}: the shared cache holds a paste the store has no row for, and was not "
        "invalidated: {}",
        id.view(), told.error().message);
  } else {
    spdlog::warn(
        "delete {}: the store has no row for a paste the shared cache held; dropped from "
        "every cache",
        id.view());
  }
}

}  // namespace sluice::service
