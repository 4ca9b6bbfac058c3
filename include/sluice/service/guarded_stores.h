// Store decorators that route every call through its Dependency: timeouts capped by the request's
// deadline, breaker, retry rule, latency histograms. The service sees only the interfaces.
#pragma once

#include <array>
#include <atomic>
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
  /// Reports, reviews, blocks, the audit trail and the review queue (docs/moderation.md). Default:
  /// 1 s.
  Duration meta_moderation = std::chrono::seconds(1);
};

/// The per-call timeouts a reload replaces (docs/operations.md, "Reload"). A call reads the one it
/// needs when it starts, from atomics: no lock on the read path, and no call needs two of them to
/// agree. A call already started keeps its timeout. Thread-safe.
class LiveCallTimeouts {
 public:
  explicit LiveCallTimeouts(const CallTimeouts& initial);
  LiveCallTimeouts(const LiveCallTimeouts&) = delete;
  LiveCallTimeouts& operator=(const LiveCallTimeouts&) = delete;

  /// The timeouts for calls from now on.
  void Store(const CallTimeouts& next);
  CallTimeouts Load() const;

 private:
  static constexpr size_t kCount = 8;  // the fields of CallTimeouts
  std::array<std::atomic<Duration::rep>, kCount> ticks_{};
};

/// `inner` and `dependency` must outlive the decorator; so must `timeouts` where it is borrowed.
std::unique_ptr<store::BlobStore> MakeGuardedBlobStore(store::BlobStore& inner,
                                                       Dependency& dependency,
                                                       const LiveCallTimeouts& timeouts);
std::unique_ptr<store::MetaStore> MakeGuardedMetaStore(store::MetaStore& inner,
                                                       Dependency& dependency,
                                                       const LiveCallTimeouts& timeouts);
/// With timeouts fixed for the decorator's life.
std::unique_ptr<store::BlobStore> MakeGuardedBlobStore(store::BlobStore& inner,
                                                       Dependency& dependency,
                                                       CallTimeouts timeouts);
std::unique_ptr<store::MetaStore> MakeGuardedMetaStore(store::MetaStore& inner,
                                                       Dependency& dependency,
                                                       CallTimeouts timeouts);

}  // namespace sluice::service
