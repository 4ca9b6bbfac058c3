#include "sluice/service/admission_control.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "sluice/admission/adaptive_concurrency_limiter.h"

namespace sluice::service {

namespace {

std::unique_ptr<admission::SlotLimiter> MakeCreateSlots(const AdmissionOptions& o,
                                                        const Clock& clock) {
  if (o.adaptive_create_cap) {
    admission::AdaptiveConcurrencyOptions a;
    a.max_limit = o.create_slots;
    a.initial_limit = std::max<int64_t>(1, o.create_slots / 2);
    a.target_latency = o.adaptive_target;
    a.max_bytes = o.create_slot_bytes;
    return std::make_unique<admission::AdaptiveConcurrencyLimiter>(a, clock);
  }
  return std::make_unique<admission::ConcurrencyLimiter>(
      admission::ConcurrencyLimiterOptions{o.create_slots, o.create_slot_bytes}, clock);
}

const char* kRejectionHelp =
    "Requests refused by admission control, by the limit that refused them";

const char* kSharedHelp =
    "Rate-limit decisions (creates and origin reads) asked of the shared store, by outcome "
    "(fail_open: it did not answer)";

// This process's part of a tier-wide cap while the shared store cannot count for the tier.
admission::TokenBucketPolicy LocalShare(const AdmissionOptions& o,
                                        admission::TokenBucketPolicy global) {
  const double share = o.local_share_slack / static_cast<double>(std::max<int64_t>(1, o.processes));
  return {global.rate_per_second * share, global.burst * share};
}

// The reasons of SharedCreateTakes' buckets, in its order: per client before global, as locally.
constexpr const char* kSharedReasons[] = {"ip_create_count", "ip_create_bytes", "global_count",
                                          "global_bytes"};

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

AdmissionControl::AdmissionControl(AdmissionOptions options, const Clock& clock,
                                   MetricsRegistry& metrics, store::SharedState* shared)
    : options_(options),
      clock_(clock),
      metrics_(metrics),
      shared_(shared),
      ip_create_(
          [&] {
            admission::KeyedLimiterOptions o{{options.ip_create_count, options.ip_create_bytes},
                                             options.max_client_keys};
            // Its use histogram is what /status shows; light users must stay in it.
            o.hold_recent_users = true;
            return o;
          }(),
          clock),
      ip_read_(admission::KeyedLimiterOptions{{options.ip_read}, options.max_client_keys}, clock),
      ip_report_(admission::KeyedLimiterOptions{{options.ip_report}, options.max_client_keys},
                 clock),
      ip_delete_(admission::KeyedLimiterOptions{{options.ip_delete}, options.max_client_keys},
                 clock),
      global_count_(
          shared ? LocalShare(options, options.global_create_count) : options.global_create_count,
          clock),
      global_bytes_(
          shared ? LocalShare(options, options.global_create_bytes) : options.global_create_bytes,
          clock),
      peeks_(kPeeks, clock),
      create_slots_(MakeCreateSlots(options, clock)),
      read_slots_(admission::ConcurrencyLimiterOptions{options.read_slots, 0}, clock),
      fill_slots_(admission::ConcurrencyLimiterOptions{options.fill_cap, 0}, clock),
      fill_per_client_(options.fill_cap_per_client),
      create_per_client_(options.create_slots_per_client),
      create_per_network_(options.create_slots_per_network),
      retry_after_(
          admission::RetryAfterOptions{options.retry_after_min, options.retry_after_max, 0}),
      gauges_(metrics) {
  if (shared_) {
    // The local shares stand in for the shared store while it is silent, and hold only what
    // refilled since it last decided a create of this process (AdmitCreate): none yet.
    NoteCreateAnswered();
  }
  // Every reason exists from the start, so a dashboard shows zeros rather than gaps.
  for (const char* reason : {"ip_create_count", "ip_create_bytes", "global_count", "global_bytes",
                             "create_slots", "create_slots_per_client", "create_bytes",
                             "read_slots", "fill_cap", "origin_get_ip", "delete_rate"}) {
    metrics.GetCounter("sluice_admission_rejections_total", kRejectionHelp, {{"reason", reason}});
  }
  const std::pair<const char*, const admission::SlotLimiter*> pools[] = {
      {"create", create_slots_.get()}, {"read", &read_slots_}, {"fill", &fill_slots_}};
  for (const auto& [pool, pool_limiter] : pools) {
    // A named copy: clang 14 cannot capture a structured binding.
    const admission::SlotLimiter* limiter = pool_limiter;
    gauges_.Add("sluice_pool_in_use", "Units in flight per admission pool", {{"pool", pool}},
                [limiter] { return double(limiter->Gauges().in_use); });
    gauges_.Add("sluice_pool_limit", "Cap of each admission pool (adaptive: current)",
                {{"pool", pool}}, [limiter] { return double(limiter->Gauges().limit); });
  }
  gauges_.Add("sluice_pool_peak", "Highest in-flight count seen per pool", {{"pool", "create"}},
              [this] { return double(create_peak_.load()); });
  gauges_.Add("sluice_pool_peak", "Highest in-flight count seen per pool", {{"pool", "read"}},
              [this] { return double(read_peak_.load()); });
  gauges_.Add("sluice_pool_peak", "Highest in-flight count seen per pool", {{"pool", "fill"}},
              [this] { return double(fill_peak_.load()); });
  gauges_.Add("sluice_create_bytes_in_use",
              "Create body bytes counted against the byte cap (abandoned PUTs included)", {},
              [this] { return double(create_slots_->Gauges().bytes_in_use); });
  gauges_.Add("sluice_create_bytes_limit", "The create byte cap", {},
              [this] { return double(create_slots_->Gauges().max_bytes); });
  if (shared_) {
    gauges_.Add(
        "sluice_limiter_fail_open",
        "1 while the shared limiter store does not answer: per-client create limits are open and "
        "the global caps run on this process's local share",
        {}, [this] { return FailingOpen() ? 1.0 : 0.0; });
    shared_allowed_ = &metrics.GetCounter("sluice_shared_limit_decisions_total", kSharedHelp,
                                          {{"outcome", "allowed"}});
    shared_refused_ = &metrics.GetCounter("sluice_shared_limit_decisions_total", kSharedHelp,
                                          {{"outcome", "refused"}});
    shared_fail_open_ = &metrics.GetCounter("sluice_shared_limit_decisions_total", kSharedHelp,
                                            {{"outcome", "fail_open"}});
    gauges_.AddCounter(
        "sluice_limiter_silent_seconds_total",
        "Time the global create caps ran on this process's local share: from the shared store's "
        "last answer to a create of this process until each create decision it missed. The local "
        "share admits at most its rate times this",
        {}, [this] { return SilentSeconds(); });
  }
}

void AdmissionControl::Reconfigure(AdmissionOptions next) {
  const auto current = options_.Load();
  next.adaptive_create_cap = current->adaptive_create_cap;
  next.max_client_keys = current->max_client_keys;
  // The limiters first, the snapshot last: a request in between is judged by the new numbers and
  // at worst names the old ones in its refusal.
  ip_create_.SetPolicies({next.ip_create_count, next.ip_create_bytes});
  ip_read_.SetPolicies({next.ip_read});
  ip_report_.SetPolicies({next.ip_report});
  ip_delete_.SetPolicies({next.ip_delete});
  global_count_.SetPolicy(shared_ ? LocalShare(next, next.global_create_count)
                                  : next.global_create_count);
  global_bytes_.SetPolicy(shared_ ? LocalShare(next, next.global_create_bytes)
                                  : next.global_create_bytes);
  if (auto* adaptive = dynamic_cast<admission::AdaptiveConcurrencyLimiter*>(create_slots_.get())) {
    adaptive->SetBounds(next.create_slots, next.create_slot_bytes, next.adaptive_target);
  } else if (auto* fixed = dynamic_cast<admission::ConcurrencyLimiter*>(create_slots_.get())) {
    fixed->SetLimits({next.create_slots, next.create_slot_bytes});
  }
  read_slots_.SetLimits({next.read_slots, 0});
  fill_slots_.SetLimits({next.fill_cap, 0});
  fill_per_client_.SetMaxPerKey(next.fill_cap_per_client);
  create_per_client_.SetMaxPerKey(next.create_slots_per_client);
  create_per_network_.SetMaxPerKey(next.create_slots_per_network);
  retry_after_.SetBand(next.retry_after_min, next.retry_after_max);
  options_.Store(std::move(next));
}

Error AdmissionControl::Refuse(ErrorCode code, const char* reason, std::string message) {
  metrics_.GetCounter("sluice_admission_rejections_total", kRejectionHelp, {{"reason", reason}})
      .Inc();
  Error e = MakeError(code, std::move(message), reason);
  if (code == ErrorCode::kUnavailable) e.retry_after_seconds = retry_after_.NextSeconds();
  return e;
}

Error AdmissionControl::RateLimited(const char* reason, const admission::TokenBucketPolicy& policy,
                                    const admission::TakeDecision& decision, double available) {
  // Clamped to retry_after_max: the wait may come from the shared store, whose answer can be
  // nonsense (1e308 s, negative once converted), and a client told "1" or "in a century" is told
  // wrong either way. A take larger than the burst never succeeds, however long one waits.
  const int retry_after_max = options_.Load()->retry_after_max;
  const int retry = decision.exceeds_burst ? 3600
                    : decision.retry_after < Duration::zero()
                        ? retry_after_max
                        : std::clamp(decision.RetryAfterSeconds(), 1, retry_after_max);
  Error e =
      Refuse(ErrorCode::kResourceExhausted, reason,
             decision.exceeds_burst
                 ? fmt::format("this request is larger than the {} limit allows at once", reason)
                 : fmt::format("rate limit {} reached; retry after {} s", reason, retry));
  e.retry_after_seconds = retry;
  e.limit = LimitInfo{reason, policy.burst, policy.burst / policy.rate_per_second,
                      std::floor(std::max(0.0, available)), retry};
  return e;
}

void AdmissionControl::NotePeak(std::atomic<int64_t>& peak, const admission::SlotLimiter& limiter) {
  const int64_t now = limiter.Gauges().in_use;
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
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
    std::string client_key, uint64_t declared_bytes, CreateSlotPromise* promise) {
  if (!shared_) co_return AdmitCreateLocal(client_key, declared_bytes, promise);
  std::vector<store::BucketTake> takes = SharedCreateTakes(client_key, declared_bytes);
  auto asking = AskShared(takes, kSharedReasons);
  SharedVerdict verdict = co_await std::move(asking);
  if (verdict.kind == SharedVerdict::kSilent) {
    NoteCreateSilent();
    Result<CreateAdmission> local = AdmitCreateOnLocalShare(client_key, declared_bytes, promise);
    if (local.ok()) {
      ip_create_.NoteUse(client_key);
      local->tokens = CreateAdmission::Tokens::kLocalShare;
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
  Result<CreateAdmission> slot = TakeCreateSlot(client_key, declared_bytes, promise);
  if (!slot.ok()) {
    auto refunding = RefundShared(std::move(takes));  // shed, not limited: the tokens go back
    co_await std::move(refunding);
  } else {
    // The budget lives in the shared store; the use histogram is this process's view of it.
    ip_create_.NoteUse(client_key);
    slot->tokens = CreateAdmission::Tokens::kShared;
  }
  co_return slot;
}

boost::asio::awaitable<void> AdmissionControl::RefundCreate(const CreateAdmission& admitted,
                                                            std::string_view client_key) {
  if (admitted.tokens == CreateAdmission::Tokens::kShared) {
    auto refunding = RefundShared(SharedCreateTakes(client_key, admitted.declared_bytes));
    co_await std::move(refunding);
  } else {
    RefundLocalTokens(admitted.tokens, client_key, admitted.declared_bytes);
  }
}

void AdmissionControl::RefundLocalTokens(CreateAdmission::Tokens taken, std::string_view client_key,
                                         uint64_t declared_bytes) {
  const double bytes = static_cast<double>(declared_bytes);
  // On the local share the per-client limits were open: only the global caps took tokens.
  if (taken == CreateAdmission::Tokens::kLocal) ip_create_.Refund(client_key, 1, bytes);
  global_count_.Refund(1);
  global_bytes_.Refund(bytes);
}

std::vector<store::BucketTake> AdmissionControl::SharedCreateTakes(std::string_view client_key,
                                                                   uint64_t declared_bytes) const {
  const double bytes = static_cast<double>(declared_bytes);
  const auto options = options_.Load();
  std::vector<store::BucketTake> takes;
  takes.reserve(4);
  takes.push_back({fmt::format("ipc:{}", client_key), options->ip_create_count, 1});
  takes.push_back({fmt::format("ipb:{}", client_key), options->ip_create_bytes, bytes});
  takes.push_back({"gc", options->global_create_count, 1});
  takes.push_back({"gb", options->global_create_bytes, bytes});
  return takes;
}

store::BucketTake AdmissionControl::SharedReadTake(std::string_view client_key) const {
  return {fmt::format("ipr:{}", client_key), options_.Load()->ip_read, 1};
}

void AdmissionControl::NoteCreateAnswered() {
  global_count_.Drain();
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
                                                         CreateSlotPromise* promise) {
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
    return Refuse(ErrorCode::kUnavailable, "create_slots_per_network",
                  "this address's network already has its share of creates in flight; nothing "
                  "was saved, retry later");
  }
  // Slots promised to creates that cut a slow body to free them are not for anyone else.
  if (const int64_t kept = promised_slots_.load(std::memory_order_relaxed); kept > 0 && !promised) {
    const admission::SlotGauges g = create_slots_->Gauges();
    if (g.in_use + kept >= g.limit) {
      return Refuse(
          ErrorCode::kUnavailable, "create_slots",
          "the server is at its limit of creates in flight; nothing was saved, retry later");
    }
  }
  admission::AcquireResult slot = create_slots_->TryAcquire(static_cast<int64_t>(declared_bytes));
  if (promised) promise->Release();  // spent, or, if the slot is taken after all, void
  if (!slot.ok()) {
    const bool count = slot.refusal == admission::SlotRefusal::kCount;
    return Refuse(
        ErrorCode::kUnavailable, count ? "create_slots" : "create_bytes",
        "the server is at its limit of creates in flight; nothing was saved, retry later");
  }
  NotePeak(create_peak_, *create_slots_);
  return CreateAdmission{std::move(*slot.permit), std::move(*share), std::move(*network_share),
                         CreateAdmission::Tokens::kLocal, declared_bytes};
}

Result<CreateAdmission> AdmissionControl::AdmitCreateOnLocalShare(std::string_view client_key,
                                                                  uint64_t declared_bytes,
                                                                  CreateSlotPromise* promise) {
  const double bytes = static_cast<double>(declared_bytes);
  const auto global = admission::TokenBucket::TryTakeBoth(global_count_, 1, global_bytes_, bytes);
  if (!global.decision.allowed) {
    const bool count = global.refused_first;
    return RateLimited(count ? "global_count" : "global_bytes",
                       (count ? global_count_ : global_bytes_).policy(), global.decision,
                       (count ? global_count_ : global_bytes_).Available());
  }
  Result<CreateAdmission> slot = TakeCreateSlot(client_key, declared_bytes, promise);
  if (!slot.ok()) {
    RefundLocalTokens(CreateAdmission::Tokens::kLocalShare, client_key, declared_bytes);
  }
  return slot;
}

Result<CreateAdmission> AdmissionControl::AdmitCreateLocal(std::string_view client_key,
                                                           uint64_t declared_bytes,
                                                           CreateSlotPromise* promise) {
  const double bytes = static_cast<double>(declared_bytes);
  const admission::KeyedDecision mine = ip_create_.TryTake(client_key, 1, bytes);
  if (!mine.allowed()) {
    const bool count = mine.refused_dimension == 0;
    const auto budget = ip_create_.Peek(client_key);
    return RateLimited(count ? "ip_create_count" : "ip_create_bytes",
                       ip_create_.policies()[count ? 0 : 1], mine.decision,
                       budget.available[count ? 0 : 1]);
  }
  const auto global = admission::TokenBucket::TryTakeBoth(global_count_, 1, global_bytes_, bytes);
  if (!global.decision.allowed) {
    ip_create_.Refund(client_key, 1, bytes);
    const bool count = global.refused_first;
    const auto options = options_.Load();
    return RateLimited(count ? "global_count" : "global_bytes",
                       count ? options->global_create_count : options->global_create_bytes,
                       global.decision, (count ? global_count_ : global_bytes_).Available());
  }
  Result<CreateAdmission> slot = TakeCreateSlot(client_key, declared_bytes, promise);
  // Shed, not limited: the tokens go back, the client did nothing wrong.
  if (!slot.ok()) RefundLocalTokens(CreateAdmission::Tokens::kLocal, client_key, declared_bytes);
  return slot;
}

Status AdmissionControl::AdmitReport(std::string_view client_key) {
  const admission::KeyedDecision mine = ip_report_.TryTake(client_key, 1);
  if (mine.allowed()) return Ok();
  return RateLimited("report_rate", ip_report_.policies()[0], mine.decision,
                     ip_report_.Peek(client_key).available[0]);
}

Status AdmissionControl::AdmitDelete(std::string_view client_key) {
  const admission::KeyedDecision mine = ip_delete_.TryTake(client_key, 1);
  if (mine.allowed()) return Ok();
  return RateLimited("delete_rate", ip_delete_.policies()[0], mine.decision,
                     ip_delete_.Peek(client_key).available[0]);
}

std::vector<uint64_t> AdmissionControl::CreateBudgetUse(
    const std::vector<double>& upper_bounds) const {
  return ip_create_.UseHistogram(upper_bounds);
}

double AdmissionControl::CreateSlotSaturation() const {
  const admission::SlotGauges g = create_slots_->Gauges();
  if (g.limit <= 0) return 1.0;
  return std::clamp(double(g.in_use) / double(g.limit), 0.0, 1.0);
}

boost::asio::awaitable<Result<admission::Permit>> AdmissionControl::AdmitOriginRead(
    std::string client_key) {
  if (!shared_) {
    const admission::KeyedDecision mine = ip_read_.TryTake(client_key, 1);
    if (!mine.allowed()) {
      co_return RateLimited("origin_get_ip", ip_read_.policies()[0], mine.decision,
                            ip_read_.Peek(client_key).available[0]);
    }
    Result<admission::Permit> slot = TakeReadSlot();
    if (!slot.ok()) ip_read_.Refund(client_key, 1);
    co_return slot;
  }
  static constexpr const char* kReasons[] = {"origin_get_ip"};
  std::vector<store::BucketTake> takes = {SharedReadTake(client_key)};
  auto asking = AskShared(takes, kReasons);
  SharedVerdict verdict = co_await std::move(asking);
  // Silent: the per-client read limit fails open like the create limits; the read pool still holds.
  if (verdict.kind == SharedVerdict::kRefused) co_return std::move(*verdict.refusal);
  Result<admission::Permit> slot = TakeReadSlot();
  if (!slot.ok() && verdict.kind == SharedVerdict::kAllowed) {
    auto refunding = RefundShared(std::move(takes));
    co_await std::move(refunding);
  }
  co_return slot;
}

boost::asio::awaitable<Status> AdmissionControl::AdmitPageBytes(std::string client_key,
                                                                size_t page_bytes) {
  const size_t reads = page_bytes / kPageBytesPerRead;
  if (reads == 0) co_return Ok();
  const admission::TokenBucketPolicy policy = options_.Load()->ip_read;
  // Never more than the bucket holds: a page the bucket could never pay for would be refused for
  // ever, whatever the client's pace.
  const double cost = std::min(static_cast<double>(reads), policy.burst);
  if (!shared_) {
    const admission::KeyedDecision mine = ip_read_.TryTake(client_key, cost);
    if (!mine.allowed()) {
      co_return RateLimited("page_bytes_ip", ip_read_.policies()[0], mine.decision,
                            ip_read_.Peek(client_key).available[0]);
    }
    co_return Ok();
  }
  static constexpr const char* kReasons[] = {"page_bytes_ip"};
  store::BucketTake take = SharedReadTake(client_key);
  take.cost = cost;
  auto asking = AskShared({std::move(take)}, kReasons);
  SharedVerdict verdict = co_await std::move(asking);
  if (verdict.kind == SharedVerdict::kRefused) co_return std::move(*verdict.refusal);
  co_return Ok();
}

Result<admission::Permit> AdmissionControl::TakeReadSlot() {
  admission::AcquireResult slot = read_slots_.TryAcquire(0);
  if (!slot.ok()) {
    return Refuse(ErrorCode::kUnavailable, "read_slots",
                  "the server is at its limit of reads in flight; retry later");
  }
  NotePeak(read_peak_, read_slots_);
  return std::move(*slot.permit);
}

Result<AdmissionControl::FillTicket> AdmissionControl::AdmitFill(std::string_view client_key) {
  auto share = fill_per_client_.TryAcquire(client_key);
  if (!share) {
    return Refuse(ErrorCode::kUnavailable, "fill_cap",
                  "too many lookups of uncached pastes from this address at once; retry later");
  }
  admission::AcquireResult slot = fill_slots_.TryAcquire(0);
  if (!slot.ok()) {
    return Refuse(ErrorCode::kUnavailable, "fill_cap",
                  "too many lookups of uncached pastes at once; retry later");
  }
  NotePeak(fill_peak_, fill_slots_);
  return FillTicket{std::move(*slot.permit), std::move(*share)};
}

ClientBudgets AdmissionControl::Budgets(std::string_view client_key) const {
  ClientBudgets b;
  const auto options = options_.Load();
  const auto mine = ip_create_.Peek(client_key);
  b.buckets.push_back({"ip_create_count", options->ip_create_count, mine.available[0]});
  b.buckets.push_back({"ip_create_bytes", options->ip_create_bytes, mine.available[1]});
  b.buckets.push_back({"global_count", options->global_create_count, global_count_.Available()});
  b.buckets.push_back({"global_bytes", options->global_create_bytes, global_bytes_.Available()});
  b.buckets.push_back({"origin_get_ip", options->ip_read, ip_read_.Peek(client_key).available[0]});
  b.create_slots = create_slots_->Gauges();
  b.read_slots = read_slots_.Gauges();
  b.fill_slots = fill_slots_.Gauges();
  return b;
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
