// Reading the reputation feeds' files (docs/admission.md, "Reputation feeds"): at start, where a
// feed that cannot be read refuses the start, and at each reload, where it keeps the networks it
// had. A feed of a million prefixes takes a few hundred milliseconds to read and build, so a
// reload does this on a thread of its own (ServerProcess::ReloadFeeds), never on an event loop.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "sluice/admission/reputation_feed.h"

namespace sluice::app {

/// What LoadFeeds built and what it could not.
struct FeedLoad {
  admission::FeedSet feeds;
  /// One line a feed that kept its old networks (or, at start, has none): "NAME: why".
  std::vector<std::string> failures;
  /// The whole load's time: every file read, parsed and built.
  std::chrono::nanoseconds took{};
};

/// Reads and builds every feed of `specs`, in their order. A feed whose file cannot be read or
/// has a line that is no network keeps the networks of the feed of the same name in `previous`
/// (null at start, or a feed new at this reload: then it is left out) and is named in
/// `failures`. Logs each feed it built with its entries, ranges, memory and time.
FeedLoad LoadFeeds(const std::vector<admission::FeedSpec>& specs,
                   const admission::FeedSet* previous);

}  // namespace sluice::app
