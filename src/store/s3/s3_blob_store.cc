// BlobStore over the S3 REST API (PUT, GET and DELETE of one object; DeleteObjects for a batch;
// ListObjectsV2).
//
// An HTTP client of our own rather than a library: Debian ships no AWS SDK, and what the store
// needs is small (five request shapes on kept-alive HTTP/1.1 connections). Beast lives here, in
// the backend, like it lives in src/http for the server.
//
// Connections: three bounded pools (GET; PUT; DELETE, DeleteObjects and List), so a reaper backlog
// can never hold the connections that reads and creates need (docs/overload.md, "Read"). A caller
// waits for a free connection no longer than its deadline. Each exchange runs on its connection's
// strand, with the socket's expiry set to the call's deadline: past it Beast closes the socket, so
// a connection whose state is unknown is never reused.
//
// A request on a reused connection that fails before any byte of an answer arrives is sent once
// more on a new connection: the peer closed the idle connection while we picked it, so it most
// likely never read the request. This is the one retry here, and it is not the app's retry. It is
// safe even if the peer did read it: every request here is idempotent (a PUT of the same body to
// the same key, GET, DELETE, DeleteObjects, List).
#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "s3_client.h"
#include "s3_xml.h"
#include "sigv4.h"
#include "sluice/asio/completion.h"
#include "sluice/store/s3.h"

namespace sluice::store {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using admission::Deadline;
using asio::awaitable;

constexpr std::string_view kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
/// ListObjectsV2 answers at most this many keys per page.
constexpr size_t kMaxKeysPerPage = 1000;
/// List requests one List call may make while it skips keys that are not paste ids.
constexpr size_t kMaxListRequests = 4;

using s3::Connection;
using s3::Endpoint;
using s3::Exchange;
using s3::ParseEndpoint;
using s3::Pool;
using s3::ResolvableHost;
using s3::RunExchange;
using s3::SignedRequest;

// ---- the store --------------------------------------------------------------------------------

struct Answer {
  unsigned status = 0;
  std::string body;
};

class S3BlobStoreImpl final : public S3BlobStore {
 public:
  S3BlobStoreImpl(S3Options options, asio::any_io_executor executor)
      : options_(std::move(options)), tls_context_(ssl::context::tls_client) {
    if (options_.bucket.empty()) throw std::invalid_argument("S3: no bucket");
    if (options_.access_key.empty() || options_.secret_key.empty()) {
      throw std::invalid_argument("S3: no credentials");
    }
    if (options_.endpoint.empty()) {
      options_.endpoint = fmt::format("https://s3.{}.amazonaws.com", options_.region);
    }
    auto endpoint = ParseEndpoint(options_.endpoint);
    if (!endpoint) {
      throw std::invalid_argument("S3: endpoint '" + options_.endpoint +
                                  "' is not http(s)://HOST[:PORT]");
    }
    endpoint_ = *endpoint;
    if (!options_.path_style) endpoint_.host = options_.bucket + "." + endpoint_.host;
    host_header_ = endpoint_.default_port ? endpoint_.host : endpoint_.host + ":" + endpoint_.port;
    ssl::context* tls = nullptr;
    if (endpoint_.tls) {
      tls_context_.set_default_verify_paths();
      tls_context_.set_verify_mode(ssl::verify_peer);
      tls = &tls_context_;
    }
    const Duration max_idle = options_.max_idle;
    get_ = std::make_shared<Pool>(executor, tls, options_.get_connections, max_idle, &opened_);
    put_ = std::make_shared<Pool>(executor, tls, options_.put_connections, max_idle, &opened_);
    cleanup_ =
        std::make_shared<Pool>(executor, tls, options_.cleanup_connections, max_idle, &opened_);
  }

  uint64_t ConnectionsOpened() const override { return opened_.load(); }

  S3DeleteRequests DeleteRequestsSent() const override {
    return {batch_deletes_sent_.load(std::memory_order_relaxed),
            single_deletes_sent_.load(std::memory_order_relaxed)};
  }

  awaitable<Status> Put(PasteId id, std::shared_ptr<const std::string> body,
                        Deadline deadline) override {
    auto call = Call(*put_, http::verb::put, ObjectPath(id), {}, std::move(body), deadline);
    Result<Answer> answer = co_await std::move(call);
    if (!answer.ok()) co_return answer.error();
    // S3 answers 200 only once the object is stored durably; anything else is a failure.
    if (answer->status != 200) co_return StatusError("PUT", *answer);
    co_return Ok();
  }

  awaitable<Result<std::string>> Get(PasteId id, Deadline deadline) override {
    auto call = Call(*get_, http::verb::get, ObjectPath(id), {}, nullptr, deadline);
    Result<Answer> answer = co_await std::move(call);
    if (!answer.ok()) co_return answer.error();
    if (answer->status == 200) co_return std::move(answer->body);
    if (answer->status == 404 && s3::ParseErrorBody(answer->body).code != "NoSuchBucket") {
      co_return MakeError(ErrorCode::kNotFound, "no such body", "not_found");
    }
    co_return StatusError("GET", *answer);
  }

  awaitable<Status> Delete(PasteId id, Deadline deadline) override {
    single_deletes_sent_.fetch_add(1, std::memory_order_relaxed);
    auto call = Call(*cleanup_, http::verb::delete_, ObjectPath(id), {}, nullptr, deadline);
    Result<Answer> answer = co_await std::move(call);
    if (!answer.ok()) co_return answer.error();
    if (answer->status == 204 || answer->status == 200) co_return Ok();
    // S3 answers 204 for an absent key; some peers answer 404 NoSuchKey. Both mean gone.
    if (answer->status == 404 && s3::ParseErrorBody(answer->body).code == "NoSuchKey") {
      co_return Ok();
    }
    co_return StatusError("DELETE", *answer);
  }

  // One DeleteObjects request per kMaxKeysPerDelete bodies, in turn on the cleanup pool, all
  // within the caller's deadline: the sweep's 1,000 bodies in one round trip rather than 1,000.
  awaitable<Status> DeleteMany(std::vector<PasteId> ids, Deadline deadline) override {
    // Each call is a statement of its own: g++ 12 double-frees non-trivial temporaries that sit
    // inside a co_await expression.
    if (!batch_delete_works_.load(std::memory_order_relaxed)) {
      auto one_by_one = BlobStore::DeleteMany(std::move(ids), deadline);
      co_return co_await std::move(one_by_one);
    }
    for (size_t first = 0; first < ids.size(); first += s3::kMaxKeysPerDelete) {
      const size_t end = std::min(ids.size(), first + s3::kMaxKeysPerDelete);
      std::vector<std::string> keys;
      keys.reserve(end - first);
      for (size_t i = first; i < end; ++i) keys.push_back(options_.key_prefix + ids[i].str());
      auto batch = DeleteBatch(std::move(keys), deadline);
      Result<bool> sent = co_await std::move(batch);
      if (!sent.ok()) co_return sent.error();
      if (!*sent) {
        // The peer has no DeleteObjects: what is left goes one body at a time, now and from now
        // on. The bodies of earlier chunks are gone already, and deleting them again is harmless.
        std::vector<PasteId> rest(ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end());
        auto one_by_one = BlobStore::DeleteMany(std::move(rest), deadline);
        co_return co_await std::move(one_by_one);
      }
    }
    co_return Ok();
  }

  awaitable<Result<std::vector<BlobInfo>>> List(std::string after, size_t limit,
                                                Deadline deadline) override {
    std::vector<BlobInfo> out;
    // Keys under the prefix that are not paste ids are skipped, so a page may yield fewer ids
    // than asked for: keep paging from the last key seen until the limit, the end, or the bound
    // on requests per call (a caller is never held in a loop of Lists).
    std::string start_after = after.empty() ? std::string() : options_.key_prefix + after;
    for (size_t request = 0; out.size() < limit; ++request) {
      if (request == kMaxListRequests) {
        if (!out.empty()) break;
        co_return BadAnswer("List", fmt::format("{} pages of keys that are not paste ids after "
                                                "'{}'; giving up this scan",
                                                kMaxListRequests, start_after));
      }
      std::vector<std::pair<std::string, std::string>> query = {
          {"list-type", "2"},
          {"prefix", options_.key_prefix},
          {"max-keys", std::to_string(std::min(kMaxKeysPerPage, limit - out.size()))}};
      if (!start_after.empty()) query.emplace_back("start-after", start_after);
      auto call =
          Call(*cleanup_, http::verb::get, BucketPath(), std::move(query), nullptr, deadline);
      Result<Answer> answer = co_await std::move(call);
      if (!answer.ok()) co_return answer.error();
      if (answer->status != 200) co_return StatusError("List", *answer);
      auto page = s3::ParseListObjectsV2(answer->body);
      if (!page) co_return BadAnswer("List", "the answer is not a ListBucketResult");
      for (const s3::ListedObject& object : page->objects) {
        // Keys come in ascending byte order after start-after. One that does not is a listing
        // that ignores where we asked it to start: following it would walk the same page forever.
        if (object.key <= start_after) {
          co_return BadAnswer("List", fmt::format("the listing does not advance: key '{}' after "
                                                  "'{}' (start-after ignored?)",
                                                  object.key, start_after));
        }
        start_after = object.key;
        if (!object.key.starts_with(options_.key_prefix)) continue;
        auto id = PasteId::Parse(std::string_view(object.key).substr(options_.key_prefix.size()));
        if (!id) continue;
        out.push_back(BlobInfo{*id, object.modified_at});
        if (out.size() >= limit) break;
      }
      if (!page->truncated) break;
      if (page->objects.empty()) {
        co_return BadAnswer("List", "a truncated page with no keys: the listing does not advance");
      }
    }
    co_return out;
  }

 private:
  // Object keys are built only from a validated PasteId: 12 base62 characters, nothing to escape
  // and nothing that could climb out of the prefix.
  std::string ObjectPath(const PasteId& id) const {
    return BucketPath() + (options_.path_style ? "/" : "") +
           s3::UriEncode(options_.key_prefix + std::string(id.view()), true);
  }
  std::string BucketPath() const {
    return options_.path_style ? "/" + s3::UriEncode(options_.bucket, false) : "/";
  }

  // Sends one DeleteObjects request for `keys`. True when the peer took it and every key is gone;
  // false when the peer does not implement DeleteObjects (remembered, and logged once); an error
  // naming the first key that failed otherwise.
  awaitable<Result<bool>> DeleteBatch(std::vector<std::string> keys, Deadline deadline) {
    batch_deletes_sent_.fetch_add(1, std::memory_order_relaxed);
    auto body = std::make_shared<const std::string>(s3::DeleteObjectsBody(keys));
    // S3 refuses a DeleteObjects without a checksum of its body (Content-MD5 or an
    // x-amz-checksum-* header). Signed with the rest, as every header given to Sign is.
    Headers headers = {{"content-md5", s3::Md5Base64(*body)}, {"content-type", "application/xml"}};
    auto call = Call(*cleanup_, http::verb::post, BucketPath(), {{"delete", ""}}, std::move(body),
                     deadline, std::move(headers));
    Result<Answer> answer = co_await std::move(call);
    if (!answer.ok()) co_return answer.error();
    if (answer->status != 200) {
      const s3::S3ErrorBody error = s3::ParseErrorBody(answer->body);
      const bool not_implemented =
          answer->status == 501 ||
          ((answer->status == 400 || answer->status == 405) &&
           (error.code == "NotImplemented" || error.code == "MethodNotAllowed"));
      if (not_implemented) {
        if (batch_delete_works_.exchange(false)) {
          spdlog::warn(
              "S3 {}:{} does not implement DeleteObjects (HTTP {}{}{}): this store now removes a "
              "batch of bodies one DELETE at a time",
              endpoint_.host, endpoint_.port, answer->status, error.code.empty() ? "" : " ",
              error.code);
        }
        co_return false;
      }
      co_return StatusError("DeleteObjects", *answer);
    }
    auto result = s3::ParseDeleteResult(answer->body);
    if (!result) co_return BadAnswer("DeleteObjects", "the answer is not a DeleteResult");
    for (const s3::DeleteError& error : result->errors) {
      // Absent is gone, as Delete takes it (S3 itself does not report absent keys).
      if (error.code == "NoSuchKey") continue;
      co_return MakeError(ErrorCode::kUnavailable,
                          fmt::format("S3 DeleteObjects {}:{}: key '{}' not deleted: {}{}{}",
                                      endpoint_.host, endpoint_.port, error.key, error.code,
                                      error.message.empty() ? "" : ": ", error.message),
                          error.code == "SlowDown" ? "storage_slow_down" : "storage_unavailable");
    }
    co_return true;
  }

  using Headers = std::vector<std::pair<std::string, std::string>>;

  std::shared_ptr<const SignedRequest> Sign(http::verb method, std::string path,
                                            std::vector<std::pair<std::string, std::string>> query,
                                            std::shared_ptr<const std::string> body,
                                            const std::string& payload_sha256,
                                            const Headers& extra_headers) const {
    s3::SigV4Request to_sign;
    to_sign.method = std::string(http::to_string(method));
    to_sign.encoded_path = path;
    to_sign.query = std::move(query);
    to_sign.payload_sha256 = payload_sha256;
    const std::string amz_date = s3::AmzDate(SystemClock::Instance().UnixSeconds());
    to_sign.headers = {{"host", host_header_},
                       {"x-amz-content-sha256", to_sign.payload_sha256},
                       {"x-amz-date", amz_date}};
    if (!options_.session_token.empty()) {
      to_sign.headers.emplace_back("x-amz-security-token", options_.session_token);
    }
    to_sign.headers.insert(to_sign.headers.end(), extra_headers.begin(), extra_headers.end());
    const s3::SigV4Key key{options_.access_key, options_.secret_key, options_.region, "s3"};
    auto request = std::make_shared<SignedRequest>();
    request->method = method;
    request->target = path;
    const std::string query_string = s3::CanonicalQuery(to_sign.query);
    if (!query_string.empty()) request->target += "?" + query_string;
    request->headers = to_sign.headers;
    request->headers.emplace_back("authorization", s3::Authorization(to_sign, key, amz_date));
    request->headers.emplace_back("user-agent", "sluice");
    request->body = std::move(body);
    return request;
  }

  awaitable<Result<Answer>> Call(Pool& pool, http::verb method, std::string path,
                                 std::vector<std::pair<std::string, std::string>> query,
                                 std::shared_ptr<const std::string> body, Deadline deadline,
                                 Headers headers = {}) {
    // Hashed here, on the caller's thread, before a connection is held.
    const std::string payload_sha256 = body ? s3::Sha256Hex(*body) : std::string(kEmptySha256);
    auto acquire = pool.Acquire(deadline);
    Result<Pool::Lease> lease = co_await std::move(acquire);
    if (!lease.ok()) co_return lease.error();
    if (deadline.Expired(SystemClock::Instance())) {
      // Out of time while waiting: keep the connection, which is fine, rather than let the
      // expiry close it mid-request.
      lease->reusable = true;
      co_return MakeError(ErrorCode::kDeadlineExceeded,
                          "S3: the deadline passed while waiting for a connection",
                          "deadline_exceeded");
    }
    const std::string sni = ResolvableHost(endpoint_.host);
    // An idle connection has nothing to say: bytes waiting on it are the tail of an answer we did
    // not frame right, and would be read as the answer to our request.
    if ((*lease)->connected && (*lease)->HasUnreadBytes()) lease->Replace();
    for (int attempt = 0;; ++attempt) {
      // Signed per attempt: the date in the signature is part of what the peer checks.
      auto request = Sign(method, path, query, body, payload_sha256, headers);
      auto exchange = asio::co_spawn((*lease)->strand(),
                                     RunExchange(&**lease, endpoint_, sni, std::move(request),
                                                 options_.max_body_bytes, deadline, &pool.opened()),
                                     asio::use_awaitable);
      Exchange out = co_await std::move(exchange);
      if (out.stage == Exchange::Stage::kDone) {
        lease->reusable = out.keep_alive;
        if (!out.in_step) {
          co_return BadAnswer(http::to_string(method),
                              fmt::format("HTTP {} followed by bytes past its end", out.status));
        }
        co_return Answer{out.status, std::move(out.body)};
      }
      if (out.stale && attempt == 0 && !deadline.Expired(SystemClock::Instance())) {
        lease->Replace();
        continue;
      }
      co_return TransportError(http::to_string(method), out);
    }
  }

  Error TransportError(boost::string_view method, const Exchange& out) const {
    const std::string where =
        fmt::format("S3 {} {}:{}", std::string(method), endpoint_.host, endpoint_.port);
    if (out.ec == beast::error::timeout) {
      return MakeError(ErrorCode::kDeadlineExceeded,
                       fmt::format("{}: no answer before the deadline", where),
                       "deadline_exceeded");
    }
    if (out.stage == Exchange::Stage::kConnect) {
      // Nothing left this process: the one case a caller may retry, and what opens the breaker.
      Error e = MakeError(
          ErrorCode::kUnavailable, fmt::format("{}: cannot connect: {}", where, out.ec.message()),
          out.ec == asio::error::connection_refused ? "connection_refused" : "storage_unavailable");
      e.never_sent = true;
      return e;
    }
    return MakeError(ErrorCode::kUnavailable,
                     fmt::format("{}: connection failed: {}", where, out.ec.message()),
                     "storage_unavailable");
  }

  static Error StatusError(std::string_view what, const Answer& answer) {
    const s3::S3ErrorBody body = s3::ParseErrorBody(answer.body);
    const std::string detail =
        body.code.empty() ? std::string() : fmt::format(": {}: {}", body.code, body.message);
    if (answer.status == 403 || answer.status == 401) {
      return MakeError(
          ErrorCode::kUnavailable,
          fmt::format("S3 {} refused (HTTP {}){}; check the credentials, region and bucket", what,
                      answer.status, detail),
          "storage_denied");
    }
    if (answer.status == 503 || answer.status >= 500 || body.code == "NoSuchBucket") {
      return MakeError(ErrorCode::kUnavailable,
                       fmt::format("S3 {} failed (HTTP {}){}", what, answer.status, detail),
                       body.code == "SlowDown" ? "storage_slow_down" : "storage_unavailable");
    }
    // Redirects, interim or unknown statuses: the store answered wrongly, which is its failure
    // and a 503, not ours (500 is kept for broken invariants of this process). A redirect is not
    // followed: the endpoint and region are configuration, and a signed request is bound to them.
    const bool redirect = answer.status >= 300 && answer.status < 400;
    return MakeError(
        ErrorCode::kUnavailable,
        fmt::format("S3 {}: unexpected HTTP {}{}{}", what, answer.status, detail,
                    redirect ? "; redirects are not followed: check the endpoint and region" : ""),
        "storage_bad_answer");
  }

  Error BadAnswer(boost::string_view method, std::string_view what) const {
    return MakeError(
        ErrorCode::kUnavailable,
        fmt::format("S3 {} {}:{}: {}", std::string(method), endpoint_.host, endpoint_.port, what),
        "storage_bad_answer");
  }

  S3Options options_;
  ssl::context tls_context_;
  Endpoint endpoint_;
  std::string host_header_;
  std::atomic<uint64_t> opened_{0};
  std::atomic<uint64_t> batch_deletes_sent_{0};
  std::atomic<uint64_t> single_deletes_sent_{0};
  /// Cleared, for the store's life, by the first answer saying the peer has no DeleteObjects.
  std::atomic<bool> batch_delete_works_{true};
  std::shared_ptr<Pool> get_;
  std::shared_ptr<Pool> put_;
  std::shared_ptr<Pool> cleanup_;
};

std::string GetEnv(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::string(value) : std::string();
}

}  // namespace

Result<S3Options> S3Options::FromEnvironment(std::string bucket, std::string endpoint,
                                             std::string_view path_style) {
  S3Options options;
  options.bucket = std::move(bucket);
  options.endpoint = std::move(endpoint);
  options.access_key = GetEnv("AWS_ACCESS_KEY_ID");
  options.secret_key = GetEnv("AWS_SECRET_ACCESS_KEY");
  options.session_token = GetEnv("AWS_SESSION_TOKEN");
  options.region = GetEnv("AWS_REGION");
  if (options.region.empty()) options.region = GetEnv("AWS_DEFAULT_REGION");
  if (options.region.empty()) options.region = "us-east-1";
  std::string missing;
  if (options.access_key.empty()) missing = "AWS_ACCESS_KEY_ID";
  if (options.secret_key.empty()) {
    missing += missing.empty() ? "AWS_SECRET_ACCESS_KEY" : " and AWS_SECRET_ACCESS_KEY";
  }
  if (!missing.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     fmt::format("S3 blob store: {} not set in the environment", missing),
                     "missing_credentials");
  }
  if (options.bucket.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "S3 blob store: no bucket", "no_bucket");
  }
  if (!options.endpoint.empty() && !ParseEndpoint(options.endpoint)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "S3 endpoint '" + options.endpoint + "' is not http(s)://HOST[:PORT]",
                     "bad_endpoint");
  }
  if (path_style.empty() || path_style == "auto") {
    options.path_style = !options.endpoint.empty();
  } else if (path_style == "true" || path_style == "false") {
    options.path_style = path_style == "true";
  } else {
    return MakeError(ErrorCode::kInvalidArgument, "s3_path_style: choose auto, true or false",
                     "bad_path_style");
  }
  return options;
}

std::optional<std::string> ParseS3BlobUrl(std::string_view url) {
  if (!url.starts_with("s3://")) return std::nullopt;
  url.remove_prefix(5);
  if (url.ends_with('/')) url.remove_suffix(1);
  // Bucket names: 3 to 63 of lowercase letters, digits, dots and hyphens.
  if (url.size() < 3 || url.size() > 63 ||
      url.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") != std::string_view::npos) {
    return std::nullopt;
  }
  return std::string(url);
}

std::unique_ptr<S3BlobStore> MakeS3BlobStore(S3Options options,
                                             boost::asio::any_io_executor executor) {
  return std::make_unique<S3BlobStoreImpl>(std::move(options), std::move(executor));
}

}  // namespace sluice::store
