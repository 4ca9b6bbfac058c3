// The connection caps of the edge (docs/overload.md, "Pressure"): max_connections, and the shares
// of one client and of one network, each a place taken before a connection is served (server.cc)
// and the refusal that names the cap a connection was over.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "edge.h"

namespace sluice::http {

/// Which connection cap refused a connection.
enum class ConnectionCap { kProcess, kClient, kNetwork };

/// A connection's place: its unit of max_connections and of its client's and network's shares.
struct ConnectionPlace {
  std::optional<Held> connection;
  std::optional<admission::KeyedSlots::Slot> client_share;
  std::optional<admission::KeyedSlots::Slot> network_share;
};

/// Takes a place for a connection of client `key` (the socket peer's; `exempt`, a trusted proxy or
/// a Unix socket's peer, takes no share): the client's share, its network's, then a unit of
/// max_connections, or, at the cap, the place of the connection idle longest, which is closed for
/// it (docs/overload.md, "Pressure"). Nothing when refused, with `refused_by` naming the cap.
std::optional<ConnectionPlace> TakeConnectionPlace(Edge& edge, const ServerOptions& o,
                                                   const std::string& key, bool exempt,
                                                   ConnectionCap& refused_by);

/// The 503 a connection over a cap is given, naming the cap. Counts the refusal.
Error ConnectionRefusal(Edge& edge, ConnectionCap cap);

/// How far over max_connections reclaims under way may take the count: a connection admitted in
/// the place of an idle one is counted before the idle one, on its own loop, has closed.
inline constexpr int64_t kReclaimSlack = 64;

}  // namespace sluice::http
