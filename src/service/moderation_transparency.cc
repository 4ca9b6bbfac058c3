// The transparency report of ModerationService (docs/moderation.md, "Transparency"): its
// counters and the report read from them.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <cmath>

#include "sluice/asio/spawn.h"
#include "sluice/asio/timer.h"
#include "sluice/service/body_check.h"
#include "sluice/service/moderation.h"
#include "sluice/service/paste_service.h"
#include "sluice/service/text.h"

namespace sluice::service {

using admission::Deadline;
using boost::asio::awaitable;

awaitable<Status> ModerationService::RecordTransparency(std::string_view kind, std::string label,
                                                        int64_t count) {
  std::vector<store::TransparencyCount> counts{store::TransparencyCount{
      store::TransparencyMonth(clock_.UnixSeconds()), std::string(kind), std::move(label), count}};
  auto adding = meta_.AddTransparency(std::move(counts), Deadline::After(clock_, built_.budget));
  if (Status added = co_await std::move(adding); !added.ok()) {
    co_return WithRetryAfter(added.error());
  }
  co_return Ok();
}

awaitable<Status> ModerationService::FlushTransparency(Duration budget) {
  if (blocked_contents_ == nullptr) co_return Ok();
  const int64_t refused = blocked_contents_->TakeRefused();
  if (refused == 0) co_return Ok();
  // Dated by the flush: a refusal in the last blocks_refresh of a month may count in the next.
  std::vector<store::TransparencyCount> counts{
      store::TransparencyCount{store::TransparencyMonth(clock_.UnixSeconds()),
                               std::string(store::kTallyReuploadBlocked), "", refused}};
  auto adding = meta_.AddTransparency(std::move(counts), Deadline::After(clock_, budget));
  Status added = co_await std::move(adding);
  // Counted at most once: a failed flush is given back for the next one only when it cannot have
  // been stored (as a create, a flush whose outcome is unknown is never repeated).
  if (!added.ok() && !store::InsertOutcomeUnknown(added.error())) {
    blocked_contents_->ReturnRefused(refused);
  }
  co_return added;
}

awaitable<Result<std::shared_ptr<const TransparencyReport>>> ModerationService::Transparency() {
  const int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.Now().time_since_epoch()).count();
  {
    std::lock_guard lock(transparency_mu_);
    if (transparency_ &&
        (transparency_reading_ || now_ns - transparency_read_ns_ <
                                      std::chrono::nanoseconds(kTransparencyFreshness).count())) {
      co_return transparency_;
    }
    transparency_reading_ = true;
  }
  const int64_t now = clock_.UnixSeconds();
  std::vector<std::string> months = LastMonths(now, kTransparencyMonths);
  auto reading = meta_.TransparencyCounts(months.back(), store::kMaxTransparencyRows,
                                          Deadline::After(clock_, built_.budget));
  Result<std::vector<store::TransparencyCount>> rows = co_await std::move(reading);
  std::lock_guard lock(transparency_mu_);
  transparency_reading_ = false;
  if (!rows.ok()) {
    if (transparency_) co_return transparency_;  // stale beats nothing; the next call tries again
    co_return WithRetryAfter(rows.error());
  }
  transparency_ =
      std::make_shared<const TransparencyReport>(SummarizeTransparency(*rows, months, now));
  transparency_read_ns_ = now_ns;
  co_return transparency_;
}

}  // namespace sluice::service
