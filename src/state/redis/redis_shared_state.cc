// SharedState over Redis. Token buckets are one Lua script per decision (all keys checked, all
// taken or none), timed by the Redis server's TIME: the app's clock is monotonic per process and
// not comparable between machines, while the server's clock is the one clock every process sees.
// The metadata cache is plain keys with expiry; invalidations go out on a pub/sub channel.
#include <fmt/format.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "redis_connection.h"
#include "sluice/asio/completion.h"
#include "sluice/store/shared_state.h"

namespace sluice::state {

namespace {

namespace asio = boost::asio;
using admission::Deadline;
using asio::awaitable;
using store::BucketTake;
using store::PasteId;
using store::PasteMeta;
using store::SharedTakeDecision;

// ARGV[1] is "take" or "refund", then rate, burst and cost per key. A take answers {0} when every
// bucket gave its tokens, or {i, tokens, seconds_to_wait, exceeds_burst} for the first bucket i
// (1-based) that could not, having written nothing. A key expires when its bucket would be full
// again, so idle clients cost no memory; a missing key is a full bucket, and a refund to it is a
// no-op.
constexpr const char* kBucketScript = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local take = ARGV[1] == 'take'
local left = {}
for i = 1, #KEYS do
  local rate = tonumber(ARGV[3 * i - 1])
  local burst = tonumber(ARGV[3 * i])
  local cost = tonumber(ARGV[3 * i + 1])
  local state = redis.call('HMGET', KEYS[i], 'tokens', 'at')
  local tokens = tonumber(state[1])
  local at = tonumber(state[2])
  local seen = tokens ~= nil and at ~= nil
  if not seen then tokens = burst; at = now end
  if now > at then tokens = math.min(burst, tokens + (now - at) * rate) end
  if take then
    if cost > burst then return {i, string.format('%.17g', tokens), '0', 1} end
    if tokens + 1e-9 < cost then
      return {i, string.format('%.17g', tokens), string.format('%.17g', (cost - tokens) / rate), 0}
    end
    left[i] = tokens - cost
  elseif seen then
    left[i] = math.min(burst, tokens + cost)
  else
    left[i] = false
  end
end
for i = 1, #KEYS do
  if left[i] then
    local rate = tonumber(ARGV[3 * i - 1])
    local burst = tonumber(ARGV[3 * i])
    redis.call('HSET', KEYS[i], 'tokens', string.format('%.17g', left[i]), 'at',
               string.format('%.6f', now))
    redis.call('PEXPIRE', KEYS[i], math.ceil((burst - left[i]) / rate * 1000) + 1000)
  end
end
return {0}
)lua";

// Replace the entry with the tombstone and announce it, in one step so no reader can see the
// announcement before the tombstone.
constexpr const char* kInvalidateScript = R"lua(
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return redis.call('PUBLISH', ARGV[3], ARGV[4])
)lua";

struct Script {
  std::string text;
  std::string sha;
  explicit Script(const char* source) : text(source) {
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
    for (unsigned char c : digest) sha += fmt::format("{:02x}", c);
  }
};

Error Unavailable(std::string message) {
  return MakeError(ErrorCode::kUnavailable, "redis: " + std::move(message), "cache_unavailable");
}

std::string Hex(const store::TokenHash& hash) {
  std::string out;
  for (unsigned char c : hash) out += fmt::format("{:02x}", c);
  return out;
}

// The body's checksum rides as a 7th field ("-" for none), which readers of the 6-field form
// ignore, so processes of both versions can share one cache during an upgrade.
std::string EncodeMeta(const PasteMeta& m) {
  return fmt::format("1 {} {} {} {} {} {}", m.created_at, m.expires_at, m.size_bytes,
                     Hex(m.token_hash), m.deleted ? 1 : 0,
                     m.body_sha256 ? Hex(*m.body_sha256) : std::string("-"));
}

std::optional<PasteMeta> DecodeMeta(const PasteId& id, const std::string& text) {
  PasteMeta m{id, 0, 0, 0, {}, false, std::nullopt};
  char hex[65] = {};
  char digest[65] = {};
  int version = 0, deleted = 0;
  long long created = 0, expires = 0;
  unsigned long long size = 0;
  const int fields = std::sscanf(text.c_str(), "%d %lld %lld %llu %64s %d %64s", &version, &created,
                                 &expires, &size, hex, &deleted, digest);
  if (fields < 6 || version != 1) return std::nullopt;
  for (size_t i = 0; i < m.token_hash.size(); ++i) {
    unsigned value = 0;
    if (std::sscanf(hex + 2 * i, "%2x", &value) != 1) return std::nullopt;
    m.token_hash[i] = static_cast<unsigned char>(value);
  }
  if (fields == 7 && std::strlen(digest) == 2 * store::BodyDigest().size()) {
    m.body_sha256.emplace();
    for (size_t i = 0; i < m.body_sha256->size(); ++i) {
      unsigned value = 0;
      if (std::sscanf(digest + 2 * i, "%2x", &value) != 1) return std::nullopt;
      (*m.body_sha256)[i] = static_cast<unsigned char>(value);
    }
  }
  m.created_at = created;
  m.expires_at = expires;
  m.size_bytes = size;
  m.deleted = deleted != 0;
  return m;
}

double ParseDouble(const std::string& s) { return std::strtod(s.c_str(), nullptr); }

class RedisSharedState final : public store::SharedState {
 public:
  RedisSharedState(store::RedisOptions options, const Clock& clock, MetricsRegistry& metrics)
      : options_(std::move(options)),
        clock_(clock),
        metrics_(metrics),
        work_(asio::make_work_guard(io_)),
        buckets_script_(kBucketScript),
        invalidate_script_(kInvalidateScript),
        channel_(options_.key_prefix + "invalidate") {
    metrics.AddGaugeCallback("sluice_redis_connected",
                             "1 while the command connection to Redis is up", {},
                             [this] { return connected_.load() ? 1.0 : 0.0; });
    thread_ = std::thread([this] {
      // hiredis writes with write(2): a server that went away would otherwise raise SIGPIPE and
      // end the process. Blocked in this thread, the write fails with EPIPE and we reconnect.
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
      io_.run();
    });
    asio::post(io_, [this] {
      commands_ = std::make_unique<RedisConnection>(
          io_, options_, "commands", [this] { connected_ = true; }, [this] { connected_ = false; });
      subscriber_ = std::make_unique<RedisConnection>(io_, options_, "invalidations",
                                                      [this] { Subscribe(); });
      on_message_ = [this](const redisReply* r) { OnMessage(r); };
      commands_->Start();
      subscriber_->Start();
    });
  }

  ~RedisSharedState() override {
    // The connections live and die on the io thread; freeing them fails every pending call.
    asio::post(io_, [this] {
      commands_.reset();
      subscriber_.reset();
    });
    work_.reset();
    thread_.join();
  }

  awaitable<Result<SharedTakeDecision>> TakeAll(std::vector<BucketTake> takes,
                                                Deadline deadline) override {
    auto running = EvalBuckets("take", std::move(takes), deadline, "take");
    Result<RedisReply> reply = co_await std::move(running);
    if (!reply.ok()) co_return reply.error();
    const auto& e = reply->elements;
    if (reply->type != REDIS_REPLY_ARRAY || e.empty()) co_return Unavailable("odd script reply");
    if (e[0].integer == 0) co_return SharedTakeDecision{true, -1, 0, Duration::zero(), false};
    if (e.size() < 4) co_return Unavailable("odd script reply");
    SharedTakeDecision d;
    d.refused_index = static_cast<int>(e[0].integer) - 1;
    d.available = ParseDouble(e[1].str);
    d.exceeds_burst = e[3].integer != 0;
    d.retry_after = d.exceeds_burst ? Duration::max()
                                    : std::chrono::duration_cast<Duration>(
                                          std::chrono::duration<double>(ParseDouble(e[2].str)));
    co_return d;
  }

  awaitable<Status> Refund(std::vector<BucketTake> takes, Deadline deadline) override {
    auto running = EvalBuckets("refund", std::move(takes), deadline, "refund");
    Result<RedisReply> reply = co_await std::move(running);
    if (!reply.ok()) co_return reply.error();
    co_return Ok();
  }

  awaitable<Result<std::optional<PasteMeta>>> GetMeta(PasteId id, Deadline deadline) override {
    auto running = Call({"GET", MetaKey(id)}, deadline, "meta_get");
    Result<RedisReply> reply = co_await std::move(running);
    if (!reply.ok()) co_return reply.error();
    if (reply->type != REDIS_REPLY_STRING) co_return std::optional<PasteMeta>();
    // A value this build cannot read is a miss: the primary has the row.
    co_return DecodeMeta(id, reply->str);
  }

  awaitable<Status> PutMeta(PasteMeta meta, std::chrono::seconds ttl, Deadline deadline) override {
    auto running = Call({"SET", MetaKey(meta.id), EncodeMeta(meta), "EX",
                         std::to_string(std::max<int64_t>(1, ttl.count())), "NX"},
                        deadline, "meta_put");
    Result<RedisReply> reply = co_await std::move(running);
    if (!reply.ok()) co_return reply.error();
    co_return Ok();
  }

  awaitable<Status> Invalidate(PasteMeta tombstone, std::chrono::seconds ttl,
                               Deadline deadline) override {
    tombstone.deleted = true;
    auto running = Eval(invalidate_script_, {MetaKey(tombstone.id)},
                        {EncodeMeta(tombstone), std::to_string(std::max<int64_t>(1, ttl.count())),
                         channel_, tombstone.id.str()},
                        deadline, "invalidate");
    Result<RedisReply> reply = co_await std::move(running);
    if (!reply.ok()) co_return reply.error();
    co_return Ok();
  }

  void SubscribeInvalidations(std::function<void(const PasteId&)> on_invalidated) override {
    std::lock_guard lock(subscribers_mu_);
    subscribers_.push_back(std::move(on_invalidated));
  }

 private:
  // The state of one command: answered by its reply, by the loss of the connection or by its
  // deadline, whichever comes first; the others find it answered.
  struct Call_ {
    Call_(asio::io_context& io, asio_glue::Completion<Result<RedisReply>> c, Histogram& h,
          TimePoint start)
        : timer(io), done(std::move(c)), latency(h), started(start) {}
    asio::steady_timer timer;
    asio_glue::Completion<Result<RedisReply>> done;
    Histogram& latency;
    TimePoint started;
    bool answered = false;

    void Answer(Result<RedisReply> r, const Clock& clock) {
      if (answered) return;
      answered = true;
      timer.cancel();
      latency.Observe(std::chrono::duration<double>(clock.Now() - started).count());
      done(std::move(r));
    }
  };

  std::string MetaKey(const PasteId& id) const { return options_.key_prefix + "m:" + id.str(); }

  // Not a coroutine: returns the awaitable of the command's completion (see RunBlocking for why
  // the lambda must not be a temporary inside a co_await).
  awaitable<Result<RedisReply>> Call(std::vector<std::string> args, Deadline deadline,
                                     const char* op) {
    return asio_glue::AwaitCompletion<Result<RedisReply>>(
        [this, args = std::move(args), deadline,
         op](asio_glue::Completion<Result<RedisReply>> done) mutable {
          asio::post(
              io_, [this, args = std::move(args), deadline, op, done = std::move(done)]() mutable {
                Start(std::move(args), deadline, op, std::move(done));
              });
        });
  }

  void Start(std::vector<std::string> args, Deadline deadline, const char* op,
             asio_glue::Completion<Result<RedisReply>> done) {
    const Labels labels = {{"dependency", "redis"}, {"op", op}};
    auto call = std::make_shared<Call_>(
        io_, std::move(done),
        metrics_.GetHistogram("sluice_dependency_duration_seconds", "Store call latency", labels),
        clock_.Now());
    if (!commands_ || !commands_->connected()) {
      call->Answer(Unavailable("not connected"), clock_);
      return;
    }
    if (in_flight_ >= kMaxInFlight) {
      // A stalled server answers nothing, and every abandoned call still waits for its reply on
      // the connection; past this many, new calls fail at once instead of piling up.
      call->Answer(Unavailable("too many calls awaiting replies"), clock_);
      return;
    }
    const Duration left = deadline.Remaining(clock_);
    if (left <= Duration::zero()) {
      call->Answer(MakeError(ErrorCode::kDeadlineExceeded, "redis: no time left", "cache_timeout"),
                   clock_);
      return;
    }
    if (!deadline.IsNever()) {
      call->timer.expires_after(left);
      call->timer.async_wait([this, call, op](const boost::system::error_code& ec) {
        if (ec || call->answered) return;
        metrics_
            .GetCounter("sluice_dependency_timeouts_total",
                        "Store calls abandoned at their timeout (never retried)",
                        {{"dependency", "redis"}, {"op", op}})
            .Inc();
        call->Answer(
            MakeError(ErrorCode::kDeadlineExceeded, "redis: past its budget", "cache_timeout"),
            clock_);
      });
    }
    const bool sent = commands_->Send(args, [this, call](const redisReply* r) {
      --in_flight_;
      if (r == nullptr) {
        call->Answer(Unavailable("connection lost"), clock_);
      } else if (r->type == REDIS_REPLY_ERROR &&
                 std::string_view(r->str, r->len).substr(0, 8) != "NOSCRIPT") {
        call->Answer(Unavailable(std::string(r->str, r->len)), clock_);
      } else {
        call->Answer(RedisReply::CopyOf(*r), clock_);
      }
    });
    if (sent) {
      ++in_flight_;
    } else {
      call->Answer(Unavailable("not connected"), clock_);
    }
  }

  // EVALSHA first (the script body travels once per connection), EVAL when the server says it has
  // not seen the script (restarted, flushed, or a new connection to another server).
  awaitable<Result<RedisReply>> Eval(const Script& script, std::vector<std::string> keys,
                                     std::vector<std::string> args, Deadline deadline,
                                     const char* op) {
    std::vector<std::string> cmd = {"EVALSHA", script.sha, std::to_string(keys.size())};
    for (auto& k : keys) cmd.push_back(std::move(k));
    for (auto& a : args) cmd.push_back(std::move(a));
    auto first = Call(cmd, deadline, op);
    Result<RedisReply> reply = co_await std::move(first);
    if (reply.ok() && reply->IsError()) {
      cmd[0] = "EVAL";
      cmd[1] = script.text;
      auto second = Call(std::move(cmd), deadline, op);
      reply = co_await std::move(second);
      if (reply.ok() && reply->IsError()) co_return Unavailable(reply->str);
    }
    co_return reply;
  }

  awaitable<Result<RedisReply>> EvalBuckets(const char* mode, std::vector<BucketTake> takes,
                                            Deadline deadline, const char* op) {
    std::vector<std::string> keys;
    std::vector<std::string> args = {mode};
    for (const BucketTake& t : takes) {
      keys.push_back(options_.key_prefix + "b:" + t.key);
      args.push_back(fmt::format("{}", t.policy.rate_per_second));
      args.push_back(fmt::format("{}", t.policy.burst));
      args.push_back(fmt::format("{}", t.cost));
    }
    return Eval(buckets_script_, std::move(keys), std::move(args), deadline, op);
  }

  void Subscribe() {
    if (!subscriber_->SendPersistent({"SUBSCRIBE", channel_}, &on_message_)) {
      spdlog::warn("redis: could not subscribe to {}", channel_);
    }
  }

  void OnMessage(const redisReply* r) {
    if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 3) return;
    const redisReply* kind = r->element[0];
    const redisReply* payload = r->element[2];
    if (kind->type != REDIS_REPLY_STRING || std::string_view(kind->str, kind->len) != "message" ||
        payload->type != REDIS_REPLY_STRING) {
      return;
    }
    const auto id = PasteId::Parse(std::string_view(payload->str, payload->len));
    if (!id) return;
    std::lock_guard lock(subscribers_mu_);
    for (auto& notify : subscribers_) notify(*id);
  }

  const store::RedisOptions options_;
  const Clock& clock_;
  MetricsRegistry& metrics_;
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  const Script buckets_script_;
  const Script invalidate_script_;
  const std::string channel_;
  std::unique_ptr<RedisConnection> commands_;
  std::unique_ptr<RedisConnection> subscriber_;
  RedisConnection::ReplyHandler on_message_;
  std::atomic<bool> connected_{false};
  static constexpr int kMaxInFlight = 4096;
  int in_flight_ = 0;  // io thread only
  std::mutex subscribers_mu_;
  std::vector<std::function<void(const PasteId&)>> subscribers_;
  std::thread thread_;
};

}  // namespace

}  // namespace sluice::state

namespace sluice::store {

std::unique_ptr<SharedState> MakeRedisSharedState(RedisOptions options, const Clock& clock,
                                                  MetricsRegistry& metrics) {
  return std::make_unique<state::RedisSharedState>(std::move(options), clock, metrics);
}

}  // namespace sluice::store
