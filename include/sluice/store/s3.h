// The S3-compatible blob store ("the bucket" of the scaled-out deployment): AWS S3, MinIO, Ceph
// RGW, or s3rver in tests. Only src/app (and tests) name it; everything else sees BlobStore.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/common/result.h"
#include "sluice/store/blob_store.h"

namespace sluice::store {

struct S3Options {
  /// The bucket; must exist. Required.
  std::string bucket;
  /// Base URL of the store, http:// (local peers) or https://.
  /// Default: https://s3.REGION.amazonaws.com.
  std::string endpoint;
  /// Default: us-east-1.
  std::string region = "us-east-1";
  /// Credentials. Required.
  std::string access_key;
  std::string secret_key;
  /// Temporary credentials' token, sent as x-amz-security-token. Default: none.
  std::string session_token;
  /// Path-style URLs (endpoint/bucket/key), which s3rver, MinIO and most local peers need;
  /// virtual-host style (bucket.endpoint/key) otherwise. Default: false for AWS, true for any
  /// other endpoint (FromEnvironment decides).
  bool path_style = false;
  /// Every object key is this prefix plus a validated paste id. Default: "pastes/".
  std::string key_prefix = "pastes/";
  /// Connections per purpose, each pool bounded on its own so a cleanup backlog cannot take the
  /// connections of reads or creates (docs/overload.md, "Read"). Size them to the slots that feed
  /// them. Defaults: 200 (GET, the read slots), 50 (PUT, the create slots), 4 (DELETE and List).
  size_t get_connections = 200;
  size_t put_connections = 50;
  size_t cleanup_connections = 4;
  /// An idle kept-alive connection older than this is closed instead of reused: peers close idle
  /// connections on their own (Node's server after 5 s, AWS after about 20 s), and reusing one
  /// they are closing wastes a request. Default: 4 s.
  std::chrono::milliseconds max_idle = std::chrono::seconds(4);
  /// Largest object body read back. Default: 64 MiB.
  uint64_t max_body_bytes = 64ull << 20;

  /// Options for `bucket`, with credentials and region from AWS_ACCESS_KEY_ID,
  /// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN (optional) and AWS_REGION (or AWS_DEFAULT_REGION;
  /// default us-east-1). An empty `endpoint` means AWS. `path_style` empty or "auto" means the
  /// default above; otherwise "true" or "false". Returns InvalidArgument naming what is missing or
  /// wrong.
  static Result<S3Options> FromEnvironment(std::string bucket, std::string endpoint,
                                           std::string_view path_style = {});
};

/// Returns the bucket of an `s3://BUCKET` blob setting, nothing if `url` is not one. A path or
/// anything after the bucket is refused: the key layout is the store's, not the operator's.
std::optional<std::string> ParseS3BlobUrl(std::string_view url);

/// Removal requests a store has made since it was made (each call once, whatever its retry).
struct S3DeleteRequests {
  /// DeleteObjects (POST /BUCKET?delete), up to 1,000 keys each.
  uint64_t batches = 0;
  /// DELETE of one object.
  uint64_t singles = 0;
};

/// A BlobStore over the S3 REST API: SigV4-signed requests on kept-alive connections, one bounded
/// pool per purpose (GET; PUT; DELETE, DeleteObjects and List), each call ended at its deadline
/// with its connection closed. Thread-safe.
///
/// DeleteMany (the expiry sweep's batch) sends one DeleteObjects request per 1,000 bodies. A peer
/// that does not implement it (501, or 400/405 NotImplemented or MethodNotAllowed) is remembered:
/// from then on this store deletes a batch one DELETE a body, and says so once in the log.
class S3BlobStore : public BlobStore {
 public:
  /// Connections opened since the store was made, all pools together: the keep-alive check.
  virtual uint64_t ConnectionsOpened() const = 0;
  /// What DeleteMany and Delete sent: the check that a batch went in one request.
  virtual S3DeleteRequests DeleteRequestsSent() const = 0;
};

/// Makes the store; its sockets and timers run on `executor`, which must outlive the store and
/// keep running while calls are in flight. Throws std::invalid_argument for a malformed endpoint
/// or missing bucket or credentials.
std::unique_ptr<S3BlobStore> MakeS3BlobStore(S3Options options,
                                             boost::asio::any_io_executor executor);

}  // namespace sluice::store
