#include "redis_client.h"

#include <fmt/format.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>
#include <random>
#include <stdexcept>

namespace sluice::store {

namespace asio = boost::asio;
using asio::ip::tcp;

std::shared_ptr<asio::ssl::context> MakeRedisTlsContext(const store::RedisOptions& options) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1);
  if (options.tls) {
    if (options.ca_file.empty()) {
      ctx->set_default_verify_paths();
    } else {
      boost::system::error_code ec;
      ctx->load_verify_file(options.ca_file, ec);
      if (ec) {
        throw std::invalid_argument("redis_ca_file: cannot use " + options.ca_file +
                                    " as PEM certificates");
      }
    }
  }
  return ctx;
}

// What one connection attempt owns. Every asynchronous operation holds the Link it works on, so
// buffers outlive the operations even when the client has already moved on to a new connection.
struct RedisClient::Link {
  Link(asio::io_context& io, asio::ssl::context& ctx, bool tls) : stream(io, ctx), use_tls(tls) {}
  asio::ssl::stream<tcp::socket> stream;
  const bool use_tls;
  std::array<char, 16384> in{};
  std::string writing;
  bool write_in_flight = false;

  template <typename F>
  void With(F&& f) {
    if (use_tls) {
      f(stream);
    } else {
      f(stream.next_layer());
    }
  }
  void Close() {
    boost::system::error_code ignored;
    stream.next_layer().shutdown(tcp::socket::shutdown_both, ignored);
    stream.next_layer().close(ignored);
  }
};

// One question to one sentinel: its own connection, closed once the master's address is known.
struct RedisClient::SentinelAsk {
  SentinelAsk(asio::io_context& io, asio::ssl::context& ctx, bool tls)
      : link(io, ctx, tls), timer(io), resolver(io) {}
  Link link;
  asio::steady_timer timer;
  tcp::resolver resolver;
  resp::Parser parser;
  size_t index = 0;
  uint64_t generation = 0;
  bool auth_pending = false;
  bool done = false;
};

std::shared_ptr<RedisClient> RedisClient::Make(asio::io_context& io, store::RedisOptions options,
                                               std::string name,
                                               std::shared_ptr<asio::ssl::context> tls,
                                               MetricsRegistry& metrics, Hooks hooks) {
  return std::shared_ptr<RedisClient>(new RedisClient(io, std::move(options), std::move(name),
                                                      std::move(tls), metrics, std::move(hooks)));
}

RedisClient::RedisClient(asio::io_context& io, store::RedisOptions options, std::string name,
                         std::shared_ptr<asio::ssl::context> tls, MetricsRegistry& metrics,
                         Hooks hooks)
    : io_(io),
      options_(std::move(options)),
      name_(std::move(name)),
      where_(store::RedactedRedisUrl(options_)),
      host_(options_.host),
      port_(options_.port),
      tls_(std::move(tls)),
      protocol_errors_(metrics.GetCounter(
          "sluice_redis_protocol_errors_total",
          "Replies from Redis that broke the protocol (the connection was closed and remade)",
          {{"connection", name_}})),
      hooks_(std::move(hooks)),
      resolver_(io),
      connect_timer_(io),
      reconnect_timer_(io),
      backoff_(options_.reconnect_min) {}

RedisClient::~RedisClient() = default;

void RedisClient::Start() { Connect(); }

void RedisClient::Stop() {
  stopping_ = true;
  Drop("stopped");
  state_ = State::kStopped;
  reconnect_timer_.cancel();
}

void RedisClient::Connect() {
  if (stopping_) return;
  const uint64_t generation = ++generation_;
  state_ = State::kConnecting;
  parser_ = resp::Parser();
  subscribe_sent_ = false;
  auto link = std::make_shared<Link>(io_, *tls_, options_.tls);
  link_ = link;
  // Under Sentinel each sentinel asked gets a connect timeout of its own, and the master one more.
  connect_timer_.expires_after(options_.connect_timeout *
                               static_cast<int>(1 + options_.sentinels.size()));
  connect_timer_.async_wait(
      [self = shared_from_this(), generation](const boost::system::error_code& ec) {
        if (ec || generation != self->generation_ || self->state_ == State::kUp) return;
        self->Drop("no connection within the connect timeout");
      });
  if (sentinel()) {
    sentinel_failures_.clear();
    return AskSentinel(0, generation);
  }
  ConnectTo(generation);
}

void RedisClient::AskSentinel(size_t index, uint64_t generation) {
  if (generation != generation_) return;
  if (index >= options_.sentinels.size()) {
    return Drop("no sentinel named a master for " + options_.sentinel_master + " (" +
                sentinel_failures_ + ")");
  }
  const auto& at = options_.sentinels[index];
  auto ask = std::make_shared<SentinelAsk>(io_, *tls_, options_.tls);
  ask->index = index;
  ask->generation = generation;
  ask->timer.expires_after(options_.connect_timeout);
  ask->timer.async_wait([self = shared_from_this(), ask](const boost::system::error_code& ec) {
    if (!ec) self->SentinelFailed(ask, "no answer within the connect timeout");
  });
  ask->resolver.async_resolve(
      at.host, std::to_string(at.port),
      [self = shared_from_this(), ask](const boost::system::error_code& ec,
                                       const tcp::resolver::results_type& results) {
        if (ec) return self->SentinelFailed(ask, "resolving: " + ec.message());
        asio::async_connect(
            ask->link.stream.next_layer(), results,
            [self, ask](const boost::system::error_code& e, const tcp::endpoint&) {
              if (e) return self->SentinelFailed(ask, e.message());
              auto ask_it = [self, ask] {
                std::string out;
                if (!self->options_.password.empty()) {
                  std::vector<std::string> auth = {"AUTH"};
                  if (!self->options_.user.empty()) auth.push_back(self->options_.user);
                  auth.push_back(self->options_.password);
                  resp::AppendCommand(out, auth);
                  ask->auth_pending = true;
                }
                resp::AppendCommand(
                    out, {"SENTINEL", "get-master-addr-by-name", self->options_.sentinel_master});
                ask->link.writing = std::move(out);
                ask->link.With([&](auto& stream) {
                  asio::async_write(stream, asio::buffer(ask->link.writing),
                                    [self, ask](const boost::system::error_code& w, size_t) {
                                      if (w) self->SentinelFailed(ask, "writing: " + w.message());
                                    });
                });
                self->SentinelRead(ask);
              };
              if (!ask->link.use_tls) return ask_it();
              const std::string& host = self->options_.sentinels[ask->index].host;
              boost::system::error_code not_an_address;
              asio::ip::make_address(host, not_an_address);
              if (not_an_address) {
                SSL_set_tlsext_host_name(ask->link.stream.native_handle(), host.c_str());
              }
              ask->link.stream.set_verify_mode(asio::ssl::verify_peer);
              ask->link.stream.set_verify_callback(asio::ssl::host_name_verification(host));
              ask->link.stream.async_handshake(
                  asio::ssl::stream_base::client,
                  [self, ask, ask_it](const boost::system::error_code& h) {
                    if (h) return self->SentinelFailed(ask, "TLS handshake: " + h.message());
                    ask_it();
                  });
            });
      });
}

void RedisClient::SentinelRead(const std::shared_ptr<SentinelAsk>& ask) {
  ask->link.With([&](auto& stream) {
    stream.async_read_some(
        asio::buffer(ask->link.in),
        [self = shared_from_this(), ask](const boost::system::error_code& ec, size_t n) {
          if (ask->done) return;
          if (ec) return self->SentinelFailed(ask, "reading: " + ec.message());
          ask->parser.Feed(std::string_view(ask->link.in.data(), n));
          resp::Value v;
          while (true) {
            const auto status = ask->parser.Next(v);
            if (status == resp::Parser::Status::kNeedMore) return self->SentinelRead(ask);
            if (status == resp::Parser::Status::kError) {
              return self->SentinelFailed(ask, "protocol error: " + ask->parser.error());
            }
            if (ask->auth_pending) {
              ask->auth_pending = false;
              if (v.IsError()) return self->SentinelFailed(ask, "AUTH refused: " + v.str);
              continue;
            }
            if (v.IsError()) return self->SentinelFailed(ask, v.str);
            if (v.type == resp::Type::kNil) {
              return self->SentinelFailed(ask, "does not know " + self->options_.sentinel_master);
            }
            const auto port = v.type == resp::Type::kArray && v.elements.size() == 2 &&
                                      v.elements[0].type == resp::Type::kBulk &&
                                      v.elements[1].type == resp::Type::kBulk
                                  ? resp::ParseInteger(v.elements[1].str)
                                  : std::nullopt;
            if (!port || *port <= 0 || *port > 65535 || v.elements[0].str.empty()) {
              return self->SentinelFailed(ask, "not an address in the answer");
            }
            ask->done = true;
            ask->timer.cancel();
            ask->link.Close();
            if (ask->generation != self->generation_) return;
            self->host_ = v.elements[0].str;
            self->port_ = static_cast<int>(*port);
            self->where_ = fmt::format("{} (master {}:{})", store::RedactedRedisUrl(self->options_),
                                       self->host_, self->port_);
            return self->ConnectTo(ask->generation);
          }
        });
  });
}

void RedisClient::SentinelFailed(const std::shared_ptr<SentinelAsk>& ask, const std::string& why) {
  if (ask->done) return;
  ask->done = true;
  ask->timer.cancel();
  ask->resolver.cancel();
  ask->link.Close();
  if (ask->generation != generation_) return;
  const auto& at = options_.sentinels[ask->index];
  if (!sentinel_failures_.empty()) sentinel_failures_ += "; ";
  sentinel_failures_ += fmt::format("{}:{}: {}", at.host, at.port, why);
  AskSentinel(ask->index + 1, ask->generation);
}

void RedisClient::ConnectTo(uint64_t generation) {
  auto link = link_;
  resolver_.async_resolve(
      host_, std::to_string(port_),
      [self = shared_from_this(), link, generation](const boost::system::error_code& ec,
                                                    const tcp::resolver::results_type& results) {
        if (generation != self->generation_) return;
        if (ec) return self->Drop("resolving: " + ec.message());
        asio::async_connect(
            link->stream.next_layer(), results,
            [self, link, generation](const boost::system::error_code& e, const tcp::endpoint&) {
              if (generation != self->generation_) return;
              if (e) return self->Drop(e.message());
              self->Connected(link);
            });
      });
}

void RedisClient::Connected(const std::shared_ptr<Link>& link) {
  boost::system::error_code ignored;
  link->stream.next_layer().set_option(tcp::no_delay(true), ignored);
  if (!link->use_tls) return Handshake(link);
  // Server name for SNI (not sent for an address), and the certificate must name the host.
  boost::system::error_code not_an_address;
  asio::ip::make_address(host_, not_an_address);
  if (not_an_address) SSL_set_tlsext_host_name(link->stream.native_handle(), host_.c_str());
  link->stream.set_verify_mode(asio::ssl::verify_peer);
  link->stream.set_verify_callback(asio::ssl::host_name_verification(host_));
  const uint64_t generation = generation_;
  link->stream.async_handshake(
      asio::ssl::stream_base::client,
      [self = shared_from_this(), link, generation](const boost::system::error_code& ec) {
        if (generation != self->generation_) return;
        if (ec) return self->Drop("TLS handshake: " + ec.message());
        self->Handshake(link);
      });
}

void RedisClient::Handshake(const std::shared_ptr<Link>& link) {
  state_ = State::kHandshaking;
  Read(link);
  if (!options_.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!options_.user.empty()) auth.push_back(options_.user);
    auth.push_back(options_.password);
    Queue(
        auth,
        [this](Result<resp::Value> r) {
          if (!r.ok()) return;  // the connection is gone already
          // The server's words only (e.g. WRONGPASS): never the password.
          if (r->IsError()) return Drop("AUTH refused: " + r->str);
          if (!subscriber() && !sentinel()) Up();
        },
        /*tagged=*/false);
  }
  if (sentinel()) {
    // A sentinel's answer may be stale (a failover under way): only a master takes commands.
    Queue(
        {"ROLE"},
        [this](Result<resp::Value> r) {
          if (!r.ok()) return;
          if (r->type != resp::Type::kArray || r->elements.empty() ||
              !r->elements[0].Is("master")) {
            return Drop(r->IsError() ? "ROLE refused: " + r->str
                                     : "the server the sentinels named is not a master");
          }
          if (!subscriber()) Up();
        },
        /*tagged=*/false);
  }
  if (subscriber()) {
    // Not a pending call: its confirmation and the messages after it are pushes (see Push).
    resp::AppendCommand(outbox_, {"SUBSCRIBE", hooks_.channel});
    subscribe_sent_ = true;
    Flush(link);
  } else if (options_.password.empty() && !sentinel()) {
    Up();
  }
}

void RedisClient::Up() {
  state_ = State::kUp;
  connect_timer_.cancel();
  backoff_ = options_.reconnect_min;
  if (failing_) spdlog::info("redis {} {}: connected", name_, where_);
  failing_ = false;
  if (hooks_.on_up) hooks_.on_up();
}

uint64_t RedisClient::Send(const std::vector<std::string>& args, ReplyHandler handler) {
  if (state_ != State::kUp || subscriber()) return 0;
  Queue(args, std::move(handler));
  return generation_;
}

void RedisClient::Queue(const std::vector<std::string>& args, ReplyHandler handler, bool tagged) {
  Pending p;
  p.handler = std::move(handler);
  resp::AppendCommand(outbox_, args);
  if (tagged) {
    p.tag = "sluice:" + std::to_string(generation_) + ":" + std::to_string(++next_tag_);
    resp::AppendCommand(outbox_, {"ECHO", p.tag});
  }
  pending_.push_back(std::move(p));
  Flush(link_);
}

void RedisClient::Flush(const std::shared_ptr<Link>& link) {
  if (link->write_in_flight || outbox_.empty()) return;
  link->writing.clear();
  link->writing.swap(outbox_);
  link->write_in_flight = true;
  const uint64_t generation = generation_;
  link->With([&](auto& stream) {
    asio::async_write(
        stream, asio::buffer(link->writing),
        [self = shared_from_this(), link, generation](const boost::system::error_code& ec, size_t) {
          link->write_in_flight = false;
          if (generation != self->generation_) return;
          if (ec) return self->Drop("writing: " + ec.message());
          self->Flush(link);
        });
  });
}

void RedisClient::Read(const std::shared_ptr<Link>& link) {
  const uint64_t generation = generation_;
  link->With([&](auto& stream) {
    stream.async_read_some(
        asio::buffer(link->in), [self = shared_from_this(), link, generation](
                                    const boost::system::error_code& ec, size_t n) {
          if (generation != self->generation_) return;
          if (ec) {
            return self->Drop(ec == asio::error::eof ? std::string("closed by the server")
                                                     : "reading: " + ec.message());
          }
          self->parser_.Feed(std::string_view(link->in.data(), n));
          resp::Value value;
          // A handler may close the connection: stop at once if it did.
          while (generation == self->generation_) {
            const auto status = self->parser_.Next(value);
            if (status == resp::Parser::Status::kNeedMore) break;
            if (status == resp::Parser::Status::kError) {
              return self->ProtocolError(self->parser_.error());
            }
            self->Route(std::move(value));
          }
          if (generation == self->generation_) self->Read(link);
        });
  });
}

void RedisClient::Route(resp::Value value) {
  if (!pending_.empty()) {
    Pending& p = pending_.front();
    if (!p.have_reply && !p.tag.empty()) {
      // Its own tag in place of the reply: the reply never came.
      if (value.type == resp::Type::kBulk && value.str == p.tag) {
        return ProtocolError("a reply missing");
      }
      p.reply = std::move(value);
      p.have_reply = true;
      return;
    }
    if (p.tag.empty()) {
      ReplyHandler handler = std::move(p.handler);
      pending_.pop_front();
      handler(std::move(value));
      return;
    }
    // The reply is only handed over once the tag after it proves it was the reply to this call.
    if (value.type != resp::Type::kBulk || value.str != p.tag) {
      return ProtocolError("a reply out of place (missing, repeated or unasked for)");
    }
    ReplyHandler handler = std::move(p.handler);
    resp::Value reply = std::move(p.reply);
    pending_.pop_front();
    // A master demoted under this connection (a failover) answers writes with READONLY: the
    // connection is dropped so that the next one asks the sentinels where the master went.
    const bool demoted = sentinel() && reply.IsError() && reply.str.starts_with("READONLY");
    const uint64_t generation = generation_;
    handler(std::move(reply));
    if (demoted && generation == generation_) Drop("the master became a replica (READONLY)");
    return;
  }
  if (subscribe_sent_ && Push(value)) return;
  ProtocolError("a reply nobody asked for");
}

// A subscriber receives exactly two shapes, both three bulk strings but for the count:
// ["subscribe", channel, count] once per SUBSCRIBE and ["message", channel, payload].
bool RedisClient::Push(const resp::Value& value) {
  if (value.type != resp::Type::kArray || value.elements.size() != 3) return false;
  const resp::Value& kind = value.elements[0];
  const resp::Value& channel = value.elements[1];
  const resp::Value& last = value.elements[2];
  if (kind.type != resp::Type::kBulk || channel.type != resp::Type::kBulk ||
      channel.str != hooks_.channel) {
    return false;
  }
  if (kind.str == "subscribe" && last.type == resp::Type::kInteger && state_ != State::kUp) {
    Up();
    return true;
  }
  if (kind.str == "message" && last.type == resp::Type::kBulk && state_ == State::kUp) {
    if (hooks_.on_message) hooks_.on_message(last.str);
    return true;
  }
  return false;
}

void RedisClient::Follow(const std::string& host, int port) {
  if (!sentinel() || state_ == State::kStopped) return;
  if (state_ == State::kIdle) {
    // Waiting out a back-off grown against a dead master: the new one is there now.
    backoff_ = options_.reconnect_min;
    reconnect_timer_.cancel();
    return Connect();
  }
  if (host == host_ && port == port_) return;
  Drop(fmt::format("a sentinel announced the master at {}:{}", host, port));
}

void RedisClient::Abandon(uint64_t generation, const std::string& why) {
  if (generation != generation_ || state_ == State::kStopped) return;
  if (state_ == State::kIdle) return;
  Drop(why);
}

void RedisClient::ProtocolError(const std::string& why) {
  protocol_errors_.Inc();
  Drop("protocol error: " + why);
}

void RedisClient::Drop(const std::string& why) {
  if (state_ == State::kStopped || state_ == State::kIdle) return;
  const bool was_up = state_ == State::kUp;
  ++generation_;  // every operation of the old link now finds itself stale
  state_ = State::kIdle;
  if (link_) link_->Close();
  link_.reset();
  resolver_.cancel();
  connect_timer_.cancel();
  outbox_.clear();
  subscribe_sent_ = false;
  parser_ = resp::Parser();

  // A server that keeps failing would otherwise log at the reconnect rate.
  const TimePoint now = std::chrono::steady_clock::now();
  if (!stopping_ && (was_up || !failing_)) {
    if (now - last_warning_ >= std::chrono::seconds(1)) {
      spdlog::warn("redis {} {}: {}; reconnecting{}", name_, where_, why,
                   suppressed_warnings_ > 0
                       ? fmt::format(" ({} similar messages suppressed)", suppressed_warnings_)
                       : std::string());
      last_warning_ = now;
      suppressed_warnings_ = 0;
    } else {
      ++suppressed_warnings_;
    }
    failing_ = true;
  }

  // Handlers run after the state is consistent: one may send again (and be refused) or abandon.
  std::deque<Pending> failed;
  failed.swap(pending_);
  for (Pending& p : failed) {
    p.handler(MakeError(ErrorCode::kUnavailable, "redis: connection lost (" + why + ")",
                        "cache_unavailable"));
  }
  if (was_up && hooks_.on_down) hooks_.on_down();
  ScheduleReconnect();
}

void RedisClient::ScheduleReconnect() {
  if (stopping_) return;
  // Jittered, so the processes of a tier do not reconnect to a restarted server as one wave.
  thread_local std::minstd_rand rng(std::random_device{}());
  const auto half = backoff_ / 2;
  const Duration wait = half + Duration(std::uniform_int_distribution<Duration::rep>(
                                   0, std::max<Duration::rep>(1, half.count()))(rng));
  backoff_ = std::min(options_.reconnect_max, backoff_ * 2);
  reconnect_timer_.expires_after(wait);
  reconnect_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec && self->state_ == State::kIdle) self->Connect();
  });
}

}  // namespace sluice::store
