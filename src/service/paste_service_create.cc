// PasteService's create (include/sluice/service/paste_service.h): admission in order, then the
// durable steps, each through its Dependency, and the check by id of an insert whose answer was
// lost.
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

Error InvalidCreate(std::string message, std::string reason) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message), std::move(reason));
}

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

std::string DefaultCreateAccessText(admission::CreateAccess mode) {
  switch (mode) {
    case admission::CreateAccess::kAnyone:
      return "anyone may create pastes here";
    case admission::CreateAccess::kTokens:
      return "this server takes new pastes only from creators who sign in: sign in through the "
             "operator's login, or ask the operator for access; reading pastes is open to "
             "everyone";
    case admission::CreateAccess::kNetworks:
      return "this server takes new pastes only from the operator's networks: connect from one of "
             "them (the office, the VPN), or ask the operator for access; reading pastes is open "
             "to everyone";
    case admission::CreateAccess::kTokensOrNetworks:
      return "this server takes new pastes only from the operator's networks or from creators "
             "who sign in: connect from one of them, sign in, or ask the operator for access; "
             "reading pastes is open to everyone";
  }
  return {};
}

std::optional<Error> PasteService::CheckCreateAccess(const admission::Creator& creator) const {
  const std::shared_ptr<const ServiceOptions> options = options_.Load();
  const admission::AccessVerdict verdict =
      admission::DecideCreateAccess(options->create_access, creator);
  if (verdict == admission::AccessVerdict::kAllowed) return std::nullopt;
  std::string text = options->create_access_text.empty()
                         ? DefaultCreateAccessText(options->create_access.mode)
                         : options->create_access_text;
  return MakeError(ErrorCode::kPermissionDenied, std::move(text),
                   verdict == admission::AccessVerdict::kCredentialRequired
                       ? "create_access_credential"
                       : "create_access_network");
}

void PasteService::UseProofOfWork(ProofOfWork* pow, MetricsRegistry& metrics) {
  pow_ = pow;
  constexpr const char* kHelp =
      "Proof-of-work challenges issued, and solutions by what their redeem found "
      "(docs/overload.md, \"Proof of work\")";
  pow_outcomes_["issued"] =
      &metrics.GetCounter("sluice_pow_challenges_total", kHelp, {{"outcome", "issued"}});
  for (PowVerdict v :
       {PowVerdict::kValid, PowVerdict::kMalformed, PowVerdict::kExpired, PowVerdict::kForged,
        PowVerdict::kWrong, PowVerdict::kReplayed, PowVerdict::kBusy}) {
    pow_outcomes_[PowVerdictName(v)] = &metrics.GetCounter(
        "sluice_pow_challenges_total", kHelp, {{"outcome", std::string(PowVerdictName(v))}});
  }
}

Error PasteService::WithChallenge(Error refusal) const {
  const uint64_t base = options_.Load()->proof_of_work_difficulty;
  refusal.challenge = pow_->Issue(PowDifficulty(base, admission_.SolverShareLeft())).ToJson();
  pow_outcomes_.at("issued")->Inc();
  return refusal;
}

std::optional<std::string> PasteService::ChallengeBeforeCreate(const admission::Creator& creator,
                                                               const ClientBudgets& budgets) const {
  if (pow_ == nullptr || creator.HoldsCredential()) return std::nullopt;
  // A "challenge" feed's network solves for every create (AdmitCreate), whatever the budget.
  if (feeds_ != nullptr && feeds_->AsksProofOfWork(creator.address_key)) {
    return WithChallenge(MakeError(ErrorCode::kResourceExhausted, {})).challenge;
  }
  for (const auto& bucket : budgets.buckets) {
    if (bucket.name == "global_count" && bucket.available < 1) {
      return WithChallenge(MakeError(ErrorCode::kResourceExhausted, {})).challenge;
    }
  }
  return std::nullopt;
}

std::optional<Error> PasteService::RedeemProof(std::string_view proof) {
  const PowVerdict verdict = pow_->Redeem(proof);
  pow_outcomes_.at(PowVerdictName(verdict))->Inc();
  switch (verdict) {
    case PowVerdict::kValid:
      return std::nullopt;
    case PowVerdict::kMalformed:
    case PowVerdict::kForged:
    case PowVerdict::kWrong:
      // A client's mistake, not the server's state: solving again would not change it.
      return MakeError(ErrorCode::kInvalidArgument,
                       fmt::format("the proof of work is {}: send the solution of a challenge "
                                   "this server issued (docs/api.md, \"Proof of work\")",
                                   PowVerdictName(verdict)),
                       "invalid_proof");
    case PowVerdict::kExpired:
    case PowVerdict::kReplayed:
    case PowVerdict::kBusy:
      break;
  }
  Error again = MakeError(ErrorCode::kResourceExhausted,
                          verdict == PowVerdict::kBusy
                              ? "too many solved challenges are waiting to expire; solve this one"
                          : verdict == PowVerdict::kExpired
                              ? "the proof of work's challenge has expired; solve this one"
                              : "that proof of work was already spent on a create; solve this one",
                          fmt::format("proof_{}", PowVerdictName(verdict)));
  again.retry_after_seconds = 1;
  return WithChallenge(std::move(again));
}

awaitable<Result<CreateTicket>> PasteService::AdmitCreate(admission::Creator creator,
                                                          CreateHeaders headers, uint64_t allowance,
                                                          const FreeCreateSlot* free_slot) {
  // The window first: a create it refuses would be one the cutover's copy misses, and a 503 for
  // the server's state says nothing about this creator, so nothing is spent or counted for it.
  if (std::optional<Error> closed = ReadOnlyRefusal()) co_return std::move(*closed);
  // Then, and apart from the refusals AbuseWatch counts: a creator the operator does not take is
  // neither abuse nor growth, and learns that before a size or a rate that does not apply to it.
  if (std::optional<Error> refused = CheckCreateAccess(creator)) co_return std::move(*refused);
  // Then the feeds, for the same reasons, and only for anonymous creators: one the operator's
  // proxy named (or a token, later) is judged as a person, not by the reputation of the network
  // it happens to create from (a CI runner in a cloud). A feed's refusals are the operator's
  // policy about networks, like create_access's, so AbuseWatch does not count them either.
  FeedVerdict feed;
  if (feeds_ != nullptr && !creator.HoldsCredential()) {
    feed = feeds_->Judge(creator.address_key);
    if (feed.refusal) co_return std::move(*feed.refusal);
  }
  std::string client_key = creator.BudgetKey();
  std::optional<admission::TokenBudget> own;
  if (creator.token) own = creator.token->budget;
  // A creator with a credential has budgets of its own and is never asked to prove work.
  const bool may_solve = pow_ != nullptr && !creator.HoldsCredential();
  if (may_solve && feed.challenge && headers.proof.empty()) {
    // The operator's "challenge" feed: a create from it pays a solved challenge every time, and
    // then draws on the solvers' share like any solver (docs/admission.md, "Reputation feeds").
    feeds_->Refund(feed, creator.address_key);
    Error ask = MakeError(ErrorCode::kResourceExhausted,
                          "new pastes from this network need a solved proof of work: solve the "
                          "challenge and send again",
                          "feed_challenge");
    ask.retry_after_seconds = 1;
    co_return WithChallenge(std::move(ask));
  }
  auto admitting = AdmitCreateInOrder(free_slot, client_key, creator.address_key, headers,
                                      allowance, own, may_solve);
  Result<CreateTicket> ticket = co_await std::move(admitting);
  if (may_solve && !ticket.ok() &&
      (ticket.error().reason == "global_count" || ticket.error().reason == "solver_count")) {
    ticket = WithChallenge(std::move(ticket.error()));
  }
  // A refused create spends nothing: the class's tokens go back too.
  if (!ticket.ok() && feeds_ != nullptr) feeds_->Refund(feed, creator.address_key);
  if (abuse_ && !ticket.ok()) {
    // Only the refusals that are about this client: a 503 from a full cap or a failing store is
    // the server's state, and a too-large body is a mistake, not a rate.
    const ErrorCode code = ticket.error().code;
    if (code == ErrorCode::kResourceExhausted || code == ErrorCode::kPermissionDenied ||
        code == ErrorCode::kInsufficientStorage) {
      abuse_->NoteRefusal(client_key);
    }
  }
  if (ticket.ok()) {
    ticket->client_key = std::move(client_key);
    ticket->address_key = std::move(creator.address_key);
  }
  co_return ticket;
}

awaitable<Result<CreateTicket>> PasteService::AdmitCreateInOrder(
    const FreeCreateSlot* free_slot, const std::string& client_key, const std::string& address_key,
    const CreateHeaders& headers, uint64_t allowance, std::optional<admission::TokenBudget> own,
    bool may_solve) {
  if (Status size = CheckCreateHeaders(headers, allowance); !size.ok()) co_return size.error();
  // Before the buckets: a blocked client spends nothing and learns why. A block is of a network,
  // so it holds against the address whatever name the creator gave.
  if (blocks_) {
    if (auto block = blocks_->Find(address_key, clock_.UnixSeconds())) {
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
  // The proof last before the buckets, once nothing cheaper refuses: a redeemed solution is spent,
  // and a create refused for its size or a block should not have cost one.
  bool solver = false;
  if (may_solve && !headers.proof.empty()) {
    if (std::optional<Error> refused = RedeemProof(headers.proof)) co_return std::move(*refused);
    solver = true;
  }
  const bool may_free = free_slot != nullptr && *free_slot;
  auto admitting =
      admission_.AdmitCreate(client_key, *headers.declared_length, nullptr, own, solver, !may_free);
  Result<CreateAdmission> slot = co_await std::move(admitting);
  if (may_free && !slot.ok() && AdmissionControl::AtFullCap(slot.error())) {
    // Every slot taken, or every unit of this network's share: the slowest body in flight gives
    // its slot up to this create (docs/overload.md, "Pressure"), kept for it rather than for
    // whoever asks first. Only the tokens and the slot are asked again, as the refusal gave them
    // back: the checks above passed, and a proof of work is spent once (asked twice, it would be
    // refused as replayed).
    const bool network = slot.error().reason == "create_slots_per_network";
    CreateSlotPromise promise =
        network ? admission_.PromiseNetworkSlot(client_key) : admission_.PromiseCreateSlot();
    auto freeing = (*free_slot)(network);
    if (co_await std::move(freeing)) {
      auto again = admission_.AdmitCreate(client_key, *headers.declared_length, &promise,
                                          std::move(own), solver);
      slot = co_await std::move(again);
    } else {
      admission_.CountRefusal(slot.error());
    }
  }
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
  co_return CreateTicket{
      std::move(slot->slot), std::move(slot->client_share), std::move(slot->network_share), {}, {},
      std::move(reservation)};
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
      co_return InvalidCreate("the paste is empty", "empty_body");
    case TextProblem::kInvalidUtf8:
      co_return InvalidCreate("the paste is not valid UTF-8 text", "invalid_utf8");
    case TextProblem::kNulByte:
      co_return InvalidCreate("the paste contains a NUL byte; only text is accepted", "nul_byte");
  }
  if (max_views > kMaxViews) {
    co_return InvalidCreate(fmt::format("max_views may be at most {}", kMaxViews),
                            "invalid_max_views");
  }
  const bool burn = max_views > 0;
  std::chrono::seconds ttl = options->default_ttl;
  if (!ttl_text.empty()) {
    auto parsed = ParseTtl(ttl_text);
    if (!parsed)
      co_return InvalidCreate("unknown ttl; choose one of 10m, 1h, 1d, 1w, 30d", "invalid_ttl");
    if (*parsed > options->max_ttl) {
      co_return InvalidCreate("this server does not keep pastes that long", "ttl_over_max");
    }
    ttl = *parsed;
  }

  // The digest once, for the row's checksum and for the content blocklist. The check is here, after
  // the body is read and before anything is stored, on the one path every create route takes; an
  // encrypted body is its ciphertext, so only the very same envelope can match (docs/moderation.md,
  // "Takedowns that stick").
  std::optional<store::BodyDigest> digest;
  const bool screened = blocked_contents_ != nullptr && !blocked_contents_->empty();
  if (options->verify_bodies || screened) digest = DigestBody(body);
  if (screened && blocked_contents_->Contains(*digest)) {
    blocked_content_refusals_.Inc();
    blocked_contents_->CountRefused();
    co_return MakeError(ErrorCode::kWithheld,
                        "this text was taken down by the operator and cannot be posted again",
                        "blocked_content");
  }
  const Deadline deadline = Deadline::After(clock_, options->create_budget);
  std::optional<store::PasteId> parent;
  if (!parent_text.empty()) {
    // A fork names a paste that exists and may be forked: its diff would otherwise show the
    // text of a burn paste to whoever asks (docs/sharing.md, "Fork and diff").
    parent = store::PasteId::Parse(parent_text);
    const auto bad_parent = [] {
      return InvalidCreate("the parent paste does not exist, has expired, or may not be forked",
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
  if (options->verify_bodies) meta.body_sha256 = digest;
  meta.burn = burn;
  meta.encrypted = encrypted;
  meta.views_left = burn ? max_views : 1;
  meta.parent = parent;
  // Reports from the creator's own network never withhold the paste (docs/moderation.md).
  meta.creator_network =
      admission::PackNetwork(ticket.address_key.empty() ? ticket.client_key : ticket.address_key,
                             options->creator_networks);

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

}  // namespace sluice::service
