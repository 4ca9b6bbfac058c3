// HttpServer: the Beast/Asio front of sluice, and all a caller needs of it. Inside src/http it is
// a session (session.h: Beast I/O), a route table (routes.h), handlers (handlers.h) and one
// presenter (presenter.h); docs/architecture.md follows a request through them.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice/admission/client_key.h"
#include "sluice/admission/network.h"
#include "sluice/admission/pressure.h"
#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/render/view_renderer.h"
#include "sluice/service/creator_tokens.h"
#include "sluice/service/moderation.h"
#include "sluice/service/paste_service.h"

namespace sluice::http {

/// The public contact (docs/moderation.md, "The public contact"): /.well-known/security.txt,
/// /abuse, every page's footer and /robots.txt, all made from these once at start.
struct ContactOptions {
  /// Where abuse notices and security reports go: mailto:, https:// or tel: URIs (checked by the
  /// settings). Default: none, and then /.well-known/security.txt is 404 (RFC 9116 requires a
  /// Contact) while /abuse and the footer point to the report form, which always works.
  std::vector<std::string> contacts;
  /// The languages the contact reads (RFC 9116 Preferred-Languages). Default: en.
  std::vector<std::string> languages{"en"};
  /// security.txt's Expires: this long after the start of the UTC day it is served on, so it
  /// never lapses on a server that runs for months. Default: 180 days.
  std::chrono::seconds security_txt_lifetime = std::chrono::hours(24 * 180);
  /// How fast the operator acts on a notice, as /abuse states it. Default: 1 h.
  std::chrono::seconds takedown_deadline = std::chrono::hours(1);
  /// The operator's own words on /abuse, shown as written (escaped). Default: none.
  std::string policy_text;
  /// What /robots.txt lets crawlers fetch: the site's own pages, everything, or nothing.
  /// Default: kSite (no paste).
  enum class Robots { kSite, kAll, kNone } robots = Robots::kSite;
};

struct ServerOptions {
  /// Address to listen on, "host:port"; port 0 picks a free one. Default: 127.0.0.1:8080. The
  /// admin listener may also name a Unix socket, "unix:/path" or "/path" (absolute, at most 107
  /// bytes): made with mode 0660, a stale one left by a killed process replaced, a live one
  /// refused, and removed on drain.
  std::string listen = "127.0.0.1:8080";
  /// Base of the links handed out ("https://paste.example"); empty: http://<listen address>.
  std::string public_url;
  /// How long an open connection may sit with no request started. Default: 30 s.
  Duration idle_timeout = std::chrono::seconds(30);
  /// How long a new connection may wait for its first byte: a client that opens connections and
  /// sends nothing holds each this long, not idle_timeout. Default: 5 s.
  Duration first_byte_timeout = std::chrono::seconds(5);
  /// How long a request's headers may take once their first byte arrived, so a client sending
  /// them a byte at a time (slowloris) is cut off. Default: 10 s.
  Duration header_timeout = std::chrono::seconds(10);
  /// How long a request body may take to arrive once admitted. Default: 30 s.
  Duration body_timeout = std::chrono::seconds(30);
  /// Slowest an admitted create body may arrive, in bytes per second averaged from the start of the
  /// body, once `min_body_rate_grace` has passed; slower is cut with a 408 and its create slot
  /// freed. 0: off. Default: 1024.
  int64_t min_body_rate = 1024;
  /// Default: 5 s.
  Duration min_body_rate_grace = std::chrono::seconds(5);
  /// Pressure (docs/overload.md, "Pressure"): from how full max_connections is, the idle timeout
  /// shrinks linearly from idle_timeout to idle_timeout_floor between pressure.start and
  /// pressure.full; from how full the create slots are, the required body rate rises from
  /// min_body_rate to min_body_rate_at_pressure. Default: 0.5 to 0.9.
  admission::PressureCurve pressure{};
  /// Default: 1 s.
  Duration idle_timeout_floor = std::chrono::seconds(1);
  /// Default: 64 KiB/s.
  int64_t min_body_rate_at_pressure = 65'536;
  /// How long SIGTERM waits for in-flight requests before exiting anyway. Default: 10 s.
  Duration drain_timeout = std::chrono::seconds(10);
  /// Open connections per process. One more closes the connection idle longest between two
  /// requests (a keep-alive connection waiting for its next request) to take its place, or, when
  /// none is idle, gets a 503 and is closed, so file descriptors are never exhausted by idle or
  /// slow clients. Default: 10,000.
  int64_t max_connections = 10'000;
  /// Of which one client may hold, keyed by the socket peer at accept (IPv6 by its /64), before
  /// any header is read: the X-Forwarded-For hop is not known yet, so a trusted proxy's
  /// connections are exempt and count against max_connections only. Default: 256.
  int64_t max_connections_per_client = 256;
  /// Of which the clients of one network (`networks`, by socket peer) may hold together, so one
  /// IPv6 /48 (65,536 client keys) cannot take what one /64 cannot; trusted proxies are exempt
  /// as from the client share. Default: 1,024 (four clients' shares).
  int64_t max_connections_per_network = 1'024;
  /// What makes a network of a client address for max_connections_per_network. Default: IPv4
  /// /24, IPv6 /48.
  admission::NetworkPrefixes networks{};
  /// Balancers whose appended X-Forwarded-For hop names the client. Default: none, so the client
  /// key is the socket peer and whatever a client writes in the header is ignored.
  admission::TrustedProxies trusted_proxies;
  /// The header a trusted forward-auth proxy (oauth2-proxy, a VPN gateway) names the creator in,
  /// e.g. "X-Forwarded-User"; honoured only from trusted_proxies, like X-Forwarded-For. Empty: off.
  /// Default: off.
  std::string forward_auth_header;
  /// One log line per request (src/http/access_log.h): every 5xx, and this share of the rest.
  bool access_log = false;
  double access_log_sample = 1.0;
  /// Fault injection control (GET/PUT /debug/faults); both unset unless configuration enables
  /// fault injection, and then the route does not exist.
  std::function<std::string()> get_faults;
  std::function<Status(std::string_view)> set_faults;
  /// Which routes this listener serves: the public site and API, or the operator's side
  /// (/debug/faults, /metrics, /admin/...), which a public request never reaches (404).
  enum class Surface { kPublic, kAdmin } surface = Surface::kPublic;
  /// Public side: serve /metrics there too (it is always on the admin side). Default: true.
  bool metrics_on_public = true;
  /// Admin side: the SHA-256 of the bearer token every request must carry; unset, every request is
  /// refused with 401 (no token file was configured).
  std::optional<std::array<unsigned char, 32>> admin_token_sha256{};
  /// Admin side: the moderation use-cases (reports, takedowns, blocks); may be null.
  service::ModerationService* moderation = nullptr;
  /// Who creates and who is refused most (/api/v1/status: aggregates only; the admin listener's
  /// /status and /admin/abuse: keys and prefixes in full); may be null.
  const service::AbuseWatch* abuse = nullptr;
  /// Creator tokens: looked up by the public side's creates, managed on the admin side; may be
  /// null.
  service::CreatorTokens* creator_tokens = nullptr;
  /// Public side: the contact, with public_url (security.txt's Canonical and Policy when https).
  ContactOptions contact{};
};

/// Accepts connections and serves the API. Each io_context must be run by exactly one thread:
/// every one gets its own acceptor on the shared port, and a connection stays on the loop that
/// accepted it. Thread-safe otherwise.
class HttpServer {
 public:
  /// Precondition: `ios` is not empty and outlives the server.
  /// `renderer` makes the HTML view of a paste (its degradation ladder); it must outlive the
  /// server.
  HttpServer(std::vector<boost::asio::io_context*> ios, ServerOptions options,
             service::PasteService& service, render::ViewRenderer& renderer,
             MetricsRegistry& metrics, const Clock& clock = SystemClock::Instance());
  ~HttpServer();

  /// Binds and starts accepting. Throws std::runtime_error if the address cannot be bound.
  void Start();
  /// The bound port (useful with port 0) and address; 0 and empty on a Unix socket.
  uint16_t port() const;
  std::string bound_address() const;
  /// The socket's path when `listen` named a Unix socket ("unix:/path" or "/path"); empty for TCP.
  std::string unix_path() const;
  /// The base of the links handed out (public_url, or http://<bound address>).
  std::string base_url() const;
  /// The settings a reload may change (timeouts, connection caps, trusted proxies, access log),
  /// for connections and requests from now on; the rest of `next` is ignored. Thread-safe.
  void Reconfigure(const ServerOptions& next);
  /// Stops accepting, lets in-flight requests finish (up to drain_timeout), then calls `done`.
  void Drain(std::function<void()> done);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace sluice::http
