// The SharedState contract and the Redis-only behaviours against a real redis-server, started by
// the CTest fixture (scripts/testenv/redis.sh) in $SLUICE_TEST_REDIS_DIR, which holds its port;
// when that directory also holds a URL (redis.sh start-tls), the server speaks only TLS and lets in
// only an ACL user with a password, and every test goes through both.
// Without that server these tests fail: a backend that was never exercised is not done.
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cstdlib>
#include <fstream>
#include <future>
#include <sstream>

#include "../../src/store/redis/redis_client.h"
#include "../contract/shared_state_contract.h"

namespace sluice::testing {
namespace {

std::string FixtureFile(const std::string& name) {
  const char* dir = std::getenv("SLUICE_TEST_REDIS_DIR");
  if (dir == nullptr) return {};
  std::ifstream file(std::string(dir) + "/" + name);
  std::stringstream text;
  text << file.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

int RedisPort() { return std::atoi(FixtureFile("port").c_str()); }
bool OverTls() { return !FixtureFile("url").empty(); }

// How the fixture's server is reached: plain, or TLS with its CA and the ACL user.
store::RedisOptions ServerOptions() {
  store::RedisOptions o;
  if (OverTls()) {
    auto parsed = store::ParseRedisUrl(FixtureFile("url"));
    EXPECT_TRUE(parsed.ok());
    if (parsed.ok()) o = *parsed;
    o.ca_file = std::string(std::getenv("SLUICE_TEST_REDIS_DIR")) + "/ca.pem";
  }
  o.port = RedisPort();
  return o;
}

// Each store gets keys and a channel of its own, so tests neither see each other nor a
// previous run.
store::RedisOptions TestOptions(int port) {
  static std::atomic<int> counter{0};
  store::RedisOptions o = ServerOptions();
  o.port = port;
  o.key_prefix =
      "sluice-test:" + std::to_string(::getpid()) + ":" + std::to_string(++counter) + ":";
  return o;
}

MetricsRegistry& Metrics() {
  static MetricsRegistry metrics;
  return metrics;
}

// The store connects in the background; a test starts once a call gets through.
bool WaitUntilAnswering(store::SharedState& state) {
  for (int i = 0; i < 200; ++i) {
    auto r = RunSync(state.GetMeta(
        *store::PasteId::Parse("warmup000000"),
        admission::Deadline::After(SystemClock::Instance(), std::chrono::seconds(1))));
    if (r.ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

std::unique_ptr<store::SharedState> ConnectedRedis() {
  const int port = RedisPort();
  EXPECT_NE(port, 0) << "no fixture redis (SLUICE_TEST_REDIS_DIR/port): run ctest -L backend";
  auto state = store::MakeRedisSharedState(TestOptions(port), SystemClock::Instance(), Metrics());
  EXPECT_TRUE(WaitUntilAnswering(*state)) << "no redis-server answers on port " << port;
  return state;
}

INSTANTIATE_TEST_SUITE_P(redis, SharedStateContract,
                         ::testing::Values(SharedStateFactory(ConnectedRedis)),
                         [](const auto&) { return std::string("store"); });

// A connection of the test's own (the same client, called synchronously) for looking behind the
// store's back.
class RawRedis {
 public:
  explicit RawRedis(store::RedisOptions options = ServerOptions()) {
    options.reconnect_min = std::chrono::milliseconds(10);
    client_ = store::RedisClient::Make(io_, options, "test", store::MakeRedisTlsContext(options),
                                       metrics_, {});
    boost::asio::post(io_, [this] { client_->Start(); });
    thread_ = std::thread([this] { io_.run(); });
  }
  ~RawRedis() {
    boost::asio::post(io_, [this] { client_->Stop(); });
    work_.reset();
    thread_.join();
  }
  bool WaitUp() {
    for (int i = 0; i < 200; ++i) {
      std::promise<bool> up;
      boost::asio::post(io_, [&] { up.set_value(client_->up()); });
      if (up.get_future().get()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  Result<store::resp::Value> Call(const std::vector<std::string>& args) {
    WaitUp();
    std::promise<Result<store::resp::Value>> done;
    boost::asio::post(io_, [&] {
      if (client_->Send(args,
                        [&](Result<store::resp::Value> r) { done.set_value(std::move(r)); }) == 0) {
        done.set_value(MakeError(ErrorCode::kUnavailable, "not connected"));
      }
    });
    return done.get_future().get();
  }
  long long Integer(const std::vector<std::string>& args) {
    auto r = Call(args);
    return r.ok() && r->type == store::resp::Type::kInteger ? r->integer : -1000;
  }
  void Run(const std::vector<std::string>& args) { (void)Call(args); }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{
      boost::asio::make_work_guard(io_)};
  MetricsRegistry metrics_;
  std::shared_ptr<store::RedisClient> client_;
  std::thread thread_;
};

admission::Deadline Soon() {
  return admission::Deadline::After(SystemClock::Instance(), std::chrono::seconds(5));
}

TEST(RedisSharedStateTest, ScriptFlushedOnTheServerIsSentAgain) {
  const store::RedisOptions options = TestOptions(RedisPort());
  auto state = store::MakeRedisSharedState(options, SystemClock::Instance(), Metrics());
  ASSERT_TRUE(WaitUntilAnswering(*state));
  const admission::TokenBucketPolicy slow{0.0001, 3};
  ASSERT_TRUE(RunSync(state->TakeAll({{"k", slow, 1}}, Soon()))->allowed);
  RawRedis().Run({"SCRIPT", "FLUSH"});
  auto after = RunSync(state->TakeAll({{"k", slow, 1}}, Soon()));
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_TRUE(after->allowed);
  EXPECT_FALSE(RunSync(state->TakeAll({{"k", slow, 2}}, Soon()))->allowed);  // one left
}

TEST(RedisSharedStateTest, BucketKeysExpireWhenTheyWouldBeFullAgain) {
  const store::RedisOptions options = TestOptions(RedisPort());
  auto state = store::MakeRedisSharedState(options, SystemClock::Instance(), Metrics());
  ASSERT_TRUE(WaitUntilAnswering(*state));
  ASSERT_TRUE(RunSync(state->TakeAll({{"ttl", {10, 20}, 5}}, Soon()))->allowed);
  // 5 tokens at 10/s refill in 0.5 s; the key lives that long plus a second of margin.
  const long long pttl = RawRedis().Integer({"PTTL", options.key_prefix + "b:ttl"});
  EXPECT_GT(pttl, 0);
  EXPECT_LE(pttl, 1500);
}

TEST(RedisSharedStateTest, ServerAbsentIsUnavailableNotAHang) {
  store::RedisOptions options = TestOptions(1);  // nothing listens on port 1
  auto state = store::MakeRedisSharedState(options, SystemClock::Instance(), Metrics());
  auto r = RunSync(state->TakeAll({{"x", {1, 1}, 1}}, Soon()));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  auto meta = RunSync(state->GetMeta(*store::PasteId::Parse("abcdefabcdef"), Soon()));
  ASSERT_FALSE(meta.ok());
}

TEST(RedisSharedStateTest, TwoClientsShareOneBudget) {
  const store::RedisOptions options = TestOptions(RedisPort());
  auto one = store::MakeRedisSharedState(options, SystemClock::Instance(), Metrics());
  auto two = store::MakeRedisSharedState(options, SystemClock::Instance(), Metrics());
  ASSERT_TRUE(WaitUntilAnswering(*one));
  ASSERT_TRUE(WaitUntilAnswering(*two));
  const admission::TokenBucketPolicy slow{0.0001, 4};
  int allowed = 0;
  for (int i = 0; i < 8; ++i) {
    auto r = RunSync((i % 2 ? one : two)->TakeAll({{"shared", slow, 1}}, Soon()));
    ASSERT_TRUE(r.ok()) << r.error().message;
    allowed += r->allowed ? 1 : 0;
  }
  EXPECT_EQ(allowed, 4);
}

// Many callers on one store at once, calls of every shape interleaved on its one connection: each
// answer must be the answer to its own call.
TEST(RedisSharedStateTest, ConcurrentCallsOfEveryShapeGetTheirOwnAnswers) {
  const store::RedisOptions options = TestOptions(RedisPort());
  auto state = store::MakeRedisSharedState(options, SystemClock::Instance(), Metrics());
  ASSERT_TRUE(WaitUntilAnswering(*state));
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 60; ++i) {
        const std::string n = std::to_string(t * 1000 + i);
        const auto id = *store::PasteId::Parse(("p" + std::string(11 - n.size(), '0') + n));
        store::PasteMeta meta{id, 1000 + t, 2000 + i, static_cast<uint64_t>(t * 1000 + i),
                              {}, false,    {}};
        if (!RunSync(state->PutMeta(meta, std::chrono::seconds(60), Soon())).ok()) ++wrong;
        auto got = RunSync(state->GetMeta(id, Soon()));
        if (!got.ok() || !got->has_value() || (*got)->size_bytes != meta.size_bytes ||
            (*got)->created_at != meta.created_at) {
          ++wrong;
        }
        // Bucket t holds 30 tokens and nobody else takes from it: the 31st take is refused.
        auto take = RunSync(state->TakeAll({{"c" + std::to_string(t), {0.0001, 30}, 1}}, Soon()));
        if (!take.ok() || take->allowed != (i < 30)) ++wrong;
        if (i % 10 == 0) {
          store::PasteMeta tombstone = meta;
          tombstone.deleted = true;
          if (!RunSync(state->Invalidate(tombstone, std::chrono::seconds(60), Soon())).ok()) {
            ++wrong;
          }
          auto gone = RunSync(state->GetMeta(id, Soon()));
          if (!gone.ok() || !gone->has_value() || !(*gone)->deleted) ++wrong;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(RedisSharedStateTest, AWrongPasswordIsUnavailableAndNeverLogged) {
  if (!OverTls()) GTEST_SKIP() << "the plain fixture has no password (see backend.redis_tls)";
  store::RedisOptions options = TestOptions(RedisPort());
  options.password = "not-the-password-4711";
  auto state = store::MakeRedisSharedState(options, SystemClock::Instance(), Metrics());
  for (int i = 0; i < 20; ++i) {
    auto r = RunSync(state->TakeAll({{"x", {1, 1}, 1}}, Soon()));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
    EXPECT_EQ(r.error().message.find("4711"), std::string::npos);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(store::RedactedRedisUrl(options).find("4711"), std::string::npos);
}

TEST(RedisSharedStateTest, ACertificateFromAnotherCaIsRefused) {
  if (!OverTls()) GTEST_SKIP() << "the plain fixture has no TLS (see backend.redis_tls)";
  store::RedisOptions options = ServerOptions();
  options.ca_file = std::string(std::getenv("SLUICE_TEST_REDIS_DIR")) + "/other-ca.pem";
  RawRedis other(options);
  EXPECT_FALSE(other.WaitUp());
  RawRedis right;
  EXPECT_TRUE(right.WaitUp());
  EXPECT_EQ(right.Integer({"EXISTS", "nothing-here"}), 0);
}

TEST(RedisSharedStateTest, TheCertificateMustNameTheHost) {
  if (!OverTls()) GTEST_SKIP() << "the plain fixture has no TLS (see backend.redis_tls)";
  // The certificate names localhost only (scripts/testenv/redis.sh): the same server reached as
  // 127.0.0.1 is refused.
  store::RedisOptions options = ServerOptions();
  ASSERT_EQ(options.host, "localhost");
  options.host = "127.0.0.1";
  RawRedis wrong_name(options);
  EXPECT_FALSE(wrong_name.WaitUp());
  options.host = "localhost";
  RawRedis by_name(options);
  EXPECT_TRUE(by_name.WaitUp());
}

TEST(RedisSharedStateTest, PlainTextToATlsPortNeverConnects) {
  if (!OverTls()) GTEST_SKIP() << "the plain fixture has no TLS (see backend.redis_tls)";
  store::RedisOptions options = ServerOptions();
  options.tls = false;
  RawRedis plain(options);
  EXPECT_FALSE(plain.WaitUp());
}

}  // namespace
}  // namespace sluice::testing
