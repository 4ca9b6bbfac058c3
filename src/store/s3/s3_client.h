// The S3 store's HTTP client (s3_blob_store.cc): kept-alive connections in bounded pools, and one
// exchange (connect if need be, send a signed request, read its answer) on a connection's strand.
// Private to sluice_store_s3; why a client of our own, and why its pools and its one retry, is
// said at the top of s3_blob_store.cc.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/admission/deadline.h"
#include "sluice/asio/completion.h"
#include "sluice/common/clock.h"
#include "sluice/common/result.h"

namespace sluice::store::s3 {

using Strand = boost::asio::strand<boost::asio::any_io_executor>;

struct Endpoint {
  bool tls = false;
  std::string host;  // as in the Host header (IPv6 in brackets)
  std::string port;
  bool default_port = true;
};

/// An endpoint URL, http(s)://HOST[:PORT] with an optional trailing slash; nullopt if not one.
std::optional<Endpoint> ParseEndpoint(std::string_view url);

/// The host to resolve or to name in SNI: an IPv6 address without its brackets.
std::string ResolvableHost(const std::string& host);

// ---- connections and their pools ---------------------------------------------------------------

class Connection {
 public:
  Connection(const boost::asio::any_io_executor& executor, boost::asio::ssl::context* tls)
      : strand_(boost::asio::make_strand(executor)) {
    if (tls) {
      tls_.emplace(strand_, *tls);
    } else {
      plain_.emplace(strand_);
    }
  }

  const Strand& strand() const { return strand_; }
  boost::beast::tcp_stream& tcp() { return tls_ ? boost::beast::get_lowest_layer(*tls_) : *plain_; }
  boost::beast::ssl_stream<boost::beast::tcp_stream>* tls() { return tls_ ? &*tls_ : nullptr; }
  boost::beast::tcp_stream* plain() { return plain_ ? &*plain_ : nullptr; }
  boost::beast::flat_buffer& buffer() { return buffer_; }
  /// Bytes received and not parsed yet: in our buffer, or decrypted and held by OpenSSL.
  bool HasBufferedBytes() {
    return buffer_.size() > 0 || (tls_ && ::SSL_pending(tls_->native_handle()) > 0);
  }
  /// Also bytes waiting on the socket. Only while no operation is pending on the connection (an
  /// idle connection under a lease).
  bool HasUnreadBytes() {
    boost::system::error_code ec;
    const size_t waiting = tcp().socket().available(ec);
    return HasBufferedBytes() || ec || waiting > 0;
  }

  bool connected = false;
  TimePoint idle_since{};

 private:
  Strand strand_;
  std::optional<boost::beast::tcp_stream> plain_;
  std::optional<boost::beast::ssl_stream<boost::beast::tcp_stream>> tls_;
  boost::beast::flat_buffer buffer_;
};

// A bounded set of connections for one purpose. `in_use_` counts leases (including those granted
// to a waiter that has not resumed yet); idle connections hold no lease, and leases plus idle
// connections never exceed the capacity.
class Pool : public std::enable_shared_from_this<Pool> {
 public:
  Pool(boost::asio::any_io_executor executor, boost::asio::ssl::context* tls, size_t capacity,
       Duration max_idle, std::atomic<uint64_t>* opened)
      : executor_(std::move(executor)),
        timers_(boost::asio::make_strand(executor_)),
        tls_(tls),
        capacity_(std::max<size_t>(1, capacity)),
        max_idle_(max_idle),
        opened_(opened) {}

  class Lease {
   public:
    Lease() = default;
    Lease(std::shared_ptr<Pool> pool, std::unique_ptr<Connection> connection)
        : pool_(std::move(pool)), connection_(std::move(connection)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = default;
    ~Lease() {
      if (pool_) pool_->Release(std::move(connection_), reusable);
    }
    Connection& operator*() { return *connection_; }
    Connection* operator->() { return connection_.get(); }
    /// Drops the current connection for a new one, keeping the lease.
    void Replace() { connection_ = pool_->NewConnection(); }
    bool reusable = false;

   private:
    std::shared_ptr<Pool> pool_;
    std::unique_ptr<Connection> connection_;
  };

  boost::asio::awaitable<Result<Lease>> Acquire(admission::Deadline deadline) {
    if (deadline.Expired(SystemClock::Instance())) co_return PoolTimeout();
    {
      std::lock_guard lock(mu_);
      if (in_use_ < capacity_) {
        ++in_use_;
        co_return Lease(shared_from_this(), TakeIdleOrNewLocked());
      }
    }
    auto waiter = std::make_shared<Waiter>();
    auto self = shared_from_this();
    auto wait = asio_glue::AwaitCompletion<bool>(
        [self, waiter, deadline](asio_glue::Completion<bool> done) {
          std::unique_lock lock(self->mu_);
          if (self->in_use_ < self->capacity_) {  // a slot came free since the check above
            ++self->in_use_;
            waiter->fired = true;
            lock.unlock();
            done(true);
            return;
          }
          waiter->done = std::move(done);
          self->waiters_.push_back(waiter);
          if (deadline.IsNever()) return;
          // Armed and cancelled on one strand, so a cancel can never pass the wait it cancels.
          waiter->timer = std::make_shared<boost::asio::steady_timer>(self->timers_, deadline.at());
          boost::asio::post(self->timers_, [self, waiter] {
            waiter->timer->async_wait([self, waiter](boost::system::error_code ec) {
              if (!ec) self->Expire(*waiter);
            });
          });
        });
    const bool granted = co_await std::move(wait);
    if (waiter->timer) {
      boost::asio::post(timers_, [timer = waiter->timer] { timer->cancel(); });
    }
    if (!granted) co_return PoolTimeout();
    std::unique_ptr<Connection> connection;
    {
      std::lock_guard lock(mu_);
      connection = TakeIdleOrNewLocked();
    }
    co_return Lease(std::move(self), std::move(connection));
  }

  std::unique_ptr<Connection> NewConnection() {
    return std::make_unique<Connection>(executor_, tls_);
  }

  std::atomic<uint64_t>& opened() { return *opened_; }

 private:
  struct Waiter {
    asio_glue::Completion<bool> done;
    bool fired = false;  // under the pool's mutex
    std::shared_ptr<boost::asio::steady_timer> timer;
  };

  static Error PoolTimeout() {
    return MakeError(ErrorCode::kDeadlineExceeded,
                     "S3: no connection of this pool came free before the deadline",
                     "deadline_exceeded");
  }

  std::unique_ptr<Connection> TakeIdleOrNewLocked() {
    const TimePoint now = SystemClock::Instance().Now();
    while (!idle_.empty()) {
      // Newest first: the most recently used connection is the least likely to be closing.
      std::unique_ptr<Connection> connection = std::move(idle_.back());
      idle_.pop_back();
      if (now - connection->idle_since < max_idle_) return connection;
    }
    return NewConnection();
  }

  void Release(std::unique_ptr<Connection> connection, bool reusable) {
    std::unique_lock lock(mu_);
    --in_use_;
    if (connection && reusable && connection->connected) {
      connection->idle_since = SystemClock::Instance().Now();
      idle_.push_back(std::move(connection));
    }
    while (!waiters_.empty()) {
      std::shared_ptr<Waiter> waiter = std::move(waiters_.front());
      waiters_.pop_front();
      if (waiter->fired) continue;
      waiter->fired = true;
      ++in_use_;
      lock.unlock();
      waiter->done(true);
      break;
    }
    // A connection not kept is closed here, outside the lock.
  }

  void Expire(Waiter& waiter) {
    {
      std::lock_guard lock(mu_);
      if (waiter.fired) return;
      waiter.fired = true;
      // Dropped now rather than at the next release: a stalled peer can collect many of them.
      std::erase_if(waiters_, [&waiter](const auto& w) { return w.get() == &waiter; });
    }
    waiter.done(false);
  }

  const boost::asio::any_io_executor executor_;
  const Strand timers_;
  boost::asio::ssl::context* const tls_;
  const size_t capacity_;
  const Duration max_idle_;
  std::atomic<uint64_t>* const opened_;
  std::mutex mu_;
  size_t in_use_ = 0;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::deque<std::shared_ptr<Waiter>> waiters_;
};

// ---- one exchange -----------------------------------------------------------------------------

struct SignedRequest {
  boost::beast::http::verb method = boost::beast::http::verb::get;
  std::string target;
  std::vector<std::pair<std::string, std::string>> headers;
  std::shared_ptr<const std::string> body;  // null: none
};

// What happened on the wire; default-constructible so that co_spawn can carry it.
struct Exchange {
  enum class Stage { kConnect, kSend, kReceive, kDone } stage = Stage::kConnect;
  boost::beast::error_code ec;
  /// Failed on a reused connection before any byte of the answer: the peer had closed it.
  bool stale = false;
  unsigned status = 0;
  std::string body;
  /// Nothing was received past the end of the answer.
  bool in_step = true;
  /// The connection may carry another request.
  bool keep_alive = false;
};

// Runs on the connection's strand: everything that touches its sockets happens there.
boost::asio::awaitable<Exchange> RunExchange(Connection* c, Endpoint endpoint, std::string sni,
                                             std::shared_ptr<const SignedRequest> request,
                                             uint64_t max_body, admission::Deadline deadline,
                                             std::atomic<uint64_t>* opened);

}  // namespace sluice::store::s3
