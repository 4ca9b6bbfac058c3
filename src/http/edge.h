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
#include "sluice/admission/connection_balancer.h"
#include "sluice/admission/keyed_slots.h"
#include "sluice/common/metrics.h"
#include "sluice/common/swappable.h"
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
  /// The route label of `label_index` (for the access log).
  std::string_view Label(size_t label_index) const;

  Gauge& in_flight;
  Gauge& connections;
  Gauge& reserved_connections;
  Counter& connections_refused;
  Counter& client_connections_refused;
  Counter& first_byte_timeouts;
  Counter& header_timeouts;
  Counter& body_timeouts;
  Counter& body_rate_cuts;
  Counter& write_timeouts;
  Counter& bytes_received;

 private:
  // Resolved once per route and status, so the hot path is a few atomic operations.
  struct RouteStats {
    Histogram* latency = nullptr;
    std::array<std::atomic<Counter*>, 600> by_status{};
  };
  MetricsRegistry& registry_;
  const std::vector<std::string_view>& labels_;
  std::unique_ptr<RouteStats[]> stats_;
};

/// Connections past max_connections, or past a client's share of it, that may still ask for
/// /healthz (and get a 503 for anything else), so a balancer's health check is answered while one
/// client fills the cap. Within the 256 file descriptors src/app/serve_options.cc keeps free
/// above max_connections. Each is held for first_byte_timeout plus header_timeout at most, and one
/// address may hold two of them, so a flood from a few addresses cannot keep the reserve full.
inline constexpr int64_t kHealthReserve = 16;
inline constexpr int64_t kHealthReservePerClient = 2;

/// What every connection of one server shares; sessions hold it by shared_ptr, so it outlives
/// them all.
struct Edge {
  Edge(ServerOptions options_in, Context context_in, MetricsRegistry& registry, size_t loop_count)
      : options(std::move(options_in)),
        live(options),
        context(std::move(context_in)),
        routes(options.surface == ServerOptions::Surface::kAdmin
                   ? AdminRoutes()
                   : DefaultRoutes(options.metrics_on_public)),
        metrics(registry, routes),
        connections_per_client(options.max_connections_per_client),
        reserved_per_client(kHealthReservePerClient),
        loops(loop_count),
        loop_gauges(registry) {
    // The public surface's only: the admin listener's few connections would be a second series
    // of the same name.
    if (options.surface == ServerOptions::Surface::kAdmin) return;
    for (size_t loop = 0; loop < loop_count; ++loop) {
      loop_gauges.Add("sluice_http_loop_connections",
                      "Open client connections on each event loop (the listener keeps them even)",
                      {{"loop", std::to_string(loop)}},
                      [this, loop] { return static_cast<double>(loops.Load(loop)); });
    }
  }

  /// As built: what cannot change while the server runs (listen, surface, public_url, the admin
  /// token and the callbacks) is read from here.
  const ServerOptions options;
  /// What a reload may change (timeouts, caps, trusted proxies, access log): read once per request
  /// or connection through Live(), so one request never mixes two configurations.
  Swappable<ServerOptions> live;
  std::shared_ptr<const ServerOptions> Live() const { return live.Load(); }
  Context context;
  const RouteTable routes;
  EdgeMetrics metrics;
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> connections{0};
  /// Open connections by client key (the socket peer, IPv6 by /64); a key with none is forgotten,
  /// so the map holds at most max_connections keys.
  admission::KeyedSlots connections_per_client;
  /// Connections in the health reserve, and each address's part of them.
  std::atomic<int64_t> reserved{0};
  admission::KeyedSlots reserved_per_client;
  /// Which event loop each accepted connection lives on: the one with fewest open connections.
  admission::ConnectionBalancer loops;
  GaugeCallbacks loop_gauges;
  std::atomic<bool> draining{false};
};

}  // namespace sluice::http
