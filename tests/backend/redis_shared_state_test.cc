// The SharedState contract and the Redis-only behaviours against a real redis-server, started by
// the CTest fixture (scripts/testenv/redis.sh) in $SLUICE_TEST_REDIS_DIR, which holds its port.
// Without that server these tests fail: a backend that was never exercised is not done.
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "../contract/shared_state_contract.h"

namespace sluice::testing {
namespace {

int RedisPort() {
  const char* dir = std::getenv("SLUICE_TEST_REDIS_DIR");
  if (dir == nullptr) return 0;
  std::ifstream file(std::string(dir) + "/port");
  int port = 0;
  file >> port;
  return port;
}

// Each store gets keys and a channel of its own, so tests neither see each other nor a
// previous run.
store::RedisOptions TestOptions(int port) {
  static std::atomic<int> counter{0};
  store::RedisOptions o;
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

// A second, synchronous connection for looking behind the store's back.
class RawRedis {
 public:
  RawRedis() : c_(redisConnect("127.0.0.1", RedisPort())) {}
  ~RawRedis() {
    if (c_ != nullptr) redisFree(c_);
  }
  long long Integer(const std::vector<std::string>& args) {
    redisReply* r = Command(args);
    const long long v = r != nullptr ? r->integer : -1000;
    if (r != nullptr) freeReplyObject(r);
    return v;
  }
  void Run(const std::vector<std::string>& args) {
    if (redisReply* r = Command(args)) freeReplyObject(r);
  }

 private:
  redisReply* Command(const std::vector<std::string>& args) {
    if (c_ == nullptr || c_->err != 0) return nullptr;
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    return static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(args.size()), argv.data(), lens.data()));
  }
  redisContext* c_;
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

}  // namespace
}  // namespace sluice::testing
