// The rows of moderation (docs/moderation.md): abuse reports, blocked clients and the audit
// trail of operator actions. The MetaStore keeps them beside the pastes they are about.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/result.h"
#include "sluice/store/paste.h"
#include "sluice/store/transparency.h"

namespace sluice::store {

/// The state's name in the admin API and the audit trail.
constexpr std::string_view ModerationName(Moderation m) {
  switch (m) {
    case Moderation::kNone:
      return "none";
    case Moderation::kWithheld:
      return "withheld";
    case Moderation::kTakenDown:
      return "taken_down";
    case Moderation::kWithheldNotice:
      return "withheld_notice";
  }
  return "none";
}

/// The reasons a report may give (src/service/moderation.cc), in the order of their bits in a
/// review-queue row's reason mask (ReportReasonBit). Append only: the position is stored.
inline constexpr std::array<std::string_view, 5> kReportReasons = {"spam", "malware", "illegal",
                                                                   "personal_data", "other"};

/// The bit of `reason` in a reason mask; 0 for a name that is not in kReportReasons.
constexpr int64_t ReportReasonBit(std::string_view reason) {
  for (size_t i = 0; i < kReportReasons.size(); ++i) {
    if (kReportReasons[i] == reason) return int64_t{1} << i;
  }
  return 0;
}

/// The names of the reasons in `mask`, sorted.
inline std::vector<std::string> ReportReasonNames(int64_t mask) {
  std::vector<std::string> out;
  for (size_t i = 0; i < kReportReasons.size(); ++i) {
    if (mask & (int64_t{1} << i)) out.emplace_back(kReportReasons[i]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// How long a withholding counts against the networks that caused it (ReportPolicy).
inline constexpr int64_t kWithholdWindowSeconds = 24 * 3600;

/// One report of one paste by one network (docs/moderation.md). `reason` is one of
/// kReportReasons; `note` is free text of at most 1000 bytes.
struct AbuseReport {
  PasteId id;
  /// The reporter's network (admission::ClientNetwork): a paste counts each network once.
  std::string network;
  std::string reason;
  std::string note;
  int64_t at = 0;
  /// The reporter is in the network the paste was created from: the report is stored and listed
  /// but never counts toward withholding.
  bool from_creator = false;
};

/// What a report may do besides being stored (the service's settings, passed with each report).
struct ReportPolicy {
  /// Votes (open reports of distinct networks, not the creator's, each with withholding budget
  /// left) that withhold the paste; 0: never withheld automatically. Default: 3.
  int64_t hide_threshold = 3;
  /// Withholdings one network may have taken part in over kWithholdWindowSeconds; a network past
  /// it reports, but its reports are no votes. Default: 5.
  int64_t withholds_per_network = 5;
  /// Open report rows stored at most, over all pastes. Past it a report is counted on its paste's
  /// queue row, but neither its row nor its note is stored, and it is no vote (whether its
  /// network reported the paste before is not known). Default: 100,000.
  int64_t max_open_reports = 100'000;
  /// False when the caller's withhold rate is spent: a paste with enough votes stays served and
  /// queued (ReportOutcome::withhold_deferred). Default: true.
  bool may_withhold = true;
};

struct ReportOutcome {
  /// False when this network had already reported the paste (an open report, or one closed by a
  /// review): nothing changed.
  bool counted = false;
  /// False past ReportPolicy::max_open_reports: counted on the queue row, nothing else stored.
  bool stored = false;
  /// This report is a vote toward withholding.
  bool vote = false;
  /// Open reports of the paste, this one included (its queue row's count).
  int64_t open_reports = 0;
  /// Votes among them.
  int64_t votes = 0;
  /// This report withheld the paste, in its own transaction (with the edge purge owed).
  bool withheld = false;
  /// The paste had enough votes but ReportPolicy::may_withhold was false: it stays served.
  bool withhold_deferred = false;
  /// A review marked the paste "keep": reports queue it for review and never withhold it.
  bool kept = false;
  /// When `withheld`: the networks charged with it (their withholding budget).
  std::vector<std::string> charged{};
};

/// A paste in the review queue: its open reports, as its queue row keeps them.
struct ReportSummary {
  PasteId id;
  /// Open reports counted, those past max_open_reports included.
  int64_t reports = 0;
  /// Distinct networks among them (each stored as a row).
  int64_t networks = 0;
  /// Votes toward withholding among them.
  int64_t votes = 0;
  /// The distinct reasons given, sorted.
  std::vector<std::string> reasons{};
  /// The newest open report's time and the newest stored note.
  int64_t latest_at = 0;
  std::string latest_note{};
  /// When the paste entered the queue: its first open report's time (the takedown clock,
  /// docs/moderation.md). A dismissal takes it out; a later report starts a new clock.
  int64_t first_at = 0;
  Moderation moderation = Moderation::kNone;
  /// A review marked the paste "keep".
  bool keep = false;
};

/// A position in the review queue, newest first: the queue continues after (strictly older than)
/// this paste. Text form "LATEST_AT.ID" (ReportCursor::Parse).
struct ReportCursor {
  int64_t latest_at = 0;
  PasteId id;

  std::string Encode() const { return std::to_string(latest_at) + "." + id.str(); }
  static std::optional<ReportCursor> Parse(std::string_view text) {
    const size_t dot = text.find('.');
    if (dot == std::string_view::npos || dot == 0 || dot > 18) return std::nullopt;
    int64_t at = 0;
    for (char c : text.substr(0, dot)) {
      if (c < '0' || c > '9') return std::nullopt;
      at = at * 10 + (c - '0');
    }
    auto id = PasteId::Parse(text.substr(dot + 1));
    if (!id) return std::nullopt;
    return ReportCursor{at, *id};
  }
};

/// One page of the review queue, and where the next one starts (nothing on the last page).
struct ReportPage {
  std::vector<ReportSummary> pastes;
  std::optional<ReportCursor> next;
};

/// The review queue's counts, kept by every transaction that changes them.
struct ReportCounts {
  /// Pastes with open reports.
  int64_t pending = 0;
  /// Open report rows stored (what max_open_reports bounds).
  int64_t open_reports = 0;
  /// The arrival (ReportSummary::first_at) of the queue's oldest entry, read with the counts by
  /// one probe of an index on the arrival; none when the queue is empty.
  std::optional<int64_t> oldest_at{};
};

/// One body that creates are refused (451 blocked_content): the SHA-256 of exactly the bytes an
/// operator took down or named (docs/moderation.md, "Takedowns that stick").
struct BlockedContent {
  BodyDigest sha256{};
  int64_t added_at = 0;
  /// The id of the paste whose takedown recorded it, or "admin".
  std::string source;
  std::string reason;
};

/// One page of the content blocklist in digest order, and the digest the next page starts after
/// (nothing on the last page).
struct BlockedContentPage {
  std::vector<BlockedContent> entries;
  std::optional<BodyDigest> next;
};

/// The content blocklist's row of counts: `version` changes with every change to the list (a
/// process reads the list again only when it did), `entries` is its size.
struct BlockedContentsState {
  int64_t version = 0;
  int64_t entries = 0;
};

/// The reason of the InsufficientStorage error of a content blocklist that holds its maximum.
inline constexpr std::string_view kBlockedContentsFull = "blocked_contents_full";

/// A change of a paste's moderation state (MetaStore::SetModeration).
struct ModerationChange {
  Moderation state = Moderation::kNone;
  std::string reason;
  int64_t at = 0;
  /// With kNone: the review's "keep", after which reports queue the paste and never withhold it.
  /// A dismissal without it clears an earlier one.
  bool keep = false;
  /// With kTakenDown: the body's digest, added to the content blocklist in the same transaction
  /// unless it is there already or the list holds `max_blocked_contents` entries (then the
  /// takedown stands without it).
  std::optional<BlockedContent> block_content{};
  int64_t max_blocked_contents = 0;
  /// Transparency counters to add to in the change's own transaction (the action's own count:
  /// a takedown, a restore, a dismissal). The store adds the time to action itself when the
  /// change takes the paste out of the review queue, and the content block when it adds a digest
  /// (include/sluice/store/transparency.h).
  std::vector<TransparencyCount> tally{};
};

/// What a change of state did besides setting it (MetaStore::SetModeration).
struct ModerationOutcome {
  /// The change took the paste out of the review queue: when it had entered it
  /// (ReportSummary::first_at), for the time to action. None when it was not queued (nothing was
  /// open) or the change leaves it queued (a withholding).
  std::optional<int64_t> queued_since{};
};

/// What a notice did to one paste it named (NoticePaste::outcome).
inline constexpr std::string_view kNoticeWithheld = "withheld";
inline constexpr std::string_view kNoticeNotFound = "not_found";
inline constexpr std::string_view kNoticeTakenDown = "taken_down";

/// One paste a notice names and what the notice did to it. `open` while the operator has not
/// acted on it (taken it down or restored it): the notice's clock runs while any is open.
struct NoticePaste {
  std::string paste;
  /// kNoticeWithheld, kNoticeNotFound (no live paste) or kNoticeTakenDown (down already).
  std::string outcome;
  bool open = false;
};

/// A notice from a hosting abuse desk, a registrar or an authority (docs/moderation.md,
/// "Notices"): it withholds the pastes it names at once (451 withheld_notice) and waits in the
/// queue, on the takedown clock, until the operator acts on each. Unique by sender and reference.
struct Notice {
  /// Given by the store.
  int64_t id = 0;
  std::string sender;
  std::string reference;
  std::string category;
  /// The sender's deadline (Unix seconds), when they gave one.
  std::optional<int64_t> deadline_at{};
  int64_t received_at = 0;
  std::vector<NoticePaste> pastes{};
  /// Pastes still open (NoticePaste::open).
  int64_t open_pastes = 0;
};

/// What MetaStore::AddNotice did.
struct NoticeOutcome {
  /// False when the sender's reference was stored already (`notice` is the stored one) or when
  /// no paste it names could be withheld (nothing stored).
  bool created = false;
  /// The notice is in the store (created now or before).
  bool stored = false;
  Notice notice;
};

/// The reason of the InsufficientStorage error of a store that holds max_notices notices.
inline constexpr std::string_view kNoticesFull = "notices_full";
/// That error: MetaStore::AddNotice makes room from the oldest closed notices, so the store holds
/// `max_notices` notices that still wait on the operator.
Error NoticesFull(int64_t max_notices);

/// Creates from `prefix` (a client key, an address or a CIDR block) are refused until `until`.
struct ClientBlock {
  std::string prefix;
  std::string reason;
  int64_t created_at = 0;
  int64_t until = 0;
};

/// One operator action (or the automatic withholding of a paste) as the audit trail keeps it.
struct AuditEntry {
  int64_t at = 0;
  /// "withhold", "takedown", "dismiss", "block".
  std::string action;
  /// The paste id or the blocked prefix.
  std::string target;
  std::string detail;
};

}  // namespace sluice::store
