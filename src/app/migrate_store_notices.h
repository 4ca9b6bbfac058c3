#pragma once
// The abuse notices' part of `sluice admin migrate-store` (docs/scale-out.md, "Outgrowing one
// box"; docs/moderation.md, "Notices"): copied after the pastes, whose rows carry the state the
// notices put them in, and verified with the rest.

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <optional>

#include "sluice/common/deadline.h"
#include "sluice/store/meta_store.h"

namespace sluice::app::migrate {

/// The deadline of each store call: the copy's own (migrate_store.cc).
using CallDeadlineFn = Deadline (*)();

/// What a copy of the notices did, for its summary.
struct NoticeCopy {
  /// Notices stored on the target by this run.
  uint64_t added = 0;
  /// Pastes closed on the target that the operator had acted on at the source after an earlier
  /// run copied their notice.
  uint64_t closed = 0;
};

/// Copies every source notice, open and closed, in the source's id order (so the target's ids
/// keep their order), with the target's `max_notices`. One the target has already (by sender and
/// reference) is not stored again; its pastes closed at the source since are closed on the
/// target too. False when a read or a write failed (printed as "failed: ...").
boost::asio::awaitable<bool> CopyNotices(store::MetaStore& source, store::MetaStore& target,
                                         int64_t max_notices, int64_t now, CallDeadlineFn deadline,
                                         NoticeCopy& copy);

/// Names each source notice missing on the target or different there (printed as
/// "difference: notice REFERENCE from SENDER: ..."); the number of differences, or none when a read
/// failed.
boost::asio::awaitable<std::optional<uint64_t>> VerifyNotices(store::MetaStore& source,
                                                              store::MetaStore& target,
                                                              CallDeadlineFn deadline);

/// The source's notices, open and closed (the dry run's count); none when a read failed.
boost::asio::awaitable<std::optional<uint64_t>> CountNotices(store::MetaStore& source,
                                                             CallDeadlineFn deadline);

}  // namespace sluice::app::migrate
