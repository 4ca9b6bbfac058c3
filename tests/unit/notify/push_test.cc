// The push sinks against a real HTTP peer on loopback and a real shell (include/sluice/notify/
// push.h). Built in the sanitizer builds, where the many-publishers test is the stress test of
// the sinks' threads with libcurl under ASan and TSan. Nothing here asserts a time: every wait is
// for a condition, and a pacing test moves a ManualClock.
#include "sluice/notify/push.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace sluice::notify {
namespace {

using namespace std::chrono_literals;
using service::OperatorEvent;

OperatorEvent Event(std::string kind, int n = 0) {
  return {std::move(kind),
          "abcDEF123456",
          1'700'000'000 + n,
          "a report of abcDEF123456",
          {{"reason", "spam"}, {"n", std::to_string(n)}}};
}

// A webhook receiver: answers each POST with `status` (or never, when `answer` is false), keeps
// the bodies and the signature headers. HTTP/1.1 with keep-alive, as libcurl speaks it.
class Receiver {
 public:
  explicit Receiver(int status = 204, bool answer = true) : status_(status), answer_(answer) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(::listen(listener_, 64), 0);
    socklen_t size = sizeof address;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &size);
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~Receiver() {
    stopping_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    acceptor_.join();
    for (std::thread& t : connections_) t.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }

  struct Post {
    std::string body;
    std::string event;
    std::string signature;
  };
  // Waits (without a time limit of its own: ctest's timeout ends a test that hangs) until `n`
  // posts have arrived, and returns them.
  std::vector<Post> AwaitPosts(size_t n) {
    std::unique_lock lock(mu_);
    arrived_.wait(lock, [&] { return posts_.size() >= n; });
    return posts_;
  }
  size_t received() {
    std::lock_guard lock(mu_);
    return posts_.size();
  }

 private:
  void Accept() {
    while (!stopping_) {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      std::lock_guard lock(mu_);
      connections_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  static std::string Header(const std::string& head, const std::string& name) {
    const size_t at = head.find("\r\n" + name + ": ");
    if (at == std::string::npos) return {};
    const size_t start = at + name.size() + 4;
    return head.substr(start, head.find("\r\n", start) - start);
  }

  void Serve(int fd) {
    std::string buffer;
    char chunk[4096];
    while (true) {
      size_t end;
      while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return (void)::close(fd);
        buffer.append(chunk, static_cast<size_t>(n));
      }
      const std::string head = buffer.substr(0, end);
      const size_t length = std::stoul(Header(head, "Content-Length"));
      while (buffer.size() < end + 4 + length) {
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return (void)::close(fd);
        buffer.append(chunk, static_cast<size_t>(n));
      }
      Post post{buffer.substr(end + 4, length), Header(head, "X-Sluice-Event"),
                Header(head, "X-Sluice-Signature")};
      buffer.erase(0, end + 4 + length);
      {
        std::lock_guard lock(mu_);
        posts_.push_back(std::move(post));
      }
      arrived_.notify_all();
      if (!answer_) {
        // Holds the connection open and never answers, until the peer gives up.
        while (::recv(fd, chunk, sizeof chunk, 0) > 0) {
        }
        return (void)::close(fd);
      }
      const std::string answer =
          "HTTP/1.1 " + std::to_string(status_) + " X\r\nContent-Length: 0\r\n\r\n";
      if (::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL) < 0) return (void)::close(fd);
    }
  }

  const int status_;
  const bool answer_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable arrived_;
  std::vector<std::thread> connections_;
  std::vector<Post> posts_;
};

uint64_t Events(MetricsRegistry& metrics, const std::string& sink, const std::string& outcome) {
  return metrics.GetCounter("sluice_push_events_total", "", {{"sink", sink}, {"outcome", outcome}})
      .value();
}

// Waits until the counter reaches `n` (ctest's timeout ends a test that would wait for ever).
void AwaitEvents(MetricsRegistry& metrics, const std::string& sink, const std::string& outcome,
                 uint64_t n) {
  while (Events(metrics, sink, outcome) < n) std::this_thread::sleep_for(5ms);
}

PushOptions Fast() {
  PushOptions options;
  options.deliveries_per_minute = 6'000'000;
  options.burst = 1'000'000;
  options.timeout = 10s;
  return options;
}

TEST(PushJsonTest, AnEventAndADigestSayWhatHappened) {
  const auto one = nlohmann::json::parse(EventJson(Event("report", 1)));
  EXPECT_EQ(one["kind"], "report");
  EXPECT_EQ(one["paste"], "abcDEF123456");
  EXPECT_EQ(one["fields"]["reason"], "spam");
  std::vector<OperatorEvent> many;
  for (int i = 0; i < 30; ++i) many.push_back(Event(i % 3 == 0 ? "withhold" : "report", i));
  const auto digest = nlohmann::json::parse(DigestJson(many, 20, 1'700'000'100));
  EXPECT_EQ(digest["kind"], "digest");
  EXPECT_EQ(digest["count"], 30);
  EXPECT_EQ(digest["by_kind"]["report"], 20);
  EXPECT_EQ(digest["by_kind"]["withhold"], 10);
  EXPECT_EQ(digest["events"].size(), 20u);
  EXPECT_EQ(digest["unlisted"], 10);
  EXPECT_EQ(digest["summary"], "30 events: 20 report, 10 withhold");
}

TEST(PushJsonTest, TheSignatureIsHmacSha256OfTimeDotBody) {
  // Python's hmac.new(b"whsec-test", b'1700000000.{"kind":"report"}', hashlib.sha256).
  EXPECT_EQ(Signature("whsec-test", 1'700'000'000, R"({"kind":"report"})"),
            "t=1700000000,v1=f7acaaf799c3deb0d3bbf670ebf50b27def627448894f6e7bd1f8b51bed88dac");
}

TEST(PushTest, AWebhookGetsEachEventSigned) {
  Receiver receiver;
  ManualClock clock;
  MetricsRegistry metrics;
  PushOptions options = Fast();
  options.webhook_url = receiver.url();
  options.webhook_secret = "whsec-test";
  auto push = Push::FromOptions(options, clock, metrics);
  ASSERT_NE(push, nullptr);
  push->Publish(Event("report"));
  const auto posts = receiver.AwaitPosts(1);
  EXPECT_EQ(posts[0].event, "report");
  EXPECT_EQ(posts[0].signature, Signature("whsec-test", clock.UnixSeconds(), posts[0].body));
  EXPECT_EQ(nlohmann::json::parse(posts[0].body)["kind"], "report");
  AwaitEvents(metrics, "webhook", "delivered", 1);
}

TEST(PushTest, WhatPilesUpWhilePacedLeavesAsOneDigest) {
  Receiver receiver;
  ManualClock clock;
  MetricsRegistry metrics;
  PushOptions options;
  options.webhook_url = receiver.url();
  options.deliveries_per_minute = 1;
  options.burst = 1;
  auto push = Push::FromOptions(options, clock, metrics);
  push->Publish(Event("report", 0));
  receiver.AwaitPosts(1);
  for (int i = 1; i <= 10; ++i) push->Publish(Event(i == 10 ? "withhold" : "report", i));
  // The bucket is empty until the clock moves: nothing more can leave before it does.
  EXPECT_EQ(receiver.received(), 1u);
  clock.Advance(60s);
  const auto posts = receiver.AwaitPosts(2);
  const auto digest = nlohmann::json::parse(posts[1].body);
  EXPECT_EQ(posts[1].event, "digest");
  EXPECT_EQ(digest["count"], 10);
  EXPECT_EQ(digest["by_kind"]["withhold"], 1);
  AwaitEvents(metrics, "webhook", "delivered", 11);
  EXPECT_EQ(receiver.received(), 2u);
}

TEST(PushTest, ManyPublishersNeverWaitAndEveryEventIsAccountedFor) {
  // The stress test of the sinks' threads and libcurl under the sanitizers: publishers on eight
  // threads, a queue small enough to overflow, a receiver that answers.
  Receiver receiver;
  ManualClock clock;
  MetricsRegistry metrics;
  PushOptions options = Fast();
  options.webhook_url = receiver.url();
  options.queue = 50;
  options.digest_events = 5;
  auto push = Push::FromOptions(options, clock, metrics);
  constexpr int kThreads = 8, kEach = 500;
  std::vector<std::thread> publishers;
  for (int t = 0; t < kThreads; ++t) {
    publishers.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) push->Publish(Event("report", t * kEach + i));
    });
  }
  for (std::thread& t : publishers) t.join();
  while (Events(metrics, "webhook", "delivered") + Events(metrics, "webhook", "dropped") <
         uint64_t{kThreads * kEach}) {
    std::this_thread::sleep_for(5ms);
  }
  push.reset();
  const uint64_t delivered = Events(metrics, "webhook", "delivered");
  const uint64_t dropped = Events(metrics, "webhook", "dropped");
  EXPECT_EQ(Events(metrics, "webhook", "failed"), 0u);
  EXPECT_EQ(delivered + dropped, uint64_t{kThreads * kEach});
  uint64_t received = 0;
  for (const auto& post : receiver.AwaitPosts(0)) {
    const auto json = nlohmann::json::parse(post.body);
    received += json["kind"] == "digest" ? json["count"].get<uint64_t>() : 1;
  }
  EXPECT_EQ(received, delivered);
}

TEST(PushTest, ADeadReceiverCostsPublishersNothingAndIsCounted) {
  ManualClock clock;
  MetricsRegistry metrics;
  PushOptions options = Fast();
  {
    Receiver closed;  // a port that was listening and is not any more
    options.webhook_url = closed.url();
  }
  options.queue = 10;
  options.attempts = 1;
  auto push = Push::FromOptions(options, clock, metrics);
  for (int i = 0; i < 1000; ++i) push->Publish(Event("report", i));
  AwaitEvents(metrics, "webhook", "failed", 1);
  push.reset();
  const uint64_t failed = Events(metrics, "webhook", "failed");
  const uint64_t dropped = Events(metrics, "webhook", "dropped");
  EXPECT_GT(failed, 0u);
  EXPECT_EQ(failed + dropped, 1000u);
  EXPECT_EQ(Events(metrics, "webhook", "delivered"), 0u);
}

TEST(PushTest, AStopDoesNotWaitOutAReceiverThatNeverAnswers) {
  Receiver silent(204, /*answer=*/false);
  ManualClock clock;
  MetricsRegistry metrics;
  PushOptions options = Fast();
  options.webhook_url = silent.url();
  options.timeout = std::chrono::hours(1);
  auto push = Push::FromOptions(options, clock, metrics);
  push->Publish(Event("report"));
  silent.AwaitPosts(1);
  // The post is waiting for its answer when the push is destroyed; the destructor returning at
  // all is the test (ctest's timeout fails it otherwise), and the event counts as failed.
  push.reset();
  EXPECT_EQ(Events(metrics, "webhook", "failed"), 1u);
  EXPECT_EQ(Events(metrics, "webhook", "delivered"), 0u);
}

TEST(PushTest, ACommandGetsTheEventOnItsInputAndAFailingOneIsCounted) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("sluice-push-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto out = dir / "events";
  ManualClock clock;
  MetricsRegistry metrics;
  PushOptions options = Fast();
  options.command = "cat > '" + out.string() + "'; test \"$SLUICE_EVENT\" = withhold";
  {
    auto push = Push::FromOptions(options, clock, metrics);
    push->Publish(Event("withhold"));
    AwaitEvents(metrics, "command", "delivered", 1);
  }
  std::ifstream written(out);
  const auto json = nlohmann::json::parse(written);
  EXPECT_EQ(json["kind"], "withhold");
  EXPECT_EQ(Events(metrics, "command", "delivered"), 1u);

  options.command = "exit 3";
  options.attempts = 1;
  {
    auto push = Push::FromOptions(options, clock, metrics);
    push->Publish(Event("report"));
    AwaitEvents(metrics, "command", "failed", 1);
  }
  EXPECT_EQ(Events(metrics, "command", "failed"), 1u);

  // A command that hangs is killed at the timeout (or the stop), never waited out, and so is what
  // it started: here a child of the shell (a sendmail that forks, a pipeline), which once outlived
  // the kill holding its parent's stderr open (ctest waited for it for ten minutes).
  const auto child_pid_file = dir / "child";
  options.command = "sleep 600 & echo $! > '" + child_pid_file.string() + "'; wait";
  options.timeout = 500ms;
  {
    auto push = Push::FromOptions(options, clock, metrics);
    push->Publish(Event("report"));
    AwaitEvents(metrics, "command", "failed", 2);
  }
  pid_t child = 0;
  std::ifstream(child_pid_file) >> child;
  ASSERT_GT(child, 0);
  // SIGKILL is delivered at once, but the orphan is reaped by init in its own time: wait for it,
  // with a bound only so that a surviving child fails the test rather than hanging it.
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (::kill(child, 0) == 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_NE(::kill(child, 0), 0) << "the command's child " << child << " outlived the kill";
  std::filesystem::remove_all(dir);
}

TEST(PushTest, AWebhookThatIsNotHttpIsRefused) {
  ManualClock clock;
  EXPECT_THROW(MakeWebhook("file:///etc/passwd", "", 1s, clock), std::invalid_argument);
  EXPECT_THROW(MakeWebhook("gopher://x", "", 1s, clock), std::invalid_argument);
}

}  // namespace
}  // namespace sluice::notify
