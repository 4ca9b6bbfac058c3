#include "redis_connection.h"

#include <poll.h>
#include <spdlog/spdlog.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <random>

namespace sluice::state {

namespace asio = boost::asio;

RedisReply RedisReply::CopyOf(const redisReply& r) {
  RedisReply out;
  out.type = r.type;
  out.integer = r.integer;
  if (r.str != nullptr) out.str.assign(r.str, r.len);
  for (size_t i = 0; i < r.elements; ++i) {
    if (r.element[i] != nullptr) out.elements.push_back(CopyOf(*r.element[i]));
  }
  return out;
}

// The event-loop side of one hiredis context. It lives in a shared_ptr so that a wait completing
// after hiredis freed the context finds `ac_` null instead of freed memory.
//
// Asio's reactor is edge-triggered and a wait does not remember readiness that arrived while no
// wait was queued, so after each read or write the adapter re-arms first and then polls the fd once
// without blocking: data that came in between is handled now rather than never.
class AsioHiredisAdapter : public std::enable_shared_from_this<AsioHiredisAdapter> {
 public:
  AsioHiredisAdapter(asio::io_context& io, redisAsyncContext* ac)
      : ac_(ac), descriptor_(io, ac->c.fd) {}

  void Attach() {
    self_ = shared_from_this();
    ac_->ev.data = this;
    ac_->ev.addRead = [](void* p) { static_cast<AsioHiredisAdapter*>(p)->Want(kRead, true); };
    ac_->ev.delRead = [](void* p) { static_cast<AsioHiredisAdapter*>(p)->Want(kRead, false); };
    ac_->ev.addWrite = [](void* p) { static_cast<AsioHiredisAdapter*>(p)->Want(kWrite, true); };
    ac_->ev.delWrite = [](void* p) { static_cast<AsioHiredisAdapter*>(p)->Want(kWrite, false); };
    ac_->ev.cleanup = [](void* p) { static_cast<AsioHiredisAdapter*>(p)->Cleanup(); };
  }

  /// Watches for the end of a non-blocking connect (hiredis learns of it from a write event).
  void StartConnecting() { Want(kWrite, true); }

 private:
  enum Direction { kRead = 0, kWrite = 1 };

  void Want(Direction d, bool on) {
    wanted_[d] = on;
    // Never call back into hiredis from inside one of its hooks: post the pump.
    if (on)
      asio::post(descriptor_.get_executor(), [self = shared_from_this(), d] { self->Pump(d); });
  }

  void Arm(Direction d) {
    if (armed_[d] || ac_ == nullptr) return;
    armed_[d] = true;
    descriptor_.async_wait(d == kRead ? asio::posix::descriptor_base::wait_read
                                      : asio::posix::descriptor_base::wait_write,
                           [self = shared_from_this(), d](const boost::system::error_code& ec) {
                             self->armed_[d] = false;
                             if (!ec) self->Pump(d);
                           });
  }

  void Pump(Direction d) {
    for (int round = 0; round < 16; ++round) {
      if (ac_ == nullptr || !wanted_[d]) return;
      Arm(d);
      pollfd p{ac_->c.fd, static_cast<short>(d == kRead ? POLLIN : POLLOUT), 0};
      if (::poll(&p, 1, 0) <= 0) return;
      if (d == kRead) {
        redisAsyncHandleRead(ac_);
      } else {
        redisAsyncHandleWrite(ac_);
      }
    }
    // Still ready after many rounds: yield to other work, then continue.
    asio::post(descriptor_.get_executor(), [self = shared_from_this(), d] { self->Pump(d); });
  }

  void Cleanup() {
    ac_ = nullptr;
    wanted_[kRead] = wanted_[kWrite] = false;
    boost::system::error_code ignored;
    descriptor_.cancel(ignored);
    descriptor_.release();         // hiredis closes its own fd
    auto last = std::move(self_);  // may be the last owner: nothing touches `this` after it
  }

  redisAsyncContext* ac_;
  asio::posix::stream_descriptor descriptor_;
  bool wanted_[2] = {false, false};
  bool armed_[2] = {false, false};
  std::shared_ptr<AsioHiredisAdapter> self_;  // kept while hiredis holds `this` in ev.data
};

namespace {

void OneShotReply(redisAsyncContext* /*ac*/, void* reply, void* privdata) {
  std::unique_ptr<RedisConnection::ReplyHandler> handler(
      static_cast<RedisConnection::ReplyHandler*>(privdata));
  (*handler)(static_cast<const redisReply*>(reply));
}

void PersistentReply(redisAsyncContext* /*ac*/, void* reply, void* privdata) {
  (*static_cast<RedisConnection::ReplyHandler*>(privdata))(static_cast<const redisReply*>(reply));
}

}  // namespace

RedisConnection::RedisConnection(asio::io_context& io, store::RedisOptions options,
                                 std::string name, std::function<void()> on_connect,
                                 std::function<void()> on_lost)
    : io_(io),
      options_(std::move(options)),
      name_(std::move(name)),
      on_connect_(std::move(on_connect)),
      on_lost_(std::move(on_lost)),
      backoff_(options_.reconnect_min),
      reconnect_timer_(io) {}

RedisConnection::~RedisConnection() {
  stopping_ = true;
  reconnect_timer_.cancel();
  if (ac_ != nullptr) {
    redisAsyncContext* ac = ac_;
    ac_ = nullptr;
    connected_ = false;
    redisAsyncFree(ac);
  }
}

void RedisConnection::Start() { Connect(); }

void RedisConnection::Connect() {
  if (stopping_) return;
  redisAsyncContext* ac = redisAsyncConnect(options_.host.c_str(), options_.port);
  if (ac == nullptr || ac->err != 0) {
    if (!warned_) {
      spdlog::warn("redis {} {}:{}: {}", name_, options_.host, options_.port,
                   ac != nullptr ? ac->errstr : "out of memory");
      warned_ = true;
    }
    if (ac != nullptr) redisAsyncFree(ac);
    ScheduleReconnect();
    return;
  }
  ac_ = ac;
  ac_->data = this;
  adapter_ = std::make_shared<AsioHiredisAdapter>(io_, ac_);
  adapter_->Attach();
  redisAsyncSetConnectCallback(ac_, &RedisConnection::OnConnect);
  redisAsyncSetDisconnectCallback(ac_, &RedisConnection::OnDisconnect);
  adapter_->StartConnecting();
}

void RedisConnection::OnConnect(const redisAsyncContext* ac, int status) {
  auto* self = static_cast<RedisConnection*>(ac->data);
  if (status != REDIS_OK) {
    // hiredis frees the context after this callback returns.
    self->Lost(ac->errstr);
    return;
  }
  self->connected_ = true;
  self->backoff_ = self->options_.reconnect_min;
  if (self->warned_)
    spdlog::info("redis {} {}:{}: connected", self->name_, self->options_.host,
                 self->options_.port);
  self->warned_ = false;
  if (self->on_connect_) self->on_connect_();
}

void RedisConnection::OnDisconnect(const redisAsyncContext* ac, int status) {
  auto* self = static_cast<RedisConnection*>(ac->data);
  if (self->stopping_) return;
  self->Lost(status == REDIS_OK ? "closed" : ac->errstr);
}

void RedisConnection::Lost(const char* what) {
  ac_ = nullptr;  // being freed by hiredis
  adapter_.reset();
  if (connected_ || !warned_) {
    spdlog::warn("redis {} {}:{}: {}; reconnecting", name_, options_.host, options_.port, what);
    warned_ = true;
  }
  connected_ = false;
  if (on_lost_) on_lost_();
  ScheduleReconnect();
}

void RedisConnection::ScheduleReconnect() {
  if (stopping_) return;
  // Jittered, so the processes of a tier do not reconnect to a restarted server as one wave.
  thread_local std::minstd_rand rng(std::random_device{}());
  const auto half = backoff_ / 2;
  const Duration wait = half + Duration(std::uniform_int_distribution<Duration::rep>(
                                   0, std::max<Duration::rep>(1, half.count()))(rng));
  backoff_ = std::min(options_.reconnect_max, backoff_ * 2);
  reconnect_timer_.expires_after(wait);
  reconnect_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Connect();
  });
}

bool RedisConnection::SendRaw(const std::vector<std::string>& args, redisCallbackFn* fn,
                              void* privdata) {
  if (ac_ == nullptr || !connected_) return false;
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  argv.reserve(args.size());
  lengths.reserve(args.size());
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  return redisAsyncCommandArgv(ac_, fn, privdata, static_cast<int>(args.size()), argv.data(),
                               lengths.data()) == REDIS_OK;
}

bool RedisConnection::Send(const std::vector<std::string>& args, ReplyHandler handler) {
  auto owned = std::make_unique<ReplyHandler>(std::move(handler));
  if (!SendRaw(args, &OneShotReply, owned.get())) return false;
  owned.release();  // OneShotReply deletes it
  return true;
}

bool RedisConnection::SendPersistent(const std::vector<std::string>& args, ReplyHandler* handler) {
  return SendRaw(args, &PersistentReply, handler);
}

}  // namespace sluice::state
