// AdmissionControl's create (include/sluice/service/admission_control.h): the order of a create's
// checks, its buckets in the shared store or, while that is silent, on this process's share, and
// the create slots promised per network.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "sluice/admission/adaptive_concurrency_limiter.h"
#include "sluice/service/admission_control.h"

namespace sluice::service {

namespace {

// The reasons of SharedCreateTakes' buckets, in its order: per client before global, as locally.
constexpr const char* kSharedReasons[] = {"ip_create_count", "ip_create_bytes", "global_count",
                                          "global_bytes"};
// A solver's takes: its count token from the solvers' share.
constexpr const char* kSharedSolverReasons[] = {"ip_create_count", "ip_create_bytes",
                                                "solver_count", "global_bytes"};
// The same for a creator token's takes (AdmissionControl::AdmitCreate's `own`).
constexpr const char* kSharedTokenReasons[] = {"token_create_count", "token_create_bytes",
                                               "global_count", "global_bytes"};

// Log the fail-open state at most this often, so a flood of creates does not flood the log.
constexpr Duration kFailOpenLogInterval = std::chrono::seconds(10);

}  // namespace

CreateSlotPromise::CreateSlotPromise(AdmissionControl* owner, std::string network)
    : owner_(owner), network_(std::move(network)) {
  if (network_.empty()) {
    owner_->promised_slots_.fetch_add(1);
    return;
  }
  std::lock_guard lock(owner_->promised_networks_mu_);
  ++owner_->promised_networks_[network_];
}

void CreateSlotPromise::Release() {
  AdmissionControl* owner = std::exchange(owner_, nullptr);
  if (owner == nullptr) return;
  if (network_.empty()) {
    owner->promised_slots_.fetch_sub(1);
    return;
  }
  std::lock_guard lock(owner->promised_networks_mu_);
  auto it = owner->promised_networks_.find(network_);
  if (it != owner->promised_networks_.end() && --it->second <= 0) {
    owner->promised_networks_.erase(it);
  }
}

int64_t AdmissionControl::PromisedToNetwork(const std::string& network) const {
  std::lock_guard lock(promised_networks_mu_);
  auto it = promised_networks_.find(network);
  return it == promised_networks_.end() ? 0 : it->second;
}

boost::asio::awaitable<AdmissionControl::SharedVerdict> AdmissionControl::AskShared(
    std::vector<store::BucketTake> takes, const char* const* reasons) {
  auto asking =
      shared_->TakeAll(takes, admission::Deadline::After(clock_, options_.Load()->shared_timeout));
  Result<store::SharedTakeDecision> shared = co_await std::move(asking);
  if (!shared.ok()) {
    NoteSharedSilence(shared.error());
    shared_fail_open_->Inc();
    co_return SharedVerdict{SharedVerdict::kSilent, std::nullopt};
  }
  NoteSharedAnswer();
  if (!shared->allowed) {
    shared_refused_->Inc();
    const size_t refused = static_cast<size_t>(
        std::clamp<int>(shared->refused_index, 0, static_cast<int>(takes.size()) - 1));
    const admission::TakeDecision decision{false, shared->retry_after, shared->exceeds_burst};
    co_return SharedVerdict{
        SharedVerdict::kRefused,
        RateLimited(reasons[refused], takes[refused].policy, decision, shared->available)};
  }
  shared_allowed_->Inc();
  co_return SharedVerdict{SharedVerdict::kAllowed, std::nullopt};
}

boost::asio::awaitable<void> AdmissionControl::RefundShared(std::vector<store::BucketTake> takes) {
  // If the refund is lost (the store went silent in between) the client pays for a request it did
  // not make, which its bucket forgives within seconds.
  auto refunding = shared_->Refund(
      std::move(takes), admission::Deadline::After(clock_, options_.Load()->shared_timeout));
  const Status refunded = co_await std::move(refunding);
  if (!refunded.ok()) NoteSharedSilence(refunded.error());
}

boost::asio::awaitable<Result<CreateAdmission>> AdmissionControl::AdmitCreate(
    std::string client_key, uint64_t declared_bytes, CreateSlotPromise* promise,
    std::optional<admission::TokenBudget> own, bool solver, bool count_full_cap) {
  solver = solver && options_.Load()->solver_share > 0;
  if (!shared_) {
    co_return AdmitCreateLocal(client_key, declared_bytes, promise, own, solver, count_full_cap);
  }
  std::vector<store::BucketTake> takes = SharedCreateTakes(client_key, declared_bytes, own, solver);
  auto asking = AskShared(takes, own      ? kSharedTokenReasons
                                 : solver ? kSharedSolverReasons
                                          : kSharedReasons);
  SharedVerdict verdict = co_await std::move(asking);
  if (verdict.kind == SharedVerdict::kSilent) {
    NoteCreateSilent();
    Result<CreateAdmission> local =
        AdmitCreateOnLocalShare(client_key, declared_bytes, promise, solver, count_full_cap);
    if (local.ok()) {
      ip_create_.NoteUse(client_key);
      local->tokens = CreateAdmission::Tokens::kLocalShare;
      local->own = std::move(own);
      local->solver = solver;
    }
    co_return local;
  }
  // The store answered: it counts this process's creates for the tier, so the local share has
  // nothing to stand in for until its next silence, and then only what it refills meanwhile, at
  // its rate. A share left full (or only charged for the creates it admitted, when its rate with
  // the slack is above what a process's part of the shared budget takes) turned each moment of
  // Redis latency into a burst on top of the tier's budget (docs/overload.md, "Shared state").
  NoteCreateAnswered();
  if (verdict.kind == SharedVerdict::kRefused) co_return std::move(*verdict.refusal);
  Result<CreateAdmission> slot =
      TakeCreateSlot(client_key, declared_bytes, promise, count_full_cap);
  if (!slot.ok()) {
    auto refunding = RefundShared(std::move(takes));  // shed, not limited: the tokens go back
    co_await std::move(refunding);
  } else {
    // The budget lives in the shared store; the use histogram is this process's view of it.
    ip_create_.NoteUse(client_key);
    slot->tokens = CreateAdmission::Tokens::kShared;
    slot->own = std::move(own);
    slot->solver = solver;
  }
  co_return slot;
}

boost::asio::awaitable<void> AdmissionControl::RefundCreate(const CreateAdmission& admitted,
                                                            std::string_view client_key) {
  if (admitted.tokens == CreateAdmission::Tokens::kShared) {
    auto refunding = RefundShared(
        SharedCreateTakes(client_key, admitted.declared_bytes, admitted.own, admitted.solver));
    co_await std::move(refunding);
  } else {
    RefundLocalTokens(admitted.tokens, client_key, admitted.declared_bytes, admitted.own,
                      admitted.solver);
  }
}

void AdmissionControl::RefundLocalTokens(CreateAdmission::Tokens taken, std::string_view client_key,
                                         uint64_t declared_bytes,
                                         const std::optional<admission::TokenBudget>& own,
                                         bool solver) {
  const double bytes = static_cast<double>(declared_bytes);
  // On the local share the per-client limits were open: only the global caps took tokens.
  if (taken == CreateAdmission::Tokens::kLocal) {
    if (own) {
      const std::shared_ptr<OwnBuckets> mine = OwnBucketsOf(client_key, *own);
      mine->count.Refund(1);
      mine->bytes.Refund(bytes);
    } else {
      ip_create_.Refund(client_key, 1, bytes);
    }
  }
  CountBucket(solver).Refund(1);
  global_bytes_.Refund(bytes);
}

std::vector<store::BucketTake> AdmissionControl::SharedCreateTakes(
    std::string_view client_key, uint64_t declared_bytes,
    const std::optional<admission::TokenBudget>& own, bool solver) const {
  const double bytes = static_cast<double>(declared_bytes);
  const auto options = options_.Load();
  std::vector<store::BucketTake> takes;
  takes.reserve(4);
  // A token's budget key ("token:...") is no address's, so its buckets never share a name with
  // an address's even under the same prefixes.
  takes.push_back(
      {fmt::format("ipc:{}", client_key), own ? own->count : options->ip_create_count, 1});
  takes.push_back({fmt::format("ipb:{}", client_key),
                   own ? own->bytes.value_or(options->ip_create_bytes) : options->ip_create_bytes,
                   bytes});
  // The solvers' share has a key of its own: with no share kept, "gc" holds the whole budget as
  // before, and a tier that turns the share on starts both buckets full.
  takes.push_back({solver ? "gs" : "gc", CountPolicy(*options, solver), 1});
  takes.push_back({"gb", options->global_create_bytes, bytes});
  return takes;
}

store::BucketTake AdmissionControl::SharedReadTake(std::string_view client_key) const {
  return {fmt::format("ipr:{}", client_key), options_.Load()->ip_read, 1};
}

void AdmissionControl::NoteCreateAnswered() {
  global_count_.Drain();
  solver_count_.Drain();
  global_bytes_.Drain();
  last_create_answer_ns_.store(clock_.Now().time_since_epoch().count(), std::memory_order_relaxed);
}

void AdmissionControl::NoteCreateSilent() {
  // The span from the store's last answer to this decision, less what an earlier silent decision
  // of the same span counted: each moment of silence once.
  const int64_t now = clock_.Now().time_since_epoch().count();
  std::lock_guard lock(silent_mu_);
  const int64_t from =
      std::max(last_create_answer_ns_.load(std::memory_order_relaxed), silent_counted_to_ns_);
  if (now > from) silent_ns_.fetch_add(now - from, std::memory_order_relaxed);
  silent_counted_to_ns_ = std::max(silent_counted_to_ns_, now);
}

void AdmissionControl::NoteSharedAnswer() {
  if (failing_open_.exchange(false, std::memory_order_relaxed)) {
    spdlog::info("limiter store answers again: create limits are shared across processes");
  }
}

void AdmissionControl::NoteSharedSilence(const Error& why) {
  const bool was = failing_open_.exchange(true, std::memory_order_relaxed);
  const int64_t now = clock_.Now().time_since_epoch().count();
  int64_t last = last_fail_open_log_ns_.load(std::memory_order_relaxed);
  if (was && now - last < kFailOpenLogInterval.count()) return;
  if (!last_fail_open_log_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) return;
  const auto options = options_.Load();
  spdlog::warn(
      "limiter store did not answer ({}): per-client limits fail open, global caps run on "
      "this process's local share (1/{} x {})",
      why.message, options->processes, options->local_share_slack);
}

Result<CreateAdmission> AdmissionControl::TakeCreateSlot(std::string_view client_key,
                                                         uint64_t declared_bytes,
                                                         CreateSlotPromise* promise,
                                                         bool count_full_cap) {
  // A full cap's refusal, counted unless the caller may still free a slot (AdmitCreate).
  const auto full = [&](const char* reason, std::string message) {
    return count_full_cap ? Refuse(ErrorCode::kUnavailable, reason, std::move(message))
                          : Refusal(ErrorCode::kUnavailable, reason, std::move(message));
  };
  // The client's share first: a slow uploader holds its slots for as long as its body trickles in
  // (up to body_timeout, or until it falls under min_body_rate), and without a share a handful of
  // addresses each within its create rate could hold every slot (docs/overload.md, "Create").
  auto share = create_per_client_.TryAcquire(client_key);
  if (!share) {
    return Refuse(ErrorCode::kUnavailable, "create_slots_per_client",
                  "this address already has its share of creates in flight; nothing was saved, "
                  "retry later");
  }
  // Then its network's: client keys are IPv6 /64s, and one /48 holds 65,536 of them
  // (docs/overload.md, "Pressure"). Units of it promised to a create of the network that cut one
  // of the network's slow bodies are not for the network's other creates.
  const std::string network = admission::ClientNetwork(client_key, options_.Load()->networks);
  const bool network_promised =
      promise != nullptr && promise->held() && promise->network_ == network;
  const bool promised = promise != nullptr && promise->held() && promise->network_.empty();
  std::optional<admission::KeyedSlots::Slot> network_share;
  if (const int64_t kept = network_promised ? 0 : PromisedToNetwork(network);
      kept == 0 ||
      create_per_network_.InFlight(network) + kept < create_per_network_.max_per_key()) {
    network_share = create_per_network_.TryAcquire(network);
  }
  if (network_promised) promise->Release();  // spent, or, if the share is taken after all, void
  if (!network_share) {
    return full("create_slots_per_network",
                "this address's network already has its share of creates in flight; nothing "
                "was saved, retry later");
  }
  // Slots promised to creates that cut a slow body to free them are not for anyone else.
  if (const int64_t kept = promised_slots_.load(std::memory_order_relaxed); kept > 0 && !promised) {
    const admission::SlotGauges g = create_slots_->Gauges();
    if (g.in_use + kept >= g.limit) {
      return full(
          "create_slots",
          "the server is at its limit of creates in flight; nothing was saved, retry later");
    }
  }
  admission::AcquireResult slot = create_slots_->TryAcquire(static_cast<int64_t>(declared_bytes));
  if (promised) promise->Release();  // spent, or, if the slot is taken after all, void
  if (!slot.ok()) {
    constexpr char kFull[] =
        "the server is at its limit of creates in flight; nothing was saved, retry later";
    if (slot.refusal == admission::SlotRefusal::kCount) return full("create_slots", kFull);
    return Refuse(ErrorCode::kUnavailable, "create_bytes", kFull);
  }
  NotePeak(create_peak_, *create_slots_);
  return CreateAdmission{std::move(*slot.permit), std::move(*share), std::move(*network_share),
                         CreateAdmission::Tokens::kLocal, declared_bytes};
}

Result<CreateAdmission> AdmissionControl::AdmitCreateOnLocalShare(std::string_view client_key,
                                                                  uint64_t declared_bytes,
                                                                  CreateSlotPromise* promise,
                                                                  bool solver,
                                                                  bool count_full_cap) {
  const double bytes = static_cast<double>(declared_bytes);
  admission::TokenBucket& counts = CountBucket(solver);
  const auto global = admission::TokenBucket::TryTakeBoth(counts, 1, global_bytes_, bytes);
  if (!global.decision.allowed) {
    const bool count = global.refused_first;
    return RateLimited(count ? (solver ? "solver_count" : "global_count") : "global_bytes",
                       (count ? counts : global_bytes_).policy(), global.decision,
                       (count ? counts : global_bytes_).Available());
  }
  Result<CreateAdmission> slot =
      TakeCreateSlot(client_key, declared_bytes, promise, count_full_cap);
  if (!slot.ok()) {
    RefundLocalTokens(CreateAdmission::Tokens::kLocalShare, client_key, declared_bytes,
                      std::nullopt, solver);
  }
  return slot;
}

std::optional<Error> AdmissionControl::RefuseFromTokensReserve() {
  const auto options = options_.Load();
  const double reserved = options->token_reserved_share * options->global_create_count.burst;
  if (reserved <= 0) return std::nullopt;
  // A look, then the take (TryTakeBoth) under the bucket's lock: anonymous creates racing here
  // can dip into the reserve by as many as run at once, never more.
  const double available = global_count_.Available();
  if (available - 1 >= reserved) return std::nullopt;
  const double missing = reserved + 1 - available;
  const admission::TakeDecision decision{
      false,
      std::chrono::duration_cast<Duration>(
          std::chrono::duration<double>(missing / options->global_create_count.rate_per_second)),
      false};
  return RateLimited("global_count", options->global_create_count, decision,
                     std::max(0.0, available - reserved));
}

std::shared_ptr<AdmissionControl::OwnBuckets> AdmissionControl::OwnBucketsOf(
    std::string_view client_key, const admission::TokenBudget& own) {
  const admission::TokenBucketPolicy bytes = OwnBytesPolicy(own);
  std::lock_guard lock(own_mu_);
  auto it = own_buckets_.find(std::string(client_key));
  if (it != own_buckets_.end()) {
    // A reload may have changed the per-address byte budget a token without its own follows.
    const admission::TokenBucketPolicy held = it->second->bytes.policy();
    if (held.rate_per_second != bytes.rate_per_second || held.burst != bytes.burst) {
      it->second->bytes.SetPolicy(bytes);
    }
    return it->second;
  }
  if (own_buckets_.size() >= kMaxOwnBuckets) {
    // A refilled pair is the same as a pair never made: nothing is lost by forgetting it.
    std::erase_if(own_buckets_, [](const auto& entry) {
      return entry.second->count.Available() >= entry.second->count.policy().burst &&
             entry.second->bytes.Available() >= entry.second->bytes.policy().burst;
    });
  }
  auto made = std::make_shared<OwnBuckets>(own, bytes, clock_);
  own_buckets_.emplace(std::string(client_key), made);
  return made;
}

Result<CreateAdmission> AdmissionControl::AdmitCreateLocal(
    std::string_view client_key, uint64_t declared_bytes, CreateSlotPromise* promise,
    const std::optional<admission::TokenBudget>& own, bool solver, bool count_full_cap) {
  const double bytes = static_cast<double>(declared_bytes);
  if (own) {
    // A creator token's own buckets instead of the address's (docs/admission.md, "Creator
    // tokens").
    const std::shared_ptr<OwnBuckets> mine = OwnBucketsOf(client_key, *own);
    const auto taken = admission::TokenBucket::TryTakeBoth(mine->count, 1, mine->bytes, bytes);
    if (!taken.decision.allowed) {
      admission::TokenBucket& refused = taken.refused_first ? mine->count : mine->bytes;
      return RateLimited(taken.refused_first ? "token_create_count" : "token_create_bytes",
                         refused.policy(), taken.decision, refused.Available());
    }
  } else {
    const admission::KeyedDecision mine = ip_create_.TryTake(client_key, 1, bytes);
    if (!mine.allowed()) {
      const bool count = mine.refused_dimension == 0;
      const auto budget = ip_create_.Peek(client_key);
      return RateLimited(count ? "ip_create_count" : "ip_create_bytes",
                         ip_create_.policies()[count ? 0 : 1], mine.decision,
                         budget.available[count ? 0 : 1]);
    }
    // A solver draws on a share of its own, which the tokens' reserve is not kept in.
    if (std::optional<Error> reserved = solver ? std::nullopt : RefuseFromTokensReserve()) {
      ip_create_.Refund(client_key, 1, bytes);
      return std::move(*reserved);
    }
  }
  admission::TokenBucket& counts = CountBucket(solver);
  const auto global = admission::TokenBucket::TryTakeBoth(counts, 1, global_bytes_, bytes);
  if (!global.decision.allowed) {
    if (own) {
      const std::shared_ptr<OwnBuckets> mine = OwnBucketsOf(client_key, *own);
      mine->count.Refund(1);
      mine->bytes.Refund(bytes);
    } else {
      ip_create_.Refund(client_key, 1, bytes);
    }
    const bool count = global.refused_first;
    const auto options = options_.Load();
    return RateLimited(count ? (solver ? "solver_count" : "global_count") : "global_bytes",
                       count ? CountPolicy(*options, solver) : options->global_create_bytes,
                       global.decision, (count ? counts : global_bytes_).Available());
  }
  Result<CreateAdmission> slot =
      TakeCreateSlot(client_key, declared_bytes, promise, count_full_cap);
  // Shed, not limited: the tokens go back, the client did nothing wrong.
  if (!slot.ok()) {
    RefundLocalTokens(CreateAdmission::Tokens::kLocal, client_key, declared_bytes, own, solver);
  } else {
    slot->own = own;
    slot->solver = solver;
  }
  return slot;
}

boost::asio::awaitable<ClientBudgets> AdmissionControl::DecidingBudgets(std::string client_key) {
  ClientBudgets b = Budgets(client_key);
  if (!shared_) co_return b;
  if (!peeks_.TryTake().allowed) {
    b.source = ClientBudgets::Source::kThisProcessPeeksSpent;
    co_return b;
  }
  std::vector<store::BucketTake> buckets = SharedCreateTakes(client_key, 0);
  buckets.push_back(SharedReadTake(client_key));
  auto peeking = shared_->PeekAll(
      buckets, admission::Deadline::After(clock_, options_.Load()->shared_timeout));
  Result<std::vector<double>> tokens = co_await std::move(peeking);
  if (!tokens.ok()) {
    // Not a decision: the fail-open state is the takes' to set, not a status page's.
    b.source = ClientBudgets::Source::kThisProcessSharedStoreSilent;
    co_return b;
  }
  b.source = ClientBudgets::Source::kSharedStore;
  for (size_t i = 0; i < buckets.size(); ++i) {
    const char* name = i < std::size(kSharedReasons) ? kSharedReasons[i] : "origin_get_ip";
    for (auto& bucket : b.buckets) {
      if (bucket.name != name) continue;
      bucket.policy = buckets[i].policy;  // the tier's, not this process's share of it
      bucket.available = (*tokens)[i];
    }
  }
  co_return b;
}

}  // namespace sluice::service
