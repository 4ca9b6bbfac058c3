// The RESP client (src/store/redis/redis_client.h) against an in-process server that speaks RESP
// and misbehaves on request, so it runs in unit_tests and under the sanitizers. The real
// redis-server is in tests/backend/redis_shared_state_test.cc.
#include "../../../../src/store/redis/redis_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <future>
#include <mutex>
#include <random>
#include <thread>

namespace sluice::store {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// Answers ECHO, GET k ("value-of-k"), ARR n (n bulks "0".."n-1"), PING, SUBSCRIBE; and on the
// commands below, misbehaves: DUP (its reply twice), DROP (no reply), UNASKED (+OK, then the
// reply), STALL (nothing ever again on this connection), GARBAGE (bytes that are not RESP),
// PUBLISH x (pushes x verbatim to every subscriber).
class FakeRedis {
 public:
  FakeRedis() : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    asio::co_spawn(io_, Accept(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~FakeRedis() {
    io_.stop();
    thread_.join();
  }
  int port() const { return acceptor_.local_endpoint().port(); }
  int connections() const { return connections_.load(); }
  void Publish(std::string raw) {
    asio::post(io_, [this, raw = std::move(raw)] {
      for (auto& s : subscribers_) {
        auto copy = std::make_shared<std::string>(raw);
        asio::async_write(*s, asio::buffer(*copy), [copy](auto, auto) {});
      }
    });
  }

 private:
  asio::awaitable<void> Accept() {
    for (;;) {
      auto socket =
          std::make_shared<tcp::socket>(co_await acceptor_.async_accept(asio::use_awaitable));
      ++connections_;
      sockets_.push_back(socket);
      asio::co_spawn(io_, Session(socket), asio::detached);
    }
  }

  static std::string Bulk(const std::string& s) {
    return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
  }

  asio::awaitable<void> Session(std::shared_ptr<tcp::socket> socket) {
    resp::Parser parser;
    std::array<char, 4096> buf;
    bool stalled = false;
    for (;;) {
      const size_t n = co_await socket->async_read_some(asio::buffer(buf), asio::use_awaitable);
      parser.Feed(std::string_view(buf.data(), n));
      resp::Value cmd;
      std::string out;
      while (parser.Next(cmd) == resp::Parser::Status::kValue) {
        if (stalled) continue;
        const auto& a = cmd.elements;
        const std::string& name = a.at(0).str;
        if (name == "ECHO") {
          out += Bulk(a.at(1).str);
        } else if (name == "GET") {
          out += Bulk("value-of-" + a.at(1).str);
        } else if (name == "ARR") {
          const int count = std::stoi(a.at(1).str);
          out += "*" + std::to_string(count) + "\r\n";
          for (int i = 0; i < count; ++i) out += Bulk(std::to_string(i));
        } else if (name == "PING") {
          out += "+PONG\r\n";
        } else if (name == "SUBSCRIBE") {
          subscribers_.push_back(socket);
          out += "*3\r\n" + Bulk("subscribe") + Bulk(a.at(1).str) + ":1\r\n";
        } else if (name == "DUP") {
          out += "+DUP\r\n+DUP\r\n";
        } else if (name == "DROP") {
        } else if (name == "UNASKED") {
          out += "+OK\r\n+UNASKED\r\n";
        } else if (name == "STALL") {
          stalled = true;
        } else if (name == "GARBAGE") {
          out += "!!!\r\n";
        } else {
          out += "-ERR unknown command\r\n";
        }
      }
      if (!out.empty()) co_await asio::async_write(*socket, asio::buffer(out), asio::use_awaitable);
    }
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::vector<std::shared_ptr<tcp::socket>> sockets_;
  std::vector<std::shared_ptr<tcp::socket>> subscribers_;
  std::atomic<int> connections_{0};
  std::thread thread_;
};

// A client on its own io thread, called from the test's threads.
class ClientHarness {
 public:
  ClientHarness(int port, RedisClient::Hooks hooks = {}) {
    store::RedisOptions o;
    o.port = port;
    o.reconnect_min = std::chrono::milliseconds(10);
    o.reconnect_max = std::chrono::milliseconds(50);
    channel_mode_ = !hooks.channel.empty();
    client_ = RedisClient::Make(io_, o, name(), MakeRedisTlsContext(o), metrics_, std::move(hooks));
    asio::post(io_, [this] { client_->Start(); });
    thread_ = std::thread([this] { io_.run(); });
  }
  ~ClientHarness() {
    asio::post(io_, [this] { client_->Stop(); });
    work_.reset();
    thread_.join();
  }

  bool WaitUp() {
    for (int i = 0; i < 1000; ++i) {
      std::promise<bool> up;
      asio::post(io_, [&] { up.set_value(client_->up()); });
      if (up.get_future().get()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  // Sends every command pipelined, then waits for all the answers.
  std::vector<Result<resp::Value>> CallAll(std::vector<std::vector<std::string>> commands) {
    std::vector<std::promise<Result<resp::Value>>> promises(commands.size());
    std::vector<std::future<Result<resp::Value>>> futures;
    for (auto& p : promises) futures.push_back(p.get_future());
    // Nothing captured by reference may be touched after the last promise is kept: the caller
    // returns (and frees them) as soon as it is.
    asio::post(io_, [this, commands = &commands, p = promises.data(), n = commands.size()] {
      for (size_t i = 0; i < n; ++i) {
        auto* promise = p + i;
        if (client_->Send((*commands)[i], [promise](Result<resp::Value> r) {
              promise->set_value(std::move(r));
            }) == 0) {
          promise->set_value(MakeError(ErrorCode::kUnavailable, "not up"));
        }
      }
    });
    std::vector<Result<resp::Value>> out;
    for (auto& f : futures) out.push_back(f.get());
    return out;
  }
  Result<resp::Value> Call(std::vector<std::string> command) {
    return std::move(CallAll({std::move(command)})[0]);
  }

  uint64_t protocol_errors() {
    return metrics_.GetCounter("sluice_redis_protocol_errors_total", "", {{"connection", name()}})
        .value();
  }
  std::string name() const { return channel_mode_ ? "invalidations" : "commands"; }

  asio::io_context& io() { return io_; }
  std::shared_ptr<RedisClient>& client() { return client_; }
  bool channel_mode_ = false;

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{asio::make_work_guard(io_)};
  MetricsRegistry metrics_;
  std::shared_ptr<RedisClient> client_;
  std::thread thread_;
};

TEST(RedisClientTest, RepliesComeBackInOrderToTheirCallers) {
  FakeRedis server;
  ClientHarness h(server.port());
  ASSERT_TRUE(h.WaitUp());
  auto r = h.CallAll({{"GET", "a"}, {"ARR", "3"}, {"PING"}, {"NOPE"}, {"ECHO", ""}});
  ASSERT_TRUE(r[0].ok());
  EXPECT_EQ(r[0]->str, "value-of-a");
  ASSERT_TRUE(r[1].ok());
  ASSERT_EQ(r[1]->elements.size(), 3u);
  EXPECT_EQ(r[1]->elements[2].str, "2");
  EXPECT_EQ(r[2]->str, "PONG");
  ASSERT_TRUE(r[3].ok());  // a Redis error is an answer
  EXPECT_TRUE(r[3]->IsError());
  EXPECT_EQ(r[4]->str, "");
  EXPECT_EQ(h.protocol_errors(), 0u);
}

// Each misbehaviour fails the calls waiting on the connection, counts a protocol error, and the
// client is back on a new connection without anyone restarting it.
class MisbehavingServerTest : public ::testing::TestWithParam<const char*> {};

TEST_P(MisbehavingServerTest, FailsTheWaitingCallsAndRecovers) {
  FakeRedis server;
  ClientHarness h(server.port());
  ASSERT_TRUE(h.WaitUp());
  auto r = h.CallAll({{"GET", "before"}, {GetParam()}, {"GET", "after"}});
  ASSERT_TRUE(r[0].ok());
  EXPECT_EQ(r[0]->str, "value-of-before");
  EXPECT_FALSE(r[1].ok());
  EXPECT_FALSE(r[2].ok()) << "a reply reached a caller it was not meant for";
  EXPECT_EQ(h.protocol_errors(), 1u);
  ASSERT_TRUE(h.WaitUp());
  auto again = h.Call({"GET", "again"});
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->str, "value-of-again");
  EXPECT_EQ(server.connections(), 2);
}

INSTANTIATE_TEST_SUITE_P(Redis, MisbehavingServerTest,
                         ::testing::Values("DUP", "DROP", "UNASKED", "GARBAGE"));

TEST(RedisClientTest, AMissingReplyIsCaughtByTheTagThatFollowsIt) {
  FakeRedis server;
  ClientHarness h(server.port());
  ASSERT_TRUE(h.WaitUp());
  // Nothing is sent after it: without the tag this call would wait for its reply for ever.
  auto r = h.Call({"DROP"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(h.protocol_errors(), 1u);
}

TEST(RedisClientTest, AnAbandonedConnectionFailsItsCallsAndIsRemade) {
  FakeRedis server;
  ClientHarness h(server.port());
  ASSERT_TRUE(h.WaitUp());
  std::promise<Result<resp::Value>> stalled;
  std::promise<uint64_t> generation;
  asio::post(h.io(), [&] {
    generation.set_value(h.client()->Send(
        {"STALL"}, [&](Result<resp::Value> r) { stalled.set_value(std::move(r)); }));
  });
  const uint64_t g = generation.get_future().get();
  ASSERT_NE(g, 0u);
  asio::post(h.io(), [&] { h.client()->Abandon(g, "test gave up"); });
  EXPECT_FALSE(stalled.get_future().get().ok());
  ASSERT_TRUE(h.WaitUp());
  // A stale generation does not close the new connection.
  asio::post(h.io(), [&] { h.client()->Abandon(g, "too late"); });
  auto r = h.Call({"GET", "x"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->str, "value-of-x");
  EXPECT_EQ(server.connections(), 2);
}

TEST(RedisClientTest, NoServerIsUnavailableAtOnce) {
  int port;
  {
    FakeRedis gone;
    port = gone.port();
  }
  ClientHarness h(port);
  auto r = h.Call({"PING"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
}

class Subscriber {
 public:
  explicit Subscriber(int port) {
    RedisClient::Hooks hooks;
    hooks.channel = "sluice:invalidate";
    hooks.on_message = [this](const std::string& m) {
      std::lock_guard lock(mu_);
      messages_.push_back(m);
    };
    harness_ = std::make_unique<ClientHarness>(port, std::move(hooks));
  }
  std::vector<std::string> messages() {
    std::lock_guard lock(mu_);
    return messages_;
  }
  ClientHarness& h() { return *harness_; }

 private:
  std::mutex mu_;
  std::vector<std::string> messages_;
  std::unique_ptr<ClientHarness> harness_;
};

std::string Message(const std::string& payload) {
  return "*3\r\n$7\r\nmessage\r\n$17\r\nsluice:invalidate\r\n$" + std::to_string(payload.size()) +
         "\r\n" + payload + "\r\n";
}

bool WaitFor(const std::function<bool()>& done) {
  for (int i = 0; i < 1000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

class HostilePushTest : public ::testing::TestWithParam<const char*> {};

TEST_P(HostilePushTest, IsAProtocolErrorAndTheSubscriptionComesBack) {
  FakeRedis server;
  Subscriber sub(server.port());
  ASSERT_TRUE(sub.h().WaitUp());
  server.Publish(Message("first"));
  ASSERT_TRUE(WaitFor([&] { return sub.messages().size() == 1; }));
  server.Publish(GetParam());
  ASSERT_TRUE(WaitFor([&] { return sub.h().protocol_errors() == 1; }));
  ASSERT_TRUE(WaitFor([&] { return server.connections() == 2; }));
  ASSERT_TRUE(sub.h().WaitUp());
  server.Publish(Message("second"));
  ASSERT_TRUE(WaitFor([&] { return sub.messages().size() == 2; }));
  EXPECT_EQ(sub.messages()[1], "second");
}

INSTANTIATE_TEST_SUITE_P(
    Redis, HostilePushTest,
    ::testing::Values("*3\r\n:1\r\n:2\r\n:3\r\n", "*1\r\n$7\r\nmessage\r\n",
                      "*3\r\n$7\r\nmessage\r\n:17\r\n$5\r\nhello\r\n",
                      "*2\r\n$11\r\nunsubscribe\r\n$17\r\nsluice:invalidate\r\n",
                      "*3\r\n$7\r\nmessage\r\n$5\r\nother\r\n$5\r\nhello\r\n", "+OK\r\n",
                      "*3\r\n$7\r\nmessage\r\n$17\r\nsluice:invalidate\r\n*0\r\n", "\x01\r\n"));

// Many threads, each with many calls in flight, of shapes large and small, every reply checked
// against its own command; midway, misbehaviours drop the connection under everyone's feet.
TEST(RedisClientStressTest, ConcurrentCallsOfManyShapesEachGetTheirOwnReply) {
  FakeRedis server;
  ClientHarness h(server.port());
  ASSERT_TRUE(h.WaitUp());
  constexpr int kThreads = 8;
  constexpr int kRounds = 40;
  std::atomic<int> wrong{0}, answered{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::minstd_rand rng(static_cast<unsigned>(t));
      for (int round = 0; round < kRounds; ++round) {
        std::vector<std::vector<std::string>> cmds;
        std::vector<std::string> expected;
        const int n = 1 + static_cast<int>(rng() % 30);
        for (int i = 0; i < n; ++i) {
          const std::string key =
              std::to_string(t) + "-" + std::to_string(round) + "-" + std::to_string(i);
          switch (rng() % 4) {
            case 0:
              cmds.push_back({"GET", key});
              expected.push_back("value-of-" + key);
              break;
            case 1: {
              // Up to 40 KB: replies split over many reads.
              std::string big(rng() % 40000, static_cast<char>('a' + t));
              big += key;
              cmds.push_back({"ECHO", big});
              expected.push_back(big);
              break;
            }
            case 2: {
              const int count = static_cast<int>(rng() % 50);
              cmds.push_back({"ARR", std::to_string(count)});
              expected.push_back("#" + std::to_string(count));
              break;
            }
            default:
              cmds.push_back({"PING"});
              expected.push_back("PONG");
          }
        }
        if (t == 0 && round % 10 == 5) {
          cmds.push_back({"DUP"});
          expected.push_back("!");
        }
        auto replies = h.CallAll(cmds);
        for (size_t i = 0; i < replies.size(); ++i) {
          if (!replies[i].ok()) {
            ++failed;
            continue;
          }
          ++answered;
          const resp::Value& v = *replies[i];
          const std::string& want = expected[i];
          const bool right = want[0] == '#' ? v.type == resp::Type::kArray &&
                                                  v.elements.size() ==
                                                      static_cast<size_t>(std::stoi(want.substr(1)))
                                            : v.IsString() && v.str == want;
          if (!right) ++wrong;
        }
        if (round % 10 == 6) h.WaitUp();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(answered.load(), failed.load());
  EXPECT_EQ(h.protocol_errors(), 4u);  // one per DUP
}

}  // namespace
}  // namespace sluice::store
