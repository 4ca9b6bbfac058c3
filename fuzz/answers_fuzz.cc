// libFuzzer target: every request gets a well-formed answer, whatever bytes a client puts where
// an error message or a page may quote them: the query, header fields, a JSON create's keys and
// values, form fields, a multipart file name, the path. Each input is one request (its shape
// chosen by the first byte's low 7 bits modulo 10, Accept: text/html by its top bit, its fields
// the rest split at 0x1F), run through the real route table
// and handlers over the in-memory stores and then the presenter, as the session would
// (src/http/session.cc). A finding is an exception anywhere on the way (the session would answer
// it with a 500, and before issue 32 a throw in the presenter left the connection with no answer at
// all), a 500, a status that is not one, a body that is not valid UTF-8, a JSON body that does not
// parse, a refusal without its "error" and "reason", or a head that a field could break.
//
// No socket, so a run costs microseconds, not the millisecond of request_fuzz.cc, which covers
// the bytes before the handlers (the parser, the framing checks, the session).
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../src/http/handlers.h"
#include "../src/http/presenter.h"
#include "../src/http/routes.h"
#include "../tests/support/fake_request.h"
#include "service_stack.h"
#include "sluice/service/text.h"

namespace {

using sluice::http::Method;
using sluice::http::Reply;
using sluice::testing::FakeBody;
using sluice::testing::FakeHeaders;

struct Fixture {
  static sluice::service::ServiceOptions Options() {
    sluice::service::ServiceOptions options;
    // Small pastes and a quota, so that millions of runs hold a bounded store (and 507 is
    // answered too, once it fills).
    options.max_paste_bytes = 4096;
    options.max_storage_bytes = 32u << 20;
    return options;
  }

  sluice::fuzzing::ServiceStack stack{Options()};
  sluice::http::Context context{*stack.paste_service,
                                *stack.renderer,
                                stack.metrics,
                                sluice::SystemClock::Instance(),
                                "https://paste.example",
                                {},
                                {}};
  const sluice::http::RouteTable routes{sluice::http::DefaultRoutes()};
};

Fixture& TheFixture() {
  static Fixture* fixture = new Fixture();  // never destroyed: the process ends with the fuzzer
  return *fixture;
}

struct Client final : sluice::service::ClientKeySource {
  std::string Key() const override { return "192.0.2.1"; }
};

// One request as the session would build it, its body whole.
struct Input {
  Method method = Method::kGet;
  std::string target;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

void Fail() { std::abort(); }

// The handler's reply, as the session's Dispatch would get it (src/http/session.cc): the route,
// 405 or 404, the body offered to a create's reader or as the small body of the rest.
Reply Answer(const Input& in, const FakeHeaders& headers) {
  Fixture& f = TheFixture();
  const std::string_view target = in.target;
  const size_t qmark = target.find('?');
  const std::string_view path = target.substr(0, qmark);
  const sluice::http::RouteMatch match = f.routes.Match(in.method, path);
  if (match.allowed) {
    return Reply::Refuse(sluice::ErrorCode::kInvalidArgument, "method not allowed here",
                         "method_not_allowed", 405);
  }
  if (!match.route) {
    return Reply::Refuse(sluice::ErrorCode::kNotFound, "no such route", "no_route");
  }
  const bool create = match.route->kind == sluice::http::RouteKind::kCreate;
  FakeBody body(in.body);
  const Client client;
  const sluice::http::Request request{
      in.method,
      target,
      path,
      qmark == std::string_view::npos ? std::string_view() : target.substr(qmark + 1),
      match.id,
      headers,
      client,
      std::optional<uint64_t>(in.body.size()),
      false,
      create ? std::string_view() : std::string_view(in.body),
      create ? &body : nullptr};
  boost::asio::io_context io;
  std::optional<Reply> reply;
  std::exception_ptr thrown;
  boost::asio::co_spawn(io, match.route->handler(request, f.context),
                        [&](std::exception_ptr e, Reply r) {
                          thrown = e;
                          if (!e) reply.emplace(std::move(r));
                        });
  io.run();
  if (thrown || !reply) Fail();  // the session would answer a 500
  return std::move(*reply);
}

bool IsValidUtf8(std::string_view bytes) {
  return sluice::service::ReplaceInvalidUtf8(bytes) == bytes;
}

// The answer as sent: what the presenter made of the reply, and its head.
void Check(Reply reply, bool wants_html) {
  const bool refusal = reply.error.has_value();
  const Reply presented = sluice::http::Present(std::move(reply), wants_html, 1'700'000'000);
  if (presented.status < 100 || presented.status > 599 || presented.status == 500) Fail();
  const std::string_view body = presented.body_view();
  if (!IsValidUtf8(body)) Fail();
  const bool json = presented.content_type.starts_with("application/json");
  if (json) {
    const nlohmann::json doc = nlohmann::json::parse(body, nullptr, false);
    if (doc.is_discarded()) Fail();
    if (refusal && (!doc.is_object() || !doc.contains("error") || !doc["error"].is_string() ||
                    !doc.contains("reason") || !doc["reason"].is_string())) {
      Fail();
    }
  }
  if (refusal && !json && !presented.content_type.starts_with("text/html")) Fail();
  std::string head;
  sluice::http::SerializeHead(presented, "request-id", false, head);
  // Every line of the head ends in CRLF and the blank line comes last: no field split it.
  size_t at = 0;
  while (at < head.size()) {
    const size_t end = head.find("\r\n", at);
    if (end == std::string::npos) Fail();
    const std::string_view line(head.data() + at, end - at);
    if (line.find_first_of("\r\n") != std::string_view::npos) Fail();
    if (line.empty() && end + 2 != head.size()) Fail();
    at = end + 2;
  }
}

void Run(const Input& in, bool wants_html) {
  std::vector<std::pair<std::string, std::string>> fields = in.headers;
  if (wants_html) fields.emplace_back("Accept", "text/html,application/xhtml+xml");
  const FakeHeaders headers(std::move(fields));
  Reply reply = Answer(in, headers);
  // A created paste is read back as a page, so the pages of odd but valid text are checked too.
  std::string created_id;
  if (reply.status == 201 && reply.content_type == "application/json") {
    const nlohmann::json doc = nlohmann::json::parse(reply.body, nullptr, false);
    if (doc.is_object() && doc.contains("id") && doc["id"].is_string()) {
      created_id = doc["id"].get<std::string>();
    }
  }
  Check(std::move(reply), wants_html);
  if (!created_id.empty()) {
    const Input view{Method::kGet, "/" + created_id, {}, {}};
    const FakeHeaders browser({{"Accept", "text/html"}});
    Check(Answer(view, browser), true);
  }
}

// The fields of an input: the bytes after the first, split at 0x1F (missing ones are empty).
std::vector<std::string> Fields(std::string_view rest) {
  std::vector<std::string> out;
  for (;;) {
    const size_t cut = rest.find('\x1F');
    out.emplace_back(rest.substr(0, cut));
    if (cut == std::string_view::npos) break;
    rest.remove_prefix(cut + 1);
  }
  while (out.size() < 8) out.emplace_back();
  return out;
}

std::string WithQuery(std::string path, const std::string& query) {
  if (!query.empty()) path += "?" + query;
  return path;
}

std::string Multipart(const std::vector<std::string>& f) {
  const std::string b = "--sluicefuzz\r\n";
  return b + "Content-Disposition: form-data; name=\"file\"; filename=\"" + f[2] + "\"\r\n\r\n" +
         f[3] + "\r\n" + b + "Content-Disposition: form-data; name=\"" + f[1] + "\"\r\n\r\n" +
         f[4] + "\r\n" + b + "Content-Disposition: form-data; name=\"ttl\"\r\n\r\n" + f[5] +
         "\r\n" + b + "Content-Disposition: form-data; name=\"lang\"\r\n\r\n" + f[6] +
         "\r\n--sluicefuzz--\r\n";
}

Method AnyMethod(std::string_view name) {
  if (name == "GET") return Method::kGet;
  if (name == "HEAD") return Method::kHead;
  if (name == "PUT") return Method::kPut;
  if (name == "DELETE") return Method::kDelete;
  if (name.empty()) return Method::kPost;
  return name.size() % 2 ? Method::kOther : Method::kPost;
}

}  // namespace

// libFuzzer runs a full LeakSanitizer scan after every input that allocated more than it freed,
// and every create does, on purpose: the store keeps the paste. That scan was 45% of the time and
// grew with the heap (600 inputs a second falling to 200 within a minute), so libFuzzer's own
// check is off unless asked for (-detect_leaks=1); LeakSanitizer still checks at exit. libFuzzer
// reads its flags after this function, from the argv it leaves. Its LLVMFuzzerMutate is there only
// when libFuzzer is (not in fuzz/replay_main.cc's build, whose arguments are its own).
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size)
    __attribute__((weak));

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  sluice::fuzzing::BecomeHighlightWorkerIfAsked(*argc, *argv);
  if (LLVMFuzzerMutate == nullptr) return 0;
  for (int i = 1; i < *argc; ++i) {
    if (std::string_view((*argv)[i]).starts_with("-detect_leaks=")) return 0;
  }
  static std::vector<char*> args;
  args.assign(*argv, *argv + *argc);
  static char kNoLeakScan[] = "-detect_leaks=0";
  args.insert(args.begin() + 1, kNoLeakScan);
  args.push_back(nullptr);
  *argc = static_cast<int>(args.size()) - 1;
  *argv = args.data();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const unsigned shape = (static_cast<unsigned char>(bytes[0]) & 0x7F) % 10;
  const bool wants_html = (static_cast<unsigned char>(bytes[0]) & 0x80) != 0;
  const std::vector<std::string> f = Fields(bytes.substr(1));
  const std::string json = "application/json";
  Input in;
  switch (shape) {
    case 0:  // a JSON create's body as sent
      in = {Method::kPost, WithQuery("/api/v1/pastes", f[0]), {{"Content-Type", json}}, f[1]};
      break;
    case 1:  // a JSON create with the client's bytes as they are in a key and in values
      in = {Method::kPost,
            WithQuery("/api/v1/pastes", f[0]),
            {{"Content-Type", json}},
            "{\"" + f[1] + "\": \"" + f[2] + "\", \"content\": \"" + f[3] + "\", \"ttl\": \"" +
                f[4] + "\"}"};
      break;
    case 2:  // the form: a file with its name, a field named by the client, ttl and lang
      in = {Method::kPost,
            WithQuery("/", f[0]),
            {{"Content-Type", "multipart/form-data; boundary=sluicefuzz"}},
            Multipart(f)};
      break;
    case 3:  // curl's raw create with the headers a create reads
      in = {Method::kPost,
            WithQuery("/", f[0]),
            {{"Sluice-TTL", f[1]}, {"Sluice-Filename", f[2]}, {"Content-Type", f[4]}},
            f[3]};
      break;
    case 4:  // a read of any path, with the fields a read looks at
      in = {Method::kGet,
            WithQuery("/" + f[1], f[0]),
            {{"If-None-Match", f[2]}, {"Accept", f[3]}},
            {}};
      break;
    case 5:  // the delete page, its token from the link, and its form
      in = {f[3].empty() ? Method::kGet : Method::kPost,
            WithQuery("/delete/" + f[1], "token=" + f[2]),
            {{"Content-Type", "application/x-www-form-urlencoded"}},
            f[3]};
      break;
    case 6:  // the API's delete, its token in Authorization
      in = {Method::kDelete,
            WithQuery("/api/v1/pastes/" + f[1], f[0]),
            {{"Authorization", f[2]}},
            {}};
      break;
    case 7:  // haste's create
      in = {Method::kPost, WithQuery("/documents", f[0]), {{"Content-Type", f[2]}}, f[1]};
      break;
    case 8:  // a report, through the API and the form
      in = {Method::kPost,
            f[3].empty() ? "/api/v1/pastes/" + f[1] + "/report" : "/report/" + f[1],
            {{"Content-Type", f[3].empty() ? json : f[3]}},
            f[2]};
      break;
    default:  // any method on any target, with a field of the client's naming
      in = {AnyMethod(f[2]), f[1], {{f[3], f[4]}, {"Content-Type", f[5]}}, f[6]};
      break;
  }
  Run(in, wants_html);
  return 0;
}
