// What every connection of one server shares: its options, the handlers' context, the route table,
// the edge's metrics and counts. The listener (server.cc) owns it; sessions (session.cc) hold it by
// shared_ptr, so it outlives them all.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <optional>

#include "handlers.h"
#include "routes.h"
#include "sluice/common/metrics.h"
#include "sluice/http/server.h"

namespace sluice::http {

/// One unit of a count that a gauge mirrors, given back however its holder ends: a return, an
/// exception, or a coroutine destroyed with its event loop.
class Held {
 public:
  /// Takes one unit if the count is below `limit`; nothing otherwise.
  static std::optional<Held> TryTake(std::atomic<int64_t>& count, Gauge& gauge, int64_t limit);
  Held(std::atomic<int64_t>& count, Gauge& gauge);
  Held(Held&& other) noexcept : count_(other.count_), gauge_(other.gauge_) {
    other.count_ = nullptr;
  }
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;
  Held& operator=(Held&&) = delete;
  ~Held();

 private:
  Held(std::atomic<int64_t>* count, Gauge* gauge) : count_(count), gauge_(gauge) {}
  std::atomic<int64_t>* count_;
  Gauge* gauge_;
};

/// The edge's own metrics, declared here once.
class EdgeMetrics {
 public:
  EdgeMetrics(MetricsRegistry& registry, const RouteTable& routes);
  /// A response written: latency by route, and a counter by route and status.
  void CountResponse(size_t label_index, unsigned status, double seconds);
  /// The route label of answers given before a request could be routed (the parser's refusals).
  size_t unparsed_label() const { return labels_.size(); }

  Gauge& in_flight;
  Gauge& connections;
  Counter& connections_refused;
  Counter& header_timeouts;
  Counter& body_timeouts;
  Counter& write_timeouts;
  Counter& bytes_received;

 private:
  std::string_view Label(size_t label_index) const;
  // Resolved once per route and status, so the hot path is a few atomic operations.
  struct RouteStats {
    Histogram* latency = nullptr;
    std::array<std::atomic<Counter*>, 600> by_status{};
  };
  MetricsRegistry& registry_;
  const std::vector<std::string_view>& labels_;
  std::unique_ptr<RouteStats[]> stats_;
};

/// What every connection of one server shares; sessions hold it by shared_ptr, so it outlives
/// them all.
struct Edge {
  Edge(ServerOptions options_in, Context context_in, MetricsRegistry& registry)
      : options(std::move(options_in)),
        context(std::move(context_in)),
        routes(DefaultRoutes()),
        metrics(registry, routes) {}

  const ServerOptions options;
  Context context;
  const RouteTable routes;
  EdgeMetrics metrics;
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> connections{0};
  std::atomic<bool> draining{false};
};

}  // namespace sluice::http
