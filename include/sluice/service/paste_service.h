// PasteService: the create, read and delete use-cases and the order of their checks. It knows the
// stores through their interfaces and time through a Clock; it knows nothing of sockets or HTTP.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/common/result.h"
#include "sluice/service/paste_cache.h"
#include "sluice/store/blob_store.h"
#include "sluice/store/meta_store.h"

namespace sluice::service {

struct ServiceOptions {
  /// Largest body accepted, in bytes. Default: 1,000,000.
  uint64_t max_paste_bytes = 1'000'000;
  /// Expiry when the creator names none; must be on the allow-list. Default: 1w.
  std::chrono::seconds default_ttl{7 * 86400};
  /// Longest expiry the operator allows; allow-list entries above it are refused. Default: 30d.
  std::chrono::seconds max_ttl{30 * 86400};
  /// Whole budget of one create (PUT then insert). Default: 2 s.
  std::chrono::milliseconds create_budget{2000};
  /// Timeout of the body PUT inside the create budget. Default: 1 s.
  std::chrono::milliseconds put_timeout{1000};
  /// Timeout of the row insert. Default: 50 ms. (The embedded SQLite group commit needs more under
  /// a burst; the server configures it.)
  std::chrono::milliseconds insert_timeout{50};
  /// Whole budget of one origin read. Default: 300 ms.
  std::chrono::milliseconds read_budget{300};
};

/// What a create's request line and headers say, before any of the body is read.
struct CreateHeaders {
  /// Content-Length, if the request declared one.
  std::optional<uint64_t> declared_length;
  /// Transfer-Encoding: chunked (or any transfer coding): the length is not bounded up front.
  bool chunked = false;
};

struct CreatedPaste {
  store::PasteId id;
  std::string delete_token;
  int64_t expires_at = 0;
};

/// The create, read and delete use-cases. Thread-safe; the stores and cache must outlive it.
class PasteService {
 public:
  PasteService(store::MetaStore& meta, store::BlobStore& blobs, PasteCache& cache,
               const Clock& clock, MetricsRegistry& metrics, ServiceOptions options);

  const ServiceOptions& options() const { return options_; }

  /// Step 1 of a create, from the headers alone: LengthRequired without a bounded length, TooLarge
  /// over the limit. `allowance` is extra framing the transport adds (multipart boundaries).
  Status CheckCreateHeaders(const CreateHeaders& headers, uint64_t allowance = 0) const;

  /// Validates the body and TTL (InvalidArgument), stores the body, then the row. Nothing durable
  /// happens for a rejected create; a failed PUT is Unavailable and leaves no row.
  boost::asio::awaitable<Result<CreatedPaste>> Create(std::string body, std::string_view ttl);

  /// Returns a live paste: NotFound for malformed ids (without touching storage), absent, expired
  /// or deleted pastes; Unavailable when a store fails, never NotFound.
  boost::asio::awaitable<Result<CachedPaste>> Read(std::string_view id_text);

  /// Deletes with the token. NotFound for a malformed id, a missing paste or a wrong token alike;
  /// success again for a paste already deleted with the right token.
  boost::asio::awaitable<Status> Delete(std::string_view id_text, std::string_view token);

 private:
  bool IsLive(const store::PasteMeta& meta) const;

  store::MetaStore& meta_;
  store::BlobStore& blobs_;
  PasteCache& cache_;
  const Clock& clock_;
  const ServiceOptions options_;
  Counter& cache_hits_;
  Counter& cache_misses_;
};

}  // namespace sluice::service
