#include "sluice/service/dependency.h"

#include <random>

#include "sluice/store/meta_store.h"

namespace sluice::service {

Dependency::Dependency(std::string name, const Clock& clock, MetricsRegistry& metrics,
                       admission::RetryBudget& retry_budget,
                       admission::CircuitBreakerOptions breaker)
    : name_(std::move(name)),
      clock_(clock),
      metrics_(metrics),
      retry_budget_(retry_budget),
      breaker_([&] {
        // Transitions are counted by destination, so an operator sees opens, probes and closes.
        auto& to_open = metrics.GetCounter("sluice_breaker_transitions_total",
                                           "Circuit breaker state changes by destination",
                                           {{"dependency", name_}, {"to", "open"}});
        auto& to_half = metrics.GetCounter("sluice_breaker_transitions_total",
                                           "Circuit breaker state changes by destination",
                                           {{"dependency", name_}, {"to", "half_open"}});
        auto& to_closed = metrics.GetCounter("sluice_breaker_transitions_total",
                                             "Circuit breaker state changes by destination",
                                             {{"dependency", name_}, {"to", "closed"}});
        breaker.on_transition = [&to_open, &to_half, &to_closed](admission::BreakerState,
                                                                 admission::BreakerState to) {
          (to == admission::BreakerState::kOpen       ? to_open
           : to == admission::BreakerState::kHalfOpen ? to_half
                                                      : to_closed)
              .Inc();
        };
        return admission::CircuitBreaker(std::move(breaker), clock);
      }()),
      jitter_(std::random_device{}()),
      breaker_rejections_(metrics.GetCounter("sluice_breaker_rejections_total",
                                             "Calls refused at once because the breaker was open",
                                             {{"dependency", name_}})),
      callbacks_(metrics) {
  callbacks_.Add("sluice_breaker_state", "0 closed, 1 open, 2 half-open", {{"dependency", name_}},
                 [this] {
                   switch (breaker_.state()) {
                     case admission::BreakerState::kClosed:
                       return 0.0;
                     case admission::BreakerState::kOpen:
                       return 1.0;
                     case admission::BreakerState::kHalfOpen:
                       return 2.0;
                   }
                   return 0.0;
                 });
}

Dependency::OpStats& Dependency::StatsFor(const char* op) {
  std::lock_guard lock(stats_mu_);
  auto it = stats_.find(op);
  if (it != stats_.end()) return it->second;
  const Labels labels = {{"dependency", name_}, {"op", op}};
  OpStats stats{
      &metrics_.GetHistogram("sluice_dependency_duration_seconds", "Store call latency", labels),
      &metrics_.GetCounter("sluice_dependency_timeouts_total",
                           "Store calls abandoned at their timeout (never retried)", labels),
      &metrics_.GetCounter("sluice_dependency_retries_total",
                           "Second attempts after a refused connect, within the retry budget",
                           labels),
      &metrics_.GetCounter("sluice_dependency_errors_total", "Store calls that failed", labels)};
  return stats_.emplace(op, stats).first->second;
}

Error Dependency::BreakerOpen(Duration retry_after) {
  Error e = refused_by_failover_
                ? MakeError(ErrorCode::kUnavailable,
                            "the " + name_ + " store's primary is failing over; try again shortly",
                            std::string(store::kPrimaryFailover))
                : MakeError(ErrorCode::kUnavailable,
                            "the " + name_ + " store is refusing connections; try again shortly",
                            "breaker_open");
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(retry_after).count();
  e.retry_after_seconds = static_cast<int>(std::max<int64_t>(1, seconds + 1));
  return e;
}

}  // namespace sluice::service
