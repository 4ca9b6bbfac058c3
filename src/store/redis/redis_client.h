// One connection to Redis over Boost.Asio (plain TCP or TLS), reconnecting with backoff: the client
// under src/store/redis/redis_shared_state.cc.
//
// It is strict on purpose. Replies go to callers in the order the commands were sent, and each
// command is followed on the wire by an ECHO of a tag unique to it: a reply that is missing, sent
// twice or sent unasked shows up as a tag out of place, so a confused server cannot hand one
// caller's answer to another. Anything unexpected (a malformed reply, a tag out of place, a reply
// nobody asked for, a pub/sub message of the wrong shape) is a protocol error: the connection is
// closed, every call waiting on it fails, the error is counted
// (sluice_redis_protocol_errors_total) and a fresh connection is made, which subscribes again.
//
// Under Redis Sentinel (options.sentinels not empty) every connection attempt first asks the
// sentinels, one after another, for the master's address, then checks with ROLE that the server
// found is a master. A reply of READONLY (the master was demoted under us) drops the connection,
// and so does sentinel's own CLIENT KILL at a failover: the next attempt asks the sentinels again.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "resp.h"
#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/common/result.h"
#include "sluice/store/shared_state.h"

namespace sluice::store {

/// A TLS context for `options`: the system's CAs, or only `options.ca_file` when set. Throws
/// std::invalid_argument when that file cannot be read. Plain connections need one too (unused).
std::shared_ptr<boost::asio::ssl::context> MakeRedisTlsContext(const store::RedisOptions& options);

class RedisClient : public std::enable_shared_from_this<RedisClient> {
 public:
  /// A reply (a Redis error reply is a value of type kError), or Unavailable when the connection
  /// failed before it arrived.
  using ReplyHandler = std::function<void(Result<resp::Value>)>;

  struct Hooks {
    /// Each time the connection is ready for commands (after AUTH, and for a subscriber after the
    /// server confirmed the subscription).
    std::function<void()> on_up;
    /// Each time a ready connection is lost.
    std::function<void()> on_down;
    /// Subscriber mode when not empty: the connection subscribes to this channel on every
    /// connection and takes no commands; each message's payload goes to `on_message`.
    std::string channel;
    std::function<void(const std::string&)> on_message;
  };

  /// Everything happens on `io`'s thread: call every member there.
  static std::shared_ptr<RedisClient> Make(boost::asio::io_context& io, store::RedisOptions options,
                                           std::string name,
                                           std::shared_ptr<boost::asio::ssl::context> tls,
                                           MetricsRegistry& metrics, Hooks hooks);
  ~RedisClient();

  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  /// Connects in the background; reconnects with backoff whenever the connection drops.
  void Start();
  /// Closes for good: pending handlers get Unavailable, nothing reconnects.
  void Stop();
  bool up() const { return state_ == State::kUp; }

  /// Queues a command (pipelined behind the others). `handler` is called exactly once, on the io
  /// thread. Returns the connection's generation, to pass to Abandon(), or 0 (and `handler` is not
  /// called) when the connection is not ready.
  uint64_t Send(const std::vector<std::string>& args, ReplyHandler handler);
  /// Gives up on connection `generation` (a call on it timed out: its reply, when it comes, could
  /// no longer be told apart from the next one's), failing every call waiting on it. A no-op if
  /// that connection is already gone.
  void Abandon(uint64_t generation, const std::string& why);

  size_t waiting() const { return pending_.size(); }

  /// Under Sentinel: the master is now at `host`:`port` (a sentinel's +switch-master). A
  /// connection to anywhere else is dropped, so the next one asks the sentinels again: the old
  /// master keeps taking writes until the sentinels demote it, which can take seconds.
  void Follow(const std::string& host, int port);

 private:
  enum class State { kIdle, kConnecting, kHandshaking, kUp, kStopped };
  struct Link;
  struct Pending {
    ReplyHandler handler;
    std::string tag;  // empty: not followed by a tag (AUTH, whose failure fails the tag too)
    bool have_reply = false;
    resp::Value reply;
  };

  RedisClient(boost::asio::io_context& io, store::RedisOptions options, std::string name,
              std::shared_ptr<boost::asio::ssl::context> tls, MetricsRegistry& metrics,
              Hooks hooks);
  bool subscriber() const { return !hooks_.channel.empty(); }
  void Connect();
  struct SentinelAsk;
  void AskSentinel(size_t index, uint64_t generation);
  void SentinelRead(const std::shared_ptr<SentinelAsk>& ask);
  void SentinelFailed(const std::shared_ptr<SentinelAsk>& ask, const std::string& why);
  bool sentinel() const { return !options_.sentinels.empty(); }
  void ConnectTo(uint64_t generation);
  void Connected(const std::shared_ptr<Link>& link);
  void Handshake(const std::shared_ptr<Link>& link);
  void Up();
  void Queue(const std::vector<std::string>& args, ReplyHandler handler, bool tagged = true);
  void Flush(const std::shared_ptr<Link>& link);
  void Read(const std::shared_ptr<Link>& link);
  void Route(resp::Value value);
  bool Push(const resp::Value& value);
  void ProtocolError(const std::string& why);
  void Drop(const std::string& why);
  void ScheduleReconnect();

  boost::asio::io_context& io_;
  const store::RedisOptions options_;
  const std::string name_;
  std::string where_;  // the redacted URL (and under Sentinel, the master in use), for logs
  std::string host_;   // the server to connect to: options_.host, or the master a sentinel named
  int port_;
  std::string sentinel_failures_;  // why each sentinel asked in this attempt gave no master
  std::shared_ptr<boost::asio::ssl::context> tls_;
  Counter& protocol_errors_;
  Hooks hooks_;

  State state_ = State::kIdle;
  uint64_t generation_ = 0;
  uint64_t next_tag_ = 0;
  std::shared_ptr<Link> link_;
  resp::Parser parser_;
  std::deque<Pending> pending_;
  std::string outbox_;  // commands not yet handed to a write
  bool stopping_ = false;
  bool subscribe_sent_ = false;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::steady_timer connect_timer_;
  boost::asio::steady_timer reconnect_timer_;
  Duration backoff_;
  bool failing_ = false;  // the last attempt failed and was logged: log the next success
  TimePoint last_warning_{};
  int suppressed_warnings_ = 0;
};

}  // namespace sluice::store
