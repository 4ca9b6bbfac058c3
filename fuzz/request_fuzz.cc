// libFuzzer target: the whole request path up to the service layer. Each input is the bytes a
// client sends on one connection (several pipelined requests, or garbage) to a real HttpServer on
// loopback over the in-memory stores: Beast's parser, the framing checks, routing, client keys,
// create admission, multipart, text validation and the service. A crash, a sanitizer report, a
// 500 or a response that is not HTTP/1.1 is a finding.
//
// A socket per input costs throughput (a few thousand inputs a second) but tests the code that
// really runs; the session is written against a TCP stream, and a second transport only for the
// fuzzer would be a second code path to trust.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/http/server.h"
#include "sluice/render/view_renderer.h"
#include "sluice/service/admission_control.h"
#include "sluice/service/paste_cache.h"
#include "sluice/service/paste_service.h"
#include "sluice/store/backends.h"

namespace {

struct Fixture {
  Fixture() {
    sluice::service::AdmissionOptions admission;
    // Limits far away: the fuzzer explores parsing, not the token buckets' arithmetic.
    admission.ip_create_count = {1e9, 1e9};
    admission.ip_create_bytes = {1e12, 1e12};
    admission.global_create_count = {1e9, 1e9};
    admission.global_create_bytes = {1e12, 1e12};
    admission.ip_read = {1e9, 1e9};
    admission_control = std::make_unique<sluice::service::AdmissionControl>(
        admission, sluice::SystemClock::Instance(), metrics);
    service = std::make_unique<sluice::service::PasteService>(
        *meta, *blobs, cache, *admission_control, sluice::SystemClock::Instance(), metrics,
        sluice::service::ServiceOptions{});
    sluice::http::ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.header_timeout = std::chrono::seconds(2);
    options.idle_timeout = std::chrono::seconds(2);
    options.body_timeout = std::chrono::seconds(2);
    sluice::render::ViewRendererOptions render;
    render.worker_command = {"/proc/self/exe", "highlight-worker"};
    renderer = std::make_unique<sluice::render::ViewRenderer>(
        render, sluice::SystemClock::Instance(), metrics);
    server = std::make_unique<sluice::http::HttpServer>(std::vector<boost::asio::io_context*>{&io},
                                                        options, *service, *renderer, metrics);
    server->Start();
    runner = std::thread([this] {
      auto work = boost::asio::make_work_guard(io);
      io.run();
    });
  }

  boost::asio::io_context io{1};
  sluice::MetricsRegistry metrics;
  std::unique_ptr<sluice::store::MetaStore> meta = sluice::store::MakeMemoryMetaStore();
  std::unique_ptr<sluice::store::BlobStore> blobs = sluice::store::MakeMemoryBlobStore();
  sluice::service::PasteCache cache{1 << 20};
  std::unique_ptr<sluice::service::AdmissionControl> admission_control;
  std::unique_ptr<sluice::service::PasteService> service;
  std::unique_ptr<sluice::render::ViewRenderer> renderer;
  std::unique_ptr<sluice::http::HttpServer> server;
  std::thread runner;  // never joined: the process ends with the fuzzer
};

}  // namespace

// The highlighter's worker processes are this binary again, started with `highlight-worker`.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  if (*argc > 1 && std::string_view((*argv)[1]) == "highlight-worker") {
    std::exit(sluice::render::HighlightWorkerMain(*argc, *argv));
  }
  return 0;
}

namespace {

Fixture& TheServer() {
  static Fixture* fixture = new Fixture();  // leaked on purpose: see `runner`
  return *fixture;
}

// The first response starts with a well-formed status line, and no response is a 500. Bodies may
// mention "HTTP/1.1" (error messages do), so only the start of a line counts as a status line.
bool IsStatusLine(std::string_view at) {
  if (at.size() < 13 || !at.starts_with("HTTP/1.1 ") || at[12] != ' ') return false;
  if (at[9] < '1' || at[9] > '5') return false;
  for (size_t i = 10; i < 12; ++i) {
    if (at[i] < '0' || at[i] > '9') return false;
  }
  return true;
}

void CheckResponses(std::string_view out) {
  if (out.empty()) return;  // the input ended mid-request: the server may just close
  if (!IsStatusLine(out)) std::abort();
  if (out.starts_with("HTTP/1.1 500 ") || out.find("\nHTTP/1.1 500 ") != std::string_view::npos) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Fixture& fixture = TheServer();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) std::abort();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(fixture.server->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) std::abort();
  // The server may close early (a refused request); what it did not read is its choice.
  for (size_t sent = 0; sent < size;) {
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string out;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  CheckResponses(out);
  return 0;
}
