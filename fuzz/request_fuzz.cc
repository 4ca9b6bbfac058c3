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

#include "service_stack.h"
#include "sluice/http/server.h"

namespace {

struct Fixture {
  Fixture() {
    sluice::http::ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.header_timeout = std::chrono::seconds(2);
    options.idle_timeout = std::chrono::seconds(2);
    options.body_timeout = std::chrono::seconds(2);
    server = std::make_unique<sluice::http::HttpServer>(std::vector<boost::asio::io_context*>{&io},
                                                        options, *stack.paste_service,
                                                        *stack.renderer, stack.metrics);
    server->Start();
    runner = std::thread([this] {
      auto work = boost::asio::make_work_guard(io);
      io.run();
    });
  }

  boost::asio::io_context io{1};
  sluice::fuzzing::ServiceStack stack;
  std::unique_ptr<sluice::http::HttpServer> server;
  std::thread runner;  // never joined: the process ends with the fuzzer
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  sluice::fuzzing::BecomeHighlightWorkerIfAsked(*argc, *argv);
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
