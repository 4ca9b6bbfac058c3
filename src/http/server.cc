// The listener: binds one acceptor per event loop, hands each connection to a session
// (session.cc) or refuses it over the cap, and drains on shutdown.
#include "sluice/http/server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <type_traits>

#include "review_desk.h"
#include "session.h"
#include "sluice/admission/client_key.h"
#include "sluice/asio/spawn.h"
#include "unix_socket.h"

namespace sluice::http {

namespace asio = boost::asio;
using asio::awaitable;
using tcp = asio::ip::tcp;
using local = asio::local::stream_protocol;

namespace {

// Who may connect to the admin socket: the server's user and group (docs/moderation.md). The
// bearer token is still asked of every request; the mode only keeps other users from reaching it.
constexpr mode_t kUnixSocketMode = 0660;

// The client's address as text, from a TCP connection's socket; empty when it cannot be read (the
// client left already).
std::string TcpPeer(const Socket& socket) {
  boost::system::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  tcp::endpoint ip;
  if (ec || remote.size() > ip.capacity()) return {};
  std::memcpy(ip.data(), remote.data(), remote.size());
  ip.resize(remote.size());  // within capacity (checked above): cannot throw
  return ip.address().to_string();
}

// The base of links when no public_url is set. A wildcard address (0.0.0.0, [::]) names no host,
// so a link to it is no link: it becomes loopback (127.0.0.1, or [::1] for [::]), which always
// reaches this server, since a wildcard listener accepts there too. The machine's host name was the
// other candidate; it may not resolve, or resolve to an interface this server does not listen on,
// and a link for other machines needs public_url anyway, which the start log asks for.
std::string DefaultBaseUrl(const tcp::endpoint& bound) {
  asio::ip::address address = bound.address();
  if (address.is_unspecified()) {
    if (address.is_v6()) {
      address = asio::ip::address_v6::loopback();
    } else {
      address = asio::ip::address_v4::loopback();
    }
    spdlog::warn(
        "listening on the wildcard address {} without public_url: links name {}, which only "
        "this machine can follow; set public_url to the address clients use",
        bound.address().to_string(), address.to_string());
  }
  const std::string shown = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return fmt::format("http://{}:{}", shown, bound.port());
}

}  // namespace

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(std::vector<asio::io_context*> ios_in, std::shared_ptr<Edge> edge_in)
      : ios(std::move(ios_in)), edge(std::move(edge_in)) {}

  // One event loop per thread, each with its own acceptor on the same port (SO_REUSEPORT), which
  // spreads the work of accepting; each connection accepted then moves to the loop holding fewest
  // (Edge::loops, include/sluice/admission/connection_balancer.h), whichever acceptor took it. It
  // lives on that one thread, so it needs no strand and its completions never cross cores.
  std::vector<asio::io_context*> ios;
  std::shared_ptr<Edge> edge;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  // admin_listen as a Unix socket: one acceptor, on the first loop (SO_REUSEPORT has no meaning
  // for a path), and the file it made, removed on drain or destruction if it is still that file.
  std::unique_ptr<local::acceptor> local_acceptor;
  std::string local_path;
  dev_t local_device = 0;
  ino_t local_inode = 0;
  std::atomic<bool> local_removed{false};
  int local_lock_fd = -1;  // PATH.lock, held while this server may own the path

  ~Impl() {
    RemoveSocketFile();
    if (local_lock_fd >= 0) ::close(local_lock_fd);
  }

  // The path of a Unix socket listen address: "unix:/path" or "/path"; nothing for host:port.
  static std::optional<std::string> UnixPath(const std::string& listen) {
    if (listen.starts_with("unix:")) return listen.substr(5);
    if (listen.starts_with("/")) return listen;
    return std::nullopt;
  }

  void StartUnix(const std::string& path) {
    const std::string where = "cannot listen on unix:" + path;
    if (!path.starts_with("/")) throw std::runtime_error(where + ": the path must be absolute");
    if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
      throw std::runtime_error(
          fmt::format("{}: the path is {} bytes, and a Unix socket's may be "
                      "at most {}",
                      where, path.size(), sizeof(sockaddr_un{}.sun_path) - 1));
    }
    local_lock_fd = LockSocketPath(path);
    ClearStaleSocket(path);
    auto acceptor = std::make_unique<local::acceptor>(*ios.front());
    const local::endpoint endpoint(path);
    boost::system::error_code ec;
    acceptor->open(endpoint.protocol(), ec);
    if (!ec) acceptor->bind(endpoint, ec);
    if (ec) throw std::runtime_error(where + ": " + ec.message());
    local_path = path;
    // Bound but not yet listening, the socket refuses every connect, so the mode is in force
    // before any connection can arrive. chmod rather than a umask around bind: the umask is the
    // process's, and other threads may be creating files meanwhile.
    struct stat st {};
    if (::chmod(path.c_str(), kUnixSocketMode) != 0 || ::lstat(path.c_str(), &st) != 0) {
      const std::string why = ErrnoText(errno);
      RemoveSocketFile();
      throw std::runtime_error(where + ": cannot set the socket's mode: " + why);
    }
    local_device = st.st_dev;
    local_inode = st.st_ino;
    acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      RemoveSocketFile();
      throw std::runtime_error(where + ": " + ec.message());
    }
    local_acceptor = std::move(acceptor);
    // Links are for the public side; the admin API hands out none, but base_url is never empty.
    edge->context.base_url = "http://localhost";
    asio::co_spawn(local_acceptor->get_executor(),
                   AcceptLoop(shared_from_this(), *local_acceptor, *ios.front()),
                   asio_glue::LogIfThrown("http accept loop"));
  }

  // Removes the socket file this server made, once, and only while the path still names it:
  // a server started on the same path after this one was stopped keeps its own.
  void RemoveSocketFile() {
    if (local_path.empty() || local_removed.exchange(true)) return;
    struct stat st {};
    if (::lstat(local_path.c_str(), &st) != 0) return;
    if (local_inode != 0 && (st.st_dev != local_device || st.st_ino != local_inode)) return;
    ::unlink(local_path.c_str());
  }

  tcp::endpoint Resolve() const {
    const std::string& listen = edge->options.listen;
    const auto colon = listen.rfind(':');
    if (colon == std::string::npos) throw std::runtime_error("listen address must be host:port");
    std::string host = listen.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(host, ec);
    if (ec) throw std::runtime_error("listen address '" + host + "' is not an IP address");
    return {address, static_cast<uint16_t>(std::stoi(listen.substr(colon + 1)))};
  }

  void Start() {
    if (auto path = UnixPath(edge->options.listen)) return StartUnix(*path);
    const tcp::endpoint endpoint = Resolve();
    const std::string& listen = edge->options.listen;
    using reuse_port = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;
    boost::system::error_code ec;
    if (endpoint.port() != 0) {
      // SO_REUSEPORT, which lets this process's event loops share the port, would also let it
      // join a port another process listens on, and the kernel would split connections between
      // two servers that know nothing of each other. A socket without it cannot bind beside a
      // listener, so one bound and closed first tells whether anyone listens there.
      tcp::acceptor probe(*ios.front());
      probe.open(endpoint.protocol());
      probe.set_option(asio::socket_base::reuse_address(true));
      probe.bind(endpoint, ec);
      if (ec == asio::error::address_in_use) {
        throw std::runtime_error("cannot listen on " + listen +
                                 ": another process is already listening there");
      }
      ec.clear();
    }
    tcp::endpoint bind_to = endpoint;
    for (asio::io_context* io : ios) {
      auto acceptor = std::make_unique<tcp::acceptor>(*io);
      acceptor->open(bind_to.protocol());
      acceptor->set_option(asio::socket_base::reuse_address(true));
      acceptor->set_option(reuse_port(true));
      acceptor->bind(bind_to, ec);
      if (ec) throw std::runtime_error("cannot listen on " + listen + ": " + ec.message());
      acceptor->listen(asio::socket_base::max_listen_connections);
      bind_to = acceptor->local_endpoint();  // port 0 resolved once; the others share it
      acceptors.push_back(std::move(acceptor));
    }
    const auto bound = acceptors.front()->local_endpoint();
    std::string base_url = edge->options.public_url;
    if (base_url.empty()) base_url = DefaultBaseUrl(bound);
    while (!base_url.empty() && base_url.back() == '/') base_url.pop_back();
    edge->context.base_url = std::move(base_url);  // before any session can read it
    for (size_t i = 0; i < acceptors.size(); ++i) {
      asio::co_spawn(acceptors[i]->get_executor(),
                     AcceptLoop(shared_from_this(), *acceptors[i], *ios[i]),
                     asio_glue::LogIfThrown("http accept loop"));
    }
  }

  // Moves a just-accepted socket to the loop with fewest connections, and says which loop it is on.
  // The socket is accepted on the acceptor's own loop and moved after, rather than made on the
  // chosen loop beforehand: a pending accept then holds nothing of another loop, whose io_context
  // may be destroyed first at shutdown (src/app/server_process.cc, ShutdownOrder). Moving costs an
  // epoll_ctl on each loop, once per connection. Nothing when the connection was lost in the move.
  std::optional<size_t> Rehome(Socket& socket, const Socket::protocol_type& protocol,
                               asio::io_context& accepted_on) {
    const size_t here =
        static_cast<size_t>(std::find(ios.begin(), ios.end(), &accepted_on) - ios.begin());
    const size_t loop = edge->loops.Choose();
    if (loop == here) return here;
    boost::system::error_code ec;
    const int fd = socket.release(ec);
    if (ec) return here;
    Socket moved(*ios[loop]);
    moved.assign(protocol, fd, ec);
    if (ec) {
      // Released, so neither loop owns it: it is closed, as a failed accept would be.
      spdlog::warn("moving a connection to event loop {}: {}", loop, ec.message());
      ::close(fd);
      return std::nullopt;
    }
    socket = std::move(moved);
    return loop;
  }

  // One loop per acceptor, TCP or Unix; each accepts into the generic socket the session serves.
  template <typename Acceptor>
  static awaitable<void> AcceptLoop(std::shared_ptr<Impl> self, Acceptor& acceptor,
                                    asio::io_context& io) {
    constexpr bool kUnix = std::is_same_v<Acceptor, local::acceptor>;
    Edge& edge = *self->edge;
    // What a moved socket is assigned as: the listener's, read once rather than per connection.
    const Socket::protocol_type protocol(acceptor.local_endpoint().protocol());
    for (;;) {
      boost::system::error_code ec;
      Socket socket(io);
      co_await acceptor.async_accept(socket, asio::redirect_error(asio::use_awaitable, ec));
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) {
        // Out of file descriptors, most likely: the pending connection stays in the backlog, so
        // an immediate retry would spin. Pause, then keep serving the connections already open.
        spdlog::warn("accept: {}", ec.message());
        asio::steady_timer pause(io);
        pause.expires_after(std::chrono::milliseconds(100));
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      const std::optional<size_t> loop = self->Rehome(socket, protocol, io);
      if (!loop) continue;
      admission::ConnectionBalancer::Seat seat = edge.loops.Sit(*loop);
      if constexpr (!kUnix) socket.set_option(tcp::no_delay(true), ec);
      auto executor = socket.get_executor();
      // The client's share is keyed by the socket peer: no header has been read yet, so a client
      // behind a trusted proxy cannot be told apart from the next one, and the proxy's own
      // connections count against max_connections only. A Unix socket's peers have no address:
      // they are all "unix" (the client key of their requests too), and exempt from the share as
      // a trusted proxy is, since they are local processes the file's mode let in, one key for
      // all of them, and the operator's own tools must not be locked out by one another.
      const std::string peer_text = kUnix ? std::string("unix") : TcpPeer(socket);
      const auto peer_ip = admission::IpAddress::Parse(peer_text);
      const std::shared_ptr<const ServerOptions> live = edge.Live();
      const bool exempt = kUnix || (peer_ip && live->trusted_proxies.Contains(*peer_ip));
      const std::string key = admission::ClientKey(peer_text, {}, admission::TrustedProxies());
      ConnectionCap refused_by = ConnectionCap::kProcess;
      if (std::optional<ConnectionPlace> place =
              TakeConnectionPlace(edge, *live, key, exempt, refused_by)) {
        asio::co_spawn(
            executor,
            ServeConnection(
                self->edge, std::move(socket), peer_text,
                ConnectionHolds{std::move(place->connection), std::move(place->client_share),
                                std::move(place->network_share), std::nullopt, std::move(seat)}),
            asio_glue::LogIfThrown("http session"));
        continue;
      }
      Error refusal = ConnectionRefusal(edge, refused_by);
      auto reserve_share = edge.reserved_per_client.TryAcquire(key);
      std::optional<Held> reserved =
          reserve_share
              ? Held::TryTake(edge.reserved, edge.metrics.reserved_connections, kHealthReserve)
              : std::nullopt;
      if (reserved) {
        asio::co_spawn(
            executor,
            ServeConnection(self->edge, std::move(socket), peer_text,
                            ConnectionHolds{std::move(reserved), std::move(reserve_share),
                                            std::nullopt, std::move(refusal), std::move(seat)}),
            asio_glue::LogIfThrown("http health reserve"));
        continue;
      }
      asio::co_spawn(executor, RefuseConnection(self->edge, std::move(socket), std::move(refusal)),
                     asio_glue::LogIfThrown("http refusal"));
    }
  }
};

HttpServer::HttpServer(std::vector<asio::io_context*> ios, ServerOptions options,
                       service::PasteService& service, render::ViewRenderer& renderer,
                       MetricsRegistry& metrics, const Clock& clock) {
  Context context{service,
                  renderer,
                  metrics,
                  clock,
                  "",
                  options.get_faults,
                  options.set_faults,
                  options.moderation,
                  options.admin_token_sha256,
                  options.abuse};
  context.creator_tokens = options.creator_tokens;
  if (options.surface == ServerOptions::Surface::kAdmin) {
    context.review = std::make_shared<ReviewDesk>(options.admin_token_sha256, clock);
  }
  if (options.surface == ServerOptions::Surface::kPublic) {
    context.contact = std::make_shared<const PublicContact>(options.contact, options.public_url);
    PublicContact::Install(context.contact);
  }
  const size_t loop_count = ios.size();
  impl_ = std::make_shared<Impl>(
      std::move(ios),
      std::make_shared<Edge>(std::move(options), std::move(context), metrics, loop_count));
}

HttpServer::~HttpServer() {
  // The accept loops' frames share impl_. A loop that never ran its frame (a start that failed
  // after this server's Start: the admin port taken, say) frees it only when the loop itself is
  // destroyed, one loop after another, so the last frame would free impl_ and its acceptors after
  // the other acceptors' loops were gone (ASan: heap-use-after-free in the acceptor's destructor;
  // test_api.py, test_an_admin_port_held_elsewhere_is_refused_and_torn_down_cleanly). The
  // acceptors go here instead, while every loop exists; no loop runs once this server is
  // destroyed (src/app/server_process.cc, ShutdownOrder).
  impl_->acceptors.clear();
  impl_->local_acceptor.reset();
}

void HttpServer::Reconfigure(const ServerOptions& next) {
  Edge& edge = *impl_->edge;
  // Only what a reload may change; the rest stays as built (docs/operations.md, "Reload").
  ServerOptions o = edge.options;
  o.idle_timeout = next.idle_timeout;
  o.first_byte_timeout = next.first_byte_timeout;
  o.header_timeout = next.header_timeout;
  o.body_timeout = next.body_timeout;
  o.min_body_rate = next.min_body_rate;
  o.min_body_rate_grace = next.min_body_rate_grace;
  o.drain_timeout = next.drain_timeout;
  o.max_connections = next.max_connections;
  o.max_connections_per_client = next.max_connections_per_client;
  o.max_connections_per_network = next.max_connections_per_network;
  o.networks = next.networks;
  o.pressure = next.pressure;
  o.idle_timeout_floor = next.idle_timeout_floor;
  o.min_body_rate_at_pressure = next.min_body_rate_at_pressure;
  o.trusted_proxies = next.trusted_proxies;
  o.forward_auth_header = next.forward_auth_header;
  o.access_log = next.access_log;
  o.access_log_sample = next.access_log_sample;
  edge.connections_per_client.SetMaxPerKey(o.max_connections_per_client);
  edge.connections_per_network.SetMaxPerKey(o.max_connections_per_network);
  edge.live.Store(std::move(o));
}

void HttpServer::Start() { impl_->Start(); }

uint16_t HttpServer::port() const {
  return impl_->acceptors.empty() ? 0 : impl_->acceptors.front()->local_endpoint().port();
}

std::string HttpServer::bound_address() const {
  if (impl_->acceptors.empty()) return {};
  const auto address = impl_->acceptors.front()->local_endpoint().address();
  return address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
}

std::string HttpServer::unix_path() const { return impl_->local_path; }

std::string HttpServer::base_url() const { return impl_->edge->context.base_url; }

void HttpServer::Drain(std::function<void()> done) {
  auto impl = impl_;
  impl->edge->draining = true;
  for (auto& acceptor : impl->acceptors) {
    asio::post(acceptor->get_executor(), [a = acceptor.get()] {
      boost::system::error_code ignored;
      a->close(ignored);
    });
  }
  if (impl->local_acceptor) {
    // The file goes first: a client that finds no file is told at once that nobody listens.
    impl->RemoveSocketFile();
    asio::post(impl->local_acceptor->get_executor(), [a = impl->local_acceptor.get()] {
      boost::system::error_code ignored;
      a->close(ignored);
    });
  }
  asio::co_spawn(
      *impl->ios.front(),
      [impl, done = std::move(done)]() -> awaitable<void> {
        Edge& edge = *impl->edge;
        asio::steady_timer timer(*impl->ios.front());
        const Duration drain_timeout = edge.Live()->drain_timeout;
        const auto give_up = std::chrono::steady_clock::now() + drain_timeout;
        while (edge.in_flight.load() > 0 && std::chrono::steady_clock::now() < give_up) {
          timer.expires_after(std::chrono::milliseconds(20));
          co_await timer.async_wait(asio::use_awaitable);
        }
        if (edge.in_flight.load() > 0) {
          spdlog::warn("drain: giving up on {} requests after {:.1f} s", edge.in_flight.load(),
                       std::chrono::duration<double>(drain_timeout).count());
        }
        done();
      },
      asio_glue::LogIfThrown("http drain"));
}

}  // namespace sluice::http
