// In-memory MetaStore and BlobStore: the reference behaviour the contract suite checks the real
// backends against, and the fast backend for service unit tests.
#include <algorithm>
#include <map>
#include <mutex>

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
      std::erase_if(outbox_, [&](const auto& e) { return e.first.id == id; });
    }
    co_return Ok();
  }

  awaitable<Result<std::vector<PasteId>>> Existing(std::vector<PasteId> ids,
                                                   admission::Deadline) override {
    std::lock_guard lock(mu_);
    std::erase_if(ids, [&](const PasteId& id) { return !rows_.contains(id); });
    co_return ids;
  }

  // Moderation

  awaitable<Result<ReportOutcome>> AddReport(AbuseReport report, admission::Deadline) override {
    std::lock_guard lock(mu_);
    ReportOutcome out;
    auto key = std::make_pair(report.id, report.client_key);
    out.counted = !reports_.contains(key);
    if (out.counted) reports_.emplace(key, StoredReport{report, true});
    for (const auto& [k, r] : reports_) {
      if (k.first == report.id && r.open) ++out.open_reports;
    }
    co_return out;
  }

  awaitable<Status> SetModeration(PasteId id, Moderation state, std::string, int64_t now,
                                  admission::Deadline) override {
    std::lock_guard lock(mu_);
    auto it = rows_.find(id);
    if (it == rows_.end()) co_return NotFound();
    it->second.moderation = state;
    if (state == Moderation::kWithheld) {
      outbox_.push_back({OutboxEntry{++seq_, id, OutboxEntry::Kind::kPurgeEdge, 0, now}, now});
    } else {
      for (auto& [k, r] : reports_) {
        if (k.first == id && r.open) {
          r.open = false;
          r.closed_at = now;
        }
      }
    }
    co_return Ok();
  }

  awaitable<Result<size_t>> PurgeReports(int64_t before, size_t limit,
                                         admission::Deadline) override {
    std::lock_guard lock(mu_);
    size_t gone = 0;
    for (auto it = reports_.begin(); it != reports_.end() && gone < limit;) {
      const StoredReport& r = it->second;
      const bool done = r.open ? r.report.at <= before && !rows_.contains(it->first.first)
                               : r.closed_at <= before;
      if (done) {
        it = reports_.erase(it);
        ++gone;
      } else {
        ++it;
      }
    }
    co_return gone;
  }

  awaitable<Result<std::vector<ReportSummary>>> OpenReports(size_t limit,
                                                            admission::Deadline) override {
    std::lock_guard lock(mu_);
    std::map<PasteId, ReportSummary> by_paste;
    for (const auto& [k, r] : reports_) {
      auto row = rows_.find(k.first);
      if (!r.open || row == rows_.end()) continue;
      ReportSummary& s = by_paste.try_emplace(k.first, ReportSummary{k.first}).first->second;
      ++s.reports;
      if (std::find(s.reasons.begin(), s.reasons.end(), r.report.reason) == s.reasons.end()) {
        s.reasons.push_back(r.report.reason);
      }
      if (r.report.at >= s.latest_at) {
        s.latest_at = r.report.at;
        s.latest_note = r.report.note;
      }
      s.moderation = row->second.moderation;
    }
    std::vector<ReportSummary> out;
    for (auto& [id, s] : by_paste) {
      std::sort(s.reasons.begin(), s.reasons.end());
      out.push_back(std::move(s));
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.latest_at > b.latest_at; });
    if (out.size() > limit) out.erase(out.begin() + static_cast<std::ptrdiff_t>(limit), out.end());
    co_return out;
  }

  awaitable<Status> AddBlock(ClientBlock block, admission::Deadline) override {
    std::lock_guard lock(mu_);
    blocks_.push_back(std::move(block));
    co_return Ok();
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
    // A withheld or taken-down row is never claimed (src/store/sqlite/sqlite_meta_store.cc).
    if (it == rows_.end() || !it->second.burn || it->second.deleted ||
        it->second.moderation != Moderation::kNone || it->second.expires_at <= now) {
      co_return NotFound();
    }
    PasteMeta before = it->second;
    it->second.deleted = true;
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
    AbuseReport report;
    bool open = true;
    int64_t closed_at = 0;
  };
  std::mutex mu_;
  std::map<PasteId, PasteMeta> rows_;
  std::vector<std::pair<OutboxEntry, int64_t>> outbox_;
  int64_t seq_ = 0;
  std::map<std::pair<PasteId, std::string>, StoredReport> reports_;
  std::vector<ClientBlock> blocks_;
  std::vector<AuditEntry> audit_;
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
