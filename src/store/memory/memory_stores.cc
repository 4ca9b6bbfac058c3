// In-memory MetaStore and BlobStore: the reference behaviour the contract suite checks the real
// backends against, and the fast backend for service unit tests.
#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "../storage_ledger.h"
#include "sluice/store/backends.h"

namespace sluice::store {
namespace {

using boost::asio::awaitable;

Error NotFound() { return MakeError(ErrorCode::kNotFound, "no such paste", "not_found"); }

class MemoryMetaStore final : public MetaStore {
 public:
  awaitable<Status> Insert(PasteMeta meta, admission::Deadline) override {
    std::lock_guard lock(mu_);
    if (!rows_.emplace(meta.id, meta).second) {
      co_return MakeError(ErrorCode::kInternal, "id exists", "id_collision");
    }
    ledger_.Committed(static_cast<int64_t>(meta.size_bytes), {&meta.id, 1});
    co_return Ok();
  }

  awaitable<Result<PasteMeta>> Get(PasteId id, admission::Deadline) override {
    std::lock_guard lock(mu_);
    auto it = rows_.find(id);
    if (it == rows_.end()) co_return NotFound();
    co_return it->second;
  }

  awaitable<Status> MarkDeleted(PasteId id, int64_t now, admission::Deadline) override {
    std::lock_guard lock(mu_);
    auto it = rows_.find(id);
    if (it == rows_.end()) co_return NotFound();
    if (!it->second.deleted) {
      it->second.deleted = true;
      outbox_.push_back({OutboxEntry{++seq_, id, OutboxEntry::Kind::kDeleteBody, 0, now}, now});
      ledger_.Committed(-static_cast<int64_t>(it->second.size_bytes), {});
    }
    co_return Ok();
  }

  awaitable<Result<std::vector<OutboxEntry>>> DueOutbox(int64_t now, size_t limit,
                                                        admission::Deadline) override {
    std::lock_guard lock(mu_);
    std::vector<OutboxEntry> due;
    for (const auto& [entry, enqueued_at] : outbox_) {
      if (entry.next_attempt_at <= now) due.push_back(entry);
    }
    std::stable_sort(due.begin(), due.end(), [](const auto& a, const auto& b) {
      return a.next_attempt_at < b.next_attempt_at;
    });
    if (due.size() > limit) due.erase(due.begin() + static_cast<std::ptrdiff_t>(limit), due.end());
    co_return due;
  }

  awaitable<Status> FinishOutbox(int64_t seq, admission::Deadline) override {
    std::lock_guard lock(mu_);
    std::erase_if(outbox_, [seq](const auto& e) { return e.first.seq == seq; });
    co_return Ok();
  }

  awaitable<Status> RetryOutboxLater(int64_t seq, int64_t next_attempt_at,
                                     admission::Deadline) override {
    std::lock_guard lock(mu_);
    for (auto& [entry, enqueued_at] : outbox_) {
      if (entry.seq == seq) {
        ++entry.attempts;
        entry.next_attempt_at = next_attempt_at;
      }
    }
    co_return Ok();
  }

  awaitable<Result<int64_t>> OldestOutboxAge(int64_t now, admission::Deadline) override {
    std::lock_guard lock(mu_);
    int64_t oldest = now;
    for (const auto& [entry, enqueued_at] : outbox_) oldest = std::min(oldest, enqueued_at);
    co_return std::max<int64_t>(0, now - oldest);
  }

  // A lease as PostgreSQL keeps it, on the caller's clock: the janitor's tests run two processes'
  // janitors on one of these.
  awaitable<Result<bool>> HoldLease(std::string name, std::string holder, int64_t now,
                                    int64_t seconds, admission::Deadline) override {
    std::lock_guard lock(mu_);
    auto [lease, added] = leases_.try_emplace(std::move(name), holder, now + seconds);
    if (!added && lease->second.first != holder && lease->second.second > now) co_return false;
    lease->second = {std::move(holder), now + seconds};
    co_return true;
  }

  awaitable<Result<std::vector<PasteId>>> Expired(int64_t now, size_t limit,
                                                  admission::Deadline) override {
    std::lock_guard lock(mu_);
    std::vector<PasteId> out;
    for (const auto& [id, row] : rows_) {
      if (row.expires_at <= now && out.size() < limit) out.push_back(id);
    }
    co_return out;
  }

  awaitable<Status> Purge(std::vector<PasteId> ids, admission::Deadline) override {
    std::lock_guard lock(mu_);
    for (const PasteId& id : ids) {
      if (auto row = rows_.find(id); row != rows_.end() && !row->second.deleted) {
        ledger_.Committed(-static_cast<int64_t>(row->second.size_bytes), {});
      }
      rows_.erase(id);
      keep_.erase(id);
      std::erase_if(outbox_, [&](const auto& e) { return e.first.id == id; });
      CloseReports(id, std::nullopt);
      CloseNoticesLocked(id);
    }
    co_return Ok();
  }

  awaitable<Result<std::vector<PasteId>>> Existing(std::vector<PasteId> ids,
                                                   admission::Deadline) override {
    std::lock_guard lock(mu_);
    std::erase_if(ids, [&](const PasteId& id) { return !rows_.contains(id); });
    co_return ids;
  }

  awaitable<Result<std::vector<PasteMeta>>> ListPastes(std::optional<PasteId> after, size_t limit,
                                                       admission::Deadline) override {
    std::lock_guard lock(mu_);
    std::vector<PasteMeta> out;
    for (auto it = after ? rows_.upper_bound(*after) : rows_.begin();
         it != rows_.end() && out.size() < limit; ++it) {
      out.push_back(it->second);
    }
    co_return out;
  }

  // Moderation: the same rows as the SQL stores keep (src/store/sqlite/sqlite_meta_moderation.cc),
  // in maps; the reference the contract suite holds them to.

  awaitable<Result<ReportOutcome>> AddReport(AbuseReport report, ReportPolicy policy,
                                             admission::Deadline) override {
    std::lock_guard lock(mu_);
    auto row = rows_.find(report.id);
    if (row == rows_.end()) co_return NotFound();
    ReportOutcome out;
    out.kept = keep_.contains(report.id);
    QueueRow* queued = nullptr;
    if (auto q = queue_.find(report.id); q != queue_.end()) queued = &q->second;
    out.stored = open_reports_ < policy.max_open_reports;
    if (out.stored) {
      const auto key = std::make_pair(report.id, report.network);
      if (reports_.contains(key)) {
        if (queued) {
          out.open_reports = queued->reports;
          out.votes = queued->votes;
        }
        co_return out;
      }
      out.vote =
          !report.from_creator && Charges(report.network, report.at) < policy.withholds_per_network;
      reports_.emplace(key, StoredReport{report.reason, report.note, report.at, true, out.vote, 0});
      ++open_reports_;
    }
    out.counted = true;
    if (!queued) {
      queued = &queue_.emplace(report.id, QueueRow{}).first->second;
      queued->first_at = report.at;
      arrivals_.emplace(report.at, report.id);
    }
    ++queued->reports;
    queued->notes += out.stored ? 1 : 0;
    queued->votes += out.vote ? 1 : 0;
    queued->reasons |= ReportReasonBit(report.reason);
    if (report.at >= queued->latest_at) {
      queued->latest_at = report.at;
      if (out.stored) queued->latest_note = report.note;
    }
    if (policy.hide_threshold > 0 && row->second.moderation == Moderation::kNone && !out.kept &&
        queued->votes >= policy.hide_threshold) {
      if (!policy.may_withhold) {
        out.withhold_deferred = true;
      } else {
        // The voters with budget left, as the SQL stores pick them; the others stop voting.
        std::vector<std::string> chosen;
        for (auto& [k, r] : reports_) {
          if (k.first != report.id || !r.open || !r.vote) continue;
          if (Charges(k.second, report.at) < policy.withholds_per_network) {
            chosen.push_back(k.second);
            if (static_cast<int64_t>(chosen.size()) >= policy.hide_threshold) break;
          } else {
            r.vote = false;
            --queued->votes;
          }
        }
        if (static_cast<int64_t>(chosen.size()) >= policy.hide_threshold) {
          for (const std::string& network : chosen) {
            charges_.push_back(Charge{network, report.at, report.id});
          }
          row->second.moderation = Moderation::kWithheld;
          outbox_.push_back(
              {OutboxEntry{++seq_, report.id, OutboxEntry::Kind::kPurgeEdge, 0, report.at},
               report.at});
          out.withheld = true;
          out.charged = std::move(chosen);
          Tally(report.at, kTallyWithhold, kWithholdVotes);
        }
      }
    }
    out.open_reports = queued->reports;
    out.votes = queued->votes;
    co_return out;
  }

  awaitable<Result<ModerationOutcome>> SetModeration(PasteId id, ModerationChange change,
                                                     admission::Deadline) override {
    std::lock_guard lock(mu_);
    auto it = rows_.find(id);
    if (it == rows_.end()) co_return NotFound();
    ModerationOutcome outcome;
    it->second.moderation = change.state;
    if (change.state == Moderation::kTakenDown && change.block_content &&
        static_cast<int64_t>(blocked_contents_.size()) < change.max_blocked_contents &&
        blocked_contents_.emplace(change.block_content->sha256, *change.block_content).second) {
      ++blocked_version_;
      Tally(change.at, kTallyBlock, kBlockContent);
    }
    for (const TransparencyCount& c : change.tally) Add(c);
    if (change.state == Moderation::kWithheld) {
      outbox_.push_back(
          {OutboxEntry{++seq_, id, OutboxEntry::Kind::kPurgeEdge, 0, change.at}, change.at});
      co_return outcome;
    }
    if (change.state == Moderation::kNone) {
      if (change.keep) {
        keep_.insert(id);
      } else {
        keep_.erase(id);
      }
    }
    if (auto q = queue_.find(id); q != queue_.end()) {
      outcome.queued_since = q->second.first_at;
      Tally(change.at, kTallyTimeToAction, TimeToActionBucket(change.at - q->second.first_at));
    }
    CloseReports(id, change.at);
    co_return outcome;
  }

  awaitable<Result<size_t>> PurgeReports(int64_t closed_before, int64_t now, size_t limit,
                                         admission::Deadline) override {
    std::lock_guard lock(mu_);
    size_t gone = 0;
    for (auto it = reports_.begin(); it != reports_.end() && gone < limit;) {
      if (!it->second.open && it->second.closed_at <= closed_before) {
        it = reports_.erase(it);
        ++gone;
      } else {
        ++it;
      }
    }
    const int64_t window_start = now - kWithholdWindowSeconds;
    for (auto it = charges_.begin(); it != charges_.end() && gone < limit;) {
      if (it->at <= window_start) {
        it = charges_.erase(it);
        ++gone;
      } else {
        ++it;
      }
    }
    co_return gone;
  }

  awaitable<Result<ReportPage>> OpenReports(std::optional<ReportCursor> after, size_t limit,
                                            admission::Deadline) override {
    std::lock_guard lock(mu_);
    ReportPage page;
    for (const auto& [id, q] : queue_) {
      if (after && std::make_pair(q.latest_at, id) >= std::make_pair(after->latest_at, after->id)) {
        continue;
      }
      ReportSummary s{id};
      s.reports = q.reports;
      s.networks = q.notes;
      s.votes = q.votes;
      s.reasons = ReportReasonNames(q.reasons);
      s.latest_at = q.latest_at;
      s.latest_note = q.latest_note;
      if (auto row = rows_.find(id); row != rows_.end()) s.moderation = row->second.moderation;
      s.keep = keep_.contains(id);
      s.first_at = q.first_at;
      page.pastes.push_back(std::move(s));
    }
    std::sort(page.pastes.begin(), page.pastes.end(), [](const auto& a, const auto& b) {
      return std::make_pair(a.latest_at, a.id) > std::make_pair(b.latest_at, b.id);
    });
    if (page.pastes.size() > limit) {
      page.pastes.erase(page.pastes.begin() + static_cast<std::ptrdiff_t>(limit),
                        page.pastes.end());
      page.next = ReportCursor{page.pastes.back().latest_at, page.pastes.back().id};
    }
    co_return page;
  }

  awaitable<Result<ReportCounts>> CountReports(admission::Deadline) override {
    std::lock_guard lock(mu_);
    ReportCounts counts{static_cast<int64_t>(queue_.size()), open_reports_};
    if (!arrivals_.empty()) counts.oldest_at = arrivals_.begin()->first;
    co_return counts;
  }

  awaitable<Status> AddBlock(ClientBlock block, admission::Deadline) override {
    std::lock_guard lock(mu_);
    Tally(block.created_at, kTallyBlock, kBlockNetwork);
    blocks_.push_back(std::move(block));
    co_return Ok();
  }

  awaitable<Status> AddTransparency(std::vector<TransparencyCount> counts,
                                    admission::Deadline) override {
    std::lock_guard lock(mu_);
    for (const TransparencyCount& c : counts) Add(c);
    co_return Ok();
  }

  awaitable<Result<std::vector<TransparencyCount>>> TransparencyCounts(
      std::string first_month, size_t limit, admission::Deadline) override {
    std::lock_guard lock(mu_);
    // The SQL stores' order: the newest month first, then by kind and label.
    std::vector<TransparencyCount> out;
    for (auto it = tally_.lower_bound({first_month, "", ""}); it != tally_.end(); ++it) {
      const auto& [month, kind, label] = it->first;
      out.push_back(TransparencyCount{month, kind, label, it->second});
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.month > b.month; });
    if (out.size() > limit) out.resize(limit);
    co_return out;
  }

  awaitable<Result<std::vector<AbuseReport>>> ReportsOf(PasteId id, admission::Deadline) override {
    std::lock_guard lock(mu_);
    std::vector<AbuseReport> out;
    for (auto it = reports_.lower_bound({id, std::string()});
         it != reports_.end() && it->first.first == id; ++it) {
      const StoredReport& r = it->second;
      if (r.open) out.push_back(AbuseReport{id, it->first.second, r.reason, r.note, r.at, !r.vote});
    }
    co_return out;
  }

  awaitable<Result<std::vector<ClientBlock>>> ActiveBlocks(int64_t now,
                                                           admission::Deadline) override {
    std::lock_guard lock(mu_);
    std::vector<ClientBlock> out;
    for (const ClientBlock& b : blocks_) {
      if (b.until > now) out.push_back(b);
    }
    co_return out;
  }

  awaitable<Result<NoticeOutcome>> AddNotice(Notice notice, int64_t max_notices,
                                             admission::Deadline) override {
    std::lock_guard lock(mu_);
    if (const Notice* stored = StoredNoticeLocked(notice.sender, notice.reference)) {
      co_return NoticeOutcome{false, true, *stored};
    }
    std::vector<PasteId> withheld;
    for (NoticePaste& p : notice.pastes) {
      const auto id = PasteId::Parse(p.paste);
      auto it = id ? rows_.find(*id) : rows_.end();
      if (it == rows_.end() ||
          (it->second.moderation != Moderation::kTakenDown &&
           (it->second.deleted || it->second.expires_at <= notice.received_at))) {
        p.outcome = std::string(kNoticeNotFound);
      } else if (it->second.moderation == Moderation::kTakenDown) {
        p.outcome = std::string(kNoticeTakenDown);
      } else {
        p.outcome = std::string(kNoticeWithheld);
        p.open = true;
        withheld.push_back(*id);
      }
    }
    notice.open_pastes = static_cast<int64_t>(withheld.size());
    if (withheld.empty()) co_return NoticeOutcome{false, false, std::move(notice)};
    if (!MakeRoomForNoticeLocked(max_notices)) co_return NoticesFull(max_notices);
    for (const PasteId& id : withheld) {
      rows_.at(id).moderation = Moderation::kWithheldNotice;
      outbox_.push_back(
          {OutboxEntry{++seq_, id, OutboxEntry::Kind::kPurgeEdge, 0, notice.received_at},
           notice.received_at});
    }
    notice.id = ++notice_seq_;
    notices_.emplace(notice.id, notice);
    co_return NoticeOutcome{true, true, std::move(notice)};
  }

  awaitable<Result<std::vector<Notice>>> Notices(int64_t after_id, size_t limit,
                                                 admission::Deadline) override {
    std::lock_guard lock(mu_);
    std::vector<Notice> out;
    for (auto it = notices_.upper_bound(after_id); it != notices_.end() && out.size() < limit;
         ++it) {
      out.push_back(it->second);
    }
    co_return out;
  }

  awaitable<Result<bool>> ImportNotice(Notice notice, int64_t max_notices,
                                       admission::Deadline) override {
    std::lock_guard lock(mu_);
    if (StoredNoticeLocked(notice.sender, notice.reference) != nullptr) co_return false;
    if (!MakeRoomForNoticeLocked(max_notices)) co_return NoticesFull(max_notices);
    notice.id = ++notice_seq_;
    notices_.emplace(notice.id, std::move(notice));
    co_return true;
  }

  awaitable<Result<std::vector<Notice>>> OpenNotices(size_t limit, admission::Deadline) override {
    std::lock_guard lock(mu_);
    std::vector<Notice> out;
    for (const auto& [nid, n] : notices_) {
      if (n.open_pastes > 0) out.push_back(n);
    }
    std::stable_sort(out.begin(), out.end(), [](const Notice& a, const Notice& b) {
      return a.received_at < b.received_at;
    });
    if (out.size() > limit) out.resize(limit);
    co_return out;
  }

  awaitable<Result<std::vector<Notice>>> CloseNotices(PasteId id, int64_t,
                                                      admission::Deadline) override {
    std::lock_guard lock(mu_);
    co_return CloseNoticesLocked(id);
  }

  // The notice of `sender` and `reference`, or null. mu_ held.
  const Notice* StoredNoticeLocked(const std::string& sender, const std::string& reference) const {
    for (const auto& [nid, n] : notices_) {
      if (n.sender == sender && n.reference == reference) return &n;
    }
    return nullptr;
  }

  // Room for one more notice under `max_notices` from the oldest closed ones, as the other stores
  // make it; false (nothing deleted) when too few are closed. mu_ held.
  bool MakeRoomForNoticeLocked(int64_t max_notices) {
    const size_t needed = notices_.size() + 1 -
                          std::min<size_t>(notices_.size() + 1, static_cast<size_t>(max_notices));
    std::vector<int64_t> closed;
    for (auto it = notices_.begin(); it != notices_.end() && closed.size() < needed; ++it) {
      if (it->second.open_pastes == 0) closed.push_back(it->first);
    }
    if (closed.size() < needed) return false;
    for (int64_t nid : closed) notices_.erase(nid);
    return true;
  }

  // Closes paste `id` in every notice naming it (an action on it, or its purge); the notices as
  // they were, without their pastes. mu_ held.
  std::vector<Notice> CloseNoticesLocked(const PasteId& id) {
    std::vector<Notice> out;
    for (auto& [nid, n] : notices_) {
      bool closed = false;
      for (NoticePaste& p : n.pastes) {
        if (p.open && p.paste == id.view()) {
          p.open = false;
          closed = true;
        }
      }
      if (!closed) continue;
      Notice before = n;
      before.pastes.clear();
      out.push_back(std::move(before));
      --n.open_pastes;
    }
    return out;
  }

  awaitable<Result<bool>> BlockContent(BlockedContent entry, int64_t max_entries,
                                       admission::Deadline) override {
    std::lock_guard lock(mu_);
    if (blocked_contents_.contains(entry.sha256)) co_return false;
    if (static_cast<int64_t>(blocked_contents_.size()) >= max_entries) {
      co_return MakeError(ErrorCode::kInsufficientStorage,
                          "the content blocklist holds max_blocked_contents entries",
                          std::string(kBlockedContentsFull));
    }
    Tally(entry.added_at, kTallyBlock, kBlockContent);
    blocked_contents_.emplace(entry.sha256, std::move(entry));
    ++blocked_version_;
    co_return true;
  }

  awaitable<Result<bool>> UnblockContent(BodyDigest sha256, admission::Deadline) override {
    std::lock_guard lock(mu_);
    if (blocked_contents_.erase(sha256) == 0) co_return false;
    ++blocked_version_;
    co_return true;
  }

  awaitable<Result<BlockedContentPage>> BlockedContents(std::optional<BodyDigest> after,
                                                        size_t limit,
                                                        admission::Deadline) override {
    std::lock_guard lock(mu_);
    BlockedContentPage page;
    auto it = after ? blocked_contents_.upper_bound(*after) : blocked_contents_.begin();
    for (; it != blocked_contents_.end(); ++it) {
      if (page.entries.size() == limit) {
        page.next = page.entries.back().sha256;
        break;
      }
      page.entries.push_back(it->second);
    }
    co_return page;
  }

  awaitable<Result<BlockedContentsState>> BlockedContentsVersion(admission::Deadline) override {
    std::lock_guard lock(mu_);
    co_return BlockedContentsState{blocked_version_,
                                   static_cast<int64_t>(blocked_contents_.size())};
  }

  awaitable<Status> AddCreatorToken(CreatorToken token, int64_t max_live, int64_t now,
                                    admission::Deadline) override {
    std::lock_guard lock(mu_);
    int64_t live = 0;
    for (const auto& [id, t] : creator_tokens_) {
      if (id == token.id || t.secret_sha256 == token.secret_sha256) {
        co_return MakeError(ErrorCode::kInternal, "a creator token with that id or secret exists",
                            "creator_token_exists");
      }
      if (t.LiveAt(now)) ++live;
    }
    if (live >= max_live) {
      co_return MakeError(ErrorCode::kInsufficientStorage,
                          "the store holds max_creator_tokens live creator tokens",
                          std::string(kCreatorTokensFull));
    }
    creator_tokens_.emplace(token.id, std::move(token));
    ++creator_tokens_version_;
    co_return Ok();
  }

  awaitable<Result<bool>> RevokeCreatorToken(std::string id, int64_t now,
                                             admission::Deadline) override {
    std::lock_guard lock(mu_);
    auto it = creator_tokens_.find(id);
    if (it == creator_tokens_.end()) {
      co_return MakeError(ErrorCode::kNotFound, "no such creator token", "not_found");
    }
    if (it->second.revoked_at != 0) co_return false;
    it->second.revoked_at = now;
    ++creator_tokens_version_;
    co_return true;
  }

  awaitable<Result<CreatorTokenList>> CreatorTokens(admission::Deadline) override {
    std::lock_guard lock(mu_);
    CreatorTokenList list{creator_tokens_version_, {}};
    for (const auto& entry : creator_tokens_) list.tokens.push_back(entry.second);
    co_return list;
  }

  awaitable<Result<int64_t>> CreatorTokensVersion(admission::Deadline) override {
    std::lock_guard lock(mu_);
    co_return creator_tokens_version_;
  }

  awaitable<Status> AddAudit(AuditEntry entry, admission::Deadline) override {
    std::lock_guard lock(mu_);
    audit_.push_back(std::move(entry));
    co_return Ok();
  }

  awaitable<Result<std::vector<AuditEntry>>> AuditTrail(size_t limit,
                                                        admission::Deadline) override {
    std::lock_guard lock(mu_);
    std::vector<AuditEntry> out(audit_.rbegin(), audit_.rend());
    if (out.size() > limit) out.resize(limit);
    co_return out;
  }

  // Burn after reading and storage accounting

  awaitable<Result<PasteMeta>> Claim(PasteId id, int64_t now, admission::Deadline) override {
    std::lock_guard lock(mu_);
    auto it = rows_.find(id);
    // A withheld or taken-down row is never claimed (src/store/sqlite/sqlite_meta_writes.cc).
    if (it == rows_.end() || !it->second.burn || it->second.deleted ||
        it->second.moderation != Moderation::kNone || it->second.expires_at <= now) {
      co_return NotFound();
    }
    PasteMeta before = it->second;
    if (before.views_left > 1) {
      --it->second.views_left;
      co_return before;
    }
    it->second.deleted = true;
    it->second.views_left = 0;
    outbox_.push_back({OutboxEntry{++seq_, id, OutboxEntry::Kind::kDeleteBody, 0, now}, now});
    ledger_.Committed(-static_cast<int64_t>(before.size_bytes), {});
    co_return before;
  }

  awaitable<Result<uint64_t>> LiveBytes(admission::Deadline) override {
    std::lock_guard lock(mu_);
    uint64_t live = 0;
    for (const auto& [id, row] : rows_) {
      if (!row.deleted) live += row.size_bytes;
    }
    co_return live;
  }

  awaitable<Result<StorageReservation>> ReserveStorage(StorageRequest request,
                                                       admission::Deadline) override {
    co_return ledger_.Reserve(request);
  }

 private:
  struct StoredReport {
    std::string reason;
    std::string note;
    int64_t at = 0;
    bool open = true;
    bool vote = false;
    int64_t closed_at = 0;
  };
  struct QueueRow {
    int64_t reports = 0;
    int64_t notes = 0;
    int64_t votes = 0;
    int64_t reasons = 0;
    int64_t latest_at = 0;
    std::string latest_note;
    int64_t first_at = 0;
  };
  struct Charge {
    std::string network;
    int64_t at = 0;
    PasteId paste;
  };

  // Withholdings `network` took part in over the window before `now`.
  int64_t Charges(const std::string& network, int64_t now) const {
    return std::count_if(charges_.begin(), charges_.end(), [&](const Charge& c) {
      return c.network == network && c.at > now - kWithholdWindowSeconds;
    });
  }

  void Add(const TransparencyCount& c) {
    if (c.count != 0) tally_[{c.month, c.kind, c.label}] += c.count;
  }
  void Tally(int64_t at, std::string_view kind, std::string_view label) {
    Add(TransparencyCount{TransparencyMonth(at), std::string(kind), std::string(label), 1});
  }

  // Closes the paste's open reports (at `at`; a purged paste's as made) and drops its queue row.
  void CloseReports(const PasteId& id, std::optional<int64_t> at) {
    for (auto& [k, r] : reports_) {
      if (k.first == id && r.open) {
        r.open = false;
        r.closed_at = at.value_or(r.at);
        --open_reports_;
      }
    }
    if (auto q = queue_.find(id); q != queue_.end()) {
      arrivals_.erase({q->second.first_at, id});
      queue_.erase(q);
    }
  }

  std::mutex mu_;
  std::map<PasteId, PasteMeta> rows_;
  std::map<std::string, std::pair<std::string, int64_t>> leases_;  // name: holder, until
  std::vector<std::pair<OutboxEntry, int64_t>> outbox_;
  int64_t seq_ = 0;
  std::map<std::pair<PasteId, std::string>, StoredReport> reports_;  // by paste and network
  std::map<PasteId, QueueRow> queue_;
  // The queue by arrival, as the SQL stores' index: the oldest entry without a walk of the queue.
  std::set<std::pair<int64_t, PasteId>> arrivals_;
  std::set<PasteId> keep_;
  std::vector<Charge> charges_;
  int64_t open_reports_ = 0;
  std::vector<ClientBlock> blocks_;
  std::map<BodyDigest, BlockedContent> blocked_contents_;
  int64_t blocked_version_ = 0;
  std::map<std::string, CreatorToken> creator_tokens_;  // by id
  int64_t creator_tokens_version_ = 0;
  std::vector<AuditEntry> audit_;
  // By (month, kind, label), as the SQL stores' primary key.
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> tally_;
  std::map<int64_t, Notice> notices_;  // by id
  int64_t notice_seq_ = 0;
  LocalStorageLedger ledger_;
};

class MemoryBlobStore final : public BlobStore {
 public:
  explicit MemoryBlobStore(const Clock* clock) : clock_(clock) {}

  awaitable<Status> Put(PasteId id, std::shared_ptr<const std::string> body,
                        admission::Deadline) override {
    std::lock_guard lock(mu_);
    bodies_[id] = *body;
    if (clock_) written_[id] = clock_->UnixSeconds();
    co_return Ok();
  }

  awaitable<Result<std::string>> Get(PasteId id, admission::Deadline) override {
    std::lock_guard lock(mu_);
    auto it = bodies_.find(id);
    if (it == bodies_.end()) co_return NotFound();
    co_return it->second;
  }

  awaitable<Status> Delete(PasteId id, admission::Deadline) override {
    std::lock_guard lock(mu_);
    bodies_.erase(id);
    written_.erase(id);
    co_return Ok();
  }

  awaitable<Result<std::vector<BlobInfo>>> List(std::string after, size_t limit,
                                                admission::Deadline) override {
    std::lock_guard lock(mu_);
    std::vector<BlobInfo> out;
    for (const auto& [id, body] : bodies_) {
      if (id.view() <= after || out.size() >= limit) continue;
      const auto written = written_.find(id);
      out.push_back(BlobInfo{
          id, written == written_.end() ? std::nullopt : std::optional<int64_t>(written->second)});
    }
    co_return out;
  }

 private:
  const Clock* const clock_;
  std::mutex mu_;
  std::map<PasteId, std::string> bodies_;
  std::map<PasteId, int64_t> written_;
};

}  // namespace

std::unique_ptr<MetaStore> MakeMemoryMetaStore() { return std::make_unique<MemoryMetaStore>(); }
std::unique_ptr<BlobStore> MakeMemoryBlobStore(const Clock* clock) {
  return std::make_unique<MemoryBlobStore>(clock);
}

}  // namespace sluice::store
