// PURGE requests to the edge. One short-lived connection per request: purges are rare (one per
// delete) and go to a few nodes, so a connection pool would be more code than it saves.
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <stdexcept>

#include "sluice/store/edge_cache.h"

namespace sluice::store {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using asio::awaitable;
using tcp = asio::ip::tcp;

struct EdgeNode {
  std::string host;
  std::string port;
};

EdgeNode ParseBaseUrl(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  std::string_view rest(url);
  if (!rest.starts_with(kScheme)) {
    throw std::invalid_argument("edge_purge: '" + url + "' is not http://HOST:PORT");
  }
  rest.remove_prefix(kScheme.size());
  while (rest.ends_with('/')) rest.remove_suffix(1);
  const size_t colon = rest.rfind(':');
  EdgeNode node{std::string(rest.substr(0, colon)), "80"};
  if (colon != std::string_view::npos) node.port = std::string(rest.substr(colon + 1));
  int port = 0;
  const auto [end, ec] =
      std::from_chars(node.port.data(), node.port.data() + node.port.size(), port);
  if (node.host.empty() || ec != std::errc() || end != node.port.data() + node.port.size() ||
      port <= 0 || port > 65535 || rest.find('/') != std::string_view::npos) {
    throw std::invalid_argument("edge_purge: '" + url + "' is not http://HOST:PORT");
  }
  return node;
}

class HttpPurgeEdgeCache final : public EdgeCache {
 public:
  HttpPurgeEdgeCache(std::vector<EdgeNode> nodes, const Clock& clock)
      : nodes_(std::move(nodes)), clock_(clock) {}

  awaitable<Status> Purge(PasteId id, admission::Deadline deadline) override {
    for (const EdgeNode& node : nodes_) {
      // The paste's own pages, and its Markdown rendering (public like its view; a fork's diff
      // is always revalidated, so its purge is only tidiness).
      for (const std::string& path : {"/" + id.str(), "/raw/" + id.str(),
                                      "/" + id.str() + "/rendered", "/" + id.str() + "/diff"}) {
        Status purged = co_await PurgeOne(node, path, deadline.Remaining(clock_));
        if (!purged.ok()) co_return purged;
      }
    }
    co_return Ok();
  }

 private:
  static awaitable<Status> PurgeOne(EdgeNode node, std::string path, Duration remaining) {
    auto executor = co_await asio::this_coro::executor;
    tcp::resolver resolver(executor);
    beast::tcp_stream stream(executor);
    boost::system::error_code ec;
    // A purge with no deadline of its own still gives up: an edge that never answers is down.
    remaining = std::min<Duration>(remaining, std::chrono::seconds(10));
    if (remaining <= Duration::zero()) {
      co_return MakeError(ErrorCode::kDeadlineExceeded, "edge purge: no time left", "edge_timeout");
    }
    stream.expires_after(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(remaining));
    auto endpoints = co_await resolver.async_resolve(node.host, node.port,
                                                     asio::redirect_error(asio::use_awaitable, ec));
    if (!ec)
      co_await stream.async_connect(endpoints, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      Error refused =
          MakeError(ErrorCode::kUnavailable,
                    "edge purge: cannot reach " + node.host + ":" + node.port + ": " + ec.message(),
                    "edge_unreachable");
      refused.never_sent = true;
      co_return refused;
    }
    bhttp::request<bhttp::empty_body> req{bhttp::verb::purge, path, 11};
    // The edge keys its cache on the URL alone (deploy/varnish/sluice.vcl), so any Host will do.
    req.set(bhttp::field::host, node.host);
    req.keep_alive(false);
    co_await bhttp::async_write(stream, req, asio::redirect_error(asio::use_awaitable, ec));
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> res;
    if (!ec)
      co_await bhttp::async_read(stream, buffer, res,
                                 asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      co_return MakeError(ErrorCode::kUnavailable, "edge purge of " + path + ": " + ec.message(),
                          "edge_failed");
    }
    // 200: purged; 404: nothing was cached. Anything else means the edge may still serve it.
    if (res.result() != bhttp::status::ok && res.result() != bhttp::status::not_found) {
      co_return MakeError(ErrorCode::kUnavailable,
                          "edge purge of " + path + " answered " + std::to_string(res.result_int()),
                          "edge_refused");
    }
    co_return Ok();
  }

  const std::vector<EdgeNode> nodes_;
  const Clock& clock_;
};

}  // namespace

std::unique_ptr<EdgeCache> MakeHttpPurgeEdgeCache(const std::vector<std::string>& base_urls,
                                                  const Clock& clock) {
  std::vector<EdgeNode> nodes;
  for (const std::string& url : base_urls) nodes.push_back(ParseBaseUrl(url));
  return std::make_unique<HttpPurgeEdgeCache>(std::move(nodes), clock);
}

}  // namespace sluice::store
