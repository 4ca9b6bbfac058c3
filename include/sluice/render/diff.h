// The diff of a forked paste against its parent: a unified diff (Myers' O(ND) algorithm, from
// Debian's header-only libdtl), shown highlighted as a diff.
#pragma once

#include <string>
#include <string_view>

namespace sluice::render {

/// The unified diff (3 lines of context) of `parent` into `child`, line by line, with `---` and
/// `+++` headers naming them; "" when they are equal. Lines are compared as whole strings, after
/// the common head and tail are set aside (a fork usually changes a few lines in the middle,
/// which then costs the diff only that middle). Blocking CPU work: O((N + M) * D) time for N and
/// M lines differing in D, which for two 1 MB texts that differ everywhere is far past any render
/// timeout, so the server runs it only in HighlightWorkers' processes, killed at the timeout.
/// Thread-safe (no state outside its arguments).
std::string UnifiedDiff(std::string_view parent, std::string_view child,
                        std::string_view parent_name, std::string_view child_name);

/// The one buffer a diff job sends to a worker (parent, then child, then the two names), and its
/// inverse; false for a buffer not made by EncodeDiffJob.
std::string EncodeDiffJob(std::string_view parent, std::string_view child,
                          std::string_view parent_name, std::string_view child_name);
bool DecodeDiffJob(std::string_view job, std::string_view& parent, std::string_view& child,
                   std::string_view& parent_name, std::string_view& child_name);

}  // namespace sluice::render
