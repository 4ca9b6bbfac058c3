// PasteService's reads (include/sluice/service/paste_service.h): the paste cache, the shared
// metadata cache, one fill per paste (singleflight) under the origin-read budget, the body's
// check against its row, and the burn-after-reading claim.
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

namespace {

// What the joiners of a fill receive when its leader was refused its origin-read budget or a read
// slot: no answer, so they try again (PasteService::Read).
constexpr std::string_view kLeaderRefused = "fill_leader_refused";

}  // namespace

awaitable<Result<CachedPaste>> PasteService::Read(const ClientKeySource& client,
                                                  std::string_view id_text) {
  const auto id = store::PasteId::Parse(id_text);
  if (!id) co_return PasteNotFound();
  if (auto hit = cache_.Get(*id)) {
    cache_hits_.Inc();
    if (hit->meta.moderation != store::Moderation::kNone)
      co_return PasteWithheld(hit->meta.moderation);
    // A burn row is never cached; this only guards against one arriving by some later path.
    if (!IsLive(hit->meta) || hit->meta.burn) co_return PasteNotFound();
    co_return *std::move(hit);
  }
  cache_misses_.Inc();
  std::string client_key = client.Key();
  // Only the leader of a fill pays for it: the client's origin-read budget and a read slot,
  // taken after it has become the leader; a miss that joins a fill in flight rides along for free
  // (docs/overload.md, "Read"). Charging every joiner turned a hot paste's eviction into a wave of
  // 429s for reads that cost the primary nothing. When the leader is refused, its joiners did not
  // get an answer and try again, one of them leading and paying for itself; each round ends at
  // least the leader, and the rounds are bounded besides.
  constexpr int kRounds = 8;
  for (int round = 0; round < kRounds; ++round) {
    auto refusal = std::make_shared<std::optional<Error>>();
    auto fill = FillShared(*id, client_key, refusal);
    Result<CachedPaste> paste = co_await std::move(fill);
    if (*refusal) co_return std::move(**refusal);
    if (!paste.ok()) {
      if (paste.error().reason == kLeaderRefused) continue;
      co_return paste.error();
    }
    if (!IsLive(paste->meta)) co_return PasteNotFound();
    co_return paste;
  }
  co_return WithRetryAfter(MakeError(ErrorCode::kUnavailable,
                                     "too many readers of this paste were refused; retry later",
                                     "read_slots"));
}

awaitable<Result<CachedPaste>> PasteService::FillShared(
    store::PasteId id, std::string client_key, std::shared_ptr<std::optional<Error>> refusal) {
  // Every concurrent miss of one id waits on one fill (docs/overload.md, "Read"). The leader runs
  // the fill in its own coroutine so that its waiters, which may be on other connections, are
  // resumed by it.
  auto executor = co_await boost::asio::this_coro::executor;
  auto waiting = asio_glue::AwaitCompletion<Result<CachedPaste>>(
      [this, id, executor, key = std::move(client_key),
       refusal = std::move(refusal)](asio_glue::Completion<Result<CachedPaste>> done) mutable {
        auto shared_done =
            std::make_shared<asio_glue::Completion<Result<CachedPaste>>>(std::move(done));
        auto flight =
            fills_.Join(id, [shared_done](const Result<CachedPaste>& r) { (*shared_done)(r); });
        if (!flight) {
          fills_shared_.Inc();
          return;
        }
        boost::asio::co_spawn(
            executor,
            [this, id, key = std::move(key), refusal = std::move(refusal),
             flight = std::move(*flight)]() mutable -> awaitable<void> {
              auto admitting = admission_.AdmitOriginRead(key);
              Result<admission::Permit> read_slot = co_await std::move(admitting);
              if (!read_slot.ok()) {
                // Written before Complete, whose resumption of the leader is posted after it.
                *refusal = read_slot.error();
                flight.Complete(MakeError(ErrorCode::kUnavailable,
                                          "the reader leading this fill was refused",
                                          std::string(kLeaderRefused)));
                co_return;
              }
              auto filling = Fill(id, std::move(key));
              Result<CachedPaste> result = co_await std::move(filling);
              flight.Complete(result);
            },
            asio_glue::LogIfThrown("read: fill"));
      });
  co_return co_await std::move(waiting);
}

std::chrono::seconds PasteService::SharedTtl(const store::PasteMeta& meta) const {
  const int64_t left = meta.expires_at - clock_.UnixSeconds();
  return std::chrono::seconds(
      std::clamp<int64_t>(left, 1, options_.Load()->shared_meta_ttl.count()));
}

awaitable<std::optional<store::PasteMeta>> PasteService::SharedMeta(store::PasteId id,
                                                                    Deadline deadline) {
  if (!shared_) co_return std::nullopt;
  auto asking = shared_->GetMeta(id, deadline.ForCall(clock_, options_.Load()->cache_timeout));
  Result<std::optional<store::PasteMeta>> cached = co_await std::move(asking);
  if (!cached.ok()) {
    shared_errors_.Inc();  // slow or absent: a miss, never an error for the reader
    co_return std::nullopt;
  }
  (*cached ? shared_hits_ : shared_misses_).Inc();
  co_return *cached;
}

awaitable<Result<CachedPaste>> PasteService::Fill(store::PasteId id, std::string client_key) {
  const Deadline deadline = Deadline::After(clock_, options_.Load()->read_budget);
  auto from_shared = SharedMeta(id, deadline);
  std::optional<store::PasteMeta> cached = co_await std::move(from_shared);
  Result<store::PasteMeta> meta = MakeError(ErrorCode::kInternal, "unset", "unset");
  const bool from_primary = !cached;
  if (cached) {
    meta = *cached;  // a shared-cache hit spares the primary and takes no fill slot
  } else {
    auto ticket = admission_.AdmitFill(client_key);
    if (!ticket.ok()) co_return ticket.error();
    meta = co_await meta_.Get(id, deadline);
    ticket->slot.Done(admission::Outcome::kSuccess);
    ticket->client_share.Release();
  }
  if (!meta.ok()) {
    if (meta.error().code == ErrorCode::kNotFound) co_return PasteNotFound();
    co_return WithRetryAfter(meta.error());
  }
  // Before liveness: a taken-down paste is a tombstone too, and says 451, not 404. Its body is
  // never fetched, so nothing of it is cached. A withheld burn row says 451 as well: it is never
  // claimed while moderation holds it (MetaStore::Claim).
  if (meta->moderation != store::Moderation::kNone || !IsLive(*meta)) {
    // Tombstones spare the primary too; a claimed burn row's is kept as well (its text is gone).
    if (from_primary) co_await KeepShared(*meta, deadline);
    if (meta->moderation != store::Moderation::kNone) co_return PasteWithheld(meta->moderation);
    co_return PasteNotFound();
  }
  if (meta->burn) {
    // The row alone, without the body and without any cache: the caller shows a confirmation or
    // refuses, and the text is read by Claim only. Kept out of the shared cache too, so that no
    // other process can serve it from there after the claim.
    co_return CachedPaste{*meta, nullptr};
  }
  auto fetching = FetchCheckedBody(*meta, deadline, "read");
  Result<std::string> body = co_await std::move(fetching);
  if (!body.ok()) co_return body.error();
  // Only a row whose body checked out goes to the shared cache: a wrong row must not spread.
  if (from_primary) co_await KeepShared(*meta, deadline);
  CachedPaste paste{*meta, std::make_shared<const std::string>(std::move(*body))};
  cache_.Put(paste);
  co_return paste;
}

// A live row always has its body (the PUT precedes the insert), so a missing one is damage, not
// absence, and a body that does not match its row, or that its store cannot decode, is a
// dependency's wrong answer: each is 503, never 404 and never served. `action` names the caller in
// the log.
awaitable<Result<std::string>> PasteService::FetchCheckedBody(const store::PasteMeta& meta,
                                                              Deadline deadline,
                                                              std::string_view action) {
  Result<std::string> body = co_await blobs_.Get(meta.id, deadline);
  const auto damaged = [&](BodyMismatch kind, std::string_view detail) {
    (kind == BodyMismatch::kSize       ? size_mismatches_
     : kind == BodyMismatch::kChecksum ? checksum_mismatches_
                                       : undecodable_mismatches_)
        .Inc();
    spdlog::error(
        "{} {}: the body store returned a body that does not match the row ({}: {}); not "
        "served, not cached",
        action, meta.id.view(), BodyMismatchName(kind), detail);
    return WithRetryAfter(MakeError(ErrorCode::kUnavailable,
                                    "the paste store returned a damaged body for this paste; "
                                    "it was not served, try again later",
                                    "body_mismatch"));
  };
  if (!body.ok()) {
    if (body.error().reason == store::kBodyUndecodable) {
      co_return damaged(BodyMismatch::kUndecodable, body.error().message);
    }
    if (body.error().code != ErrorCode::kNotFound) co_return WithRetryAfter(body.error());
    spdlog::error("{} {}: row without body", action, meta.id.view());
    co_return WithRetryAfter(MakeError(ErrorCode::kUnavailable,
                                       "the paste body is missing; try again later",
                                       std::string(kBodyMissing)));
  }
  if (!options_.Load()->verify_bodies) co_return body;
  if (const auto mismatch = CheckBody(meta, *body)) {
    co_return damaged(*mismatch,
                      fmt::format("{} bytes, the row says {}", body->size(), meta.size_bytes));
  }
  co_return body;
}

awaitable<void> PasteService::KeepShared(const store::PasteMeta& meta, Deadline deadline) {
  if (!shared_) co_return;
  auto keeping = shared_->PutMeta(meta, SharedTtl(meta),
                                  deadline.ForCall(clock_, options_.Load()->cache_timeout));
  const Status kept = co_await std::move(keeping);
  if (!kept.ok()) shared_errors_.Inc();
}

awaitable<Result<CachedPaste>> PasteService::Claim(const ClientKeySource& client,
                                                   std::string_view id_text) {
  // A claim spends a view, a write the cutover's copy could miss: in the read-only window the
  // paste is neither served nor burned, and the reader may claim it once the window closes.
  if (std::optional<Error> closed = ReadOnlyRefusal()) co_return std::move(*closed);
  const auto id = store::PasteId::Parse(id_text);
  if (!id) co_return PasteNotFound();
  // A claim is an origin read (never cached) and then a write: it pays like a fill's leader.
  auto admitting = admission_.AdmitOriginRead(client.Key());
  Result<admission::Permit> read_slot = co_await std::move(admitting);
  if (!read_slot.ok()) co_return read_slot.error();
  const Deadline deadline = Deadline::After(clock_, options_.Load()->delete_budget);
  Result<store::PasteMeta> meta = co_await meta_.Get(*id, deadline);
  if (!meta.ok()) {
    if (meta.error().code == ErrorCode::kNotFound) co_return PasteNotFound();
    co_return WithRetryAfter(meta.error());
  }
  // Moderation first, as a read's (Fill): a withheld or taken-down paste says 451 and is never
  // burned. The store's claim re-checks it in its one atomic step, so a paste withheld between
  // this read and the claim is not burned either (that one claim answers 404, the next 451).
  if (meta->moderation != store::Moderation::kNone) co_return PasteWithheld(meta->moderation);
  if (!IsLive(*meta)) {
    claims_gone_.Inc();
    co_return PasteNotFound();
  }
  if (!meta->burn) {
    co_return MakeError(ErrorCode::kInvalidArgument,
                        "this paste is not burn-after-reading; read it with GET", "not_burn");
  }
  // The body first, the claim after: a body that cannot be fetched or does not check out fails
  // the claim with 503 and leaves the paste for a retry, rather than burning it unread. The
  // outbox removes the body only after a claim has committed, so a winner always finds it.
  auto fetching = FetchCheckedBody(*meta, deadline, "claim");
  Result<std::string> body = co_await std::move(fetching);
  if (!body.ok()) {
    if (body.error().reason == kBodyMissing) {
      // Another reader may have claimed it meanwhile and the outbox already taken the body.
      Result<store::PasteMeta> again = co_await meta_.Get(*id, deadline);
      if (again.ok() && !IsLive(*again)) {
        claims_gone_.Inc();
        co_return PasteNotFound();
      }
    }
    co_return body.error();
  }
  auto claiming = meta_.Claim(*id, clock_.UnixSeconds(), deadline);
  Result<store::PasteMeta> claimed = co_await std::move(claiming);
  if (!claimed.ok()) {
    if (claimed.error().code == ErrorCode::kNotFound) {
      claims_gone_.Inc();
      co_return PasteNotFound();
    }
    // A claim whose answer was lost may have burned the paste: the reader is told to retry, and
    // a retry answers 404 if it did.
    co_return WithRetryAfter(claimed.error());
  }
  claims_won_.Inc();
  if (claimed->views_left <= 1) {
    // The last view: the row is a tombstone now.
    CountLive(-static_cast<int64_t>(claimed->size_bytes));
    cache_.MarkDeleted(*id);
  }
  co_return CachedPaste{*claimed, std::make_shared<const std::string>(std::move(*body))};
}

}  // namespace sluice::service
