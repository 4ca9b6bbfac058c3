// Store decorators that route every call through its Dependency: timeouts capped by the request's
// deadline, breaker, retry rule, latency histograms. The service sees only the interfaces.
#pragma once

#include <memory>

#include "sluice/service/dependency.h"
#include "sluice/store/blob_store.h"
#include "sluice/store/meta_store.h"

namespace sluice::service {

/// Per-call timeouts (docs/overload.md, "Retries, breakers, timeouts"). Each is capped by what is
/// left of the request's deadline.
struct CallTimeouts {
  /// Body PUT, inside the 2 s create budget. Default: 1 s.
  Duration blob_put = std::chrono::seconds(1);
  /// Body GET, inside the 300 ms read budget. Default: 200 ms.
  Duration blob_get = std::chrono::milliseconds(200);
  /// Body delete and listing, background work. Default: 5 s.
  Duration blob_cleanup = std::chrono::seconds(5);
  /// Row insert of a create. Default: 50 ms.
  Duration meta_insert = std::chrono::milliseconds(50);
  /// Point read of a row. Default: 20 ms.
  Duration meta_get = std::chrono::milliseconds(20);
  /// Tombstone commit of a delete. Default: 1 s.
  Duration meta_delete = std::chrono::seconds(1);
  /// Outbox, sweeper and reaper queries, background work. Default: 5 s.
  Duration meta_background = std::chrono::seconds(5);
};

/// `inner` and `dependency` must outlive the decorator.
std::unique_ptr<store::BlobStore> MakeGuardedBlobStore(store::BlobStore& inner,
                                                       Dependency& dependency,
                                                       CallTimeouts timeouts);
std::unique_ptr<store::MetaStore> MakeGuardedMetaStore(store::MetaStore& inner,
                                                       Dependency& dependency,
                                                       CallTimeouts timeouts);

}  // namespace sluice::service
