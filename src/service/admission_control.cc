// AdmissionControl (include/sluice/service/admission_control.h): its limiters and metrics, their
// reload, the refusals every check shares, and the budgets a status page shows. The checks are
// files of their own: admission_control_create.cc (a create, locally and through the shared
// store) and admission_control_read.cc (an origin read, a page's bytes, a fill).
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

// The parts of global_create_count: the solvers' share and the rest
// (AdmissionOptions::solver_share).
admission::TokenBucketPolicy OthersCount(const AdmissionOptions& o) {
  const double part = 1 - std::clamp(o.solver_share, 0.0, 0.9);
  return {o.global_create_count.rate_per_second * part, o.global_create_count.burst * part};
}

admission::TokenBucketPolicy SolverCount(const AdmissionOptions& o) {
  // With no share kept no create draws on it; the bucket still needs a rate above zero.
  if (o.solver_share <= 0) return {1, 1};
  const double part = std::min(o.solver_share, 0.9);
  return {o.global_create_count.rate_per_second * part,
          std::max(1.0, o.global_create_count.burst * part)};
}

}  // namespace

admission::TokenBucketPolicy AdmissionControl::CountPolicy(const AdmissionOptions& o, bool solver) {
  return solver ? SolverCount(o) : OthersCount(o);
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
      global_count_(shared ? LocalShare(options, OthersCount(options)) : OthersCount(options),
                    clock),
      solver_count_(shared ? LocalShare(options, SolverCount(options)) : SolverCount(options),
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
  for (const char* reason :
       {"ip_create_count", "ip_create_bytes", "global_count", "solver_count", "global_bytes",
        "create_slots", "create_slots_per_client", "create_bytes", "read_slots", "fill_cap",
        "origin_get_ip", "delete_rate"}) {
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
  global_count_.SetPolicy(shared_ ? LocalShare(next, OthersCount(next)) : OthersCount(next));
  solver_count_.SetPolicy(shared_ ? LocalShare(next, SolverCount(next)) : SolverCount(next));
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

Error AdmissionControl::Refusal(ErrorCode code, const char* reason, std::string message) {
  Error e = MakeError(code, std::move(message), reason);
  if (code == ErrorCode::kUnavailable) e.retry_after_seconds = retry_after_.NextSeconds();
  return e;
}

void AdmissionControl::CountRefusal(const Error& refusal) {
  metrics_
      .GetCounter("sluice_admission_rejections_total", kRejectionHelp, {{"reason", refusal.reason}})
      .Inc();
}

Error AdmissionControl::Refuse(ErrorCode code, const char* reason, std::string message) {
  Error e = Refusal(code, reason, std::move(message));
  CountRefusal(e);
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

double AdmissionControl::SolverShareLeft() const {
  const auto options = options_.Load();
  if (options->solver_share <= 0) return 1.0;
  const double burst = solver_count_.policy().burst;
  return burst > 0 ? std::clamp(solver_count_.Available() / burst, 0.0, 1.0) : 1.0;
}

double AdmissionControl::CreateSlotSaturation() const {
  const admission::SlotGauges g = create_slots_->Gauges();
  if (g.limit <= 0) return 1.0;
  return std::clamp(double(g.in_use) / double(g.limit), 0.0, 1.0);
}

ClientBudgets AdmissionControl::Budgets(std::string_view client_key) const {
  ClientBudgets b;
  const auto options = options_.Load();
  const auto mine = ip_create_.Peek(client_key);
  b.buckets.push_back({"ip_create_count", options->ip_create_count, mine.available[0]});
  b.buckets.push_back({"ip_create_bytes", options->ip_create_bytes, mine.available[1]});
  b.buckets.push_back({"global_count", OthersCount(*options), global_count_.Available()});
  if (options->solver_share > 0) {
    b.buckets.push_back({"solver_count", SolverCount(*options), solver_count_.Available()});
  }
  b.buckets.push_back({"global_bytes", options->global_create_bytes, global_bytes_.Available()});
  b.buckets.push_back({"origin_get_ip", options->ip_read, ip_read_.Peek(client_key).available[0]});
  b.create_slots = create_slots_->Gauges();
  b.read_slots = read_slots_.Gauges();
  b.fill_slots = fill_slots_.Gauges();
  return b;
}

}  // namespace sluice::service
