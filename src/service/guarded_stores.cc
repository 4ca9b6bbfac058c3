#include "sluice/service/guarded_stores.h"

namespace sluice::service {
namespace {

using admission::Deadline;
using boost::asio::awaitable;
using store::PasteId;

// Status calls travel as Result<Unit> through the templated wrapper and come back as Status.
struct Unit {};
Result<Unit> FromStatus(Status s) {
  if (s.ok()) return Unit{};
  return s.error();
}
Status ToStatus(const Result<Unit>& r) { return r.ok() ? Ok() : Status(r.error()); }

class GuardedBlobStore final : public store::BlobStore {
 public:
  GuardedBlobStore(store::BlobStore& inner, Dependency& dependency,
                   std::shared_ptr<const LiveCallTimeouts> timeouts)
      : inner_(inner), dep_(dependency), timeouts_(std::move(timeouts)) {}

  awaitable<Status> Put(PasteId id, std::shared_ptr<const std::string> body, Deadline d) override {
    // The attempt owns its share of the body: an abandoned PUT keeps it until the write ends.
    auto call =
        dep_.Call<Unit>({"put", t().blob_put, false}, d,
                        [this, id, body = std::move(body)](Deadline cd) -> awaitable<Result<Unit>> {
                          auto put = inner_.Put(id, body, cd);
                          co_return FromStatus(co_await std::move(put));
                        });
    co_return ToStatus(co_await std::move(call));
  }

  awaitable<Result<std::string>> Get(PasteId id, Deadline d) override {
    return dep_.Call<std::string>({"get", t().blob_get, true}, d,
                                  [this, id](Deadline cd) { return inner_.Get(id, cd); });
  }

  awaitable<Status> Delete(PasteId id, Deadline d) override {
    auto call = dep_.Call<Unit>({"delete", t().blob_cleanup, true}, d,
                                [this, id](Deadline cd) -> awaitable<Result<Unit>> {
                                  co_return FromStatus(co_await inner_.Delete(id, cd));
                                });
    co_return ToStatus(co_await std::move(call));
  }

  awaitable<Status> DeleteMany(std::vector<PasteId> ids, Deadline d) override {
    return DeleteBatch(std::move(ids), d, &store::BlobStore::DeleteMany);
  }
  awaitable<Status> DeleteManyBeforePurge(std::vector<PasteId> ids, Deadline d) override {
    return DeleteBatch(std::move(ids), d, &store::BlobStore::DeleteManyBeforePurge);
  }

  awaitable<Result<std::vector<store::BlobInfo>>> List(std::string after, size_t limit,
                                                       Deadline d) override {
    return dep_.Call<std::vector<store::BlobInfo>>(
        {"list", t().blob_cleanup, true}, d, [this, after = std::move(after), limit](Deadline cd) {
          return inner_.List(after, limit, cd);
        });
  }

 private:
  // The timeouts now: each call takes one reading when it starts.
  CallTimeouts t() const { return timeouts_->Load(); }

  // One call to the dependency for the batch, under one cleanup timeout.
  awaitable<Status> DeleteBatch(std::vector<PasteId> ids, Deadline d,
                                awaitable<Status> (store::BlobStore::*remove)(std::vector<PasteId>,
                                                                              Deadline)) {
    auto call = dep_.Call<Unit>(
        {"delete", t().blob_cleanup, true}, d,
        [this, ids = std::move(ids), remove](Deadline cd) -> awaitable<Result<Unit>> {
          co_return FromStatus(co_await (inner_.*remove)(ids, cd));
        });
    co_return ToStatus(co_await std::move(call));
  }

  store::BlobStore& inner_;
  Dependency& dep_;
  const std::shared_ptr<const LiveCallTimeouts> timeouts_;
};

class GuardedMetaStore final : public store::MetaStore {
 public:
  GuardedMetaStore(store::MetaStore& inner, Dependency& dependency,
                   std::shared_ptr<const LiveCallTimeouts> timeouts)
      : inner_(inner), dep_(dependency), timeouts_(std::move(timeouts)) {}

  awaitable<Status> Insert(store::PasteMeta meta, Deadline d) override {
    return Unwrap(dep_.Call<Unit>({"insert", t().meta_insert, false}, d,
                                  [this, meta](Deadline cd) -> awaitable<Result<Unit>> {
                                    co_return FromStatus(co_await inner_.Insert(meta, cd));
                                  }));
  }
  size_t colocated_body_limit() const override { return inner_.colocated_body_limit(); }
  // The body's write and the row's in one commit: the PUT's timeout, since it carries the body,
  // counted as the insert it also is.
  awaitable<Status> InsertWithBody(store::PasteMeta meta, std::shared_ptr<const std::string> body,
                                   Deadline d) override {
    return Unwrap(dep_.Call<Unit>(
        {"insert", t().blob_put, false}, d,
        [this, meta, body = std::move(body)](Deadline cd) -> awaitable<Result<Unit>> {
          co_return FromStatus(co_await inner_.InsertWithBody(meta, body, cd));
        }));
  }
  awaitable<Result<store::PasteMeta>> Get(PasteId id, Deadline d) override {
    return dep_.Call<store::PasteMeta>({"get", t().meta_get, true}, d,
                                       [this, id](Deadline cd) { return inner_.Get(id, cd); });
  }
  awaitable<Status> MarkDeleted(PasteId id, int64_t now, Deadline d) override {
    // Idempotent: a second tombstone is a no-op and enqueues nothing more.
    return Unwrap(dep_.Call<Unit>({"mark_deleted", t().meta_delete, true}, d,
                                  [this, id, now](Deadline cd) -> awaitable<Result<Unit>> {
                                    co_return FromStatus(co_await inner_.MarkDeleted(id, now, cd));
                                  }));
  }
  awaitable<Result<std::vector<store::OutboxEntry>>> DueOutbox(int64_t now, size_t limit,
                                                               Deadline d) override {
    return dep_.Call<std::vector<store::OutboxEntry>>(
        {"outbox", t().meta_background, true}, d,
        [this, now, limit](Deadline cd) { return inner_.DueOutbox(now, limit, cd); });
  }
  awaitable<Status> FinishOutbox(int64_t seq, Deadline d) override {
    return Unwrap(dep_.Call<Unit>({"outbox", t().meta_background, true}, d,
                                  [this, seq](Deadline cd) -> awaitable<Result<Unit>> {
                                    co_return FromStatus(co_await inner_.FinishOutbox(seq, cd));
                                  }));
  }
  awaitable<Status> RetryOutboxLater(int64_t seq, int64_t next, Deadline d) override {
    return Unwrap(dep_.Call<Unit>({"outbox", t().meta_background, true}, d,
                                  [this, seq, next](Deadline cd) -> awaitable<Result<Unit>> {
                                    co_return FromStatus(
                                        co_await inner_.RetryOutboxLater(seq, next, cd));
                                  }));
  }
  awaitable<Result<int64_t>> OldestOutboxAge(int64_t now, Deadline d) override {
    return dep_.Call<int64_t>({"outbox", t().meta_background, true}, d,
                              [this, now](Deadline cd) { return inner_.OldestOutboxAge(now, cd); });
  }
  awaitable<Result<bool>> HoldLease(std::string name, std::string holder, int64_t now,
                                    int64_t seconds, Deadline d) override {
    return dep_.Call<bool>(
        {"sweep", t().meta_background, true}, d,
        [this, name = std::move(name), holder = std::move(holder), now, seconds](Deadline cd) {
          return inner_.HoldLease(name, holder, now, seconds, cd);
        });
  }
  awaitable<Result<std::vector<PasteId>>> Expired(int64_t now, size_t limit, Deadline d) override {
    return dep_.Call<std::vector<PasteId>>(
        {"sweep", t().meta_background, true}, d,
        [this, now, limit](Deadline cd) { return inner_.Expired(now, limit, cd); });
  }
  awaitable<Status> Purge(std::vector<PasteId> ids, Deadline d) override {
    return Unwrap(
        dep_.Call<Unit>({"sweep", t().meta_background, true}, d,
                        [this, ids = std::move(ids)](Deadline cd) -> awaitable<Result<Unit>> {
                          auto purge = inner_.Purge(ids, cd);
                          co_return FromStatus(co_await std::move(purge));
                        }));
  }
  awaitable<Result<std::vector<PasteId>>> Existing(std::vector<PasteId> ids, Deadline d) override {
    return dep_.Call<std::vector<PasteId>>(
        {"sweep", t().meta_background, true}, d,
        [this, ids = std::move(ids)](Deadline cd) { return inner_.Existing(ids, cd); });
  }
  awaitable<Result<std::vector<store::PasteMeta>>> ListPastes(std::optional<PasteId> after,
                                                              size_t limit, Deadline d) override {
    return dep_.Call<std::vector<store::PasteMeta>>(
        {"sweep", t().meta_background, true}, d,
        [this, after, limit](Deadline cd) { return inner_.ListPastes(after, limit, cd); });
  }
  awaitable<Result<store::PasteMeta>> Claim(PasteId id, int64_t now, Deadline d) override {
    // Never retried: a claim whose answer was lost may have burned the paste, and a second try
    // would answer 404 to the reader it was meant for.
    return dep_.Call<store::PasteMeta>(
        {"claim", t().meta_delete, false}, d,
        [this, id, now](Deadline cd) { return inner_.Claim(id, now, cd); });
  }
  awaitable<Result<uint64_t>> LiveBytes(Deadline d) override {
    return dep_.Call<uint64_t>({"live_bytes", t().meta_background, true}, d,
                               [this](Deadline cd) { return inner_.LiveBytes(cd); });
  }
  // A create's first write, under the insert's timeout. Never retried: a grant whose answer was
  // lost is given back by the attempt that got it, and a second try for the id is refused.
  awaitable<Result<store::StorageReservation>> ReserveStorage(store::StorageRequest request,
                                                              Deadline d) override {
    return dep_.Call<store::StorageReservation>(
        {"reserve", t().meta_insert, false}, d,
        [this, request](Deadline cd) { return inner_.ReserveStorage(request, cd); });
  }

  // Moderation: operator-paced calls (reports are rate-capped before they get here), under the
  // moderation timeout. A report is keyed by paste and network and a repeated withholding only
  // purges the edge again, so both may be retried; a block or an audit row written twice would
  // be a second row.
  awaitable<Result<store::ReportOutcome>> AddReport(store::AbuseReport report,
                                                    store::ReportPolicy policy,
                                                    Deadline d) override {
    return dep_.Call<store::ReportOutcome>({"report", t().meta_moderation, true}, d,
                                           [this, report = std::move(report), policy](Deadline cd) {
                                             return inner_.AddReport(report, policy, cd);
                                           });
  }
  awaitable<Result<store::ModerationOutcome>> SetModeration(PasteId id,
                                                            store::ModerationChange change,
                                                            Deadline d) override {
    return dep_.Call<store::ModerationOutcome>({"moderate", t().meta_moderation, true}, d,
                                               [this, id, change = std::move(change)](Deadline cd) {
                                                 return inner_.SetModeration(id, change, cd);
                                               });
  }
  // Deleting a report twice deletes nothing the second time, so the sweep may retry.
  awaitable<Result<size_t>> PurgeReports(int64_t closed_before, int64_t now, size_t limit,
                                         Deadline d) override {
    return dep_.Call<size_t>({"sweep", t().meta_background, true}, d,
                             [this, closed_before, now, limit](Deadline cd) {
                               return inner_.PurgeReports(closed_before, now, limit, cd);
                             });
  }
  awaitable<Result<store::ReportPage>> OpenReports(std::optional<store::ReportCursor> after,
                                                   size_t limit, Deadline d) override {
    return dep_.Call<store::ReportPage>(
        {"reports", t().meta_moderation, true}, d,
        [this, after, limit](Deadline cd) { return inner_.OpenReports(after, limit, cd); });
  }
  awaitable<Result<store::ReportCounts>> CountReports(Deadline d) override {
    return dep_.Call<store::ReportCounts>({"reports", t().meta_moderation, true}, d,
                                          [this](Deadline cd) { return inner_.CountReports(cd); });
  }
  awaitable<Status> AddBlock(store::ClientBlock block, Deadline d) override {
    return Unwrap(
        dep_.Call<Unit>({"block", t().meta_moderation, false}, d,
                        [this, block = std::move(block)](Deadline cd) -> awaitable<Result<Unit>> {
                          auto adding = inner_.AddBlock(block, cd);
                          co_return FromStatus(co_await std::move(adding));
                        }));
  }
  awaitable<Result<std::vector<store::AbuseReport>>> ReportsOf(PasteId id, Deadline d) override {
    return dep_.Call<std::vector<store::AbuseReport>>(
        {"reports", t().meta_moderation, true}, d,
        [this, id](Deadline cd) { return inner_.ReportsOf(id, cd); });
  }
  awaitable<Result<std::vector<store::ClientBlock>>> ActiveBlocks(int64_t now,
                                                                  Deadline d) override {
    return dep_.Call<std::vector<store::ClientBlock>>(
        {"blocks", t().meta_moderation, true}, d,
        [this, now](Deadline cd) { return inner_.ActiveBlocks(now, cd); });
  }
  awaitable<Result<bool>> BlockContent(store::BlockedContent entry, int64_t max_entries,
                                       Deadline d) override {
    return dep_.Call<bool>({"block_content", t().meta_moderation, false}, d,
                           [this, entry = std::move(entry), max_entries](Deadline cd) {
                             return inner_.BlockContent(entry, max_entries, cd);
                           });
  }
  awaitable<Result<bool>> UnblockContent(store::BodyDigest sha256, Deadline d) override {
    return dep_.Call<bool>(
        {"unblock_content", t().meta_moderation, false}, d,
        [this, sha256](Deadline cd) { return inner_.UnblockContent(sha256, cd); });
  }
  awaitable<Result<store::BlockedContentPage>> BlockedContents(
      std::optional<store::BodyDigest> after, size_t limit, Deadline d) override {
    return dep_.Call<store::BlockedContentPage>(
        {"blocked_contents", t().meta_moderation, true}, d,
        [this, after, limit](Deadline cd) { return inner_.BlockedContents(after, limit, cd); });
  }
  awaitable<Status> AddCreatorToken(store::CreatorToken token, int64_t max_live, int64_t now,
                                    Deadline d) override {
    return Unwrap(dep_.Call<Unit>(
        {"add_creator_token", t().meta_moderation, false}, d,
        [this, token = std::move(token), max_live, now](Deadline cd) -> awaitable<Result<Unit>> {
          auto adding = inner_.AddCreatorToken(token, max_live, now, cd);
          co_return FromStatus(co_await std::move(adding));
        }));
  }
  awaitable<Result<bool>> RevokeCreatorToken(std::string id, int64_t now, Deadline d) override {
    return dep_.Call<bool>({"revoke_creator_token", t().meta_moderation, false}, d,
                           [this, id = std::move(id), now](Deadline cd) {
                             return inner_.RevokeCreatorToken(id, now, cd);
                           });
  }
  awaitable<Result<store::CreatorTokenList>> CreatorTokens(Deadline d) override {
    return dep_.Call<store::CreatorTokenList>(
        {"creator_tokens", t().meta_moderation, true}, d,
        [this](Deadline cd) { return inner_.CreatorTokens(cd); });
  }
  awaitable<Result<int64_t>> CreatorTokensVersion(Deadline d) override {
    return dep_.Call<int64_t>({"creator_tokens", t().meta_moderation, true}, d,
                              [this](Deadline cd) { return inner_.CreatorTokensVersion(cd); });
  }
  // A notice is unique by sender and reference, so a second try of one whose answer was lost
  // finds it stored: retried like a report's reads; closing a paste's notices twice closes
  // nothing the second time.
  awaitable<Result<store::NoticeOutcome>> AddNotice(store::Notice notice, int64_t max_notices,
                                                    Deadline d) override {
    return dep_.Call<store::NoticeOutcome>(
        {"notice", t().meta_moderation, true}, d,
        [this, notice = std::move(notice), max_notices](Deadline cd) {
          return inner_.AddNotice(notice, max_notices, cd);
        });
  }
  awaitable<Result<std::vector<store::Notice>>> Notices(int64_t after_id, size_t limit,
                                                        Deadline d) override {
    return dep_.Call<std::vector<store::Notice>>(
        {"notices", t().meta_moderation, true}, d,
        [this, after_id, limit](Deadline cd) { return inner_.Notices(after_id, limit, cd); });
  }
  // Unique by sender and reference too: a retry of one whose answer was lost answers false.
  awaitable<Result<bool>> ImportNotice(store::Notice notice, int64_t max_notices,
                                       Deadline d) override {
    return dep_.Call<bool>({"import_notice", t().meta_moderation, true}, d,
                           [this, notice = std::move(notice), max_notices](Deadline cd) {
                             return inner_.ImportNotice(notice, max_notices, cd);
                           });
  }
  awaitable<Result<std::vector<store::Notice>>> OpenNotices(size_t limit, Deadline d) override {
    return dep_.Call<std::vector<store::Notice>>(
        {"notices", t().meta_moderation, true}, d,
        [this, limit](Deadline cd) { return inner_.OpenNotices(limit, cd); });
  }
  awaitable<Result<std::vector<store::Notice>>> CloseNotices(store::PasteId id, int64_t at,
                                                             Deadline d) override {
    return dep_.Call<std::vector<store::Notice>>(
        {"close_notices", t().meta_moderation, true}, d,
        [this, id, at](Deadline cd) { return inner_.CloseNotices(id, at, cd); });
  }
  awaitable<Result<store::BlockedContentsState>> BlockedContentsVersion(Deadline d) override {
    return dep_.Call<store::BlockedContentsState>(
        {"blocked_contents", t().meta_moderation, true}, d,
        [this](Deadline cd) { return inner_.BlockedContentsVersion(cd); });
  }
  awaitable<Status> AddAudit(store::AuditEntry entry, Deadline d) override {
    return Unwrap(
        dep_.Call<Unit>({"audit", t().meta_moderation, false}, d,
                        [this, entry = std::move(entry)](Deadline cd) -> awaitable<Result<Unit>> {
                          auto adding = inner_.AddAudit(entry, cd);
                          co_return FromStatus(co_await std::move(adding));
                        }));
  }
  awaitable<Status> AddTransparency(std::vector<store::TransparencyCount> counts,
                                    Deadline d) override {
    return Unwrap(
        dep_.Call<Unit>({"transparency", t().meta_moderation, false}, d,
                        [this, counts = std::move(counts)](Deadline cd) -> awaitable<Result<Unit>> {
                          auto adding = inner_.AddTransparency(counts, cd);
                          co_return FromStatus(co_await std::move(adding));
                        }));
  }
  awaitable<Result<std::vector<store::TransparencyCount>>> TransparencyCounts(
      std::string first_month, size_t limit, Deadline d) override {
    return dep_.Call<std::vector<store::TransparencyCount>>(
        {"transparency", t().meta_moderation, true}, d,
        [this, first_month = std::move(first_month), limit](Deadline cd) {
          return inner_.TransparencyCounts(first_month, limit, cd);
        });
  }
  awaitable<Result<std::vector<store::AuditEntry>>> AuditTrail(size_t limit, Deadline d) override {
    return dep_.Call<std::vector<store::AuditEntry>>(
        {"audit", t().meta_moderation, true}, d,
        [this, limit](Deadline cd) { return inner_.AuditTrail(limit, cd); });
  }

 private:
  static awaitable<Status> Unwrap(awaitable<Result<Unit>> call) {
    co_return ToStatus(co_await std::move(call));
  }

  // The timeouts now: each call takes one reading when it starts.
  CallTimeouts t() const { return timeouts_->Load(); }

  store::MetaStore& inner_;
  Dependency& dep_;
  const std::shared_ptr<const LiveCallTimeouts> timeouts_;
};

}  // namespace

LiveCallTimeouts::LiveCallTimeouts(const CallTimeouts& initial) { Store(initial); }

// One order for both directions; the static_assert in Load keeps it in step with CallTimeouts.
void LiveCallTimeouts::Store(const CallTimeouts& next) {
  const Duration fields[kCount] = {next.blob_put,        next.blob_get,       next.blob_cleanup,
                                   next.meta_insert,     next.meta_get,       next.meta_delete,
                                   next.meta_background, next.meta_moderation};
  for (size_t i = 0; i < kCount; ++i) ticks_[i].store(fields[i].count(), std::memory_order_relaxed);
}

CallTimeouts LiveCallTimeouts::Load() const {
  static_assert(sizeof(CallTimeouts) == kCount * sizeof(Duration), "a field is missing here");
  auto at = [this](size_t i) { return Duration(ticks_[i].load(std::memory_order_relaxed)); };
  CallTimeouts t;
  t.blob_put = at(0);
  t.blob_get = at(1);
  t.blob_cleanup = at(2);
  t.meta_insert = at(3);
  t.meta_get = at(4);
  t.meta_delete = at(5);
  t.meta_background = at(6);
  t.meta_moderation = at(7);
  return t;
}

namespace {
// Borrowed: the caller keeps it alive (an aliasing pointer that owns nothing).
std::shared_ptr<const LiveCallTimeouts> Borrowed(const LiveCallTimeouts& timeouts) {
  return std::shared_ptr<const LiveCallTimeouts>(std::shared_ptr<void>(), &timeouts);
}
}  // namespace

std::unique_ptr<store::BlobStore> MakeGuardedBlobStore(store::BlobStore& inner,
                                                       Dependency& dependency,
                                                       const LiveCallTimeouts& timeouts) {
  return std::make_unique<GuardedBlobStore>(inner, dependency, Borrowed(timeouts));
}

std::unique_ptr<store::MetaStore> MakeGuardedMetaStore(store::MetaStore& inner,
                                                       Dependency& dependency,
                                                       const LiveCallTimeouts& timeouts) {
  return std::make_unique<GuardedMetaStore>(inner, dependency, Borrowed(timeouts));
}

std::unique_ptr<store::BlobStore> MakeGuardedBlobStore(store::BlobStore& inner,
                                                       Dependency& dependency,
                                                       CallTimeouts timeouts) {
  return std::make_unique<GuardedBlobStore>(inner, dependency,
                                            std::make_shared<const LiveCallTimeouts>(timeouts));
}

std::unique_ptr<store::MetaStore> MakeGuardedMetaStore(store::MetaStore& inner,
                                                       Dependency& dependency,
                                                       CallTimeouts timeouts) {
  return std::make_unique<GuardedMetaStore>(inner, dependency,
                                            std::make_shared<const LiveCallTimeouts>(timeouts));
}

}  // namespace sluice::service
