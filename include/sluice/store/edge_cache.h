// EdgeCache: the CDN or Varnish in front of the app ("the edge"), seen from the app only as the
// place a deleted paste must be purged from.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>
#include <vector>

#include "sluice/admission/deadline.h"
#include "sluice/common/clock.h"
#include "sluice/common/result.h"
#include "sluice/store/paste.h"

namespace sluice::store {

/// Removes cached responses of a paste from the edge. Implementations are thread-safe.
class EdgeCache {
 public:
  virtual ~EdgeCache() = default;

  /// Purges every cached response for the paste (its view and its raw text) from every edge
  /// node. Success only when every node confirmed; Unavailable otherwise, and the caller retries
  /// (a purge is idempotent).
  virtual boost::asio::awaitable<Status> Purge(PasteId id, admission::Deadline deadline) = 0;
};

/// Purges with HTTP PURGE requests for /{id} and /raw/{id} at each base URL
/// ("http://127.0.0.1:6081"), as Varnish (deploy/varnish/sluice.vcl) and most CDNs with a purge
/// endpoint accept them. Throws std::invalid_argument for a URL that is not http://HOST:PORT.
std::unique_ptr<EdgeCache> MakeHttpPurgeEdgeCache(const std::vector<std::string>& base_urls,
                                                  const Clock& clock);

}  // namespace sluice::store
