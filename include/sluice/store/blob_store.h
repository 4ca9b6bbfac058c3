// BlobStore: where paste bodies live ("the bucket").
#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/admission/deadline.h"
#include "sluice/common/result.h"
#include "sluice/store/paste.h"

namespace sluice::store {

/// Stores paste bodies, one object per paste. Implementations are thread-safe.
class BlobStore {
 public:
  virtual ~BlobStore() = default;

  /// Stores `body` durably under `id`; on success the bytes survive a crash. The store holds its
  /// share of `body` for as long as its work runs, which may be longer than the caller waits: a
  /// PUT abandoned at its timeout keeps its body (and whatever the owner attached to it) alive
  /// until the write really ends. Returns Unavailable on a storage failure and DeadlineExceeded
  /// past `deadline`. Never retried by the caller after a failure: the bytes may have landed, and
  /// the orphan reaper owns them then.
  virtual boost::asio::awaitable<Status> Put(PasteId id, std::shared_ptr<const std::string> body,
                                             admission::Deadline deadline) = 0;

  /// Returns the whole body, NotFound if absent, Unavailable on a storage failure, and Internal
  /// with reason kBodyUndecodable when the stored bytes are damaged past decoding.
  virtual boost::asio::awaitable<Result<std::string>> Get(PasteId id,
                                                          admission::Deadline deadline) = 0;

  /// Removes the body. Absent is success, so a repeated delete is harmless.
  virtual boost::asio::awaitable<Status> Delete(PasteId id, admission::Deadline deadline) = 0;

  /// Removes every body of `ids`, as Delete removes one. On failure some may be gone already;
  /// each removal is idempotent, so the caller repeats the whole call. This one deletes them in
  /// turn; a store that can remove many in one durable step overrides it: the expiry sweep
  /// removes a batch at a time, and one commit a body held it to 160 pastes/s
  /// (bench/results/growth.md).
  virtual boost::asio::awaitable<Status> DeleteMany(std::vector<PasteId> ids,
                                                    admission::Deadline deadline);

  /// DeleteMany for the expiry sweep, whose next step purges the rows of `ids` (MetaStore::Purge):
  /// a store whose bodies live with those rows, and go in the purge's own transaction, has nothing
  /// to do first (meta.db's inline bodies: clearing each row's body before deleting the row wrote
  /// every row's page twice). The others delete as DeleteMany does.
  virtual boost::asio::awaitable<Status> DeleteManyBeforePurge(std::vector<PasteId> ids,
                                                               admission::Deadline deadline) {
    return DeleteMany(std::move(ids), deadline);
  }

  /// Lists up to `limit` stored bodies with ids greater than `after` (empty: from the start), in id
  /// order, for the orphan reaper's resumable scan. A store may leave out the bodies that cannot
  /// be orphans (the embedded store's bodies kept with their rows:
  /// src/store/sqlite/sqlite_meta_reads.cc).
  virtual boost::asio::awaitable<Result<std::vector<BlobInfo>>> List(
      std::string after, size_t limit, admission::Deadline deadline) = 0;
};

/// The reason of a Get whose stored body does not decode (include/sluice/store/body_codec.h):
/// damage on disk, which the service answers as it answers a body that does not match its row.
inline constexpr std::string_view kBodyUndecodable = "stored_body_corrupt";

/// The first `limit` of two id-ordered listings, in id order; an id in both is listed once. Every
/// id up to the last one returned has been seen in both, so a cursor resumed from it skips nothing.
std::vector<BlobInfo> MergeListings(std::vector<BlobInfo> a, std::vector<BlobInfo> b, size_t limit);

}  // namespace sluice::store
