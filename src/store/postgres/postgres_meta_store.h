// MetaStore on PostgreSQL: four pools of libpq connections (read, write, cleanup, moderation) on
// one I/O thread, every statement a single round trip.
//
// Private to sluice_store_postgres. The class is one object in several files, by concern:
// postgres_meta_store.cc (the pools, the I/O thread, the factory), postgres_meta_pastes.cc (a
// paste's row: insert, get, delete, claim), postgres_meta_sweep.cc (the outbox, leases, expiry
// and purge), postgres_meta_moderation.cc (reports, withholding, blocks, audit) and
// postgres_meta_storage.cc (the live bytes and the quota's reservations). The connection pool is
// pg_pool.h; the parsing of rows, pg_rows.h.
#pragma once

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <variant>

#include "pg_connection.h"
#include "pg_pool.h"
#include "sluice/asio/completion.h"
#include "sluice/asio/spawn.h"
#include "sluice/asio/timer.h"
#include "sluice/store/postgres.h"

namespace sluice::store::pg {

// A write that left and whose answer did not come back: it may have committed (MetaStore::Insert).
inline Error OutcomeUnknown(Error e) {
  e.reason = std::string(kOutcomeUnknown);
  e.message += " (sent; it may have committed)";
  e.never_sent = false;
  return e;
}

// Which statements say "outcome unknown" when their answer is lost after the send.
enum class LostAnswer { kPlainError, kOutcomeUnknown };

// Answers the caller once: with the result, or with DeadlineExceeded when its deadline passes
// first. Touched on the I/O thread only.
template <typename T>
struct Answer {
  explicit Answer(asio_glue::Completion<Result<T>> c) : done(std::move(c)) {}
  bool answered() const { return !done; }
  void Finish(Result<T> result) {
    if (done) done(std::move(result));
  }
  asio_glue::Completion<Result<T>> done;
};

class PgMetaStore final : public PostgresMetaStore, private StorageReservation::Ledger {
 public:
  explicit PgMetaStore(PostgresOptions options);
  ~PgMetaStore() override;

  // A paste's row (postgres_meta_pastes.cc)
  awaitable<Status> Insert(PasteMeta meta, admission::Deadline deadline) override;
  awaitable<Result<PasteMeta>> Get(PasteId id, admission::Deadline deadline) override;
  awaitable<Status> MarkDeleted(PasteId id, int64_t now, admission::Deadline deadline) override;
  awaitable<Result<PasteMeta>> Claim(PasteId id, int64_t now,
                                     admission::Deadline deadline) override;

  // The outbox, leases, expiry and purge (postgres_meta_sweep.cc)
  awaitable<Result<std::vector<OutboxEntry>>> DueOutbox(int64_t now, size_t limit,
                                                        admission::Deadline deadline) override;
  awaitable<Status> FinishOutbox(int64_t seq, admission::Deadline deadline) override;
  awaitable<Status> RetryOutboxLater(int64_t seq, int64_t next_attempt_at,
                                     admission::Deadline deadline) override;
  awaitable<Result<int64_t>> OldestOutboxAge(int64_t now, admission::Deadline deadline) override;
  awaitable<Result<bool>> HoldLease(std::string name, std::string holder, int64_t, int64_t seconds,
                                    admission::Deadline deadline) override;
  awaitable<Result<std::vector<PasteId>>> Expired(int64_t now, size_t limit,
                                                  admission::Deadline deadline) override;
  awaitable<Status> Purge(std::vector<PasteId> ids, admission::Deadline deadline) override;
  awaitable<Result<std::vector<PasteId>>> Existing(std::vector<PasteId> ids,
                                                   admission::Deadline deadline) override;
  awaitable<Result<std::vector<PasteMeta>>> ListPastes(std::optional<PasteId> after, size_t limit,
                                                       admission::Deadline deadline) override;

  // Moderation (postgres_meta_moderation.cc)
  awaitable<Result<ReportOutcome>> AddReport(AbuseReport report, ReportPolicy policy,
                                             admission::Deadline deadline) override;
  awaitable<Result<ModerationOutcome>> SetModeration(PasteId id, ModerationChange change,
                                                     admission::Deadline deadline) override;
  awaitable<Result<size_t>> PurgeReports(int64_t closed_before, int64_t now, size_t limit,
                                         admission::Deadline deadline) override;
  awaitable<Result<ReportPage>> OpenReports(std::optional<ReportCursor> after, size_t limit,
                                            admission::Deadline deadline) override;
  awaitable<Result<ReportCounts>> CountReports(admission::Deadline deadline) override;
  awaitable<Status> AddBlock(ClientBlock block, admission::Deadline deadline) override;
  awaitable<Result<std::vector<AbuseReport>>> ReportsOf(PasteId id,
                                                        admission::Deadline deadline) override;
  awaitable<Result<std::vector<ClientBlock>>> ActiveBlocks(int64_t now,
                                                           admission::Deadline deadline) override;
  awaitable<Status> AddAudit(AuditEntry entry, admission::Deadline deadline) override;
  awaitable<Result<bool>> BlockContent(BlockedContent entry, int64_t max_entries,
                                       admission::Deadline deadline) override;
  awaitable<Result<bool>> UnblockContent(BodyDigest sha256, admission::Deadline deadline) override;
  awaitable<Result<BlockedContentPage>> BlockedContents(std::optional<BodyDigest> after,
                                                        size_t limit,
                                                        admission::Deadline deadline) override;
  awaitable<Result<BlockedContentsState>> BlockedContentsVersion(
      admission::Deadline deadline) override;
  awaitable<Result<std::vector<AuditEntry>>> AuditTrail(size_t limit,
                                                        admission::Deadline deadline) override;
  awaitable<Status> AddTransparency(std::vector<TransparencyCount> counts,
                                    admission::Deadline deadline) override;
  awaitable<Result<std::vector<TransparencyCount>>> TransparencyCounts(
      std::string first_month, size_t limit, admission::Deadline deadline) override;
  awaitable<Result<NoticeOutcome>> AddNotice(Notice notice, int64_t max_notices,
                                             admission::Deadline deadline) override;
  awaitable<Result<std::vector<Notice>>> Notices(int64_t after_id, size_t limit,
                                                 admission::Deadline deadline) override;
  awaitable<Result<bool>> ImportNotice(Notice notice, int64_t max_notices,
                                       admission::Deadline deadline) override;
  awaitable<Result<std::vector<Notice>>> OpenNotices(size_t limit,
                                                     admission::Deadline deadline) override;
  awaitable<Result<std::vector<Notice>>> CloseNotices(PasteId id, int64_t at,
                                                      admission::Deadline deadline) override;
  awaitable<Status> AddCreatorToken(CreatorToken token, int64_t max_live, int64_t now,
                                    admission::Deadline deadline) override;
  awaitable<Result<bool>> RevokeCreatorToken(std::string id, int64_t now,
                                             admission::Deadline deadline) override;
  awaitable<Result<CreatorTokenList>> CreatorTokens(admission::Deadline deadline) override;
  awaitable<Result<int64_t>> CreatorTokensVersion(admission::Deadline deadline) override;

  // Storage accounting (postgres_meta_storage.cc)
  awaitable<Result<uint64_t>> LiveBytes(admission::Deadline deadline) override;
  awaitable<Result<StorageReservation>> ReserveStorage(StorageRequest request,
                                                       admission::Deadline deadline) override;
  void Settle(const PasteId& id, bool spent) noexcept override;

  PoolStats Stats(PostgresPurpose purpose) const override;
  awaitable<Result<std::string>> ShowForTest(PostgresPurpose purpose, std::string setting) override;

 private:
  template <typename T>
  using Parser = std::function<Result<T>(const PGresult*)>;

  // Not a coroutine on purpose: the caller's co_await starts it, and g++ 12 mishandles the
  // non-trivial temporaries a coroutine here would hold in its co_await expressions.
  template <typename T>
  awaitable<Result<T>> Query(PostgresPurpose purpose, admission::Deadline deadline, const char* sql,
                             std::vector<Param> params, Parser<T> parse,
                             LostAnswer lost = LostAnswer::kPlainError) {
    auto start = [this, purpose, deadline, sql, params = std::move(params),
                  parse = std::move(parse), lost](asio_glue::Completion<Result<T>> done) mutable {
      auto answer = std::make_shared<Answer<T>>(std::move(done));
      boost::asio::co_spawn(io_,
                            Run<T>(purpose, deadline, sql, std::move(params), std::move(parse),
                                   std::move(answer), lost),
                            asio_glue::LogIfThrown("postgres: statement"));
    };
    return asio_glue::AwaitCompletion<Result<T>>(std::move(start));
  }

  // A statement whose rows say nothing beyond success, unless `check` finds otherwise.
  awaitable<Status> Command(PostgresPurpose purpose, admission::Deadline deadline, const char* sql,
                            std::vector<Param> params, Parser<std::monostate> check = nullptr,
                            LostAnswer lost = LostAnswer::kPlainError) {
    if (!check) check = [](const PGresult*) -> Result<std::monostate> { return std::monostate{}; };
    return AsStatus(
        Query<std::monostate>(purpose, deadline, sql, std::move(params), std::move(check), lost));
  }

  static awaitable<Status> AsStatus(awaitable<Result<std::monostate>> call);

  // Runs on the I/O thread. The caller is answered at its deadline even while this goes on; a
  // statement not yet sent by then is never sent.
  //
  // Why no PQcancel: it connects and waits synchronously, which would stall every connection on
  // this thread. The server-side statement_timeout (a little above the app's timeout) ends the
  // abandoned statement instead, and until it does the connection stays lent, so the pool keeps
  // counting the work the server is still doing.
  template <typename T>
  awaitable<void> Run(PostgresPurpose purpose, admission::Deadline deadline, const char* sql,
                      std::vector<Param> params, Parser<T> parse, std::shared_ptr<Answer<T>> answer,
                      LostAnswer lost) {
    asio_glue::Timer timer(clock_, io_.get_executor());
    // Set once the statement may have left: a deadline past it leaves the outcome unknown.
    auto sent = std::make_shared<bool>(false);
    if (!deadline.IsNever()) {
      timer.AsyncWaitUntil(deadline.at(), [answer, sent, lost](bool reached) {
        if (!reached) return;
        if (!*sent) {
          answer->Finish(NotSentError("postgres: no answer in time, and nothing was sent"));
          return;
        }
        Error e = DeadlineError("postgres: the call did not answer in time");
        answer->Finish(lost == LostAnswer::kOutcomeUnknown ? OutcomeUnknown(std::move(e))
                                                           : std::move(e));
      });
    }
    Pool& pool = *pools_[static_cast<size_t>(purpose)];
    auto acquiring = pool.Acquire(deadline);
    Result<Pool::Lease> lease = co_await std::move(acquiring);
    if (!lease.ok()) {
      answer->Finish(lease.error());
      co_return;
    }
    std::optional<Pool::Lease> held(std::move(*lease));
    if (answer->answered() || deadline.Expired(clock_)) {
      held.reset();
      answer->Finish(NotSentError("postgres: abandoned before it was sent"));
      co_return;
    }
    // Past this the server should have cancelled the statement itself; no answer by then means the
    // connection or the server is stuck, and the connection is closed rather than lent for ever.
    const Duration hard_limit =
        pool.statement_timeout() + std::max<Duration>(pool.statement_timeout(), kStuckGrace);
    *sent = true;
    bool answer_lost = false;
    auto exec = held->conn().Exec(sql, std::move(params),
                                  SystemClock::Instance().Now() + hard_limit, &answer_lost);
    Result<PgResult> result = co_await std::move(exec);
    timer.Cancel();
    // The connection goes back before the caller resumes, so the caller's next call finds it.
    held.reset();
    if (!result.ok() && answer_lost && lost == LostAnswer::kOutcomeUnknown) {
      answer->Finish(OutcomeUnknown(result.error()));
      co_return;
    }
    answer->Finish(result.ok() ? parse(result->get()) : Result<T>(result.error()));
  }

  static constexpr Duration kStuckGrace = std::chrono::seconds(1);
  // Voters a withholding looks at beyond the threshold (as the SQLite store's kSpareVoters).
  static constexpr int64_t kSpareVoters = 64;

  bool HoldsReservation(const PasteId& id) {
    std::lock_guard lock(reserved_mu_);
    return reserved_.contains(id);
  }

  // A create that ended without its row gives its room back at once; if this fails (the server
  // is unreachable, and so is every create), the row counts until its expiry.
  awaitable<void> GiveBack(PasteId id);
  static constexpr Duration kGiveBackTimeout = std::chrono::seconds(1);

  const PostgresOptions options_;
  const Clock& clock_ = options_.clock != nullptr ? *options_.clock : SystemClock::Instance();
  // The reservations this object granted and no insert or release has ended yet: an Insert of
  // one of these ids also ends its reservation.
  std::mutex reserved_mu_;
  std::set<PasteId> reserved_;
  std::array<std::unique_ptr<Pool>, 4> pools_;  // by PostgresPurpose; outlive io_
  std::unique_ptr<boost::asio::io_context> io_holder_ =
      std::make_unique<boost::asio::io_context>(1);
  boost::asio::io_context& io_ = *io_holder_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
};

}  // namespace sluice::store::pg
