// SharedState over Redis. Token buckets are one Lua script per decision (all keys checked, all
// taken or none), timed by the Redis server's TIME: the app's clock is monotonic per process and
// not comparable between machines, while the server's clock is the one clock every process sees.
// The metadata cache is plain keys with expiry; invalidations go out on a pub/sub channel.
#include <fmt/format.h>
#include <openssl/sha.h>
#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>

#include "redis_client.h"
#include "scripts.h"
#include "sluice/asio/completion.h"
#include "sluice/asio/timer.h"
#include "sluice/common/thread_name.h"
#include "sluice/store/shared_state.h"

namespace sluice::store {

namespace {

namespace asio = boost::asio;
using admission::Deadline;
using asio::awaitable;
using store::BucketTake;
using store::PasteId;
using store::PasteMeta;
using store::SharedTakeDecision;

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

// The entry names its own id, so that a value that reached the wrong caller (which the client's
// tags should already prevent, src/store/redis/redis_client.h) cannot describe another paste. The
// body's checksum rides next ("-" for a row that has none), then the moderation state and the
// burn flag (absent in entries written before them, which read as none and not burn). The burn
// flag must ride along: moderation puts live rows here (src/service/moderation.cc), and a burn row
// read back without it would be served by a plain GET. Then the encrypted flag (absent: not
// encrypted), so that an encrypted paste read through the cache is never rendered, the views a
// counted row has left and its parent ("-" for none), absent in older entries (one view, no
// parent).
std::string EncodeMeta(const PasteMeta& m) {
  return fmt::format("2 {} {} {} {} {} {} {} {} {} {} {} {}", m.id.str(), m.created_at,
                     m.expires_at, m.size_bytes, Hex(m.token_hash), m.deleted ? 1 : 0,
                     m.body_sha256 ? Hex(*m.body_sha256) : std::string("-"),
                     static_cast<int>(m.moderation), m.burn ? 1 : 0, m.encrypted ? 1 : 0,
                     m.views_left, m.parent ? m.parent->str() : std::string("-"));
}

std::optional<PasteMeta> DecodeMeta(const PasteId& id, const std::string& text) {
  PasteMeta m{id, 0, 0, 0, {}, false, std::nullopt};
  char hex[65] = {};
  char named[33] = {};
  char digest[65] = {};
  int version = 0, deleted = 0, moderation = 0, burn = 0, encrypted = 0;
  unsigned views_left = 1;
  char parent[33] = {};
  long long created = 0, expires = 0;
  unsigned long long size = 0;
  int fields = 0;
  if (text.find('\0') != std::string::npos ||
      (fields = std::sscanf(text.c_str(), "%d %32s %lld %lld %llu %64s %d %64s %d %d %d %u %32s",
                            &version, named, &created, &expires, &size, hex, &deleted, digest,
                            &moderation, &burn, &encrypted, &views_left, parent)) < 7 ||
      version != 2 || id.str() != named || std::strlen(hex) != 2 * m.token_hash.size()) {
    return std::nullopt;
  }
  for (size_t i = 0; i < m.token_hash.size(); ++i) {
    unsigned value = 0;
    if (std::sscanf(hex + 2 * i, "%2x", &value) != 1) return std::nullopt;
    m.token_hash[i] = static_cast<unsigned char>(value);
  }
  if (fields >= 8 && std::strlen(digest) == 2 * store::BodyDigest().size()) {
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
  if (fields >= 9 && moderation >= 0 && moderation <= store::kMaxModeration) {
    m.moderation = static_cast<store::Moderation>(moderation);
  }
  m.burn = fields >= 10 && burn != 0;
  m.encrypted = fields >= 11 && encrypted != 0;
  if (fields >= 12) m.views_left = views_left;
  if (fields >= 13) m.parent = PasteId::Parse(parent);
  return m;
}

// A number the bucket script formatted with %.17g: finite and not negative, or nullopt.
std::optional<double> ParseNumber(const resp::Value& v) {
  if (v.type != resp::Type::kBulk || v.str.empty() || v.str.size() > 40) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(v.str.c_str(), &end);
  if (end != v.str.c_str() + v.str.size() || !std::isfinite(d) || d < 0) return std::nullopt;
  return d;
}

// {-1, tokens...}: one number per bucket asked, in order.
std::optional<std::vector<double>> PeekedTokens(const resp::Value& r, size_t n) {
  const auto& e = r.elements;
  if (r.type != resp::Type::kArray || e.size() != n + 1 || e[0].type != resp::Type::kInteger ||
      e[0].integer != -1) {
    return std::nullopt;
  }
  std::vector<double> tokens;
  tokens.reserve(n);
  for (size_t i = 1; i <= n; ++i) {
    const auto t = ParseNumber(e[i]);
    if (!t) return std::nullopt;
    tokens.push_back(*t);
  }
  return tokens;
}

// The bucket script's answer: {0}, or {i, tokens, seconds, exceeds_burst} with i naming one of the
// `n` buckets. Anything else is no answer at all (the caller fails open), never a decision.
std::optional<SharedTakeDecision> TakeDecision(const resp::Value& r, size_t n) {
  const auto& e = r.elements;
  if (r.type != resp::Type::kArray || e.empty() || e[0].type != resp::Type::kInteger) {
    return std::nullopt;
  }
  if (e[0].integer == 0) {
    if (e.size() != 1) return std::nullopt;
    return SharedTakeDecision{true, -1, 0, Duration::zero(), false};
  }
  if (e.size() != 4 || e[0].integer < 1 || static_cast<uint64_t>(e[0].integer) > n ||
      e[3].type != resp::Type::kInteger || (e[3].integer != 0 && e[3].integer != 1)) {
    return std::nullopt;
  }
  const auto available = ParseNumber(e[1]);
  const auto wait = ParseNumber(e[2]);
  if (!available || !wait) return std::nullopt;
  SharedTakeDecision d;
  d.refused_index = static_cast<int>(e[0].integer) - 1;
  d.available = *available;
  d.exceeds_burst = e[3].integer != 0;
  // Capped at about 30 years, short of where nanoseconds overflow.
  d.retry_after = d.exceeds_burst ? Duration::max()
                                  : std::chrono::duration_cast<Duration>(
                                        std::chrono::duration<double>(std::min(*wait, 1e9)));
  return d;
}

std::string Describe(const resp::Value& v) {
  switch (v.type) {
    case resp::Type::kArray:
      return fmt::format("an array of {}", v.elements.size());
    case resp::Type::kInteger:
      return "an integer";
    case resp::Type::kNil:
      return "nil";
    case resp::Type::kError:
      return "an error";
    default:
      return "a string";
  }
}

class RedisSharedState final : public store::SharedState {
 public:
  RedisSharedState(store::RedisOptions options, const Clock& clock, MetricsRegistry& metrics)
      : options_(std::move(options)),
        clock_(clock),
        metrics_(metrics),
        work_(asio::make_work_guard(io_)),
        buckets_script_(kBucketScript),
        invalidate_script_(kInvalidateScript),
        channel_(options_.key_prefix + "invalidate"),
        bad_script_replies_(metrics.GetCounter(
            "sluice_redis_bad_script_replies_total",
            "Limiter script replies of the wrong shape (each failed open, as no answer)")),
        gauges_(metrics) {
    gauges_.Add("sluice_redis_connected", "1 while the command connection to Redis is up", {},
                [this] { return connected_.load() ? 1.0 : 0.0; });
    // Built here, on the caller's thread, so that an unreadable redis_ca_file stops the start.
    auto tls = MakeRedisTlsContext(options_);
    RedisClient::Hooks command_hooks;
    command_hooks.on_up = [this] { connected_ = true; };
    command_hooks.on_down = [this] { connected_ = false; };
    commands_ = RedisClient::Make(io_, options_, "commands", tls, metrics, command_hooks);
    RedisClient::Hooks subscriber_hooks;
    subscriber_hooks.channel = channel_;
    subscriber_hooks.on_message = [this](const std::string& payload) { OnMessage(payload); };
    subscriber_ = RedisClient::Make(io_, options_, "invalidations", tls, metrics, subscriber_hooks);
    // Under Sentinel, one subscriber to each sentinel's +switch-master: the clients follow a
    // failover as soon as any sentinel announces it, not when the old master is demoted.
    for (size_t i = 0; i < options_.sentinels.size(); ++i) {
      store::RedisOptions at = options_;
      at.sentinels.clear();
      at.host = options_.sentinels[i].host;
      at.port = options_.sentinels[i].port;
      RedisClient::Hooks hooks;
      hooks.channel = "+switch-master";
      hooks.on_message = [this](const std::string& payload) { OnSwitchMaster(payload); };
      watchers_.push_back(
          RedisClient::Make(io_, at, "sentinel" + std::to_string(i + 1), tls, metrics, hooks));
    }
    asio::post(io_, [this] {
      commands_->Start();
      subscriber_->Start();
      for (auto& w : watchers_) w->Start();
    });
    thread_ = std::thread([this] {
      NameThisThread("redis-io");
      io_.run();
    });
  }

  ~RedisSharedState() override {
    // The clients live on the io thread; stopping them fails every pending call, and the thread
    // ends once their last operations have completed.
    asio::post(io_, [this] {
      commands_->Stop();
      subscriber_->Stop();
      for (auto& w : watchers_) w->Stop();
    });
    work_.reset();
    thread_.join();
  }

  // "+switch-master NAME OLD-IP OLD-PORT NEW-IP NEW-PORT" minus the event name: the payload.
  void OnSwitchMaster(const std::string& payload) {
    std::istringstream in(payload);
    std::string name, old_ip, old_port, new_ip;
    int new_port = 0;
    if (!(in >> name >> old_ip >> old_port >> new_ip >> new_port)) return;
    if (name != options_.sentinel_master || new_port <= 0 || new_port > 65535) return;
    commands_->Follow(new_ip, new_port);
    subscriber_->Follow(new_ip, new_port);
  }

  awaitable<Result<SharedTakeDecision>> TakeAll(std::vector<BucketTake> takes,
                                                Deadline deadline) override {
    return EvalBucketsParsed("take", std::move(takes), deadline, &TakeDecision);
  }

  awaitable<Status> Refund(std::vector<BucketTake> takes, Deadline deadline) override {
    auto running = EvalBuckets("refund", std::move(takes), deadline, "refund");
    Result<resp::Value> reply = co_await std::move(running);
    if (!reply.ok()) co_return reply.error();
    co_return Ok();
  }

  awaitable<Result<std::vector<double>>> PeekAll(std::vector<BucketTake> buckets,
                                                 Deadline deadline) override {
    return EvalBucketsParsed("peek", std::move(buckets), deadline, &PeekedTokens);
  }

  awaitable<Result<std::optional<PasteMeta>>> GetMeta(PasteId id, Deadline deadline) override {
    auto running = Call({"GET", MetaKey(id)}, deadline, "meta_get");
    Result<resp::Value> reply = co_await std::move(running);
    if (!reply.ok()) co_return reply.error();
    if (reply->type != resp::Type::kBulk) co_return std::optional<PasteMeta>();
    // A value this build cannot read is a miss: the primary has the row.
    co_return DecodeMeta(id, reply->str);
  }

  awaitable<Status> PutMeta(PasteMeta meta, std::chrono::seconds ttl, Deadline deadline) override {
    auto running = Call({"SET", MetaKey(meta.id), EncodeMeta(meta), "EX",
                         std::to_string(std::max<int64_t>(1, ttl.count())), "NX"},
                        deadline, "meta_put");
    Result<resp::Value> reply = co_await std::move(running);
    if (!reply.ok()) co_return reply.error();
    co_return Ok();
  }

  awaitable<Status> Invalidate(PasteMeta row, std::chrono::seconds ttl,
                               Deadline deadline) override {
    auto running = Eval(invalidate_script_, {MetaKey(row.id)},
                        {EncodeMeta(row), std::to_string(std::max<int64_t>(1, ttl.count())),
                         channel_, row.id.str()},
                        deadline, "invalidate");
    Result<resp::Value> reply = co_await std::move(running);
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
    Call_(const Clock& clock, asio::io_context& io, asio_glue::Completion<Result<resp::Value>> c,
          Histogram& h, TimePoint start)
        : timer(clock, io.get_executor()), done(std::move(c)), latency(h), started(start) {}
    // On the injected clock, so a ManualClock drives the cache_timeout in tests.
    asio_glue::Timer timer;
    asio_glue::Completion<Result<resp::Value>> done;
    Histogram& latency;
    TimePoint started;
    bool answered = false;

    void Answer(Result<resp::Value> r, const Clock& clock) {
      if (answered) return;
      answered = true;
      timer.Cancel();
      latency.Observe(std::chrono::duration<double>(clock.Now() - started).count());
      done(std::move(r));
    }
  };

  std::string MetaKey(const PasteId& id) const { return options_.key_prefix + "m:" + id.str(); }

  // Not a coroutine: returns the awaitable of the command's completion (see RunBlocking for why
  // the lambda must not be a temporary inside a co_await).
  awaitable<Result<resp::Value>> Call(std::vector<std::string> args, Deadline deadline,
                                      const char* op) {
    return asio_glue::AwaitCompletion<Result<resp::Value>>(
        [this, args = std::move(args), deadline,
         op](asio_glue::Completion<Result<resp::Value>> done) mutable {
          asio::post(
              io_, [this, args = std::move(args), deadline, op, done = std::move(done)]() mutable {
                Start(std::move(args), deadline, op, std::move(done));
              });
        });
  }

  void Start(std::vector<std::string> args, Deadline deadline, const char* op,
             asio_glue::Completion<Result<resp::Value>> done) {
    const Labels labels = {{"dependency", "redis"}, {"op", op}};
    auto call = std::make_shared<Call_>(
        clock_, io_, std::move(done),
        metrics_.GetHistogram("sluice_dependency_duration_seconds", "Store call latency", labels),
        clock_.Now());
    if (!commands_->up()) {
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
    const uint64_t connection = commands_->Send(args, [this, call](Result<resp::Value> r) {
      --in_flight_;
      if (!r.ok()) {
        call->Answer(r.error(), clock_);
      } else if (r->IsError() && r->str.substr(0, 8) != "NOSCRIPT") {
        call->Answer(Unavailable(r->str), clock_);
      } else {
        call->Answer(std::move(r), clock_);
      }
    });
    if (connection == 0) {
      call->Answer(Unavailable("not connected"), clock_);
      return;
    }
    ++in_flight_;
    if (!deadline.IsNever()) {
      call->timer.AsyncWaitUntil(deadline.at(), [this, call, op, connection](bool reached) {
        if (!reached || call->answered) return;
        metrics_
            .GetCounter("sluice_dependency_timeouts_total",
                        "Store calls abandoned at their timeout (never retried)",
                        {{"dependency", "redis"}, {"op", op}})
            .Inc();
        call->Answer(
            MakeError(ErrorCode::kDeadlineExceeded, "redis: past its budget", "cache_timeout"),
            clock_);
        // Its reply may still come, and the next caller's would follow it: the connection can no
        // longer be trusted to pair replies with calls, so it is remade.
        commands_->Abandon(connection, "a call timed out");
      });
    }
  }

  // EVALSHA first (the script body travels once per connection), EVAL when the server says it has
  // not seen the script (restarted, flushed, or a new connection to another server).
  awaitable<Result<resp::Value>> Eval(const Script& script, std::vector<std::string> keys,
                                      std::vector<std::string> args, Deadline deadline,
                                      const char* op) {
    std::vector<std::string> cmd = {"EVALSHA", script.sha, std::to_string(keys.size())};
    for (auto& k : keys) cmd.push_back(std::move(k));
    for (auto& a : args) cmd.push_back(std::move(a));
    auto first = Call(cmd, deadline, op);
    Result<resp::Value> reply = co_await std::move(first);
    if (reply.ok() && reply->IsError()) {
      cmd[0] = "EVAL";
      cmd[1] = script.text;
      auto second = Call(std::move(cmd), deadline, op);
      reply = co_await std::move(second);
      if (reply.ok() && reply->IsError()) co_return Unavailable(reply->str);
    }
    co_return reply;
  }

  awaitable<Result<resp::Value>> EvalBuckets(const char* mode, std::vector<BucketTake> takes,
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

  // The bucket script in `mode` ("take" or "peek"), its reply read by `parse` (which knows how
  // many buckets were asked). A reply of any other shape is no answer, never a number.
  template <typename Parsed>
  awaitable<Result<Parsed>> EvalBucketsParsed(const char* mode, std::vector<BucketTake> buckets,
                                              Deadline deadline,
                                              std::optional<Parsed> (*parse)(const resp::Value&,
                                                                             size_t)) {
    const size_t n = buckets.size();
    auto running = EvalBuckets(mode, std::move(buckets), deadline, mode);
    Result<resp::Value> reply = co_await std::move(running);
    if (!reply.ok()) co_return reply.error();
    std::optional<Parsed> parsed = parse(*reply, n);
    if (!parsed) {
      bad_script_replies_.Inc();
      WarnBadScriptReply(*reply);
      co_return Unavailable(
          fmt::format("the limiter script answered a {} with a reply of the wrong shape", mode));
    }
    co_return std::move(*parsed);
  }

  void WarnBadScriptReply(const resp::Value& reply) {
    // At most one line a second: a broken server answers every decision this way.
    const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    int64_t last = last_bad_reply_log_.load();
    if (now - last < std::chrono::nanoseconds(std::chrono::seconds(1)).count() ||
        !last_bad_reply_log_.compare_exchange_strong(last, now)) {
      return;
    }
    spdlog::warn("redis: the limiter script answered with {}, not a decision; failing open",
                 Describe(reply));
  }

  void OnMessage(const std::string& payload) {
    const auto id = PasteId::Parse(payload);
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
  Counter& bad_script_replies_;
  std::atomic<int64_t> last_bad_reply_log_{0};
  std::shared_ptr<RedisClient> commands_;
  std::shared_ptr<RedisClient> subscriber_;
  std::vector<std::shared_ptr<RedisClient>> watchers_;  // under Sentinel: +switch-master
  std::atomic<bool> connected_{false};
  static constexpr int kMaxInFlight = 4096;
  int in_flight_ = 0;  // io thread only
  std::mutex subscribers_mu_;
  std::vector<std::function<void(const PasteId&)>> subscribers_;
  std::thread thread_;
  GaugeCallbacks gauges_;  // last: its callback reads connected_
};

}  // namespace

}  // namespace sluice::store

namespace sluice::store {

std::unique_ptr<SharedState> MakeRedisSharedState(RedisOptions options, const Clock& clock,
                                                  MetricsRegistry& metrics) {
  return std::make_unique<store::RedisSharedState>(std::move(options), clock, metrics);
}

}  // namespace sluice::store
