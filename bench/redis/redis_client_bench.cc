// Limiter-decision latency through the two Redis clients sluice has had: the hiredis adapter
// (src/state/redis/redis_connection.cc, removed after this comparison) and the RESP client over
// Asio (src/state/redis/redis_client.cc). One decision is what TakeAll sends: EVALSHA of the bucket
// script over two buckets, from a caller thread to the client's io thread and back. Both clients
// run in one process against one redis-server, in alternating rounds, so drift in the machine's
// load falls on both. Run by bench/run_redis_client_bench.sh.
//
// Usage: redis_client_bench PORT [DECISIONS_PER_CLIENT]
#include <fmt/format.h>
#include <openssl/sha.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>
#include <vector>

#include "../../src/state/redis/redis_client.h"
#include "../../src/state/redis/redis_connection.h"
#include "../../src/state/redis/scripts.h"

namespace {

namespace asio = boost::asio;
using sluice::state::RedisClient;
using sluice::state::RedisConnection;
using Clock = std::chrono::steady_clock;

std::string Sha1Hex(const char* text) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(text), std::strlen(text), digest);
  std::string out;
  for (unsigned char c : digest) out += fmt::format("{:02x}", c);
  return out;
}

// One decision's command: two buckets that never run dry, as an always-admitted create does.
std::vector<std::string> Decision(const std::string& sha, int caller, int i) {
  return {"EVALSHA",
          sha,
          "2",
          fmt::format("bench:b:ipc:10.0.{}.{}", caller, i % 200),
          "bench:b:global",
          "take",
          "1000000000",
          "1000000000",
          "1",
          "1000000000",
          "1000000000",
          "1"};
}

struct Clients {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{asio::make_work_guard(io)};
  sluice::MetricsRegistry metrics;
  std::unique_ptr<RedisConnection> hiredis;
  std::shared_ptr<RedisClient> sluice_client;
  std::thread thread;

  explicit Clients(int port) {
    sluice::store::RedisOptions o;
    o.port = port;
    asio::post(io, [this, o] {
      hiredis = std::make_unique<RedisConnection>(io, o, "hiredis");
      hiredis->Start();
      sluice_client =
          RedisClient::Make(io, o, "sluice", sluice::state::MakeRedisTlsContext(o), metrics, {});
      sluice_client->Start();
    });
    thread = std::thread([this] { io.run(); });
  }
  ~Clients() {
    asio::post(io, [this] {
      hiredis.reset();
      sluice_client->Stop();
    });
    work.reset();
    thread.join();
  }

  // Sends one command through client `which` (0: hiredis, 1: sluice) and waits for its reply;
  // false when it failed.
  bool Call(int which, std::vector<std::string> args) {
    std::promise<bool> done;
    asio::post(io, [&] {
      if (which == 0) {
        if (!hiredis->Send(args, [&](const redisReply* r) {
              done.set_value(r != nullptr && r->type != REDIS_REPLY_ERROR);
            })) {
          done.set_value(false);
        }
      } else if (sluice_client->Send(args, [&](sluice::Result<sluice::state::resp::Value> r) {
                   done.set_value(r.ok() && !r->IsError());
                 }) == 0) {
        done.set_value(false);
      }
    });
    return done.get_future().get();
  }

  bool Up() {
    std::promise<bool> up;
    asio::post(io, [&] { up.set_value(hiredis->connected() && sluice_client->up()); });
    return up.get_future().get();
  }
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PORT [DECISIONS_PER_CLIENT]\n", argv[0]);
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const int decisions = argc > 2 ? std::atoi(argv[2]) : 20000;
  Clients clients(port);
  for (int i = 0; i < 400 && !clients.Up(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!clients.Up()) {
    std::fprintf(stderr, "no redis-server on port %d\n", port);
    return 1;
  }
  const std::string sha = Sha1Hex(sluice::state::kBucketScript);
  for (int which = 0; which < 2; ++which) {
    clients.Call(which, {"SCRIPT", "LOAD", sluice::state::kBucketScript});
  }
  const char* names[2] = {"hiredis 0.14 (adapter)", "sluice RESP client"};
  std::printf("%-24s %8s %10s %10s %10s %10s %8s\n", "client", "callers", "decisions", "p50 us",
              "p99 us", "mean us", "failed");
  for (int callers : {1, 8}) {
    std::vector<double> latencies[2];
    int failed[2] = {0, 0};
    constexpr int kRounds = 10;
    for (int round = 0; round < kRounds; ++round) {
      for (int k = 0; k < 2; ++k) {
        const int which = (round + k) % 2;  // alternate which goes first
        std::vector<std::thread> threads;
        std::vector<std::vector<double>> mine(static_cast<size_t>(callers));
        std::vector<int> fails(static_cast<size_t>(callers), 0);
        for (int c = 0; c < callers; ++c) {
          threads.emplace_back([&, c] {
            const int n = decisions / kRounds / callers;
            for (int i = 0; i < n; ++i) {
              const auto start = Clock::now();
              const bool ok = clients.Call(which, Decision(sha, c, i));
              const auto us = std::chrono::duration<double, std::micro>(Clock::now() - start);
              if (ok) {
                mine[static_cast<size_t>(c)].push_back(us.count());
              } else {
                ++fails[static_cast<size_t>(c)];
              }
            }
          });
        }
        for (auto& t : threads) t.join();
        for (int c = 0; c < callers; ++c) {
          auto& m = mine[static_cast<size_t>(c)];
          latencies[which].insert(latencies[which].end(), m.begin(), m.end());
          failed[which] += fails[static_cast<size_t>(c)];
        }
      }
    }
    for (int which = 0; which < 2; ++which) {
      auto& v = latencies[which];
      double sum = 0;
      for (double x : v) sum += x;
      std::printf("%-24s %8d %10zu %10.1f %10.1f %10.1f %8d\n", names[which], callers, v.size(),
                  Percentile(v, 0.50), Percentile(v, 0.99), v.empty() ? 0 : sum / v.size(),
                  failed[which]);
    }
  }
  return 0;
}
