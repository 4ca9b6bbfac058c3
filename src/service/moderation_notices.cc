// The notice intake of ModerationService (docs/moderation.md, "Notices"): kept apart from the
// reports and reviews in moderation.cc.
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

// Notices (docs/moderation.md, "Notices").

awaitable<Result<NoticeReceipt>> ModerationService::AddNotice(NoticeRequest request) {
  if (std::optional<Error> closed = ReadOnly()) co_return std::move(*closed);
  if (Status valid = CheckNoticeRequest(request); !valid.ok()) co_return valid.error();
  const Deadline deadline = Deadline::After(clock_, built_.budget);
  const int64_t now = clock_.UnixSeconds();
  store::Notice notice{
      0, request.sender, request.reference, request.category, request.deadline_at, now, {}, 0};
  for (std::string& id : request.pastes) notice.pastes.push_back(store::NoticePaste{id, "", false});
  auto adding = meta_.AddNotice(std::move(notice), options_.Load()->max_notices, deadline);
  Result<store::NoticeOutcome> added = co_await std::move(adding);
  if (!added.ok()) co_return WithRetryAfter(added.error());
  NoticeReceipt receipt{added->created, added->stored, std::move(added->notice)};
  if (!receipt.created) co_return receipt;  // stored before, or nothing to store
  const store::Notice& n = receipt.notice;
  std::vector<std::string> withheld;
  for (const store::NoticePaste& p : n.pastes) {
    if (p.outcome != store::kNoticeWithheld) continue;
    withheld.push_back(p.paste);
    // Every cache lets go of the paste, as for a withholding by reports: the store's row says 451
    // from the notice's commit on, and this is what keeps a cached copy from being served.
    const auto id = store::PasteId::Parse(p.paste);
    if (!id) continue;  // unreachable: CheckNoticeRequest kept ids only
    auto reading = meta_.Get(*id, deadline);
    Result<store::PasteMeta> meta = co_await std::move(reading);
    if (meta.ok()) {
      auto forgetting = ForgetCached(*meta, store::Moderation::kWithheldNotice, deadline);
      co_await std::move(forgetting);
    } else {
      cache_.MarkDeleted(*id);
    }
    auto recording =
        Record("withhold_notice", p.paste,
               fmt::format("notice {} from {} ({})", n.reference, n.sender, n.category), deadline);
    co_await std::move(recording);
  }
  // The transparency report's notices (docs/moderation.md, "Transparency"), in one call after
  // the notice's own transaction: a crash between the two loses these counts, not the notice.
  // The kind of sender is the one the request gave, counted as unclassified when it gave none.
  const std::string sender_kind =
      request.sender_kind.empty() ? std::string(kNoticeSenderUnclassified) : request.sender_kind;
  std::vector<store::TransparencyCount> tally = {
      {store::TransparencyMonth(now), std::string(store::kTallyNoticeCategory), n.category, 1},
      {store::TransparencyMonth(now), std::string(store::kTallyNoticeSender), sender_kind, 1},
      {store::TransparencyMonth(now), std::string(store::kTallyWithhold), "notice",
       static_cast<int64_t>(withheld.size())}};
  auto tallying = meta_.AddTransparency(std::move(tally), deadline);
  if (Status tallied = co_await std::move(tallying); !tallied.ok()) {
    spdlog::warn("notice {}: transparency counts not stored: {}", n.reference,
                 tallied.error().message);
  }
  spdlog::info("notice {} from {} ({}): {} of {} pastes withheld{}", n.reference, n.sender,
               n.category, withheld.size(), n.pastes.size(),
               n.deadline_at ? fmt::format(", deadline {}", *n.deadline_at) : std::string());
  if (operator_events_ != nullptr) {
    std::vector<std::pair<std::string, std::string>> fields = {
        {"sender", n.sender},
        {"sender_kind", sender_kind},
        {"reference", n.reference},
        {"category", n.category},
        {"pastes", fmt::format("{}", fmt::join(withheld, " "))}};
    if (n.deadline_at) fields.emplace_back("deadline_at", std::to_string(*n.deadline_at));
    operator_events_->Publish(
        OperatorEvent{"notice", withheld.empty() ? std::string() : withheld.front(), now,
                      fmt::format("notice {} from {} ({}): {} pastes withheld (451)", n.reference,
                                  n.sender, n.category, withheld.size()),
                      std::move(fields)});
  }
  auto counting = RefreshPending();
  co_await std::move(counting);
  co_return receipt;
}

awaitable<Result<std::vector<store::Notice>>> ModerationService::OpenNotices(size_t limit) {
  auto listing = meta_.OpenNotices(limit, Deadline::After(clock_, built_.budget));
  Result<std::vector<store::Notice>> out = co_await std::move(listing);
  if (!out.ok()) co_return WithRetryAfter(out.error());
  co_return out;
}

awaitable<std::string> ModerationService::CloseNoticesOf(const store::PasteMeta& meta,
                                                         std::string_view action, int64_t at,
                                                         Deadline deadline) {
  auto closing = meta_.CloseNotices(meta.id, at, deadline);
  Result<std::vector<store::Notice>> closed = co_await std::move(closing);
  if (!closed.ok()) {
    // The action stands; the notice stays open in the queue until the operator acts again.
    spdlog::warn("moderation {}: notices naming it not closed: {}", meta.id.view(),
                 closed.error().message);
    co_return std::string();
  }
  std::string audit;
  for (const store::Notice& n : *closed) {
    ObserveWait(action, "notice", at - n.received_at);
    audit += fmt::format("; notice {} from {}", n.reference, n.sender);
  }
  co_return audit;
}

awaitable<void> ModerationService::WarnOfDeadlines() {
  if (operator_events_ == nullptr) co_return;
  const std::shared_ptr<const ModerationOptions> options = options_.Load();
  const int64_t now = clock_.UnixSeconds();
  // Three refreshes long, so a holder that misses one keeps it, and at least the janitor's 30 s
  // (src/worker/janitor.cc): the leases are dated by the store's clock, which may be apart from
  // ours.
  const int64_t lease_seconds = std::max<int64_t>(
      30, 3 * std::chrono::duration_cast<std::chrono::seconds>(built_.blocks_refresh).count());
  auto holding = meta_.HoldLease(std::string(kWarningsLease), lease_holder_, now, lease_seconds,
                                 Deadline::After(clock_, built_.budget));
  const Result<bool> held = co_await std::move(holding);
  warnings_lease_held_.Set(held.ok() && *held ? 1.0 : 0.0);
  if (!held.ok() || !*held) co_return;  // another process warns (or the store cannot say)
  const int64_t deadline_s = options->takedown_deadline.count();
  const auto warn_at = [&](int64_t arrived, int64_t due) {
    return arrived + static_cast<int64_t>(std::ceil(static_cast<double>(due - arrived) *
                                                    options->deadline_warning_share));
  };
  // The oldest open notices, a bounded page of them: a notice's own deadline may be shorter than
  // an older one's, so each is looked at, not only the oldest.
  auto listing = meta_.OpenNotices(kNoticeWarningScan, Deadline::After(clock_, built_.budget));
  Result<std::vector<store::Notice>> open = co_await std::move(listing);
  if (open.ok()) {
    std::vector<int64_t> still_open;
    for (const store::Notice& n : *open) {
      const bool warned =
          std::find(warned_notices_.begin(), warned_notices_.end(), n.id) != warned_notices_.end();
      const int64_t due = n.deadline_at.value_or(n.received_at + deadline_s);
      if (!warned && now >= warn_at(n.received_at, due)) {
        std::string pastes;
        for (const store::NoticePaste& p : n.pastes) {
          if (p.open) pastes += (pastes.empty() ? "" : " ") + p.paste;
        }
        operator_events_->Publish(OperatorEvent{
            "deadline_warning",
            pastes.substr(0, pastes.find(' ')),
            now,
            fmt::format("notice {} from {}: {} s of its {} s left", n.reference, n.sender,
                        std::max<int64_t>(0, due - now), due - n.received_at),
            {{"kind", "notice"},
             {"reference", n.reference},
             {"sender", n.sender},
             {"arrived_at", std::to_string(n.received_at)},
             {"deadline_at", std::to_string(due)},
             {"pastes", pastes}}});
        still_open.push_back(n.id);
      } else if (warned) {
        still_open.push_back(n.id);
      }
    }
    // Forgets the notices no longer open (bounded by the page).
    warned_notices_ = std::move(still_open);
  }
  // Reports: the oldest open entry, the one the store's counts name (one row, no walk of the
  // queue); each entry that becomes the oldest past the share is told once.
  const std::optional<int64_t> oldest = OldestOpenReportAt();
  if (oldest && *oldest != warned_report_at_ && now >= warn_at(*oldest, *oldest + deadline_s)) {
    warned_report_at_ = *oldest;
    operator_events_->Publish(OperatorEvent{
        "deadline_warning",
        "",
        now,
        fmt::format("the oldest open report has waited {} s of takedown_deadline's {} s",
                    now - *oldest, deadline_s),
        {{"kind", "report"},
         {"arrived_at", std::to_string(*oldest)},
         {"deadline_at", std::to_string(*oldest + deadline_s)},
         {"pending", std::to_string(PendingReports())}}});
  }
}

}  // namespace sluice::service
