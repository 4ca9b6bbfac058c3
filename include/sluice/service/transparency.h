// The transparency report (docs/moderation.md, "Transparency"): what moderation did, per month,
// read from the durable counters of the metadata store (include/sluice/store/transparency.h), so
// that it survives restarts and every process of a fleet on one store answers the same.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sluice/store/transparency.h"

namespace sluice::service {

/// A quantile of the time to action, read from the buckets: the bound of the bucket it falls in,
/// so the true value is at most this and more than the bound below it. None when nothing was
/// timed; `beyond` when it falls past the last bound.
struct TimeQuantile {
  int64_t at_most_seconds = 0;
  bool beyond = false;
};

/// One month of the report. Every map holds the labels the counters had (none: nothing counted).
struct MonthFigures {
  /// "YYYY-MM", UTC.
  std::string month;
  std::map<std::string, int64_t> notices_by_category{};
  std::map<std::string, int64_t> notices_by_sender{};
  int64_t notices = 0;
  /// By cause: "votes" (reports from report_hide_threshold networks), "notice".
  std::map<std::string, int64_t> withholds{};
  int64_t takedowns = 0;
  int64_t restores = 0;
  int64_t dismissals = 0;
  /// Reviews whose time to action was measured (each took an entry out of the review queue).
  int64_t timed_actions = 0;
  std::optional<TimeQuantile> median{};
  std::optional<TimeQuantile> p95{};
  /// Creates refused 451 blocked_content.
  int64_t reuploads_blocked = 0;
  /// "network" (client blocks), "content" (digests added to the content blocklist).
  std::map<std::string, int64_t> blocks{};
};

/// The report: the months asked for, newest first, each present even when nothing happened.
struct TransparencyReport {
  std::vector<MonthFigures> months;
  /// Unix seconds of the store read it was made from.
  int64_t read_at = 0;
};

/// The `count` months ending with the one `now` falls in, newest first ("YYYY-MM", UTC).
std::vector<std::string> LastMonths(int64_t now, int count);

/// The quantile `q` (0 < q <= 1) of the time-to-action buckets `by_bound` (a bucket's label, as
/// store::TimeToActionBucket writes it, to its count): the bucket that holds the ceil(q * n)-th
/// smallest time. None when the buckets are empty.
std::optional<TimeQuantile> TimeToActionQuantile(const std::map<std::string, int64_t>& by_bound,
                                                 double q);

/// The report of `months` (newest first) from the counters `rows`; rows of other months and of
/// kinds it does not know are left out.
TransparencyReport SummarizeTransparency(const std::vector<store::TransparencyCount>& rows,
                                         const std::vector<std::string>& months, int64_t read_at);

}  // namespace sluice::service
