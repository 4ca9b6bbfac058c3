#include "sluice/service/transparency.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string_view>

namespace sluice::service {

std::vector<std::string> LastMonths(int64_t now, int count) {
  using namespace std::chrono;
  const year_month_day ymd{floor<days>(sys_seconds{seconds{now}})};
  year_month ym{ymd.year(), ymd.month()};
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    const sys_days first{ym / 1};
    out.push_back(
        store::TransparencyMonth(duration_cast<seconds>(first.time_since_epoch()).count()));
    ym -= months{1};
  }
  return out;
}

namespace {

// A bucket's label as the stores write it: a bound in seconds, or "inf" past the last.
struct TimeBucket {
  int64_t bound = 0;
  bool beyond = false;
  int64_t count = 0;
};

std::optional<TimeBucket> ParseTimeBucket(const std::string& label, int64_t count) {
  if (label == "inf") return TimeBucket{0, true, count};
  int64_t bound = 0;
  if (label.empty() || label.size() > 12) return std::nullopt;
  for (char c : label) {
    if (c < '0' || c > '9') return std::nullopt;
    bound = bound * 10 + (c - '0');
  }
  return TimeBucket{bound, false, count};
}

}  // namespace

std::optional<TimeQuantile> TimeToActionQuantile(const std::map<std::string, int64_t>& by_bound,
                                                 double q) {
  std::vector<TimeBucket> buckets;
  int64_t total = 0;
  for (const auto& [label, count] : by_bound) {
    if (count <= 0) continue;
    if (auto b = ParseTimeBucket(label, count)) {
      buckets.push_back(*b);
      total += count;
    }
  }
  if (total == 0) return std::nullopt;
  std::sort(buckets.begin(), buckets.end(), [](const TimeBucket& a, const TimeBucket& b) {
    return std::make_pair(a.beyond, a.bound) < std::make_pair(b.beyond, b.bound);
  });
  // The rank of the quantile among the timed actions, 1-based: the median of 4 is the 2nd.
  const auto rank = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(total))));
  int64_t seen = 0;
  for (const TimeBucket& b : buckets) {
    seen += b.count;
    if (seen >= rank) return TimeQuantile{b.bound, b.beyond};
  }
  return TimeQuantile{buckets.back().bound, buckets.back().beyond};
}

TransparencyReport SummarizeTransparency(const std::vector<store::TransparencyCount>& rows,
                                         const std::vector<std::string>& months, int64_t read_at) {
  TransparencyReport report;
  report.read_at = read_at;
  std::map<std::string, size_t> index;
  for (const std::string& m : months) {
    index.emplace(m, report.months.size());
    report.months.push_back(MonthFigures{m});
  }
  std::vector<std::map<std::string, int64_t>> times(report.months.size());
  for (const store::TransparencyCount& row : rows) {
    const auto at = index.find(row.month);
    if (at == index.end()) continue;
    MonthFigures& f = report.months[at->second];
    const std::string_view kind = row.kind;
    if (kind == store::kTallyNoticeCategory) {
      f.notices_by_category[row.label] += row.count;
      f.notices += row.count;
    } else if (kind == store::kTallyNoticeSender) {
      f.notices_by_sender[row.label] += row.count;
    } else if (kind == store::kTallyWithhold) {
      f.withholds[row.label] += row.count;
    } else if (kind == store::kTallyTakedown) {
      f.takedowns += row.count;
    } else if (kind == store::kTallyRestore) {
      f.restores += row.count;
    } else if (kind == store::kTallyDismiss) {
      f.dismissals += row.count;
    } else if (kind == store::kTallyTimeToAction) {
      times[at->second][row.label] += row.count;
      f.timed_actions += row.count;
    } else if (kind == store::kTallyReuploadBlocked) {
      f.reuploads_blocked += row.count;
    } else if (kind == store::kTallyBlock) {
      f.blocks[row.label] += row.count;
    }
  }
  for (size_t i = 0; i < report.months.size(); ++i) {
    report.months[i].median = TimeToActionQuantile(times[i], 0.5);
    report.months[i].p95 = TimeToActionQuantile(times[i], 0.95);
  }
  return report;
}

}  // namespace sluice::service
