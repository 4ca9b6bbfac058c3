// What every connection of one server shares: its options, the handlers' context, the route table,
// the edge's metrics and counts. The listener (server.cc) owns it; sessions (session.cc) hold it by
// shared_ptr, so it outlives them all.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "handlers.h"
#include "routes.h"
#include "sluice/admission/connection_balancer.h"
#include "sluice/admission/keyed_slots.h"
#include "sluice/admission/pressure.h"
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
  /// Gives back this unit, if any, and takes `other`'s.
  Held& operator=(Held&& other) noexcept {
    if (this != &other) {
      Release();
      count_ = std::exchange(other.count_, nullptr);
      gauge_ = other.gauge_;
    }
    return *this;
  }
  ~Held() { Release(); }

 private:
  Held(std::atomic<int64_t>* count, Gauge* gauge) : count_(count), gauge_(gauge) {}
  void Release();
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
  Counter& network_connections_refused;
  /// Idle keep-alive connections closed to admit a new one at max_connections.
  Counter& idle_reclaimed;
  /// Create bodies cut (408) to admit a create with every create slot taken.
  Counter& bodies_reclaimed;
  /// Connections taken into the health reserve over a full cap, then given a place when their
  /// request arrived.
  Counter& reserve_promotions;
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

/// What another thread may ask of a session, under pressure: to give up the wait it is in (for
/// its next request, or for the rest of a slow create body), on its own event loop. Shared by the
/// session and the edge's registries (Edge::idle, Edge::bodies), so a post that arrives after the
/// session moved on, or ended, finds `cancel` empty and does nothing.
struct Reclaimable {
  explicit Reclaimable(boost::asio::any_io_executor executor_in)
      : executor(std::move(executor_in)) {}
  /// The session's event loop: `cancel` and `reclaimed` are touched only there.
  const boost::asio::any_io_executor executor;
  /// Cancels the pending read of the wait that may be reclaimed now; empty otherwise.
  std::function<void()> cancel;
  /// Set when a reclaim cancelled that wait, so the session knows why its read ended.
  bool reclaimed = false;
  /// Set, on any thread's view, once what the wait held is given back (a body's create slot: the
  /// request that read it has ended), so the create that cut it may take the slot.
  std::atomic<bool> released{false};
};

/// Asks `target`'s session to give up its wait (Reclaimable), on its own event loop; `on_reclaim`
/// runs there if it did (to count it). Thread-safe.
void Reclaim(const std::shared_ptr<Reclaimable>& target, Counter& on_reclaim);

/// The idle timeout now: idle_timeout while the connection cap is at most `pressure.start` full,
/// shrinking to idle_timeout_floor at `pressure.full` (docs/overload.md, "Pressure").
Duration EffectiveIdleTimeout(const ServerOptions& o, int64_t connections);

struct Edge;
/// The rate under which a create body is cut now (admission::BodiesInFlight::Required): at least
/// min_body_rate, raised toward min_body_rate_at_pressure only by the create slots held by work
/// and by bodies that keep it (docs/overload.md, "Pressure"); 0 when min_body_rate is 0 (off).
double RequiredBodyRate(const Edge& edge, const ServerOptions& o);
/// The rate required now of a create body whose average so far is `rate` bytes per second
/// (admission::BodiesInFlight::RequiredOf); 0 when min_body_rate is 0 (off).
double RequiredBodyRateOf(const Edge& edge, const ServerOptions& o, double rate);
/// The rate under which a body may be cut for a create that a full cap refused: the curve at
/// full pressure, min_body_rate_at_pressure (never under min_body_rate); 0 when off.
double BodyRateAtCap(const ServerOptions& o);

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
        connections_per_network(options.max_connections_per_network),
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
    loop_gauges.Add("sluice_http_idle_timeout_seconds",
                    "The idle keep-alive timeout now, shrunk as max_connections fills", {}, [this] {
                      return ToSeconds(EffectiveIdleTimeout(*Live(), connections.load()));
                    });
    loop_gauges.Add(
        "sluice_http_required_body_rate_bytes",
        "The average rate under which a create body is cut now (bytes per second), raised as "
        "the create slots fill with work and with bodies that keep it",
        {}, [this] { return RequiredBodyRate(*this, *Live()); });
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
  /// The same by the client's network (options.networks: IPv4 /24, IPv6 /48).
  admission::KeyedSlots connections_per_network;
  /// Keep-alive connections waiting for their next request, longest-idle first: at the cap, a new
  /// connection closes the first of them instead of being refused.
  admission::IdleConnections<std::shared_ptr<Reclaimable>> idle;
  /// Create bodies being read: what the required rate judges, and, with every create slot (or a
  /// network's share) taken, the slowest of which a new create cuts.
  admission::BodiesInFlight<std::shared_ptr<Reclaimable>> bodies;
  /// Connections in the health reserve, and each address's part of them.
  std::atomic<int64_t> reserved{0};
  admission::KeyedSlots reserved_per_client;
  /// Which event loop each accepted connection lives on: the one with fewest open connections.
  admission::ConnectionBalancer loops;
  GaugeCallbacks loop_gauges;
  std::atomic<bool> draining{false};
};

}  // namespace sluice::http
