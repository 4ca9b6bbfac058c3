// Test decorators over the store interfaces: count calls and fail them on demand, so tests can see
// that a rejected request never reached storage and that a failing store is not reported as absent.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>

#include "sluice/store/blob_store.h"
#include "sluice/store/meta_store.h"

namespace sluice::testing {

inline Error StoreDown() {
  return MakeError(ErrorCode::kUnavailable, "injected failure", "storage_unavailable");
}

/// What a store answers when the connection was refused: the request provably never left.
inline Error ConnectRefused() {
  Error e =
      MakeError(ErrorCode::kUnavailable, "injected: connection refused", "connection_refused");
  e.never_sent = true;
  return e;
}

class FaultyBlobStore final : public store::BlobStore {
 public:
  explicit FaultyBlobStore(store::BlobStore& inner) : inner_(inner) {}
  std::atomic<bool> fail{false};
  std::atomic<int> calls{0};
  /// When set, alters every body Get returns (a store answering wrongly). Set it between calls,
  /// never while one runs.
  std::function<void(std::string&)> damage;
  /// When set, every Delete of this id fails (a body the store keeps refusing). Set it between
  /// calls, never while one runs.
  std::string refuse_delete_of;
  /// When set, every DeleteMany runs out of time (a store too slow for the batch).
  std::atomic<bool> slow_batches{false};
  /// When set, called as each DeleteMany begins (a test that moves a manual clock there gives the
  /// batch a duration). Set it between calls, never while one runs.
  std::function<void()> before_delete_many;

  boost::asio::awaitable<Status> Put(store::PasteId id, std::shared_ptr<const std::string> body,
                                     admission::Deadline d) override {
    ++calls;
    if (fail) co_return StoreDown();
    auto put = inner_.Put(id, std::move(body), d);
    co_return co_await std::move(put);
  }
  boost::asio::awaitable<Result<std::string>> Get(store::PasteId id,
                                                  admission::Deadline d) override {
    ++calls;
    if (fail) co_return StoreDown();
    Result<std::string> body = co_await inner_.Get(id, d);
    if (body.ok() && damage) damage(*body);
    co_return body;
  }
  boost::asio::awaitable<Status> Delete(store::PasteId id, admission::Deadline d) override {
    ++calls;
    if (fail || id.view() == refuse_delete_of) co_return StoreDown();
    co_return co_await inner_.Delete(id, d);
  }
  boost::asio::awaitable<Status> DeleteMany(std::vector<store::PasteId> ids,
                                            admission::Deadline d) override {
    if (before_delete_many) before_delete_many();
    if (slow_batches) {
      ++calls;
      co_return MakeError(ErrorCode::kDeadlineExceeded, "injected: the call did not answer in time",
                          "deadline_exceeded");
    }
    co_return co_await store::BlobStore::DeleteMany(std::move(ids), d);
  }
  boost::asio::awaitable<Result<std::vector<store::BlobInfo>>> List(
      std::string after, size_t limit, admission::Deadline d) override {
    ++calls;
    if (fail) co_return StoreDown();
    auto page = inner_.List(std::move(after), limit, d);
    co_return co_await std::move(page);
  }

 private:
  store::BlobStore& inner_;
};

class FaultyMetaStore final : public store::MetaStore {
 public:
  explicit FaultyMetaStore(store::MetaStore& inner) : inner_(inner) {}
  std::atomic<bool> fail{false};
  std::atomic<int> calls{0};
  /// Insert answers "outcome unknown" (its answer lost after the send); with `insert_lands` the
  /// row is written first, as when the reply alone was lost.
  std::atomic<bool> lose_insert_answer{false};
  std::atomic<bool> insert_lands{true};
  /// Get fails (the primary unreachable), so an unknown outcome cannot be checked.
  std::atomic<bool> fail_gets{false};
  /// When set and it answers true, that Get is refused before anything is sent (a refused
  /// connect: the error the retry rule may retry). Set it between calls, never while one runs.
  std::function<bool()> refuse_get;
  std::atomic<int> gets{0};
  /// When set, Insert answers this without writing. Set it between calls, never while one runs.
  std::optional<Error> insert_error;

  bool Fails() {
    ++calls;
    return fail.load();
  }

  boost::asio::awaitable<Status> Insert(store::PasteMeta m, admission::Deadline d) override {
    return Inserting(std::move(m), nullptr, d);
  }
  /// The inner store's: a create on a store that keeps bodies with rows calls InsertWithBody.
  size_t colocated_body_limit() const override { return inner_.colocated_body_limit(); }
  std::atomic<int> inserts_with_body{0};
  boost::asio::awaitable<Status> InsertWithBody(store::PasteMeta m,
                                                std::shared_ptr<const std::string> body,
                                                admission::Deadline d) override {
    ++inserts_with_body;
    return Inserting(std::move(m), std::move(body), d);
  }
  boost::asio::awaitable<Result<store::PasteMeta>> Get(store::PasteId id,
                                                       admission::Deadline d) override {
    ++gets;
    if (Fails() || fail_gets) co_return StoreDown();
    if (refuse_get && refuse_get()) co_return ConnectRefused();
    co_return co_await inner_.Get(id, d);
  }
  boost::asio::awaitable<Status> MarkDeleted(store::PasteId id, int64_t now,
                                             admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.MarkDeleted(id, now, d);
  }
  boost::asio::awaitable<Result<std::vector<store::OutboxEntry>>> DueOutbox(
      int64_t now, size_t limit, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.DueOutbox(now, limit, d);
  }
  boost::asio::awaitable<Status> FinishOutbox(int64_t seq, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.FinishOutbox(seq, d);
  }
  boost::asio::awaitable<Status> RetryOutboxLater(int64_t seq, int64_t next,
                                                  admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.RetryOutboxLater(seq, next, d);
  }
  boost::asio::awaitable<Result<int64_t>> OldestOutboxAge(int64_t now,
                                                          admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.OldestOutboxAge(now, d);
  }
  boost::asio::awaitable<Result<bool>> HoldLease(std::string name, std::string holder, int64_t now,
                                                 int64_t seconds, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.HoldLease(std::move(name), std::move(holder), now, seconds, d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Result<std::vector<store::PasteId>>> Expired(
      int64_t now, size_t limit, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.Expired(now, limit, d);
  }
  boost::asio::awaitable<Status> Purge(std::vector<store::PasteId> ids,
                                       admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.Purge(std::move(ids), d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Result<std::vector<store::PasteId>>> Existing(
      std::vector<store::PasteId> ids, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.Existing(std::move(ids), d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Result<std::vector<store::PasteMeta>>> ListPastes(
      std::optional<store::PasteId> after, size_t limit, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.ListPastes(after, limit, d);
  }
  boost::asio::awaitable<Result<store::PasteMeta>> Claim(store::PasteId id, int64_t now,
                                                         admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.Claim(id, now, d);
  }
  boost::asio::awaitable<Result<uint64_t>> LiveBytes(admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.LiveBytes(d);
  }
  std::atomic<int> reservations{0};
  boost::asio::awaitable<Result<store::StorageReservation>> ReserveStorage(
      store::StorageRequest request, admission::Deadline d) override {
    ++reservations;
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.ReserveStorage(request, d);
  }

  // Moderation: fails with the rest when `fail` is set.
  boost::asio::awaitable<Result<store::ReportOutcome>> AddReport(store::AbuseReport report,
                                                                 store::ReportPolicy policy,
                                                                 admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.AddReport(std::move(report), policy, d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Result<store::ModerationOutcome>> SetModeration(
      store::PasteId id, store::ModerationChange change, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.SetModeration(id, std::move(change), d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Result<size_t>> PurgeReports(int64_t closed_before, int64_t now,
                                                      size_t limit,
                                                      admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.PurgeReports(closed_before, now, limit, d);
  }
  boost::asio::awaitable<Result<store::ReportPage>> OpenReports(
      std::optional<store::ReportCursor> after, size_t limit, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.OpenReports(after, limit, d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Result<store::ReportCounts>> CountReports(admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.CountReports(d);
  }
  boost::asio::awaitable<Status> AddBlock(store::ClientBlock block,
                                          admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.AddBlock(std::move(block), d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Status> AddTransparency(std::vector<store::TransparencyCount> counts,
                                                 admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.AddTransparency(std::move(counts), d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Result<std::vector<store::TransparencyCount>>> TransparencyCounts(
      std::string first_month, size_t limit, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.TransparencyCounts(std::move(first_month), limit, d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Result<std::vector<store::AbuseReport>>> ReportsOf(
      store::PasteId id, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.ReportsOf(id, d);
  }
  boost::asio::awaitable<Result<std::vector<store::ClientBlock>>> ActiveBlocks(
      int64_t now, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.ActiveBlocks(now, d);
  }
  boost::asio::awaitable<Result<bool>> BlockContent(store::BlockedContent entry,
                                                    int64_t max_entries,
                                                    admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.BlockContent(std::move(entry), max_entries, d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Result<bool>> UnblockContent(store::BodyDigest sha256,
                                                      admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.UnblockContent(sha256, d);
  }
  boost::asio::awaitable<Result<store::BlockedContentPage>> BlockedContents(
      std::optional<store::BodyDigest> after, size_t limit, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.BlockedContents(after, limit, d);
  }
  boost::asio::awaitable<Result<store::NoticeOutcome>> AddNotice(store::Notice notice,
                                                                 int64_t max_notices,
                                                                 admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.AddNotice(std::move(notice), max_notices, d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Result<std::vector<store::Notice>>> Notices(
      int64_t after_id, size_t limit, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.Notices(after_id, limit, d);
  }
  boost::asio::awaitable<Result<bool>> ImportNotice(store::Notice notice, int64_t max_notices,
                                                    admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.ImportNotice(std::move(notice), max_notices, d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Result<std::vector<store::Notice>>> OpenNotices(
      size_t limit, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.OpenNotices(limit, d);
  }
  boost::asio::awaitable<Result<std::vector<store::Notice>>> CloseNotices(
      store::PasteId id, int64_t at, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.CloseNotices(id, at, d);
  }
  boost::asio::awaitable<Result<store::BlockedContentsState>> BlockedContentsVersion(
      admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.BlockedContentsVersion(d);
  }
  boost::asio::awaitable<Status> AddCreatorToken(store::CreatorToken token, int64_t max_live,
                                                 int64_t now, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.AddCreatorToken(std::move(token), max_live, now, d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Result<bool>> RevokeCreatorToken(std::string id, int64_t now,
                                                          admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.RevokeCreatorToken(std::move(id), now, d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Result<store::CreatorTokenList>> CreatorTokens(
      admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.CreatorTokens(d);
  }
  boost::asio::awaitable<Result<int64_t>> CreatorTokensVersion(admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.CreatorTokensVersion(d);
  }
  boost::asio::awaitable<Status> AddAudit(store::AuditEntry entry, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    auto op = inner_.AddAudit(std::move(entry), d);
    co_return co_await std::move(op);
  }
  boost::asio::awaitable<Result<std::vector<store::AuditEntry>>> AuditTrail(
      size_t limit, admission::Deadline d) override {
    if (Fails()) co_return StoreDown();
    co_return co_await inner_.AuditTrail(limit, d);
  }

 private:
  // Insert's faults, for both kinds of insert.
  boost::asio::awaitable<Status> Inserting(store::PasteMeta m,
                                           std::shared_ptr<const std::string> body,
                                           admission::Deadline d) {
    if (Fails()) co_return StoreDown();
    if (insert_error) co_return *insert_error;
    if (lose_insert_answer && !insert_lands) {
      co_return MakeError(ErrorCode::kUnavailable, "injected: connection reset after the send",
                          std::string(store::kOutcomeUnknown));
    }
    auto inserting = body ? inner_.InsertWithBody(m, std::move(body), d) : inner_.Insert(m, d);
    Status landed = co_await std::move(inserting);
    if (!landed.ok() || !lose_insert_answer) co_return landed;
    co_return MakeError(ErrorCode::kUnavailable, "injected: connection reset after the send",
                        std::string(store::kOutcomeUnknown));
  }

  store::MetaStore& inner_;
};

}  // namespace sluice::testing
