// The session's exception boundary (src/http/session.cc): whatever throws between the route and
// the first byte written (the handler, the presenter, the head's serialiser) is answered with a
// 500 that is counted and logged like any answer, and the connection lives on when its framing
// allows. A real HttpServer over the in-memory stores on a loopback socket; the throw comes from
// the session's test hook.
#include "../../../src/http/session.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>

#include "sluice/http/server.h"
#include "sluice/service/admission_control.h"
#include "sluice/service/paste_cache.h"
#include "sluice/service/paste_service.h"
#include "sluice/store/backends.h"

namespace sluice::http {
namespace {

// How many of the next presented replies the hook throws for.
std::atomic<int> g_throws_left{0};

void ThrowingHook(const Reply&) {
  if (g_throws_left.fetch_sub(1) > 0) throw std::runtime_error("thrown by the test's hook");
}

struct Response {
  unsigned status = 0;
  std::string head;
  std::string body;
};

class SessionBoundaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_logger_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("session_test", log_));
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.access_log = true;
    server_ = std::make_unique<HttpServer>(std::vector<boost::asio::io_context*>{&io_}, options,
                                           service_, renderer_, metrics_);
    server_->Start();
    loop_ = std::thread([this] {
      auto work = boost::asio::make_work_guard(io_);
      io_.run();
    });
    g_throws_left = 0;
    SetBeforeWriteHookForTest(ThrowingHook);
  }

  void TearDown() override {
    SetBeforeWriteHookForTest(nullptr);
    for (int fd : open_) ::close(fd);
    std::atomic<bool> drained{false};
    server_->Drain([&drained] { drained = true; });
    while (!drained) std::this_thread::yield();
    io_.stop();
    loop_.join();
    server_.reset();
    renderer_.Shutdown();
    spdlog::set_default_logger(previous_logger_);
  }

  int Connect() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd, 0);
    timeval timeout{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(server_->port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    open_.push_back(fd);
    return fd;
  }

  static void Send(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      ASSERT_GT(n, 0);
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }

  // One response framed by its Content-Length; status 0 if the connection ended first. Bytes
  // past it (a pipelined request's answer) are kept for the next call.
  Response Receive(int fd) {
    std::string& in = pending_[fd];
    char chunk[4096];
    const auto fill = [&] {
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) return false;
      in.append(chunk, static_cast<size_t>(n));
      return true;
    };
    size_t head_end = std::string::npos;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return {};
    }
    Response r;
    r.head = in.substr(0, head_end + 4);
    r.status = static_cast<unsigned>(std::stoul(r.head.substr(9, 3)));
    size_t length = 0;
    if (const size_t at = r.head.find("Content-Length: "); at != std::string::npos) {
      length = std::stoul(r.head.substr(at + 16));
    }
    while (in.size() < head_end + 4 + length) {
      if (!fill()) return {};
    }
    r.body = in.substr(head_end + 4, length);
    in.erase(0, head_end + 4 + length);
    return r;
  }

  // The server closed its side: the next read ends without a byte.
  static bool Closed(int fd) {
    char byte;
    return ::recv(fd, &byte, 1, 0) == 0;
  }

  double Count(std::string_view route, std::string_view status) const {
    const std::string series = "sluice_http_requests_total{route=\"" + std::string(route) +
                               "\",status=\"" + std::string(status) + "\"}";
    for (const auto& [name, value] : metrics_.Collect()) {
      if (name == series) return value;
    }
    return 0;
  }

  bool Logged(std::string_view text) const {
    for (const std::string& line : log_->last_formatted()) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }

  static void ExpectInternalError(const Response& r) {
    ASSERT_EQ(r.status, 500u) << r.head << r.body;
    const auto doc = nlohmann::json::parse(r.body);
    EXPECT_EQ(doc["reason"], "internal");
    EXPECT_EQ(doc["error"], "internal error");
  }

  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> log_ =
      std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  std::shared_ptr<spdlog::logger> previous_logger_;
  // Declared before the loop: what a session's frame touches outlives the frames that the
  // io_context destroys.
  MetricsRegistry metrics_;
  std::unique_ptr<store::MetaStore> meta_ = store::MakeMemoryMetaStore();
  std::unique_ptr<store::BlobStore> blobs_ = store::MakeMemoryBlobStore();
  service::PasteCache cache_{1 << 20};
  service::AdmissionControl admission_{service::AdmissionOptions{}, SystemClock::Instance(),
                                       metrics_};
  service::PasteService service_{*meta_,
                                 *blobs_,
                                 cache_,
                                 admission_,
                                 SystemClock::Instance(),
                                 metrics_,
                                 service::ServiceOptions{}};
  render::ViewRenderer renderer_{[] {
                                   render::ViewRendererOptions o;
                                   o.worker_command = {SLUICE_HIGHLIGHT_WORKER};
                                   return o;
                                 }(),
                                 SystemClock::Instance(), metrics_};
  boost::asio::io_context io_{1};
  std::unique_ptr<HttpServer> server_;
  std::thread loop_;
  std::vector<int> open_;
  std::map<int, std::string> pending_;
};

constexpr std::string_view kHealthz = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";

TEST_F(SessionBoundaryTest, AThrowWhileAnsweringIsA500CountedLoggedAndTheConnectionLives) {
  g_throws_left = 1;
  const int fd = Connect();
  Send(fd, kHealthz);
  const Response failed = Receive(fd);
  ExpectInternalError(failed);
  EXPECT_EQ(failed.head.find("Connection: close"), std::string::npos) << failed.head;
  // The same connection answers the next request, as it would any other.
  Send(fd, kHealthz);
  const Response next = Receive(fd);
  EXPECT_EQ(next.status, 200u);
  EXPECT_EQ(next.body, "ok\n");
  // Counted and logged after it was written, so before the next request was read; the 200 just
  // received may not be counted yet.
  EXPECT_EQ(Count("healthz", "500"), 1);
  EXPECT_TRUE(Logged("uncaught exception while answering: thrown by the test's hook"));
  EXPECT_TRUE(Logged("route=healthz status=500 reason=internal"));
}

TEST_F(SessionBoundaryTest, ACreateWhoseBodyWasReadKeepsItsConnection) {
  g_throws_left = 1;
  const int fd = Connect();
  Send(fd, "POST /api/v1/pastes HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" +
               std::string(kHealthz));
  ExpectInternalError(Receive(fd));
  EXPECT_EQ(Receive(fd).status, 200u);  // the pipelined request, read where it belongs
  EXPECT_EQ(Count("create_api", "500"), 1);
}

TEST_F(SessionBoundaryTest, ABodyLeftUnreadClosesTheConnectionAfterThe500) {
  g_throws_left = 1;
  const int fd = Connect();
  // Too large for the route: refused from its headers, the body never read.
  Send(fd, "POST /api/v1/pastes HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\n\r\nab");
  const Response failed = Receive(fd);
  ExpectInternalError(failed);
  EXPECT_NE(failed.head.find("Connection: close"), std::string::npos) << failed.head;
  EXPECT_TRUE(Closed(fd));
  EXPECT_EQ(Count("create_api", "500"), 1);
}

TEST_F(SessionBoundaryTest, ABrowserGetsThe500AsAPage) {
  g_throws_left = 1;
  const int fd = Connect();
  Send(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\nAccept: text/html\r\n\r\n");
  const Response failed = Receive(fd);
  EXPECT_EQ(failed.status, 500u);
  EXPECT_NE(failed.head.find("Content-Type: text/html"), std::string::npos) << failed.head;
  EXPECT_NE(failed.body.find("internal error"), std::string::npos);
}

TEST_F(SessionBoundaryTest, AThrowWhileAnsweringThe500IsStillAnsweredAndCloses) {
  g_throws_left = 2;  // the reply, then the 500 made in its place
  const int fd = Connect();
  Send(fd, kHealthz);
  const Response failed = Receive(fd);
  ExpectInternalError(failed);
  EXPECT_TRUE(Closed(fd));
  EXPECT_EQ(Count("healthz", "500"), 1);
}

}  // namespace
}  // namespace sluice::http
