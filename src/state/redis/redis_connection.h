// One hiredis asynchronous connection driven by an Asio io_context, reconnecting with backoff.
//
// hiredis asks its event loop, through five hooks, to watch the socket for reads and writes; the
// adapter answers them with a posix::stream_descriptor that borrows hiredis' file descriptor (and
// releases it rather than closing it: hiredis owns the fd). No thread is parked per call: a call is
// a callback that runs when its reply is read.
#pragma once

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sluice/common/clock.h"
#include "sluice/store/shared_state.h"

namespace sluice::state {

/// A reply copied out of hiredis' memory, which is freed when the reply callback returns.
struct RedisReply {
  int type = REDIS_REPLY_NIL;
  long long integer = 0;
  std::string str;
  std::vector<RedisReply> elements;

  bool IsError() const { return type == REDIS_REPLY_ERROR; }
  static RedisReply CopyOf(const redisReply& r);
};

class AsioHiredisAdapter;

/// One connection. Not thread-safe: construct, use and destroy it on the io_context's thread.
class RedisConnection {
 public:
  /// Called with each reply, or with nullptr when the connection fails before it arrives.
  using ReplyHandler = std::function<void(const redisReply*)>;

  /// `on_connect` runs each time a connection is established (e.g. to subscribe again),
  /// `on_lost` each time one fails or drops.
  RedisConnection(boost::asio::io_context& io, store::RedisOptions options, std::string name,
                  std::function<void()> on_connect = {}, std::function<void()> on_lost = {});
  /// Frees the hiredis context; pending handlers are called with nullptr.
  ~RedisConnection();

  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  /// Connects in the background; reconnects with backoff whenever the connection drops.
  void Start();
  bool connected() const { return connected_; }

  /// Queues a command. `handler` is called exactly once. False (and `handler` not called) when
  /// there is no connection to queue it on.
  bool Send(const std::vector<std::string>& args, ReplyHandler handler);
  /// Queues a command whose handler may be called many times (SUBSCRIBE): `handler` must outlive
  /// the connection.
  bool SendPersistent(const std::vector<std::string>& args, ReplyHandler* handler);

 private:
  static void OnConnect(const redisAsyncContext* ac, int status);
  static void OnDisconnect(const redisAsyncContext* ac, int status);
  void Connect();
  void Lost(const char* what);
  void ScheduleReconnect();
  bool SendRaw(const std::vector<std::string>& args, redisCallbackFn* fn, void* privdata);

  boost::asio::io_context& io_;
  const store::RedisOptions options_;
  const std::string name_;
  std::function<void()> on_connect_;
  std::function<void()> on_lost_;
  redisAsyncContext* ac_ = nullptr;
  std::shared_ptr<AsioHiredisAdapter> adapter_;
  bool connected_ = false;
  bool stopping_ = false;
  Duration backoff_;
  boost::asio::steady_timer reconnect_timer_;
  bool warned_ = false;
};

}  // namespace sluice::state
