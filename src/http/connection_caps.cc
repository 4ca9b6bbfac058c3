// The connection caps of the edge (connection_caps.h).
#include "connection_caps.h"

#include "sluice/admission/client_key.h"

namespace sluice::http {

Error ConnectionRefusal(Edge& edge, ConnectionCap cap) {
  Error full;
  switch (cap) {
    case ConnectionCap::kClient:
      edge.metrics.client_connections_refused.Inc();
      full = MakeError(ErrorCode::kUnavailable,
                       "this address has its limit of open connections; close some or retry later",
                       "connections_per_client");
      break;
    case ConnectionCap::kNetwork:
      edge.metrics.network_connections_refused.Inc();
      full = MakeError(ErrorCode::kUnavailable,
                       "this address's network has its limit of open connections; close some or "
                       "retry later",
                       "connections_per_network");
      break;
    case ConnectionCap::kProcess:
      edge.metrics.connections_refused.Inc();
      full =
          MakeError(ErrorCode::kUnavailable,
                    "the server is at its limit of open connections; retry later", "connections");
      break;
  }
  full.retry_after_seconds = 5;
  return full;
}

std::optional<ConnectionPlace> TakeConnectionPlace(Edge& edge, const ServerOptions& o,
                                                   const std::string& key, bool exempt,
                                                   ConnectionCap& refused_by) {
  ConnectionPlace place;
  if (!exempt) {
    // The client's share, then its network's: one /48 holds 65,536 client keys, each with a
    // share of its own (docs/overload.md, "Pressure").
    place.client_share = edge.connections_per_client.TryAcquire(key);
    if (!place.client_share) {
      refused_by = ConnectionCap::kClient;
      return std::nullopt;
    }
    place.network_share =
        edge.connections_per_network.TryAcquire(admission::ClientNetwork(key, o.networks));
    if (!place.network_share) {
      refused_by = ConnectionCap::kNetwork;
      return std::nullopt;
    }
  }
  place.connection = Held::TryTake(edge.connections, edge.metrics.connections, o.max_connections);
  if (place.connection) return place;
  // At the cap: the connection idle longest between two requests gives up its place, as nginx
  // reuses its keep-alive connections first; a 503 when none is idle, or when this client has one
  // of its own idle (include/sluice/admission/pressure.h). It closes on its own loop within a
  // turn, so the count is over the cap by the reclaims under way (at most kReclaimSlack, within
  // the file descriptors kept free above the cap).
  refused_by = ConnectionCap::kProcess;
  if (auto idle = edge.idle.TakeLongestIdle(key)) {
    Reclaim(*idle, edge.metrics.idle_reclaimed);
    place.connection = Held::TryTake(edge.connections, edge.metrics.connections,
                                     o.max_connections + kReclaimSlack);
    if (place.connection) return place;
  }
  return std::nullopt;
}

}  // namespace sluice::http
