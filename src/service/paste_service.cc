#include "sluice/service/paste_service.h"

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
#include "sluice/service/text.h"

namespace sluice::service {

using admission::Deadline;
using boost::asio::awaitable;

namespace {

// What the joiners of a fill receive when its leader was refused its origin-read budget or a read
// slot: no answer, so they try again (PasteService::Read).
constexpr std::string_view kLeaderRefused = "fill_leader_refused";

Error NotFound() {
  return MakeError(ErrorCode::kNotFound,
                   "no paste with this id (it may have expired or been deleted)", "not_found");
}

Error Withheld(store::Moderation m) {
  if (m == store::Moderation::kTakenDown) {
    return MakeError(ErrorCode::kWithheld, "this paste was taken down after a report",
                     "taken_down");
  }
  return MakeError(ErrorCode::kWithheld,
                   "this paste is withheld while the operator reviews reports about it",
                   "under_review");
}

Error Invalid(std::string message, std::string reason) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message), std::move(reason));
}

constexpr const char* kMismatchHelp =
    "Bodies from the blob store that did not match their row, by what differed (answered 503 "
    "body_mismatch, never served or cached)";
constexpr const char* kUnknownHelp =
    "Creates whose insert answer was lost, by what the check by id found (confirmed: 201; "
    "unknown: 503 outcome_unknown)";

}  // namespace

PasteService::PasteService(store::MetaStore& meta, store::BlobStore& blobs, PasteCache& cache,
                           AdmissionControl& admission, const Clock& clock,
                           MetricsRegistry& metrics, ServiceOptions options,
                           store::SharedState* shared, const Blocklist* blocks, AbuseWatch* abuse)
    : meta_(meta),
      blobs_(blobs),
      cache_(cache),
      admission_(admission),
      clock_(clock),
      options_(options),
      shared_(shared),
      blocks_(blocks),
      abuse_(abuse),
      cache_hits_(metrics.GetCounter("sluice_paste_cache_total", "Paste cache lookups by outcome",
                                     {{"outcome", "hit"}})),
      cache_misses_(metrics.GetCounter("sluice_paste_cache_total", "Paste cache lookups by outcome",
                                       {{"outcome", "miss"}})),
      fills_shared_(
          metrics.GetCounter("sluice_fills_shared_total",
                             "Cache misses that joined a fill already in flight (singleflight)")),
      shared_hits_(metrics.GetCounter(
          "sluice_shared_meta_cache_total",
          "Shared metadata cache calls by outcome (error: slow or unreachable, served anyway)",
          {{"outcome", "hit"}})),
      shared_misses_(metrics.GetCounter(
          "sluice_shared_meta_cache_total",
          "Shared metadata cache calls by outcome (error: slow or unreachable, served anyway)",
          {{"outcome", "miss"}})),
      shared_errors_(metrics.GetCounter(
          "sluice_shared_meta_cache_total",
          "Shared metadata cache calls by outcome (error: slow or unreachable, served anyway)",
          {{"outcome", "error"}})),
      size_mismatches_(
          metrics.GetCounter("sluice_body_mismatches_total", kMismatchHelp, {{"kind", "size"}})),
      checksum_mismatches_(metrics.GetCounter("sluice_body_mismatches_total", kMismatchHelp,
                                              {{"kind", "checksum"}})),
      undecodable_mismatches_(metrics.GetCounter("sluice_body_mismatches_total", kMismatchHelp,
                                                 {{"kind", "undecodable"}})),
      confirmed_inserts_(metrics.GetCounter("sluice_insert_outcome_unknown_total", kUnknownHelp,
                                            {{"outcome", "confirmed"}})),
      unknown_inserts_(metrics.GetCounter("sluice_insert_outcome_unknown_total", kUnknownHelp,
                                          {{"outcome", "unknown"}})),
      claims_won_(metrics.GetCounter("sluice_burn_claims_total",
                                     "Claims of burn-after-reading pastes by outcome (won: the "
                                     "one reader got the text; gone: claimed before, or expired)",
                                     {{"outcome", "won"}})),
      claims_gone_(metrics.GetCounter("sluice_burn_claims_total",
                                      "Claims of burn-after-reading pastes by outcome (won: the "
                                      "one reader got the text; gone: claimed before, or expired)",
                                      {{"outcome", "gone"}})),
      // What the body store is billed for: the alert rules weigh it per day against a plan
      // (deploy/prometheus/sluice.rules.yml, docs/operations.md).
      put_bytes_(metrics.GetCounter("sluice_blob_put_bytes_total",
                                    "Paste body bytes the body store accepted")),
      fills_(
          Result<CachedPaste>(MakeError(ErrorCode::kInternal, "fill abandoned", "fill_abandoned"))),
      created_bytes_(metrics.GetCounter("sluice_storage_created_bytes_total",
                                        "Bytes of pastes created by this process")),
      quota_refusals_(metrics.GetCounter(
          "sluice_storage_quota_refusals_total",
          "Creates refused 507 storage_quota: live bytes, plus the bytes reserved by creates in "
          "flight, plus the declared length over the quota")),
      storage_gauges_(metrics) {
  storage_gauges_.Add("sluice_storage_live_bytes",
                      "Bytes of live pastes (not deleted, not yet purged) in the metadata store, "
                      "as this process last saw them",
                      {}, [this] { return static_cast<double>(Storage().live_bytes); });
  storage_gauges_.Add("sluice_storage_quota_bytes",
                      "The storage quota, max_storage_bytes (0: none)", {},
                      [this] { return static_cast<double>(options_.Load()->max_storage_bytes); });
  storage_gauges_.Add("sluice_storage_created_bytes_24h",
                      "Bytes of pastes created by this process in the last 24 hours (sum over "
                      "processes for the site)",
                      {}, [this] { return static_cast<double>(CreatedLastDay()); });
  if (shared_) {
    // Captures the cache, not the service: the store's thread may deliver a message while the
    // service is being torn down, and the cache outlives both.
    PasteCache* local = &cache_;
    shared_->SubscribeInvalidations([local](const store::PasteId& id) { local->MarkDeleted(id); });
  }
}

Status PasteService::CheckCreateHeaders(const CreateHeaders& headers, uint64_t allowance) const {
  if (headers.chunked || !headers.declared_length) {
    return MakeError(
        ErrorCode::kLengthRequired,
        "send the body with a Content-Length header (chunked uploads are not accepted)",
        "length_required");
  }
  const uint64_t max_paste_bytes = options_.Load()->max_paste_bytes;
  if (*headers.declared_length > max_paste_bytes + allowance) {
    return MakeError(ErrorCode::kTooLarge,
                     fmt::format("a paste may be at most {} bytes", max_paste_bytes), "too_large");
  }
  return Ok();
}

awaitable<Result<CreateTicket>> PasteService::AdmitCreate(std::string client_key,
                                                          CreateHeaders headers, uint64_t allowance,
                                                          CreateSlotPromise* promise) {
  auto admitting = AdmitCreateInOrder(promise, client_key, headers, allowance);
  Result<CreateTicket> ticket = co_await std::move(admitting);
  if (abuse_ && !ticket.ok()) {
    // Only the refusals that are about this client: a 503 from a full cap or a failing store is
    // the server's state, and a too-large body is a mistake, not a rate.
    const ErrorCode code = ticket.error().code;
    if (code == ErrorCode::kResourceExhausted || code == ErrorCode::kPermissionDenied ||
        code == ErrorCode::kInsufficientStorage) {
      abuse_->NoteRefusal(client_key);
    }
  }
  if (ticket.ok()) ticket->client_key = std::move(client_key);
  co_return ticket;
}

awaitable<Result<CreateTicket>> PasteService::AdmitCreateInOrder(CreateSlotPromise* promise,
                                                                 const std::string& client_key,
                                                                 const CreateHeaders& headers,
                                                                 uint64_t allowance) {
  if (Status size = CheckCreateHeaders(headers, allowance); !size.ok()) co_return size.error();
  // Before the buckets: a blocked client spends nothing and learns why.
  if (blocks_) {
    if (auto block = blocks_->Find(client_key, clock_.UnixSeconds())) {
      co_return MakeError(ErrorCode::kPermissionDenied,
                          fmt::format("new pastes from {} are blocked until {} (Unix time): {}",
                                      block->prefix, block->until, block->reason),
                          "blocked");
    }
  }
  // The quota after the block, before the rate limits: a refusal for a full store spends none of
  // the client's tokens.
  auto checking = CheckQuota(*headers.declared_length);
  if (std::optional<Error> full = co_await std::move(checking)) co_return std::move(*full);
  auto admitting = admission_.AdmitCreate(client_key, *headers.declared_length, promise);
  Result<CreateAdmission> slot = co_await std::move(admitting);
  if (!slot.ok()) co_return slot.error();
  // The reservation last, once the caps have admitted the create: only creates that hold a slot
  // reach the store for it, so a flood the limits refuse costs the primary nothing, and one
  // process holds at most create_slots reservations (docs/overload.md, "Create", step 4a).
  store::StorageReservation reservation;
  if (const auto options = options_.Load(); options->max_storage_bytes != 0) {
    auto reserving = ReserveStorage(*headers.declared_length, options);
    Result<store::StorageReservation> held = co_await std::move(reserving);
    if (!held.ok()) {
      // Refused before it cost anything, as the quota check above refuses: the tokens go back,
      // the slot with `slot`.
      auto refunding = admission_.RefundCreate(*slot, client_key);
      co_await std::move(refunding);
      co_return held.error();
    }
    reservation = std::move(*held);
  }
  co_return CreateTicket{std::move(slot->slot),
                         std::move(slot->client_share),
                         std::move(slot->network_share),
                         {},
                         std::move(reservation)};
}

Error PasteService::WithRetryAfter(Error e) {
  if ((e.code == ErrorCode::kUnavailable || e.code == ErrorCode::kDeadlineExceeded) &&
      !e.retry_after_seconds) {
    e.retry_after_seconds = admission_.JitteredRetryAfterSeconds();
  }
  return e;
}

bool PasteService::IsLive(const store::PasteMeta& meta) const {
  return !meta.deleted && meta.expires_at > clock_.UnixSeconds();
}

namespace {

// A create's body and the bytes it holds against the byte cap, released together when the last
// holder (the request, or a PUT still running after its timeout) lets go.
struct HeldBody {
  std::string text;
  admission::BytesLease lease;
};

admission::Outcome OutcomeOf(const Status& put) {
  if (put.ok()) return admission::Outcome::kSuccess;
  if (put.error().code == ErrorCode::kDeadlineExceeded) return admission::Outcome::kTimeout;
  return admission::Outcome::kDropped;
}

}  // namespace

void PasteService::Reconfigure(const ServiceOptions& next) {
  ServiceOptions o = *options_.Load();
  o.max_paste_bytes = next.max_paste_bytes;
  o.default_ttl = next.default_ttl;
  o.max_ttl = next.max_ttl;
  o.create_budget = next.create_budget;
  o.read_budget = next.read_budget;
  o.delete_budget = next.delete_budget;
  o.max_storage_bytes = next.max_storage_bytes;
  o.reservation_lifetime = next.reservation_lifetime;
  o.put_timeout = next.put_timeout;
  o.insert_timeout = next.insert_timeout;
  o.cache_timeout = next.cache_timeout;
  // A row stored without a checksum is checked by its size alone (CheckBody), so turning the
  // checks on serves the pastes made while they were off.
  o.verify_bodies = next.verify_bodies;
  options_.Store(std::move(o));
}

awaitable<Result<CreatedPaste>> PasteService::Create(CreateTicket ticket, std::string body,
                                                     std::string_view ttl_text, uint32_t max_views,
                                                     std::string_view parent_text, bool encrypted) {
  // One snapshot for the whole create: a reload in the middle of it changes the next one.
  const std::shared_ptr<const ServiceOptions> options = options_.Load();
  if (body.size() > options->max_paste_bytes) {
    co_return MakeError(ErrorCode::kTooLarge,
                        fmt::format("a paste may be at most {} bytes", options->max_paste_bytes),
                        "too_large");
  }
  if (encrypted) {
    // The shape only: the server has no key, and an envelope it cannot parse is one no reader
    // could open either (docs/encryption.md, "What the server checks").
    if (auto shape = CheckEnvelope(body, options->max_paste_bytes); !shape.ok()) {
      co_return shape.error();
    }
  }
  switch (CheckPasteText(body)) {
    case TextProblem::kNone:
      break;
    case TextProblem::kEmpty:
      co_return Invalid("the paste is empty", "empty_body");
    case TextProblem::kInvalidUtf8:
      co_return Invalid("the paste is not valid UTF-8 text", "invalid_utf8");
    case TextProblem::kNulByte:
      co_return Invalid("the paste contains a NUL byte; only text is accepted", "nul_byte");
  }
  if (max_views > kMaxViews) {
    co_return Invalid(fmt::format("max_views may be at most {}", kMaxViews), "invalid_max_views");
  }
  const bool burn = max_views > 0;
  std::chrono::seconds ttl = options->default_ttl;
  if (!ttl_text.empty()) {
    auto parsed = ParseTtl(ttl_text);
    if (!parsed)
      co_return Invalid("unknown ttl; choose one of 10m, 1h, 1d, 1w, 30d", "invalid_ttl");
    if (*parsed > options->max_ttl) {
      co_return Invalid("this server does not keep pastes that long", "ttl_over_max");
    }
    ttl = *parsed;
  }

  const Deadline deadline = Deadline::After(clock_, options->create_budget);
  std::optional<store::PasteId> parent;
  if (!parent_text.empty()) {
    // A fork names a paste that exists and may be forked: its diff would otherwise show the
    // text of a burn paste to whoever asks (docs/sharing.md, "Fork and diff").
    parent = store::PasteId::Parse(parent_text);
    const auto bad_parent = [] {
      return Invalid("the parent paste does not exist, has expired, or may not be forked",
                     "bad_parent");
    };
    if (!parent) co_return bad_parent();
    Result<store::PasteMeta> row = co_await meta_.Get(*parent, deadline);
    if (!row.ok()) {
      if (row.error().code == ErrorCode::kNotFound) co_return bad_parent();
      co_return WithRetryAfter(row.error());
    }
    if (!IsLive(*row) || row->moderation != store::Moderation::kNone || !CheckForkable(*row).ok()) {
      co_return bad_parent();
    }
  }
  // The id the reservation was made for: its row's insert takes the reserved bytes as live.
  const store::PasteId id = ticket.reservation.held() ? *ticket.reservation.id() : MintPasteId();
  std::string token = MintDeleteToken();
  const int64_t now = clock_.UnixSeconds();
  store::PasteMeta meta{id,    now,         now + ttl.count(), body.size(), HashDeleteToken(token),
                        false, std::nullopt};
  if (options->verify_bodies) meta.body_sha256 = DigestBody(body);
  meta.burn = burn;
  meta.encrypted = encrypted;
  meta.views_left = burn ? max_views : 1;
  meta.parent = parent;
  // Reports from the creator's own network never withhold the paste (docs/moderation.md).
  meta.creator_network = admission::PackNetwork(ticket.client_key, options->creator_networks);

  auto held = std::make_shared<HeldBody>();
  held->text = std::move(body);
  std::shared_ptr<const std::string> shared_body(held, &held->text);
  // A store that keeps small bodies beside their rows (the embedded one) takes the body and the
  // row in one commit, which is then the create's PUT for the slot and its insert for the answer;
  // otherwise the body goes to the bucket first and the row follows (docs/overload.md, "Create").
  const bool colocated = meta.size_bytes <= meta_.colocated_body_limit();
  const admission::Deadline put_deadline = deadline.ForCall(clock_, options->put_timeout);
  const TimePoint put_started = clock_.Now();
  auto put_call = colocated ? meta_.InsertWithBody(meta, shared_body, put_deadline)
                            : blobs_.Put(id, shared_body, put_deadline);
  const Status put = co_await std::move(put_call);
  const admission::Outcome put_outcome = OutcomeOf(put);
  const Duration put_latency = clock_.Now() - put_started;
  if (put_outcome == admission::Outcome::kTimeout) {
    // The PUT may still be running and still holds the body: the slot frees now (the create
    // answers), the bytes stay counted until the last holder lets go. The adaptive cap learns
    // from the PUT alone, not from a slow client's upload.
    held->lease = ticket.slot.HandOffBytes(put_outcome, put_latency);
  }
  const auto release_slot = [&] {
    if (put_outcome != admission::Outcome::kTimeout) ticket.slot.Done(put_outcome, put_latency);
  };
  if (!put.ok() && !colocated) {
    release_slot();
    spdlog::warn("create {}: body not stored: {}", id.view(), put.error().message);
    Error e = put.error();
    e.code = ErrorCode::kUnavailable;
    e.message = "the paste store is unavailable; nothing was saved, try again later";
    co_return WithRetryAfter(std::move(e));
  }
  Status insert = put;
  if (!colocated) {
    put_bytes_.Inc(meta.size_bytes);
    auto inserting = meta_.Insert(meta, deadline.ForCall(clock_, options->insert_timeout));
    insert = co_await std::move(inserting);
  }
  if (!insert.ok() && store::InsertOutcomeUnknown(insert.error())) {
    // The row may have been written: say so only after looking. The body stays either way (the
    // orphan reaper takes it if no row ever appears).
    spdlog::warn("create {}: insert answer lost ({}); checking the row", id.view(),
                 insert.error().message);
    auto confirming = ConfirmInsert(meta, insert.error(), deadline);
    Status confirmed = co_await std::move(confirming);
    if (!confirmed.ok()) {
      release_slot();
      co_return WithRetryAfter(confirmed.error());
    }
    insert = Ok();
  }
  if (!insert.ok()) {
    release_slot();
    // The body stays for the orphan reaper: deleting it here could race an insert that did commit.
    spdlog::error("create {}: row not stored: {}", id.view(), insert.error().message);
    const std::string reason =
        insert.error().reason.empty() ? "insert_failed" : insert.error().reason;
    // A primary that is down or slow is an overload answer (503, retry later), like a failed PUT;
    // only what the store itself calls internal (an id collision) is a 500.
    if (insert.error().code == ErrorCode::kUnavailable ||
        insert.error().code == ErrorCode::kDeadlineExceeded) {
      co_return WithRetryAfter(MakeError(
          ErrorCode::kUnavailable,
          "the paste index is unavailable; nothing was published, try again later", reason));
    }
    co_return MakeError(ErrorCode::kInternal,
                        "the paste could not be recorded; nothing was published, try again",
                        reason);
  }
  ticket.reservation.Spent();  // the insert took its bytes as live, in its own transaction
  if (colocated) put_bytes_.Inc(meta.size_bytes);
  release_slot();  // the PUT ended: nothing is buffered for it now
  CountLive(static_cast<int64_t>(meta.size_bytes));
  CountCreated(meta.size_bytes);
  if (abuse_ && !ticket.client_key.empty()) abuse_->NoteCreate(ticket.client_key);
  // A burn paste's text leaves this process once, through Claim: never from a cache.
  if (!burn) cache_.Put(CachedPaste{meta, std::move(shared_body)});
  co_return CreatedPaste{id, std::move(token), meta.expires_at};
}

awaitable<Status> PasteService::ConfirmInsert(const store::PasteMeta& meta, const Error& lost,
                                              Deadline deadline) {
  // Two looks at least: an insert that reached the primary just before its answer was lost may not
  // have committed yet when the first look runs (it goes out at once, on another connection).
  // During a failover the look itself may be refused until the new primary takes connections: it
  // is asked again, within the create's deadline, so the answer comes from the new primary.
  constexpr auto kSecondLookAfter = std::chrono::milliseconds(50);
  constexpr int kMaxLooks = 40;
  std::string why = "the row was not there";
  bool not_found_once = false;
  for (int look = 0; look < kMaxLooks; ++look) {
    if (look > 0) {
      if (deadline.Remaining(clock_) < 2 * kSecondLookAfter) break;
      auto pause = asio_glue::SleepFor(clock_, kSecondLookAfter);
      co_await std::move(pause);
    }
    Result<store::PasteMeta> row = co_await meta_.Get(meta.id, deadline);
    if (row.ok()) {
      if (row->token_hash != meta.token_hash || row->created_at != meta.created_at) {
        // Another create's row under the same id: ours was refused by the key, surely not written.
        spdlog::error("create {}: the check found another paste's row", meta.id.view());
        co_return MakeError(ErrorCode::kInternal,
                            "the paste could not be recorded; nothing was published, try again",
                            "id_collision");
      }
      confirmed_inserts_.Inc();
      spdlog::info("create {}: the row is there; the create stands", meta.id.view());
      co_return Ok();
    }
    if (row.error().code == ErrorCode::kNotFound) {
      if (not_found_once) break;
      not_found_once = true;
      continue;
    }
    why = "the check failed: " + row.error().message;
    if (row.error().reason != store::kPrimaryFailover) break;
  }
  unknown_inserts_.Inc();
  spdlog::error("create {}: outcome unknown ({}; {}); the body is kept", meta.id.view(),
                lost.message, why);
  co_return MakeError(ErrorCode::kUnavailable,
                      "the paste index did not confirm this paste: it may or may not have been "
                      "published, and its link was not handed out; send it again if you need it",
                      std::string(store::kOutcomeUnknown));
}

Status PasteService::CheckForkable(const store::PasteMeta& meta) {
  if (meta.burn) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "this paste is shown a limited number of times; it cannot be forked",
                     "not_forkable");
  }
  // The server holds only an encrypted paste's ciphertext: a fork of it is made in the browser
  // that has the key (docs/encryption.md).
  if (meta.encrypted) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "this paste is encrypted; only a browser that holds its key can fork it",
                     "not_forkable");
  }
  return Ok();
}

awaitable<Result<CachedPaste>> PasteService::Read(const ClientKeySource& client,
                                                  std::string_view id_text) {
  const auto id = store::PasteId::Parse(id_text);
  if (!id) co_return NotFound();
  if (auto hit = cache_.Get(*id)) {
    cache_hits_.Inc();
    if (hit->meta.moderation != store::Moderation::kNone) co_return Withheld(hit->meta.moderation);
    // A burn row is never cached; this only guards against one arriving by some later path.
    if (!IsLive(hit->meta) || hit->meta.burn) co_return NotFound();
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
    if (!IsLive(paste->meta)) co_return NotFound();
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
    if (meta.error().code == ErrorCode::kNotFound) co_return NotFound();
    co_return WithRetryAfter(meta.error());
  }
  // Before liveness: a taken-down paste is a tombstone too, and says 451, not 404. Its body is
  // never fetched, so nothing of it is cached. A withheld burn row says 451 as well: it is never
  // claimed while moderation holds it (MetaStore::Claim).
  if (meta->moderation != store::Moderation::kNone || !IsLive(*meta)) {
    // Tombstones spare the primary too; a claimed burn row's is kept as well (its text is gone).
    if (from_primary) co_await KeepShared(*meta, deadline);
    if (meta->moderation != store::Moderation::kNone) co_return Withheld(meta->moderation);
    co_return NotFound();
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
  const auto id = store::PasteId::Parse(id_text);
  if (!id) co_return NotFound();
  // A claim is an origin read (never cached) and then a write: it pays like a fill's leader.
  auto admitting = admission_.AdmitOriginRead(client.Key());
  Result<admission::Permit> read_slot = co_await std::move(admitting);
  if (!read_slot.ok()) co_return read_slot.error();
  const Deadline deadline = Deadline::After(clock_, options_.Load()->delete_budget);
  Result<store::PasteMeta> meta = co_await meta_.Get(*id, deadline);
  if (!meta.ok()) {
    if (meta.error().code == ErrorCode::kNotFound) co_return NotFound();
    co_return WithRetryAfter(meta.error());
  }
  // Moderation first, as a read's (Fill): a withheld or taken-down paste says 451 and is never
  // burned. The store's claim re-checks it in its one atomic step, so a paste withheld between
  // this read and the claim is not burned either (that one claim answers 404, the next 451).
  if (meta->moderation != store::Moderation::kNone) co_return Withheld(meta->moderation);
  if (!IsLive(*meta)) {
    claims_gone_.Inc();
    co_return NotFound();
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
        co_return NotFound();
      }
    }
    co_return body.error();
  }
  auto claiming = meta_.Claim(*id, clock_.UnixSeconds(), deadline);
  Result<store::PasteMeta> claimed = co_await std::move(claiming);
  if (!claimed.ok()) {
    if (claimed.error().code == ErrorCode::kNotFound) {
      claims_gone_.Inc();
      co_return NotFound();
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

awaitable<Status> PasteService::Delete(std::string_view id_text, std::string_view token,
                                       std::string_view client_key) {
  if (!client_key.empty()) {
    if (Status admitted = admission_.AdmitDelete(client_key); !admitted.ok()) co_return admitted;
  }
  const auto id = store::PasteId::Parse(id_text);
  if (!id) co_return NotFound();
  const Deadline deadline = Deadline::After(clock_, options_.Load()->delete_budget);
  Result<store::PasteMeta> meta = co_await meta_.Get(*id, deadline);
  if (!meta.ok()) {
    if (meta.error().code == ErrorCode::kNotFound) {
      auto forgetting = ForgetRowless(*id, deadline);
      co_await std::move(forgetting);
      // One answer for "never existed" and "wrong token": existence is not for sale.
      co_return NotFound();
    }
    co_return WithRetryAfter(meta.error());
  }
  if (!SameTokenHash(meta->token_hash, HashDeleteToken(token))) co_return NotFound();
  if (meta->deleted) co_return Ok();
  if (meta->expires_at <= clock_.UnixSeconds()) co_return NotFound();
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
