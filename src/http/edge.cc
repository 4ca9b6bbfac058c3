#include "edge.h"

#include <boost/asio/post.hpp>

namespace sluice::http {

namespace {

constexpr const char* kTimeoutsHelp =
    "Requests cut off because their headers or body arrived, or their answer was read, too slowly";

// The label of answers given before routing (EdgeMetrics::unparsed_label).
constexpr std::string_view kUnparsed = "unparsed";

}  // namespace

void Reclaim(const std::shared_ptr<Reclaimable>& target, Counter& on_reclaim) {
  boost::asio::post(target->executor, [target, &on_reclaim] {
    if (!target->cancel) return;  // the wait ended meanwhile: nothing to give up
    target->reclaimed = true;
    target->cancel();
    on_reclaim.Inc();
  });
}

Duration EffectiveIdleTimeout(const ServerOptions& o, int64_t connections) {
  return admission::ScaledTimeout(o.idle_timeout, o.idle_timeout_floor,
                                  o.pressure.Level(connections, o.max_connections));
}

namespace {

admission::BodyRateCurve BodyRates(const ServerOptions& o) {
  return {o.pressure, static_cast<double>(o.min_body_rate),
          static_cast<double>(o.min_body_rate_at_pressure)};
}

}  // namespace

double RequiredBodyRate(const Edge& edge, const ServerOptions& o) {
  if (o.min_body_rate <= 0) return 0;
  const admission::SlotGauges slots = edge.context.service.CreateSlotGauges();
  return edge.bodies.Required(std::chrono::steady_clock::now(), slots.in_use, slots.limit,
                              BodyRates(o));
}

double RequiredBodyRateOf(const Edge& edge, const ServerOptions& o, double rate) {
  if (o.min_body_rate <= 0) return 0;
  const admission::SlotGauges slots = edge.context.service.CreateSlotGauges();
  return edge.bodies.RequiredOf(std::chrono::steady_clock::now(), rate, slots.in_use, slots.limit,
                                BodyRates(o));
}

double BodyRateAtCap(const ServerOptions& o) {
  if (o.min_body_rate <= 0) return 0;
  return BodyRates(o).At(1, 1);
}

std::optional<Held> Held::TryTake(std::atomic<int64_t>& count, Gauge& gauge, int64_t limit) {
  if (count.fetch_add(1) >= limit) {
    count.fetch_sub(1);
    return std::nullopt;
  }
  gauge.Add(1);
  return Held(&count, &gauge);
}

Held::Held(std::atomic<int64_t>& count, Gauge& gauge) : count_(&count), gauge_(&gauge) {
  count_->fetch_add(1, std::memory_order_relaxed);
  gauge_->Add(1);
}

void Held::Release() {
  if (count_ == nullptr) return;
  std::exchange(count_, nullptr)->fetch_sub(1, std::memory_order_relaxed);
  gauge_->Add(-1);
}

EdgeMetrics::EdgeMetrics(MetricsRegistry& registry, const RouteTable& routes)
    : in_flight(registry.GetGauge("sluice_http_in_flight", "Requests being served now")),
      connections(registry.GetGauge("sluice_http_connections", "Open client connections")),
      reserved_connections(registry.GetGauge(
          "sluice_http_reserved_connections",
          "Connections over a connection cap held in the reserve that still answers /healthz")),
      connections_refused(registry.GetCounter(
          "sluice_admission_rejections_total",
          "Requests refused by admission control, by the limit that refused them",
          {{"reason", "connections"}})),
      client_connections_refused(registry.GetCounter(
          "sluice_admission_rejections_total",
          "Requests refused by admission control, by the limit that refused them",
          {{"reason", "connections_per_client"}})),
      network_connections_refused(registry.GetCounter(
          "sluice_admission_rejections_total",
          "Requests refused by admission control, by the limit that refused them",
          {{"reason", "connections_per_network"}})),
      idle_reclaimed(registry.GetCounter(
          "sluice_connections_reclaimed_total",
          "Connections closed under pressure to admit another: an idle keep-alive connection at "
          "max_connections, or the slowest create body with every create slot taken",
          {{"reason", "idle_at_cap"}})),
      bodies_reclaimed(registry.GetCounter(
          "sluice_connections_reclaimed_total",
          "Connections closed under pressure to admit another: an idle keep-alive connection at "
          "max_connections, or the slowest create body with every create slot taken",
          {{"reason", "slow_body_at_cap"}})),
      reserve_promotions(registry.GetCounter(
          "sluice_http_reserve_promotions_total",
          "Connections over a full max_connections held in the health reserve that found a place "
          "(freed, or an idle connection's) when their request arrived, and were served")),
      first_byte_timeouts(registry.GetCounter("sluice_http_timeouts_total", kTimeoutsHelp,
                                              {{"phase", "first_byte"}})),
      header_timeouts(
          registry.GetCounter("sluice_http_timeouts_total", kTimeoutsHelp, {{"phase", "headers"}})),
      body_timeouts(
          registry.GetCounter("sluice_http_timeouts_total", kTimeoutsHelp, {{"phase", "body"}})),
      body_rate_cuts(registry.GetCounter("sluice_http_timeouts_total", kTimeoutsHelp,
                                         {{"phase", "body_rate"}})),
      write_timeouts(
          registry.GetCounter("sluice_http_timeouts_total", kTimeoutsHelp, {{"phase", "write"}})),
      bytes_received(registry.GetCounter("sluice_http_bytes_received_total",
                                         "Bytes read from client sockets (a rejected body is "
                                         "never read past the read buffer)")),
      registry_(registry),
      labels_(routes.Labels()),
      stats_(std::make_unique<RouteStats[]>(labels_.size() + 1)) {
  for (size_t i = 0; i <= labels_.size(); ++i) {
    stats_[i].latency = &registry.GetHistogram("sluice_http_request_duration_seconds",
                                               "Time from full headers to response written",
                                               {{"route", std::string(Label(i))}});
  }
}

std::string_view EdgeMetrics::Label(size_t label_index) const {
  return label_index < labels_.size() ? labels_[label_index] : kUnparsed;
}

void EdgeMetrics::CountResponse(size_t label_index, unsigned status, double seconds) {
  RouteStats& stats = stats_[label_index];
  stats.latency->Observe(seconds);
  if (status >= stats.by_status.size()) return;
  Counter* counter = stats.by_status[status].load(std::memory_order_acquire);
  if (!counter) {
    counter = &registry_.GetCounter(
        "sluice_http_requests_total", "Responses by route and status",
        {{"route", std::string(Label(label_index))}, {"status", std::to_string(status)}});
    stats.by_status[status].store(counter, std::memory_order_release);
  }
  counter->Inc();
}

}  // namespace sluice::http
