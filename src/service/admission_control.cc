#include "sluice/service/admission_control.h"

#include <fmt/format.h>

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

}  // namespace

AdmissionControl::AdmissionControl(AdmissionOptions options, const Clock& clock,
                                   MetricsRegistry& metrics)
    : options_(options),
      clock_(clock),
      metrics_(metrics),
      ip_create_(admission::KeyedLimiterOptions{{options.ip_create_count, options.ip_create_bytes},
                                                options.max_client_keys},
                 clock),
      ip_read_(admission::KeyedLimiterOptions{{options.ip_read}, options.max_client_keys}, clock),
      global_count_(options.global_create_count, clock),
      global_bytes_(options.global_create_bytes, clock),
      create_slots_(MakeCreateSlots(options, clock)),
      read_slots_(admission::ConcurrencyLimiterOptions{options.read_slots, 0}, clock),
      fill_slots_(admission::ConcurrencyLimiterOptions{options.fill_cap, 0}, clock),
      fill_per_client_(options.fill_cap_per_client),
      retry_after_(
          admission::RetryAfterOptions{options.retry_after_min, options.retry_after_max, 0}) {
  // Every reason exists from the start, so a dashboard shows zeros rather than gaps.
  for (const char* reason :
       {"ip_create_count", "ip_create_bytes", "global_count", "global_bytes", "create_slots",
        "create_bytes", "read_slots", "fill_cap", "origin_get_ip"}) {
    metrics.GetCounter("sluice_admission_rejections_total", kRejectionHelp, {{"reason", reason}});
  }
  const std::pair<const char*, const admission::SlotLimiter*> pools[] = {
      {"create", create_slots_.get()}, {"read", &read_slots_}, {"fill", &fill_slots_}};
  for (const auto& [pool, pool_limiter] : pools) {
    // A named copy: clang 14 cannot capture a structured binding.
    const admission::SlotLimiter* limiter = pool_limiter;
    metrics.AddGaugeCallback("sluice_pool_in_use", "Units in flight per admission pool",
                             {{"pool", pool}},
                             [limiter] { return double(limiter->Gauges().in_use); });
    metrics.AddGaugeCallback("sluice_pool_limit", "Cap of each admission pool (adaptive: current)",
                             {{"pool", pool}},
                             [limiter] { return double(limiter->Gauges().limit); });
  }
  metrics.AddGaugeCallback("sluice_pool_peak", "Highest in-flight count seen per pool",
                           {{"pool", "create"}}, [this] { return double(create_peak_.load()); });
  metrics.AddGaugeCallback("sluice_pool_peak", "Highest in-flight count seen per pool",
                           {{"pool", "read"}}, [this] { return double(read_peak_.load()); });
  metrics.AddGaugeCallback("sluice_pool_peak", "Highest in-flight count seen per pool",
                           {{"pool", "fill"}}, [this] { return double(fill_peak_.load()); });
  metrics.AddGaugeCallback(
      "sluice_create_bytes_in_use",
      "Create body bytes counted against the byte cap (abandoned PUTs included)", {},
      [this] { return double(create_slots_->Gauges().bytes_in_use); });
  metrics.AddGaugeCallback("sluice_create_bytes_limit", "The create byte cap", {},
                           [this] { return double(create_slots_->Gauges().max_bytes); });
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
  Error e =
      Refuse(ErrorCode::kResourceExhausted, reason,
             decision.exceeds_burst
                 ? fmt::format("this request is larger than the {} limit allows at once", reason)
                 : fmt::format("rate limit {} reached; retry after {} s", reason,
                               decision.RetryAfterSeconds()));
  const int retry = decision.exceeds_burst ? 3600 : decision.RetryAfterSeconds();
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

Result<admission::Permit> AdmissionControl::AdmitCreate(std::string_view client_key,
                                                        uint64_t declared_bytes) {
  const double bytes = static_cast<double>(declared_bytes);
  const admission::KeyedDecision mine = ip_create_.TryTake(client_key, 1, bytes);
  if (!mine.allowed()) {
    const bool count = mine.refused_dimension == 0;
    const auto budget = ip_create_.Peek(client_key);
    return RateLimited(count ? "ip_create_count" : "ip_create_bytes",
                       count ? options_.ip_create_count : options_.ip_create_bytes, mine.decision,
                       budget.available[count ? 0 : 1]);
  }
  const auto global = admission::TokenBucket::TryTakeBoth(global_count_, 1, global_bytes_, bytes);
  if (!global.decision.allowed) {
    ip_create_.Refund(client_key, 1, bytes);
    const bool count = global.refused_first;
    return RateLimited(count ? "global_count" : "global_bytes",
                       count ? options_.global_create_count : options_.global_create_bytes,
                       global.decision, (count ? global_count_ : global_bytes_).Available());
  }
  admission::AcquireResult slot = create_slots_->TryAcquire(static_cast<int64_t>(declared_bytes));
  if (!slot.ok()) {
    // Shed, not limited: the tokens go back, the client did nothing wrong.
    ip_create_.Refund(client_key, 1, bytes);
    global_count_.Refund(1);
    global_bytes_.Refund(bytes);
    const bool count = slot.refusal == admission::SlotRefusal::kCount;
    return Refuse(
        ErrorCode::kUnavailable, count ? "create_slots" : "create_bytes",
        "the server is at its limit of creates in flight; nothing was saved, retry later");
  }
  NotePeak(create_peak_, *create_slots_);
  return std::move(*slot.permit);
}

Result<admission::Permit> AdmissionControl::AdmitOriginRead(std::string_view client_key) {
  const admission::KeyedDecision mine = ip_read_.TryTake(client_key, 1);
  if (!mine.allowed()) {
    return RateLimited("origin_get_ip", options_.ip_read, mine.decision,
                       ip_read_.Peek(client_key).available[0]);
  }
  admission::AcquireResult slot = read_slots_.TryAcquire(0);
  if (!slot.ok()) {
    ip_read_.Refund(client_key, 1);
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
  const auto mine = ip_create_.Peek(client_key);
  b.buckets.push_back({"ip_create_count", options_.ip_create_count, mine.available[0]});
  b.buckets.push_back({"ip_create_bytes", options_.ip_create_bytes, mine.available[1]});
  b.buckets.push_back({"global_count", options_.global_create_count, global_count_.Available()});
  b.buckets.push_back({"global_bytes", options_.global_create_bytes, global_bytes_.Available()});
  b.buckets.push_back({"origin_get_ip", options_.ip_read, ip_read_.Peek(client_key).available[0]});
  b.create_slots = create_slots_->Gauges();
  b.read_slots = read_slots_.Gauges();
  b.fill_slots = fill_slots_.Gauges();
  return b;
}

}  // namespace sluice::service
