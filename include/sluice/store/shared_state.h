// SharedState: what the app processes of one tier share (docs/overload.md, "Shared state"): token
// buckets that one client key spends from whichever process it reaches, and a cache of metadata
// rows with cross-process invalidation. Nothing in it is durable; losing it resets budgets and
// empties a cache, which is why every caller treats a failure as a miss and fails open.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice/admission/deadline.h"
#include "sluice/admission/token_bucket.h"
#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/common/result.h"
#include "sluice/store/paste.h"

namespace sluice::store {

/// One bucket of an all-or-nothing take: which bucket, how it refills, and what this take costs.
struct BucketTake {
  /// Names the bucket across processes, e.g. "ipc:10.0.0.1". A bucket never seen is full.
  std::string key;
  admission::TokenBucketPolicy policy;
  /// Tokens to take (or give back on a refund). Precondition: >= 0.
  double cost = 1;
};

/// The answer to TakeAll: every bucket spent, or none and the first that said no.
struct SharedTakeDecision {
  bool allowed = false;
  /// Index in the takes of the bucket that refused; -1 when allowed.
  int refused_index = -1;
  /// Tokens in the refusing bucket, after refill.
  double available = 0;
  /// How long until the refusing bucket holds the cost, if nobody else takes them.
  Duration retry_after{};
  /// The cost is over the refusing bucket's burst: waiting cannot help.
  bool exceeds_burst = false;
};

/// Shared token buckets and metadata cache. Implementations are thread-safe. Every call returns
/// Unavailable when the store cannot be reached and DeadlineExceeded past `deadline`; callers
/// treat both as "no answer" (fail open, or a cache miss), never as an answer for the user.
class SharedState {
 public:
  virtual ~SharedState() = default;

  /// Takes `cost` from every bucket if each holds it, in one atomic step; otherwise takes nothing
  /// and names the first bucket (in order) that refused. A take that timed out may still have been
  /// applied: the caller must not retry it.
  virtual boost::asio::awaitable<Result<SharedTakeDecision>> TakeAll(
      std::vector<BucketTake> takes, admission::Deadline deadline) = 0;

  /// Gives back a take whose request was refused later, never filling a bucket past its burst.
  virtual boost::asio::awaitable<Status> Refund(std::vector<BucketTake> takes,
                                                admission::Deadline deadline) = 0;

  /// The tokens in each bucket now (refilled, a bucket never seen full), in the order given,
  /// spending nothing; the costs are ignored. For GET /api/v1/limits: what the tier's limits hold
  /// for a client, not what this process would allow alone. A store that cannot tell answers
  /// Unavailable (the test doubles that only refuse or fail).
  virtual boost::asio::awaitable<Result<std::vector<double>>> PeekAll(
      std::vector<BucketTake> buckets, admission::Deadline deadline);

  /// A cached row (a tombstone has `deleted` set), or nullopt on a miss.
  virtual boost::asio::awaitable<Result<std::optional<PasteMeta>>> GetMeta(
      PasteId id, admission::Deadline deadline) = 0;

  /// Caches a live row for `ttl` unless the id already has an entry: rows never change except by
  /// deletion, and a fill racing a delete must not replace its tombstone.
  virtual boost::asio::awaitable<Status> PutMeta(PasteMeta meta, std::chrono::seconds ttl,
                                                 admission::Deadline deadline) = 0;

  /// Replaces the entry of `row.id` with `row`, as given, for `ttl` and tells every subscribed
  /// process (this one included) that the id changed. A delete passes its tombstone (deleted
  /// set); moderation passes the row in its new state, which must not be turned into a tombstone:
  /// a dismissed paste cached as deleted answered 404 from every other process until the entry
  /// expired.
  virtual boost::asio::awaitable<Status> Invalidate(PasteMeta row, std::chrono::seconds ttl,
                                                    admission::Deadline deadline) = 0;

  /// Calls `on_invalidated` with every id invalidated by any process from now on, until the
  /// store is destroyed. Messages sent while the store is unreachable are lost, so callers also
  /// bound the age of what they cache locally. Called on the store's own thread: keep it short and
  /// thread-safe. Call once, before the first request.
  virtual void SubscribeInvalidations(std::function<void(const PasteId&)> on_invalidated) = 0;
};

/// An in-process SharedState with the same semantics, for tests and for one-process experiments.
std::unique_ptr<SharedState> MakeMemorySharedState(const Clock& clock);

struct RedisOptions {
  /// Default: 127.0.0.1.
  std::string host = "127.0.0.1";
  /// Default: 6379.
  int port = 6379;
  /// Prefix of every key and of the invalidation channel, so tiers can share a server.
  /// Default: "sluice:".
  std::string key_prefix = "sluice:";
  /// First pause before reconnecting after a failure; doubles up to `reconnect_max`.
  /// Default: 100 ms.
  Duration reconnect_min = std::chrono::milliseconds(100);
  /// Default: 2 s.
  Duration reconnect_max = std::chrono::seconds(2);
  /// Longest a connection attempt (TCP, TLS, AUTH) may take. Default: 1 s.
  Duration connect_timeout = std::chrono::seconds(1);
  /// TLS (rediss://): the certificate must chain to `ca_file` (the system's CAs when empty) and
  /// name `host`.
  bool tls = false;
  std::string ca_file;
  /// AUTH with an ACL user (empty: the default user) and a password (empty: no AUTH).
  std::string user;
  std::string password;
  /// Redis Sentinel (redis[s]+sentinel://): when not empty, `host` and `port` are unused and the
  /// master is asked of these sentinels (in order) on every connection, as
  /// SENTINEL get-master-addr-by-name `sentinel_master`. The credentials and TLS settings above go
  /// to the sentinels and to the master alike.
  struct Endpoint {
    std::string host;
    int port = 26379;
  };
  std::vector<Endpoint> sentinels;
  std::string sentinel_master;
};

/// Parses "redis[s]://[USER[:PASSWORD]@]HOST[:PORT][/]" (port defaults to 6379; user and password
/// may be percent-encoded) or, for Redis Sentinel,
/// "redis[s]+sentinel://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...]/MASTER" (port defaults to
/// 26379). InvalidArgument otherwise, with a message that never shows the
/// password.
Result<RedisOptions> ParseRedisUrl(std::string_view url);

/// The URL of `options` for logs: the password, if any, as "***".
std::string RedactedRedisUrl(const RedisOptions& options);

/// Redis through sluice's own RESP client on a thread of its own (one connection for commands, one
/// for the invalidation channel), reconnecting with backoff. While disconnected every call fails at
/// once with Unavailable. Never blocks the caller's thread. Defined in src/store/redis (link
/// sluice_store_redis).
std::unique_ptr<SharedState> MakeRedisSharedState(RedisOptions options, const Clock& clock,
                                                  MetricsRegistry& metrics);

}  // namespace sluice::store
