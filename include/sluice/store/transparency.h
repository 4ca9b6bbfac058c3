// The durable counters of the transparency report (docs/moderation.md, "Transparency"): one row
// per (month, kind, label) with a count, bumped by the moderation action it counts, in that
// action's own transaction where the store allows, so that a crash cannot count an action that
// did not happen and every process of a fleet reads the same numbers.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::store {

/// One counter of the report, or an amount to add to it (MetaStore::AddTransparency).
struct TransparencyCount {
  /// "YYYY-MM", UTC (TransparencyMonth).
  std::string month;
  /// One of the kTally* kinds.
  std::string kind;
  /// The kind's bounded label ("" when it has none): a withholding's cause, a block's list, a
  /// time-to-action bucket, a notice's category or sender.
  std::string label;
  int64_t count = 0;

  bool operator==(const TransparencyCount&) const = default;
};

// The kinds. The stores bump those marked "store" themselves (the MetaStore contract); the
// moderation service passes the others with the change they count (ModerationChange::tally), and
// the notice intake counts its own.
/// label: the cause, kWithholdVotes (store: a report's withholding) or kWithholdNotice.
inline constexpr std::string_view kTallyWithhold = "withhold";
inline constexpr std::string_view kTallyTakedown = "takedown";
/// A withheld paste served again by a review.
inline constexpr std::string_view kTallyRestore = "restore";
/// Reports closed on a paste that was served all along.
inline constexpr std::string_view kTallyDismiss = "dismiss";
/// store: a review that took a paste out of the queue; label: TimeToActionBucket.
inline constexpr std::string_view kTallyTimeToAction = "time_to_action";
/// Creates refused 451 blocked_content (counted in memory, added in batches).
inline constexpr std::string_view kTallyReuploadBlocked = "reupload_blocked";
/// store: a network block (label kBlockNetwork) or a digest added to the content blocklist
/// (kBlockContent), by an operator or by a takedown.
inline constexpr std::string_view kTallyBlock = "block";
/// A notice by its category, and by the kind of its sender (the notice intake's).
inline constexpr std::string_view kTallyNoticeCategory = "notice_category";
inline constexpr std::string_view kTallyNoticeSender = "notice_sender";

inline constexpr std::string_view kWithholdVotes = "votes";
inline constexpr std::string_view kWithholdNotice = "notice";
inline constexpr std::string_view kBlockNetwork = "network";
inline constexpr std::string_view kBlockContent = "content";

/// The upper bounds (seconds) of the time-to-action buckets; a time past the last is "inf".
/// Each bound is at most 2.5 times the one before, so a quantile read as its bucket's bound is
/// at most 2.5 times the true value and never below it.
inline constexpr std::array<int64_t, 22> kTimeToActionBounds = {
    60,    120,   300,   600,   900,   1800,  2700,   3600,   5400,   7200,   10800,
    14400, 21600, 28800, 43200, 64800, 86400, 172800, 259200, 432000, 604800, 1209600};

/// The label of the bucket of `seconds` (negative counts as 0): its upper bound, or "inf".
inline std::string TimeToActionBucket(int64_t seconds) {
  for (int64_t bound : kTimeToActionBounds) {
    if (seconds <= bound) return std::to_string(bound);
  }
  return "inf";
}

/// "YYYY-MM" of the UTC month that `unix_seconds` falls in.
inline std::string TransparencyMonth(int64_t unix_seconds) {
  using namespace std::chrono;
  const year_month_day ymd{floor<days>(sys_seconds{seconds{unix_seconds}})};
  const int y = static_cast<int>(ymd.year());
  const unsigned m = static_cast<unsigned>(ymd.month());
  std::string out = std::to_string(y);
  out += m < 10 ? "-0" : "-";
  out += std::to_string(m);
  return out;
}

/// Counter rows a report reads at most: 12 months of every kind and label, with room to spare.
inline constexpr size_t kMaxTransparencyRows = 12 * 128;

}  // namespace sluice::store
