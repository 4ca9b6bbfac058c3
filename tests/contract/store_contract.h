// The contract every MetaStore and BlobStore backend keeps, as a type-parameterised suite: each
// test binary instantiates it with its backends (INSTANTIATE_TYPED_TEST_SUITE_P(Name,
// StoreContract, Types)), so a backend whose server the unit tests do not start runs the same suite
// unchanged. Include from one file per binary.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "../support/run_sync.h"
#include "sluice/store/blob_store.h"
#include "sluice/store/meta_store.h"

namespace sluice::store::contract {

using admission::Deadline;
using testing::RunSync;

inline PasteId Id(std::string_view text) { return *PasteId::Parse(text); }

inline std::shared_ptr<const std::string> Body(std::string text) {
  return std::make_shared<const std::string>(std::move(text));
}

// A row as a create writes it: a 5-byte body and its checksum (any 32 bytes will do here).
inline PasteMeta Row(std::string_view id, int64_t expires_at, unsigned char token_byte = 7) {
  PasteMeta m{Id(id), 100, expires_at, 5, {}, false, BodyDigest{}};
  m.token_hash.fill(token_byte);
  for (size_t i = 0; i < m.body_sha256->size(); ++i) {
    (*m.body_sha256)[i] = static_cast<unsigned char>(0xa0 + i);  // every byte differs
  }
  return m;
}

// A fresh folder under the system's temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("sluice-contract-" + std::to_string(std::random_device{}()) + "-" +
             std::to_string(::getpid()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A backend under test, able to reopen itself on the same storage where that means anything.
struct Backend {
  virtual ~Backend() = default;
  virtual MetaStore& meta() = 0;
  virtual BlobStore& blobs() = 0;
  virtual void Reopen() = 0;
  virtual bool persistent() const = 0;
};

template <typename B>
class StoreContract : public ::testing::Test {
 protected:
  B backend_;
  MetaStore& meta() { return backend_.meta(); }
  BlobStore& blobs() { return backend_.blobs(); }
  Deadline deadline() { return Deadline::Never(); }
};

TYPED_TEST_SUITE_P(StoreContract);

TYPED_TEST_P(StoreContract, InsertedRowReadsBackIdentically) {
  const PasteMeta row = Row("aaaaaaaaaaa1", 5000, 42);
  ASSERT_TRUE(RunSync(this->meta().Insert(row, this->deadline())).ok());
  auto got = RunSync(this->meta().Get(row.id, this->deadline()));
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->id, row.id);
  EXPECT_EQ(got->created_at, 100);
  EXPECT_EQ(got->expires_at, 5000);
  EXPECT_EQ(got->size_bytes, 5u);
  EXPECT_EQ(got->token_hash, row.token_hash);
  EXPECT_FALSE(got->deleted);
  EXPECT_EQ(got->body_sha256, row.body_sha256);
}

// What the read path checks a body against: its size and checksum, exactly as written, and no
// checksum (never a made-up one) for a row written without one.
TYPED_TEST_P(StoreContract, BodySizeAndChecksumRoundTrip) {
  PasteMeta big = Row("sum000000001", 5000);
  big.size_bytes = 1'000'000;
  big.body_sha256->fill(0x00);
  (*big.body_sha256)[31] = 0xff;
  PasteMeta none = Row("sum000000002", 5000);
  none.size_bytes = 3;
  none.body_sha256.reset();
  for (const PasteMeta& row : {big, none}) {
    ASSERT_TRUE(RunSync(this->meta().Insert(row, this->deadline())).ok());
  }
  this->backend_.Reopen();
  for (const PasteMeta& row : {big, none}) {
    auto got = RunSync(this->meta().Get(row.id, this->deadline()));
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(got->size_bytes, row.size_bytes);
    EXPECT_EQ(got->body_sha256, row.body_sha256) << row.id.view();
  }
  ASSERT_TRUE(RunSync(this->meta().MarkDeleted(big.id, 200, this->deadline())).ok());
  EXPECT_EQ(RunSync(this->meta().Get(big.id, this->deadline()))->body_sha256, big.body_sha256);
}

TYPED_TEST_P(StoreContract, MissingRowIsNotFound) {
  auto got = RunSync(this->meta().Get(Id("nothere00000"), this->deadline()));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, ErrorCode::kNotFound);
}

TYPED_TEST_P(StoreContract, DuplicateInsertFailsAndKeepsTheFirstRow) {
  ASSERT_TRUE(RunSync(this->meta().Insert(Row("dup000000000", 5000, 1), this->deadline())).ok());
  Status second = RunSync(this->meta().Insert(Row("dup000000000", 9000, 2), this->deadline()));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, ErrorCode::kInternal);
  EXPECT_EQ(RunSync(this->meta().Get(Id("dup000000000"), this->deadline()))->expires_at, 5000);
}

TYPED_TEST_P(StoreContract, MarkDeletedLeavesATombstoneAndOneOutboxEntry) {
  ASSERT_TRUE(RunSync(this->meta().Insert(Row("del000000000", 5000), this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->meta().MarkDeleted(Id("del000000000"), 200, this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->meta().MarkDeleted(Id("del000000000"), 201, this->deadline())).ok());
  EXPECT_TRUE(RunSync(this->meta().Get(Id("del000000000"), this->deadline()))->deleted);
  auto due = RunSync(this->meta().DueOutbox(200, 10, this->deadline()));
  ASSERT_TRUE(due.ok());
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ((*due)[0].id, Id("del000000000"));
  EXPECT_EQ((*due)[0].attempts, 0);
}

TYPED_TEST_P(StoreContract, MarkDeletedOfMissingRowIsNotFound) {
  Status s = RunSync(this->meta().MarkDeleted(Id("nothere00000"), 200, this->deadline()));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(RunSync(this->meta().DueOutbox(1000, 10, this->deadline()))->empty());
}

TYPED_TEST_P(StoreContract, OutboxRetryPostponesAndFinishRemoves) {
  ASSERT_TRUE(RunSync(this->meta().Insert(Row("out000000000", 5000), this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->meta().MarkDeleted(Id("out000000000"), 200, this->deadline())).ok());
  const int64_t seq = (*RunSync(this->meta().DueOutbox(200, 10, this->deadline())))[0].seq;
  ASSERT_TRUE(RunSync(this->meta().RetryOutboxLater(seq, 260, this->deadline())).ok());
  EXPECT_TRUE(RunSync(this->meta().DueOutbox(259, 10, this->deadline()))->empty());
  auto later = RunSync(this->meta().DueOutbox(260, 10, this->deadline()));
  ASSERT_EQ(later->size(), 1u);
  EXPECT_EQ((*later)[0].attempts, 1);
  EXPECT_EQ(*RunSync(this->meta().OldestOutboxAge(300, this->deadline())), 100);
  ASSERT_TRUE(RunSync(this->meta().FinishOutbox(seq, this->deadline())).ok());
  EXPECT_TRUE(RunSync(this->meta().DueOutbox(10'000, 10, this->deadline()))->empty());
  EXPECT_EQ(*RunSync(this->meta().OldestOutboxAge(300, this->deadline())), 0);
}

TYPED_TEST_P(StoreContract, ExpiredListsOnlyDueRowsUpToTheLimit) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(RunSync(this->meta().Insert(Row("exp00000000" + std::to_string(i), 100 + i),
                                            this->deadline()))
                    .ok());
  }
  ASSERT_TRUE(RunSync(this->meta().Insert(Row("live00000000", 9000), this->deadline())).ok());
  EXPECT_EQ(RunSync(this->meta().Expired(102, 10, this->deadline()))->size(), 3u);
  EXPECT_EQ(RunSync(this->meta().Expired(1000, 2, this->deadline()))->size(), 2u);
  auto all = RunSync(this->meta().Expired(1000, 10, this->deadline()));
  EXPECT_EQ(all->size(), 5u);
  EXPECT_EQ(std::count(all->begin(), all->end(), Id("live00000000")), 0);
}

TYPED_TEST_P(StoreContract, PurgeRemovesRowsAndTheirOutboxEntries) {
  ASSERT_TRUE(RunSync(this->meta().Insert(Row("pur000000000", 100), this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->meta().Insert(Row("kep000000000", 100), this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->meta().MarkDeleted(Id("pur000000000"), 50, this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->meta().Purge({Id("pur000000000")}, this->deadline())).ok());
  EXPECT_EQ(RunSync(this->meta().Get(Id("pur000000000"), this->deadline())).error().code,
            ErrorCode::kNotFound);
  EXPECT_TRUE(RunSync(this->meta().DueOutbox(10'000, 10, this->deadline()))->empty());
  auto existing =
      RunSync(this->meta().Existing({Id("pur000000000"), Id("kep000000000")}, this->deadline()));
  ASSERT_TRUE(existing.ok());
  EXPECT_EQ(*existing, std::vector<PasteId>{Id("kep000000000")});
}

TYPED_TEST_P(StoreContract, RowsSurviveReopening) {
  if (!this->backend_.persistent()) GTEST_SKIP() << "in-memory backend";
  ASSERT_TRUE(RunSync(this->meta().Insert(Row("per000000000", 5000), this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->blobs().Put(Id("per000000000"), Body("kept"), this->deadline())).ok());
  this->backend_.Reopen();
  EXPECT_TRUE(RunSync(this->meta().Get(Id("per000000000"), this->deadline())).ok());
  EXPECT_EQ(*RunSync(this->blobs().Get(Id("per000000000"), this->deadline())), "kept");
}

TYPED_TEST_P(StoreContract, BodyReadsBackByteIdentically) {
  std::string body(1'000'000, '\0');
  std::mt19937 rng(7);
  for (char& c : body) c = static_cast<char>(rng());
  ASSERT_TRUE(RunSync(this->blobs().Put(Id("blob00000001"), Body(body), this->deadline())).ok());
  auto got = RunSync(this->blobs().Get(Id("blob00000001"), this->deadline()));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, body);
}

TYPED_TEST_P(StoreContract, MissingBodyIsNotFoundAndDeleteIsIdempotent) {
  EXPECT_EQ(RunSync(this->blobs().Get(Id("blob00000002"), this->deadline())).error().code,
            ErrorCode::kNotFound);
  ASSERT_TRUE(RunSync(this->blobs().Put(Id("blob00000002"), Body("x"), this->deadline())).ok());
  EXPECT_TRUE(RunSync(this->blobs().Delete(Id("blob00000002"), this->deadline())).ok());
  EXPECT_TRUE(RunSync(this->blobs().Delete(Id("blob00000002"), this->deadline())).ok());
  EXPECT_EQ(RunSync(this->blobs().Get(Id("blob00000002"), this->deadline())).error().code,
            ErrorCode::kNotFound);
}

// The expiry sweep removes its batch's bodies in one call (src/worker/janitor.cc): each body in
// the batch goes, whichever tier holds it (a 1-byte and a 10-byte body straddle a 3-byte limit),
// absent ones are no failure, the call can be repeated, and bodies outside it stay.
TYPED_TEST_P(StoreContract, DeleteManyRemovesEachBodyOfTheBatchAndNoOther) {
  ASSERT_TRUE(RunSync(this->blobs().Put(Id("many00000001"), Body("a"), this->deadline())).ok());
  ASSERT_TRUE(
      RunSync(this->blobs().Put(Id("many00000002"), Body("0123456789"), this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->blobs().Put(Id("many00000003"), Body("kept"), this->deadline())).ok());
  const std::vector<PasteId> batch{Id("many00000001"), Id("many00000002"), Id("many0000none")};
  ASSERT_TRUE(RunSync(this->blobs().DeleteMany(batch, this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->blobs().DeleteMany(batch, this->deadline())).ok());
  for (const PasteId& gone : batch) {
    EXPECT_EQ(RunSync(this->blobs().Get(gone, this->deadline())).error().code, ErrorCode::kNotFound)
        << gone.view();
  }
  auto kept = RunSync(this->blobs().Get(Id("many00000003"), this->deadline()));
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, "kept");
}

TYPED_TEST_P(StoreContract, ListPagesThroughBodiesInIdOrder) {
  std::vector<std::string> ids = {"Zz0000000001", "ab0000000001", "ab0000000002", "cd0000000001",
                                  "0a0000000001"};
  for (const auto& id : ids) {
    ASSERT_TRUE(RunSync(this->blobs().Put(Id(id), Body("b"), this->deadline())).ok());
  }
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> seen;
  std::string cursor;
  for (int page = 0; page < 10; ++page) {
    auto got = RunSync(this->blobs().List(cursor, 2, this->deadline()));
    ASSERT_TRUE(got.ok());
    if (got->empty()) break;
    for (const auto& info : *got) seen.push_back(info.id.str());
    cursor = got->back().id.str();
  }
  EXPECT_EQ(seen, ids);
}

// Many writers at once, from several threads: every acknowledged write must be readable, which
// checks that the group committer hands each writer its own outcome.
TYPED_TEST_P(StoreContract, ConcurrentWritersAreAllDurable) {
  boost::asio::io_context io;
  constexpr int kWriters = 300;
  std::atomic<int> ok{0};
  // What each failed writer was told: a failure here must say which call refused and why.
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  std::vector<std::string> bodies;
  for (int i = 0; i < kWriters; ++i) bodies.push_back("body-" + std::to_string(i));
  for (int i = 0; i < kWriters; ++i) {
    boost::asio::co_spawn(
        io,
        [&, i]() -> boost::asio::awaitable<void> {
          char id[24];
          std::snprintf(id, sizeof id, "cw%010d", i);
          // Built outside the co_await: g++ 12 double-frees non-trivial temporaries inside it.
          auto put_op = this->blobs().Put(Id(id), Body(bodies[i]), this->deadline());
          Status put = co_await std::move(put_op);
          Status insert = co_await this->meta().Insert(Row(id, 5000), this->deadline());
          if (put.ok() && insert.ok()) {
            ++ok;
          } else {
            const std::lock_guard lock(failures_mutex);
            failures.push_back(std::string(id) + ": put " +
                               (put.ok() ? "ok" : put.error().message) + ", insert " +
                               (insert.ok() ? "ok" : insert.error().message));
          }
        },
        boost::asio::detached);
  }
  std::thread second([&io] { io.run(); });
  io.run();
  second.join();
  ASSERT_EQ(ok.load(), kWriters) << failures.size() << " failed, the first: "
                                 << (failures.empty() ? "" : failures.front());
  this->backend_.Reopen();
  for (int i = 0; i < kWriters; ++i) {
    char id[24];
    std::snprintf(id, sizeof id, "cw%010d", i);
    ASSERT_EQ(*RunSync(this->blobs().Get(Id(id), this->deadline())), bodies[i]);
    ASSERT_TRUE(RunSync(this->meta().Get(Id(id), this->deadline())).ok());
  }
}

// Moderation (src/service/moderation.cc, docs/moderation.md): one counted report per network and
// paste, the paste's queue row and the queue's counts kept by each report and review, the
// withholding a report's votes cause, the state a read checks, blocks and the audit trail.

// A policy that never withholds: the tests of counting and listing.
inline ReportPolicy ReviewOnly() {
  ReportPolicy p;
  p.hide_threshold = 0;
  return p;
}

inline AbuseReport ReportOf(const PasteMeta& row, std::string network, int64_t at,
                            std::string reason = "spam", std::string note = "") {
  return AbuseReport{row.id, std::move(network), std::move(reason), std::move(note), at};
}

TYPED_TEST_P(StoreContract, ReportsCountEachNetworkOnce) {
  const PasteMeta row = Row("rep000000001", 5000);
  ASSERT_TRUE(RunSync(this->meta().Insert(row, this->deadline())).ok());
  auto report = [&](const char* network, const char* reason, const char* note, int64_t at) {
    auto r = RunSync(this->meta().AddReport(ReportOf(row, network, at, reason, note), ReviewOnly(),
                                            this->deadline()));
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : ReportOutcome{};
  };
  ReportOutcome first = report("192.0.2.0/24", "spam", "first", 200);
  EXPECT_TRUE(first.counted);
  EXPECT_TRUE(first.stored);
  EXPECT_EQ(first.open_reports, 1);
  ReportOutcome again = report("192.0.2.0/24", "malware", "again", 201);
  EXPECT_FALSE(again.counted);
  EXPECT_EQ(again.open_reports, 1);
  ReportOutcome second = report("2001:db8:1::/48", "malware", "second", 202);
  EXPECT_TRUE(second.counted);
  EXPECT_EQ(second.open_reports, 2);
  this->backend_.Reopen();
  auto open = RunSync(this->meta().OpenReports(std::nullopt, 10, this->deadline()));
  ASSERT_TRUE(open.ok()) << open.error().message;
  ASSERT_EQ(open->pastes.size(), 1u);
  EXPECT_FALSE(open->next);
  const ReportSummary& s = open->pastes[0];
  EXPECT_EQ(s.id, row.id);
  EXPECT_EQ(s.reports, 2);
  EXPECT_EQ(s.networks, 2);
  EXPECT_EQ(s.votes, 2);
  EXPECT_EQ(s.reasons, (std::vector<std::string>{"malware", "spam"}));
  EXPECT_EQ(s.latest_at, 202);
  EXPECT_EQ(s.latest_note, "second");
  EXPECT_EQ(s.moderation, Moderation::kNone);
  EXPECT_FALSE(s.keep);
  auto counts = RunSync(this->meta().CountReports(this->deadline()));
  ASSERT_TRUE(counts.ok()) << counts.error().message;
  EXPECT_EQ(counts->pending, 1);
  EXPECT_EQ(counts->open_reports, 2);
  auto missing = RunSync(this->meta().AddReport(ReportOf(Row("nothere00000", 5000), "x", 1),
                                                ReviewOnly(), this->deadline()));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

// The queue a page at a time, newest report first, then by id (descending) among reports of one
// second; each page's cursor continues exactly where it stopped.
TYPED_TEST_P(StoreContract, TheReviewQueuePagesNewestFirstByCursor) {
  const int64_t times[] = {300, 100, 500, 300, 200};
  std::vector<PasteMeta> rows;
  for (int i = 0; i < 5; ++i) {
    rows.push_back(Row("page0000000" + std::to_string(i), 5000));
    ASSERT_TRUE(RunSync(this->meta().Insert(rows.back(), this->deadline())).ok());
    ASSERT_TRUE(RunSync(this->meta().AddReport(ReportOf(rows.back(), "192.0.2.0/24", times[i]),
                                               ReviewOnly(), this->deadline()))
                    .ok());
  }
  // A later report moves page00000001 to the top.
  ASSERT_TRUE(RunSync(this->meta().AddReport(ReportOf(rows[1], "198.51.100.0/24", 600, "other"),
                                             ReviewOnly(), this->deadline()))
                  .ok());
  std::vector<std::string> seen;
  std::optional<ReportCursor> after;
  int pages = 0;
  do {
    auto page = RunSync(this->meta().OpenReports(after, 2, this->deadline()));
    ASSERT_TRUE(page.ok()) << page.error().message;
    ASSERT_LE(page->pastes.size(), 2u);
    for (const ReportSummary& s : page->pastes) seen.push_back(s.id.str());
    after = page->next;
    ++pages;
    if (after) {
      // The text form round-trips (the admin API's `before`).
      auto parsed = ReportCursor::Parse(after->Encode());
      ASSERT_TRUE(parsed);
      EXPECT_EQ(parsed->id, after->id);
      EXPECT_EQ(parsed->latest_at, after->latest_at);
    }
  } while (after && pages < 10);
  EXPECT_EQ(seen, (std::vector<std::string>{"page00000001", "page00000002", "page00000003",
                                            "page00000000", "page00000004"}));
  EXPECT_EQ(pages, 3);
  auto exact = RunSync(this->meta().OpenReports(std::nullopt, 5, this->deadline()));
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->pastes.size(), 5u);
  EXPECT_FALSE(exact->next) << "a page that ends the queue says so";
  EXPECT_FALSE(ReportCursor::Parse("junk"));
  EXPECT_FALSE(ReportCursor::Parse("12.short"));
}

TYPED_TEST_P(StoreContract, WithholdingOwesAnEdgePurgeAndReviewClosesReports) {
  const PasteMeta row = Row("mod000000001", 5000);
  const PasteMeta later = Row("mod000000002", 5000);
  for (const PasteMeta& r : {row, later}) {
    ASSERT_TRUE(RunSync(this->meta().Insert(r, this->deadline())).ok());
  }
  EXPECT_EQ(RunSync(this->meta().Get(row.id, this->deadline()))->moderation, Moderation::kNone);
  ASSERT_TRUE(RunSync(this->meta().AddReport(ReportOf(row, "192.0.2.0/24", 300), ReviewOnly(),
                                             this->deadline()))
                  .ok());
  ASSERT_TRUE(RunSync(this->meta().AddReport(ReportOf(later, "192.0.2.0/24", 301, "other"),
                                             ReviewOnly(), this->deadline()))
                  .ok());
  ASSERT_TRUE(RunSync(this->meta().SetModeration(
                          row.id, ModerationChange{Moderation::kWithheld, "3 reports", 310},
                          this->deadline()))
                  .ok());
  this->backend_.Reopen();
  EXPECT_EQ(RunSync(this->meta().Get(row.id, this->deadline()))->moderation, Moderation::kWithheld);
  auto due = RunSync(this->meta().DueOutbox(310, 10, this->deadline()));
  ASSERT_TRUE(due.ok());
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ((*due)[0].id, row.id);
  EXPECT_EQ((*due)[0].kind, OutboxEntry::Kind::kPurgeEdge);
  // Withheld: still open, newest first.
  auto open = RunSync(this->meta().OpenReports(std::nullopt, 10, this->deadline()));
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->pastes.size(), 2u);
  EXPECT_EQ(open->pastes[0].id, later.id);
  EXPECT_EQ(open->pastes[1].moderation, Moderation::kWithheld);
  // Reviewed (dismissed): served again, out of the queue, its reports closed; the network that
  // reported it cannot report it again, a new one starts a new count.
  ASSERT_TRUE(
      RunSync(this->meta().SetModeration(row.id, ModerationChange{Moderation::kNone, "fine", 320},
                                         this->deadline()))
          .ok());
  EXPECT_EQ(RunSync(this->meta().Get(row.id, this->deadline()))->moderation, Moderation::kNone);
  open = RunSync(this->meta().OpenReports(std::nullopt, 10, this->deadline()));
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->pastes.size(), 1u);
  EXPECT_EQ(open->pastes[0].id, later.id);
  auto counts = RunSync(this->meta().CountReports(this->deadline()));
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->pending, 1);
  EXPECT_EQ(counts->open_reports, 1);
  auto again = RunSync(
      this->meta().AddReport(ReportOf(row, "192.0.2.0/24", 330), ReviewOnly(), this->deadline()));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->counted);
  auto fresh = RunSync(this->meta().AddReport(ReportOf(row, "198.51.100.0/24", 331), ReviewOnly(),
                                              this->deadline()));
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(fresh->counted);
  EXPECT_EQ(fresh->open_reports, 1);
  // Taken down: the state stays on the tombstone, and the queue lets go of it.
  ASSERT_TRUE(RunSync(this->meta().SetModeration(
                          later.id, ModerationChange{Moderation::kTakenDown, "malware", 340},
                          this->deadline()))
                  .ok());
  ASSERT_TRUE(RunSync(this->meta().MarkDeleted(later.id, 340, this->deadline())).ok());
  auto down = RunSync(this->meta().Get(later.id, this->deadline()));
  EXPECT_TRUE(down->deleted);
  EXPECT_EQ(down->moderation, Moderation::kTakenDown);
  counts = RunSync(this->meta().CountReports(this->deadline()));
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->pending, 1);  // `row`, reported afresh
  EXPECT_EQ(counts->open_reports, 1);
  Result<ModerationOutcome> missing = RunSync(this->meta().SetModeration(
      Id("nothere00000"), ModerationChange{Moderation::kWithheld, "x", 350}, this->deadline()));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

// The takedown clock (docs/moderation.md): a queue entry keeps the time of the report that queued
// it through later reports, a withholding and a reopening; the counts carry the oldest open entry's
// arrival; the review that takes an entry out says when it arrived; a report after it starts a new
// clock.
TYPED_TEST_P(StoreContract, TheQueueKeepsEachEntrysArrivalAndItsOldest) {
  const PasteMeta first = Row("clk000000001", 5000);
  const PasteMeta second = Row("clk000000002", 5000);
  const PasteMeta calm = Row("clk000000003", 5000);
  for (const PasteMeta& r : {first, second, calm}) {
    ASSERT_TRUE(RunSync(this->meta().Insert(r, this->deadline())).ok());
  }
  auto counts = RunSync(this->meta().CountReports(this->deadline()));
  ASSERT_TRUE(counts.ok());
  EXPECT_FALSE(counts->oldest_at) << "an empty queue has no oldest entry";
  for (const auto& [row, network, at] :
       {std::tuple{second, "192.0.2.0/24", 200}, std::tuple{first, "192.0.2.0/24", 210},
        std::tuple{first, "198.51.100.0/24", 250}, std::tuple{second, "198.51.100.0/24", 260}}) {
    ASSERT_TRUE(
        RunSync(this->meta().AddReport(ReportOf(row, network, at), ReviewOnly(), this->deadline()))
            .ok());
  }
  // The report that queued a paste dates its entry; a later one, even dated before it (another
  // process's clock behind), leaves it.
  ASSERT_TRUE(RunSync(this->meta().AddReport(ReportOf(first, "203.0.113.0/24", 205), ReviewOnly(),
                                             this->deadline()))
                  .ok());
  ASSERT_TRUE(RunSync(this->meta().SetModeration(
                          second.id, ModerationChange{Moderation::kWithheld, "2 networks", 270},
                          this->deadline()))
                  .ok());
  this->backend_.Reopen();
  auto open = RunSync(this->meta().OpenReports(std::nullopt, 10, this->deadline()));
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->pastes.size(), 2u);
  EXPECT_EQ(open->pastes[0].id, second.id);  // newest report first, as ever
  EXPECT_EQ(open->pastes[0].first_at, 200);  // a withholding leaves the clock running
  EXPECT_EQ(open->pastes[1].first_at, 210);
  counts = RunSync(this->meta().CountReports(this->deadline()));
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->oldest_at, 200);
  // The review that takes an entry out says when it arrived; the next oldest is then the oldest.
  auto restored = RunSync(this->meta().SetModeration(
      second.id, ModerationChange{Moderation::kNone, "fine", 300}, this->deadline()));
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(restored->queued_since, 200);
  counts = RunSync(this->meta().CountReports(this->deadline()));
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->oldest_at, 210);
  // A change to a paste nothing was open for ran no clock.
  auto unqueued = RunSync(this->meta().SetModeration(
      calm.id, ModerationChange{Moderation::kTakenDown, "operator", 310}, this->deadline()));
  ASSERT_TRUE(unqueued.ok());
  EXPECT_FALSE(unqueued->queued_since);
  // A new network's report after the review starts a new clock for the paste.
  ASSERT_TRUE(RunSync(this->meta().AddReport(ReportOf(second, "203.0.113.0/24", 400), ReviewOnly(),
                                             this->deadline()))
                  .ok());
  auto down = RunSync(this->meta().SetModeration(
      first.id, ModerationChange{Moderation::kTakenDown, "malware", 410}, this->deadline()));
  ASSERT_TRUE(down.ok());
  EXPECT_EQ(down->queued_since, 210);
  counts = RunSync(this->meta().CountReports(this->deadline()));
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->oldest_at, 400);
  EXPECT_EQ(counts->pending, 1);
  open = RunSync(this->meta().OpenReports(std::nullopt, 10, this->deadline()));
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->pastes.size(), 1u);
  EXPECT_EQ(open->pastes[0].first_at, 400);
}

// The votes of distinct networks withhold a paste in the report's own transaction; the creator's
// network, a paste reviewed "keep", a threshold of 0 and a spent withhold rate never do.
TYPED_TEST_P(StoreContract, ReportsWithholdAtTheThresholdOfVotingNetworks) {
  const PasteMeta row = Row("vote00000001", 5000);
  const PasteMeta kept = Row("vote00000002", 5000);
  const PasteMeta deferred = Row("vote00000003", 5000);
  for (const PasteMeta& r : {row, kept, deferred}) {
    ASSERT_TRUE(RunSync(this->meta().Insert(r, this->deadline())).ok());
  }
  auto report = [&](const PasteMeta& r, const char* network, int64_t at, bool creator = false,
                    ReportPolicy p = ReportPolicy{}) {
    AbuseReport a = ReportOf(r, network, at);
    a.from_creator = creator;
    auto out = RunSync(this->meta().AddReport(a, p, this->deadline()));
    EXPECT_TRUE(out.ok()) << out.error().message;
    return out.ok() ? *out : ReportOutcome{};
  };
  EXPECT_FALSE(report(row, "203.0.113.0/24", 100, true).vote) << "the creator's network";
  EXPECT_TRUE(report(row, "192.0.2.0/24", 101).vote);
  ReportOutcome second = report(row, "198.51.100.0/24", 102);
  EXPECT_EQ(second.votes, 2);
  EXPECT_EQ(second.open_reports, 3);
  EXPECT_FALSE(second.withheld);
  EXPECT_EQ(RunSync(this->meta().Get(row.id, this->deadline()))->moderation, Moderation::kNone);
  ReportOutcome third = report(row, "2001:db8:1::/48", 103);
  EXPECT_TRUE(third.withheld);
  EXPECT_EQ(third.votes, 3);
  std::vector<std::string> charged = third.charged;
  std::sort(charged.begin(), charged.end());
  EXPECT_EQ(charged,
            (std::vector<std::string>{"192.0.2.0/24", "198.51.100.0/24", "2001:db8:1::/48"}));
  this->backend_.Reopen();
  EXPECT_EQ(RunSync(this->meta().Get(row.id, this->deadline()))->moderation, Moderation::kWithheld);
  auto due = RunSync(this->meta().DueOutbox(200, 10, this->deadline()));
  ASSERT_TRUE(due.ok());
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ((*due)[0].kind, OutboxEntry::Kind::kPurgeEdge);
  EXPECT_FALSE(report(row, "2001:db8:2::/48", 104).withheld) << "withheld already";

  // Reviewed "keep": reports queue it, never withhold it; a dismissal without keep lifts that.
  ASSERT_TRUE(RunSync(this->meta().SetModeration(
                          kept.id, ModerationChange{Moderation::kNone, "fine", 110, true},
                          this->deadline()))
                  .ok());
  for (const char* network : {"10.1.0.0/24", "10.2.0.0/24", "10.3.0.0/24", "10.4.0.0/24"}) {
    ReportOutcome out = report(kept, network, 120);
    EXPECT_TRUE(out.kept);
    EXPECT_FALSE(out.withheld);
  }
  auto listed = RunSync(this->meta().OpenReports(std::nullopt, 10, this->deadline()));
  ASSERT_TRUE(listed.ok());
  auto kept_row = std::find_if(listed->pastes.begin(), listed->pastes.end(),
                               [&](const ReportSummary& s) { return s.id == kept.id; });
  ASSERT_NE(kept_row, listed->pastes.end());
  EXPECT_TRUE(kept_row->keep);
  EXPECT_EQ(kept_row->votes, 4);
  EXPECT_EQ(RunSync(this->meta().Get(kept.id, this->deadline()))->moderation, Moderation::kNone);

  // The withhold rate spent: enough votes, still served, and the next report tries again.
  ReportPolicy spent;
  spent.may_withhold = false;
  report(deferred, "10.5.0.0/24", 130, false, spent);
  report(deferred, "10.6.0.0/24", 131, false, spent);
  ReportOutcome held_back = report(deferred, "10.7.0.0/24", 132, false, spent);
  EXPECT_TRUE(held_back.withhold_deferred);
  EXPECT_FALSE(held_back.withheld);
  ReportOutcome now_withheld = report(deferred, "10.8.0.0/24", 133);
  EXPECT_TRUE(now_withheld.withheld);
  EXPECT_EQ(now_withheld.charged.size(), 3u) << "the threshold's worth of networks is charged";

  // A threshold of 0: reports only queue.
  const PasteMeta review = Row("vote00000004", 5000);
  ASSERT_TRUE(RunSync(this->meta().Insert(review, this->deadline())).ok());
  for (const char* network : {"10.9.0.0/24", "10.10.0.0/24", "10.11.0.0/24"}) {
    EXPECT_FALSE(report(review, network, 140, false, ReviewOnly()).withheld);
  }
  EXPECT_EQ(RunSync(this->meta().Get(review.id, this->deadline()))->moderation, Moderation::kNone);
}

// A network takes part in at most withholds_per_network withholdings a day: past it its reports
// are no votes, and a vote cast while it had budget no longer counts once a withholding finds
// the budget spent. The charges go a day later, with the sweep of handled reports.
TYPED_TEST_P(StoreContract, ANetworkPastItsWithholdBudgetNoLongerVotes) {
  ReportPolicy policy;
  policy.hide_threshold = 2;
  policy.withholds_per_network = 1;
  std::vector<PasteMeta> rows;
  for (int i = 0; i < 4; ++i) {
    rows.push_back(Row("budg0000000" + std::to_string(i), 500'000));
    ASSERT_TRUE(RunSync(this->meta().Insert(rows.back(), this->deadline())).ok());
  }
  auto report = [&](const PasteMeta& r, const char* network, int64_t at) {
    auto out = RunSync(this->meta().AddReport(ReportOf(r, network, at), policy, this->deadline()));
    EXPECT_TRUE(out.ok()) << out.error().message;
    return out.ok() ? *out : ReportOutcome{};
  };
  // A votes on pastes 0 and 1 while it has budget; B joins it on 0: withheld, A and B charged.
  EXPECT_TRUE(report(rows[0], "10.0.1.0/24", 1000).vote);
  EXPECT_TRUE(report(rows[1], "10.0.1.0/24", 1001).vote);
  EXPECT_TRUE(report(rows[0], "10.0.2.0/24", 1002).withheld);
  // Paste 1 now has A's earlier vote and C's: A's budget is spent, so one vote, not withheld.
  ReportOutcome one = report(rows[1], "10.0.3.0/24", 1003);
  EXPECT_FALSE(one.withheld);
  EXPECT_EQ(one.votes, 1);
  // D's vote makes two with budget left.
  EXPECT_TRUE(report(rows[1], "10.0.4.0/24", 1004).withheld);
  // B (charged) reporting paste 2 is no vote.
  EXPECT_FALSE(report(rows[2], "10.0.2.0/24", 1005).vote);
  EXPECT_TRUE(report(rows[3], "10.0.5.0/24", 1006).vote);

  // A day later the charges go (the closed-report cutoff keeps every report), and A votes again.
  auto purge = [&](int64_t now) {
    auto gone = RunSync(
        this->meta().PurgeReports(std::numeric_limits<int64_t>::min(), now, 100, this->deadline()));
    EXPECT_TRUE(gone.ok()) << gone.error().message;
    return gone.ok() ? *gone : 0;
  };
  EXPECT_EQ(purge(1002 + kWithholdWindowSeconds - 1), 0u);
  EXPECT_EQ(purge(1004 + kWithholdWindowSeconds), 4u) << "A and B for paste 0, C and D for 1";
  EXPECT_TRUE(report(rows[3], "10.0.1.0/24", 1004 + kWithholdWindowSeconds + 1).withheld);
}

// Past max_open_reports a report is counted on its paste's queue row, and neither its row, nor
// its note, nor a vote is stored.
TYPED_TEST_P(StoreContract, PastMaxOpenReportsReportsAreCountedNotStored) {
  const PasteMeta row = Row("full00000001", 5000);
  ASSERT_TRUE(RunSync(this->meta().Insert(row, this->deadline())).ok());
  ReportPolicy policy;
  policy.max_open_reports = 2;
  auto report = [&](const char* network, const char* note, int64_t at) {
    auto out = RunSync(this->meta().AddReport(ReportOf(row, network, at, "malware", note), policy,
                                              this->deadline()));
    EXPECT_TRUE(out.ok()) << out.error().message;
    return out.ok() ? *out : ReportOutcome{};
  };
  EXPECT_TRUE(report("10.0.1.0/24", "one", 100).stored);
  EXPECT_TRUE(report("10.0.2.0/24", "two", 101).stored);
  ReportOutcome third = report("10.0.3.0/24", "three", 102);
  EXPECT_TRUE(third.counted);
  EXPECT_FALSE(third.stored);
  EXPECT_FALSE(third.vote);
  EXPECT_FALSE(third.withheld) << "two votes: distinctness past the cap is not known";
  EXPECT_EQ(third.open_reports, 3);
  EXPECT_EQ(third.votes, 2);
  auto open = RunSync(this->meta().OpenReports(std::nullopt, 10, this->deadline()));
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->pastes.size(), 1u);
  EXPECT_EQ(open->pastes[0].reports, 3);
  EXPECT_EQ(open->pastes[0].networks, 2);
  EXPECT_EQ(open->pastes[0].latest_at, 102);
  EXPECT_EQ(open->pastes[0].latest_note, "two");
  auto counts = RunSync(this->meta().CountReports(this->deadline()));
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->open_reports, 2);
  EXPECT_EQ(counts->pending, 1);
}

// The creator's network rides on the row, as written; rows without one have none.
TYPED_TEST_P(StoreContract, TheCreatorsNetworkRoundTrips) {
  PasteMeta with = Row("crea00000001", 5000);
  with.creator_network = (uint64_t{1} << 63) | (uint64_t{48} << 56) | 0x20010db80001ull;
  PasteMeta v4 = Row("crea00000002", 5000);
  v4.creator_network = (uint64_t{24} << 56) | 0xcb0071ull;
  const PasteMeta without = Row("crea00000003", 5000);
  for (const PasteMeta& r : {with, v4, without}) {
    ASSERT_TRUE(RunSync(this->meta().Insert(r, this->deadline())).ok());
  }
  this->backend_.Reopen();
  EXPECT_EQ(RunSync(this->meta().Get(with.id, this->deadline()))->creator_network,
            with.creator_network);
  EXPECT_EQ(RunSync(this->meta().Get(v4.id, this->deadline()))->creator_network,
            v4.creator_network);
  EXPECT_FALSE(RunSync(this->meta().Get(without.id, this->deadline()))->creator_network);
}

// Report retention (src/worker/janitor.cc): reports closed by a review go once their review is
// old enough, at most `limit` a call; open reports of a paste with a row never go; reports of a
// purged paste (closed by the purge, dated as made) go once made long enough ago; the paste
// keeps its moderation state.
TYPED_TEST_P(StoreContract, PurgeReportsDeletesHandledReportsInBatchesAndKeepsOpenOnes) {
  const PasteMeta dismissed = Row("ret000000001", 5000);
  const PasteMeta taken = Row("ret000000002", 5000);
  const PasteMeta pending = Row("ret000000003", 5000);
  const PasteMeta purged = Row("ret000000004", 5000);
  for (const PasteMeta& r : {dismissed, taken, pending, purged}) {
    ASSERT_TRUE(RunSync(this->meta().Insert(r, this->deadline())).ok());
  }
  auto report = [&](const PasteMeta& row, const char* network, int64_t at) {
    ASSERT_TRUE(
        RunSync(this->meta().AddReport(ReportOf(row, network, at), ReviewOnly(), this->deadline()))
            .ok());
  };
  report(dismissed, "192.0.2.0/24", 100);
  report(dismissed, "198.51.100.0/24", 101);
  report(taken, "192.0.2.0/24", 102);
  report(pending, "192.0.2.0/24", 103);
  report(purged, "192.0.2.0/24", 104);
  ASSERT_TRUE(
      RunSync(this->meta().SetModeration(
                  dismissed.id, ModerationChange{Moderation::kNone, "fine", 200}, this->deadline()))
          .ok());
  ASSERT_TRUE(RunSync(this->meta().SetModeration(
                          taken.id, ModerationChange{Moderation::kTakenDown, "malware", 300},
                          this->deadline()))
                  .ok());
  ASSERT_TRUE(RunSync(this->meta().Purge({purged.id}, this->deadline())).ok());
  this->backend_.Reopen();
  auto counts = RunSync(this->meta().CountReports(this->deadline()));
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->pending, 1) << "only `pending` waits for a review";
  EXPECT_EQ(counts->open_reports, 1);
  auto purge = [&](int64_t before, size_t limit) -> size_t {
    auto gone = RunSync(this->meta().PurgeReports(before, 400, limit, this->deadline()));
    EXPECT_TRUE(gone.ok()) << gone.error().message;
    return gone.ok() ? *gone : 0;
  };
  // Before any review is old enough, only the purged paste's report (made at 104) may go.
  EXPECT_EQ(purge(103, 10), 0u);
  EXPECT_EQ(purge(199, 10), 1u);
  // The dismissal at 200 closed two reports: a batch of one takes one of them.
  EXPECT_EQ(purge(299, 1), 1u);
  EXPECT_EQ(purge(299, 10), 1u);
  EXPECT_EQ(purge(299, 10), 0u);
  EXPECT_EQ(purge(300, 10), 1u);
  // The open report of a live paste stays however old it gets.
  EXPECT_EQ(purge(1'000'000, 10), 0u);
  auto open = RunSync(this->meta().OpenReports(std::nullopt, 10, this->deadline()));
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->pastes.size(), 1u);
  EXPECT_EQ(open->pastes[0].id, pending.id);
  // The review itself stays on the paste: its reports are gone, not its state.
  EXPECT_EQ(RunSync(this->meta().Get(taken.id, this->deadline()))->moderation,
            Moderation::kTakenDown);
  // A report after the reviewed ones went is counted afresh: the network is free again.
  auto again = RunSync(this->meta().AddReport(ReportOf(dismissed, "192.0.2.0/24", 400),
                                              ReviewOnly(), this->deadline()));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->counted);
}

// The walk `sluice admin migrate-store` makes (src/app/migrate_store.cc): every row once, in any
// state, a page at a time, each page continuing after the last id of the one before, with every
// field as Get reads it. The ids are of one case so that every collation orders them alike.
TYPED_TEST_P(StoreContract, ListPastesWalksEveryRowOnceInKeysetPages) {
  std::vector<PasteId> ids;
  for (char c = 'a'; c <= 'g'; ++c) {
    PasteMeta row = Row(std::string("lst00000000") + c, c == 'c' ? 50 : 5000);
    if (c == 'e') {
      row.burn = true;
      row.views_left = 3;
      row.encrypted = true;
      row.parent = Id("lst00000000a");
      row.creator_network = 77;
    }
    ASSERT_TRUE(RunSync(this->meta().Insert(row, this->deadline())).ok());
    ids.push_back(row.id);
  }
  ASSERT_TRUE(RunSync(this->meta().MarkDeleted(Id("lst00000000b"), 60, this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->meta().SetModeration(Id("lst00000000d"),
                                                 ModerationChange{Moderation::kWithheld, "r", 70},
                                                 this->deadline()))
                  .ok());
  std::vector<PasteId> walked;
  std::optional<PasteId> after;
  size_t pages = 0;
  // Bounded: a cursor that does not move on must fail the test, not hang it.
  for (int tries = 0; tries < 10; ++tries) {
    auto page = RunSync(this->meta().ListPastes(after, 3, this->deadline()));
    ASSERT_TRUE(page.ok()) << page.error().message;
    ASSERT_LE(page->size(), 3u);
    if (page->empty()) break;
    ++pages;
    for (const PasteMeta& m : *page) {
      walked.push_back(m.id);
      auto got = RunSync(this->meta().Get(m.id, this->deadline()));
      ASSERT_TRUE(got.ok());
      EXPECT_EQ(m.created_at, got->created_at);
      EXPECT_EQ(m.expires_at, got->expires_at);
      EXPECT_EQ(m.token_hash, got->token_hash);
      EXPECT_EQ(m.body_sha256, got->body_sha256);
      EXPECT_EQ(m.deleted, got->deleted);
      EXPECT_EQ(m.burn, got->burn);
      EXPECT_EQ(m.views_left, got->views_left);
      EXPECT_EQ(m.parent, got->parent);
      EXPECT_EQ(m.encrypted, got->encrypted);
      EXPECT_EQ(m.creator_network, got->creator_network);
      EXPECT_EQ(m.moderation, got->moderation);
    }
    after = page->back().id;
  }
  EXPECT_EQ(walked, ids);  // each once, in id order, the tombstone and the expired row too
  EXPECT_EQ(pages, 3u);
  auto rest = RunSync(this->meta().ListPastes(Id("lst00000000e"), 10, this->deadline()));
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 2u);
  EXPECT_EQ((*rest)[0].id, Id("lst00000000f"));
}

// The open reports of one paste, with whether each votes, for a copy to make them again
// elsewhere; a review closes them, and then there are none.
TYPED_TEST_P(StoreContract, ReportsOfListsAPastesOpenReportsAndTheirVotes) {
  const PasteMeta row = Row("rof000000001", 5000);
  ASSERT_TRUE(RunSync(this->meta().Insert(row, this->deadline())).ok());
  AbuseReport voter = ReportOf(row, "192.0.2.0/24", 200, "spam", "a note");
  AbuseReport creator = ReportOf(row, "198.51.100.0/24", 201, "malware");
  creator.from_creator = true;
  ASSERT_TRUE(RunSync(this->meta().AddReport(voter, ReviewOnly(), this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->meta().AddReport(creator, ReviewOnly(), this->deadline())).ok());
  auto none = RunSync(this->meta().ReportsOf(Id("rof000000002"), this->deadline()));
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_TRUE(none->empty());
  auto got = RunSync(this->meta().ReportsOf(row.id, this->deadline()));
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->size(), 2u);
  const AbuseReport& a = (*got)[0];
  EXPECT_EQ(a.id, row.id);
  EXPECT_EQ(a.network, "192.0.2.0/24");
  EXPECT_EQ(a.reason, "spam");
  EXPECT_EQ(a.note, "a note");
  EXPECT_EQ(a.at, 200);
  EXPECT_FALSE(a.from_creator);
  EXPECT_EQ((*got)[1].network, "198.51.100.0/24");
  EXPECT_TRUE((*got)[1].from_creator);  // no vote
  ASSERT_TRUE(RunSync(this->meta().SetModeration(
                          row.id, ModerationChange{Moderation::kNone, "ok", 300}, this->deadline()))
                  .ok());
  auto closed = RunSync(this->meta().ReportsOf(row.id, this->deadline()));
  ASSERT_TRUE(closed.ok());
  EXPECT_TRUE(closed->empty());
}

TYPED_TEST_P(StoreContract, BlocksInForceAndTheAuditTrailNewestFirst) {
  ASSERT_TRUE(RunSync(this->meta().AddBlock(ClientBlock{"198.51.100.0/24", "spam", 100, 200},
                                            this->deadline()))
                  .ok());
  ASSERT_TRUE(RunSync(this->meta().AddBlock(ClientBlock{"2001:db8::/48", "abuse", 100, 1000},
                                            this->deadline()))
                  .ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(RunSync(this->meta().AddAudit(
                            AuditEntry{400 + i, "takedown", "aud00000000" + std::to_string(i),
                                       "reason " + std::to_string(i)},
                            this->deadline()))
                    .ok());
  }
  this->backend_.Reopen();
  auto blocks = RunSync(this->meta().ActiveBlocks(200, this->deadline()));
  ASSERT_TRUE(blocks.ok()) << blocks.error().message;
  ASSERT_EQ(blocks->size(), 1u);
  EXPECT_EQ((*blocks)[0].prefix, "2001:db8::/48");
  EXPECT_EQ((*blocks)[0].reason, "abuse");
  EXPECT_EQ((*blocks)[0].until, 1000);
  EXPECT_EQ(RunSync(this->meta().ActiveBlocks(199, this->deadline()))->size(), 2u);
  auto audit = RunSync(this->meta().AuditTrail(2, this->deadline()));
  ASSERT_TRUE(audit.ok()) << audit.error().message;
  ASSERT_EQ(audit->size(), 2u);
  EXPECT_EQ((*audit)[0].at, 402);
  EXPECT_EQ((*audit)[0].target, "aud000000002");
  EXPECT_EQ((*audit)[0].detail, "reason 2");
  EXPECT_EQ((*audit)[1].action, "takedown");
  EXPECT_EQ((*audit)[1].at, 401);
}

// The content blocklist (docs/moderation.md, "Takedowns that stick")

inline BodyDigest Digest(unsigned char first, unsigned char last = 0) {
  BodyDigest d{};
  d.fill(0x11);
  d.front() = first;
  d.back() = last;
  return d;
}

TYPED_TEST_P(StoreContract, ContentBlocksAddOnceRemoveAndBumpTheVersion) {
  auto before = RunSync(this->meta().BlockedContentsVersion(this->deadline()));
  ASSERT_TRUE(before.ok()) << before.error().message;
  EXPECT_EQ(before->entries, 0);
  auto added = RunSync(this->meta().BlockContent(BlockedContent{Digest(1), 100, "admin", "spam"},
                                                 10, this->deadline()));
  ASSERT_TRUE(added.ok()) << added.error().message;
  EXPECT_TRUE(*added);
  auto again = RunSync(this->meta().BlockContent(BlockedContent{Digest(1), 200, "admin", "x"}, 10,
                                                 this->deadline()));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);  // there already: nothing changed, the first entry stays
  auto after_add = RunSync(this->meta().BlockedContentsVersion(this->deadline()));
  EXPECT_NE(after_add->version, before->version);
  EXPECT_EQ(after_add->entries, 1);
  this->backend_.Reopen();
  auto page = RunSync(this->meta().BlockedContents(std::nullopt, 10, this->deadline()));
  ASSERT_TRUE(page.ok()) << page.error().message;
  ASSERT_EQ(page->entries.size(), 1u);
  EXPECT_EQ(page->entries[0].sha256, Digest(1));
  EXPECT_EQ(page->entries[0].added_at, 100);
  EXPECT_EQ(page->entries[0].source, "admin");
  EXPECT_EQ(page->entries[0].reason, "spam");
  EXPECT_FALSE(page->next);
  auto removed = RunSync(this->meta().UnblockContent(Digest(1), this->deadline()));
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(*removed);
  EXPECT_FALSE(*RunSync(this->meta().UnblockContent(Digest(1), this->deadline())));
  auto after_remove = RunSync(this->meta().BlockedContentsVersion(this->deadline()));
  EXPECT_NE(after_remove->version, after_add->version);
  EXPECT_EQ(after_remove->entries, 0);
  EXPECT_TRUE(
      RunSync(this->meta().BlockedContents(std::nullopt, 10, this->deadline()))->entries.empty());
}

TYPED_TEST_P(StoreContract, ContentBlocksPageInDigestOrderAndStopAtTheirMaximum) {
  for (unsigned char b : {0x30, 0x10, 0xf0, 0x20}) {
    auto added = RunSync(
        this->meta().BlockContent(BlockedContent{Digest(b), 1, "admin", ""}, 4, this->deadline()));
    ASSERT_TRUE(added.ok()) << added.error().message;
  }
  auto full = RunSync(
      this->meta().BlockContent(BlockedContent{Digest(0x40), 1, "admin", ""}, 4, this->deadline()));
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, ErrorCode::kInsufficientStorage);
  EXPECT_EQ(full.error().reason, kBlockedContentsFull);
  auto first = RunSync(this->meta().BlockedContents(std::nullopt, 3, this->deadline()));
  ASSERT_TRUE(first.ok()) << first.error().message;
  ASSERT_EQ(first->entries.size(), 3u);
  EXPECT_EQ(first->entries[0].sha256, Digest(0x10));
  EXPECT_EQ(first->entries[1].sha256, Digest(0x20));
  EXPECT_EQ(first->entries[2].sha256, Digest(0x30));
  ASSERT_TRUE(first->next);
  auto second = RunSync(this->meta().BlockedContents(first->next, 3, this->deadline()));
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->entries.size(), 1u);
  EXPECT_EQ(second->entries[0].sha256, Digest(0xf0));
  EXPECT_FALSE(second->next);
}

// Creator tokens (docs/admission.md, "Creator tokens")

inline CreatorToken TokenRow(std::string id, unsigned char secret, int64_t expires_at = 0) {
  CreatorToken t;
  t.id = std::move(id);
  t.label = "ci-" + t.id;
  t.secret_sha256.fill(0x22);
  t.secret_sha256.front() = secret;
  t.rate_milli = 10'500;
  t.burst = 100;
  t.bytes_rate = 1'000'000;
  t.bytes_burst = 20'000'000;
  t.expires_at = expires_at;
  t.created_at = 1000;
  return t;
}

TYPED_TEST_P(StoreContract, CreatorTokensAddListRevokeAndBumpTheVersion) {
  auto before = RunSync(this->meta().CreatorTokensVersion(this->deadline()));
  ASSERT_TRUE(before.ok()) << before.error().message;
  ASSERT_TRUE(
      RunSync(this->meta().AddCreatorToken(TokenRow("tokB0001", 2), 10, 1000, this->deadline()))
          .ok());
  ASSERT_TRUE(RunSync(this->meta().AddCreatorToken(TokenRow("tokA0001", 1, 5000), 10, 1000,
                                                   this->deadline()))
                  .ok());
  auto after_add = RunSync(this->meta().CreatorTokensVersion(this->deadline()));
  ASSERT_TRUE(after_add.ok());
  EXPECT_NE(*after_add, *before);
  this->backend_.Reopen();
  auto list = RunSync(this->meta().CreatorTokens(this->deadline()));
  ASSERT_TRUE(list.ok()) << list.error().message;
  EXPECT_EQ(list->version, *after_add);
  ASSERT_EQ(list->tokens.size(), 2u);
  const CreatorToken& a = list->tokens[0];  // id order
  EXPECT_EQ(a.id, "tokA0001");
  EXPECT_EQ(a.label, "ci-tokA0001");
  EXPECT_EQ(a.secret_sha256, TokenRow("x", 1).secret_sha256);
  EXPECT_EQ(a.rate_milli, 10'500);
  EXPECT_EQ(a.burst, 100);
  EXPECT_EQ(a.bytes_rate, 1'000'000);
  EXPECT_EQ(a.bytes_burst, 20'000'000);
  EXPECT_EQ(a.expires_at, 5000);
  EXPECT_EQ(a.created_at, 1000);
  EXPECT_EQ(a.revoked_at, 0);
  EXPECT_EQ(list->tokens[1].id, "tokB0001");
  auto revoked = RunSync(this->meta().RevokeCreatorToken("tokB0001", 2000, this->deadline()));
  ASSERT_TRUE(revoked.ok()) << revoked.error().message;
  EXPECT_TRUE(*revoked);
  auto after_revoke = RunSync(this->meta().CreatorTokensVersion(this->deadline()));
  EXPECT_NE(*after_revoke, *after_add);
  auto again = RunSync(this->meta().RevokeCreatorToken("tokB0001", 3000, this->deadline()));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);  // revoked already: nothing changed, the first revocation stays
  EXPECT_EQ(*RunSync(this->meta().CreatorTokensVersion(this->deadline())), *after_revoke);
  auto missing = RunSync(this->meta().RevokeCreatorToken("nosuch01", 3000, this->deadline()));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  auto listed = RunSync(this->meta().CreatorTokens(this->deadline()));
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->tokens.size(), 2u);
  EXPECT_EQ(listed->tokens[1].revoked_at, 2000);
  EXPECT_EQ(listed->version, *after_revoke);
}

TYPED_TEST_P(StoreContract, CreatorTokensStopAtTheCapOfLiveTokens) {
  ASSERT_TRUE(
      RunSync(this->meta().AddCreatorToken(TokenRow("cap00001", 1), 2, 1000, this->deadline()))
          .ok());
  // Expired at 1500: no longer live at 2000, so it leaves room.
  ASSERT_TRUE(RunSync(this->meta().AddCreatorToken(TokenRow("cap00002", 2, 1500), 2, 1000,
                                                   this->deadline()))
                  .ok());
  const Status full =
      RunSync(this->meta().AddCreatorToken(TokenRow("cap00003", 3), 2, 1000, this->deadline()));
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, ErrorCode::kInsufficientStorage);
  EXPECT_EQ(full.error().reason, kCreatorTokensFull);
  ASSERT_TRUE(
      RunSync(this->meta().AddCreatorToken(TokenRow("cap00003", 3), 2, 2000, this->deadline()))
          .ok());
  ASSERT_TRUE(RunSync(this->meta().RevokeCreatorToken("cap00001", 2000, this->deadline())).ok());
  ASSERT_TRUE(
      RunSync(this->meta().AddCreatorToken(TokenRow("cap00004", 4), 2, 2000, this->deadline()))
          .ok());
  // The same secret twice is refused, whatever the cap.
  EXPECT_FALSE(
      RunSync(this->meta().AddCreatorToken(TokenRow("cap00005", 4), 10, 2000, this->deadline()))
          .ok());
  EXPECT_EQ(RunSync(this->meta().CreatorTokens(this->deadline()))->tokens.size(), 4u);
}

TYPED_TEST_P(StoreContract, ATakedownBlocksItsDigestInItsOwnTransaction) {
  ASSERT_TRUE(RunSync(this->meta().Insert(Row("takn00000001", 5000), this->deadline())).ok());
  ModerationChange change{Moderation::kTakenDown, "illegal", 300};
  change.block_content = BlockedContent{Digest(0x77), 300, "takn00000001", "illegal"};
  change.max_blocked_contents = 10;
  ASSERT_TRUE(
      RunSync(this->meta().SetModeration(Id("takn00000001"), change, this->deadline())).ok());
  auto page = RunSync(this->meta().BlockedContents(std::nullopt, 10, this->deadline()));
  ASSERT_TRUE(page.ok()) << page.error().message;
  ASSERT_EQ(page->entries.size(), 1u);
  EXPECT_EQ(page->entries[0].sha256, Digest(0x77));
  EXPECT_EQ(page->entries[0].source, "takn00000001");
  EXPECT_EQ(RunSync(this->meta().BlockedContentsVersion(this->deadline()))->entries, 1);
  // No row, no takedown: nor its digest.
  change.block_content->sha256 = Digest(0x78);
  EXPECT_EQ(RunSync(this->meta().SetModeration(Id("none00000001"), change, this->deadline()))
                .error()
                .code,
            ErrorCode::kNotFound);
  // A full list: the takedown stands without its digest.
  ASSERT_TRUE(RunSync(this->meta().Insert(Row("takn00000002", 5000), this->deadline())).ok());
  change.max_blocked_contents = 1;
  ASSERT_TRUE(
      RunSync(this->meta().SetModeration(Id("takn00000002"), change, this->deadline())).ok());
  EXPECT_EQ(RunSync(this->meta().Get(Id("takn00000002"), this->deadline()))->moderation,
            Moderation::kTakenDown);
  EXPECT_EQ(RunSync(this->meta().BlockedContentsVersion(this->deadline()))->entries, 1);
}

// The transparency report's counters (include/sluice/store/transparency.h)

inline std::vector<TransparencyCount> Sorted(std::vector<TransparencyCount> rows) {
  std::sort(rows.begin(), rows.end(), [](const TransparencyCount& a, const TransparencyCount& b) {
    return std::tie(a.month, a.kind, a.label) < std::tie(b.month, b.kind, b.label);
  });
  return rows;
}

// Unix seconds in November and December 2025 (UTC).
inline constexpr int64_t kNovember = 1764547199;  // 2025-11-30T23:59:59Z
inline constexpr int64_t kDecember = 1764547200;  // 2025-12-01T00:00:00Z

TYPED_TEST_P(StoreContract, TransparencyCountsAddUpByMonthKindAndLabel) {
  ASSERT_TRUE(RunSync(this->meta().AddTransparency(
                          {{"2025-11", "reupload_blocked", "", 4},
                           {"2025-12", "reupload_blocked", "", 2},
                           {"2025-12", "reupload_blocked", "", 3},  // the same counter twice
                           {"2025-12", "notice_category", "copyright", 1},
                           {"2025-12", "notice_sender", "registrar", 0}},  // nothing to add
                          this->deadline()))
                  .ok());
  ASSERT_TRUE(RunSync(this->meta().AddTransparency({{"2025-12", "notice_category", "copyright", 1}},
                                                   this->deadline()))
                  .ok());
  const std::vector<TransparencyCount> want = {{"2025-11", "reupload_blocked", "", 4},
                                               {"2025-12", "notice_category", "copyright", 2},
                                               {"2025-12", "reupload_blocked", "", 5}};
  auto all = RunSync(this->meta().TransparencyCounts("2025-01", 100, this->deadline()));
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(Sorted(*all), want);
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ(all->front().month, "2025-12") << "newest month first";
  EXPECT_EQ(all->back().month, "2025-11");
  // From a month on, and at most `limit` rows, the newest first.
  auto december = RunSync(this->meta().TransparencyCounts("2025-12", 100, this->deadline()));
  ASSERT_TRUE(december.ok());
  EXPECT_EQ(Sorted(*december), (std::vector<TransparencyCount>{want[1], want[2]}));
  auto one = RunSync(this->meta().TransparencyCounts("2025-01", 1, this->deadline()));
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(one->front().month, "2025-12");
  if (this->backend_.persistent()) {
    this->backend_.Reopen();
    auto again = RunSync(this->meta().TransparencyCounts("2025-01", 100, this->deadline()));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(Sorted(*again), want) << "the counters survive reopening";
  }
}

// Each moderation action counts itself in its own transaction, dated by its own time: a
// withholding by votes, a review's own tally and its time to action, a network block, a digest
// added to the content blocklist; an action that fails counts nothing.
TYPED_TEST_P(StoreContract, ModerationActionsCountThemselvesWithTheirTime) {
  const PasteMeta reported = Row("tall00000001", kDecember + 100000);
  const PasteMeta taken = Row("tall00000002", kDecember + 100000);
  for (const PasteMeta& r : {reported, taken}) {
    ASSERT_TRUE(RunSync(this->meta().Insert(r, this->deadline())).ok());
  }
  ReportPolicy policy;  // 3 votes withhold
  const char* networks[] = {"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"};
  const int64_t times[] = {kNovember - 1, kNovember, kDecember};
  for (int i = 0; i < 3; ++i) {
    auto out = RunSync(this->meta().AddReport(ReportOf(reported, networks[i], times[i]), policy,
                                              this->deadline()));
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(out->withheld, i == 2);
  }
  // The withholding is the third report's, in December; the entry arrived in November.
  ModerationChange restore{Moderation::kNone, "fine", kDecember + 600};
  restore.tally = {{"2025-12", "restore", "", 1}};
  ASSERT_TRUE(RunSync(this->meta().SetModeration(reported.id, restore, this->deadline())).ok());
  // A takedown of a paste nobody reported: no time to action; its digest counted once added.
  ModerationChange takedown{Moderation::kTakenDown, "illegal", kDecember + 700};
  takedown.tally = {{"2025-12", "takedown", "", 1}};
  takedown.block_content = BlockedContent{Digest(0x31), kDecember + 700, "tall00000002", "x"};
  takedown.max_blocked_contents = 10;
  ASSERT_TRUE(RunSync(this->meta().SetModeration(taken.id, takedown, this->deadline())).ok());
  // A change of a paste that has no row counts nothing.
  EXPECT_EQ(RunSync(this->meta().SetModeration(Id("none00000009"), takedown, this->deadline()))
                .error()
                .code,
            ErrorCode::kNotFound);
  ASSERT_TRUE(RunSync(this->meta().AddBlock(
                          ClientBlock{"203.0.113.0/24", "spam", kNovember, kNovember + 3600},
                          this->deadline()))
                  .ok());
  EXPECT_TRUE(*RunSync(this->meta().BlockContent(
      BlockedContent{Digest(0x32), kDecember + 800, "admin", "leak"}, 10, this->deadline())));
  // There already: nothing added, nothing counted.
  EXPECT_FALSE(*RunSync(this->meta().BlockContent(
      BlockedContent{Digest(0x31), kDecember + 900, "admin", "again"}, 10, this->deadline())));
  auto rows = RunSync(this->meta().TransparencyCounts("2025-11", 100, this->deadline()));
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  // The restore came 602 s after the entry's arrival (kNovember - 1): the bucket of 900 s.
  EXPECT_EQ(Sorted(*rows), (std::vector<TransparencyCount>{
                               {"2025-11", "block", "network", 1},
                               {"2025-12", "block", "content", 2},
                               {"2025-12", "restore", "", 1},
                               {"2025-12", "takedown", "", 1},
                               {"2025-12", "time_to_action", "900", 1},
                               {"2025-12", "withhold", "votes", 1},
                           }));
}

// Burn after reading and storage accounting

inline PasteMeta BurnRow(std::string_view id, int64_t expires_at) {
  PasteMeta m = Row(id, expires_at);
  m.burn = true;
  return m;
}

TYPED_TEST_P(StoreContract, TheEncryptedFlagReadsBackThroughGetAndClaim) {
  PasteMeta sealed = Row("seal00000001", 5000);
  sealed.encrypted = true;
  PasteMeta burned = BurnRow("seal00000002", 5000);
  burned.encrypted = true;
  ASSERT_TRUE(RunSync(this->meta().Insert(sealed, this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->meta().Insert(burned, this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->meta().Insert(Row("open00000001", 5000), this->deadline())).ok());
  EXPECT_TRUE(RunSync(this->meta().Get(Id("seal00000001"), this->deadline()))->encrypted);
  EXPECT_FALSE(RunSync(this->meta().Get(Id("open00000001"), this->deadline()))->encrypted);
  auto won = RunSync(this->meta().Claim(Id("seal00000002"), 200, this->deadline()));
  ASSERT_TRUE(won.ok()) << won.error().message;
  EXPECT_TRUE(won->encrypted);
}

TYPED_TEST_P(StoreContract, ClaimTakesABurnRowOnceAndOwesItsBody) {
  ASSERT_TRUE(RunSync(this->meta().Insert(BurnRow("burn00000001", 5000), this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->meta().Insert(Row("keep00000001", 5000), this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->meta().Insert(BurnRow("late00000001", 150), this->deadline())).ok());
  EXPECT_TRUE(RunSync(this->meta().Get(Id("burn00000001"), this->deadline()))->burn);
  EXPECT_FALSE(RunSync(this->meta().Get(Id("keep00000001"), this->deadline()))->burn);

  auto won = RunSync(this->meta().Claim(Id("burn00000001"), 200, this->deadline()));
  ASSERT_TRUE(won.ok()) << won.error().message;
  EXPECT_EQ(won->id, Id("burn00000001"));
  EXPECT_TRUE(won->burn);
  EXPECT_FALSE(won->deleted);  // the row as it was before the claim
  EXPECT_EQ(won->size_bytes, 5u);
  EXPECT_EQ(won->body_sha256, Row("burn00000001", 5000).body_sha256);

  auto again = RunSync(this->meta().Claim(Id("burn00000001"), 201, this->deadline()));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(RunSync(this->meta().Get(Id("burn00000001"), this->deadline()))->deleted);

  // Not a burn row, expired, or absent: nothing to claim, and nothing changes.
  for (const char* id : {"keep00000001", "late00000001", "none00000001"}) {
    auto r = RunSync(this->meta().Claim(Id(id), 200, this->deadline()));
    ASSERT_FALSE(r.ok()) << id;
    EXPECT_EQ(r.error().code, ErrorCode::kNotFound) << id;
  }
  EXPECT_FALSE(RunSync(this->meta().Get(Id("keep00000001"), this->deadline()))->deleted);

  auto due = RunSync(this->meta().DueOutbox(200, 10, this->deadline()));
  ASSERT_TRUE(due.ok());
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ((*due)[0].id, Id("burn00000001"));
  this->backend_.Reopen();
  EXPECT_TRUE(RunSync(this->meta().Get(Id("burn00000001"), this->deadline()))->deleted);
}

// Many claimers of one id at once, from two threads: exactly one wins each row, and the others
// are told NotFound, never an error.
TYPED_TEST_P(StoreContract, ConcurrentClaimsHaveExactlyOneWinner) {
  constexpr int kRows = 4;
  constexpr int kClaimers = 25;
  for (int r = 0; r < kRows; ++r) {
    ASSERT_TRUE(RunSync(this->meta().Insert(BurnRow("race0000000" + std::to_string(r), 5000),
                                            this->deadline()))
                    .ok());
  }
  boost::asio::io_context io;
  std::atomic<int> won[kRows] = {};
  std::atomic<int> gone{0}, failed{0};
  for (int c = 0; c < kClaimers; ++c) {
    for (int r = 0; r < kRows; ++r) {
      boost::asio::co_spawn(
          io,
          [&, r]() -> boost::asio::awaitable<void> {
            auto claiming =
                this->meta().Claim(Id("race0000000" + std::to_string(r)), 200, this->deadline());
            Result<PasteMeta> got = co_await std::move(claiming);
            if (got.ok())
              ++won[r];
            else if (got.error().code == ErrorCode::kNotFound)
              ++gone;
            else
              ++failed;
          },
          boost::asio::detached);
    }
  }
  std::thread second([&io] { io.run(); });
  io.run();
  second.join();
  for (int r = 0; r < kRows; ++r) EXPECT_EQ(won[r].load(), 1) << "row " << r;
  EXPECT_EQ(gone.load(), kRows * (kClaimers - 1));
  EXPECT_EQ(failed.load(), 0);
  auto due = RunSync(this->meta().DueOutbox(200, 100, this->deadline()));
  ASSERT_TRUE(due.ok());
  EXPECT_EQ(due->size(), static_cast<size_t>(kRows));  // one body owed per row, not per claimer
}

// max_views: N claimers at most get the text of a row with N views, from two threads at once;
// each winner sees how many views were left before its claim, the last one leaves a tombstone,
// and only that one owes the body's removal and gives its bytes back.
TYPED_TEST_P(StoreContract, ConcurrentClaimsOfACountedRowHaveExactlyItsViews) {
  constexpr uint32_t kViews = 5;
  constexpr int kClaimers = 40;
  PasteMeta row = BurnRow("views0000001", 5000);
  row.views_left = kViews;
  ASSERT_TRUE(RunSync(this->meta().Insert(row, this->deadline())).ok());
  EXPECT_EQ(RunSync(this->meta().Get(row.id, this->deadline()))->views_left, kViews);
  const uint64_t live_before = *RunSync(this->meta().LiveBytes(this->deadline()));
  boost::asio::io_context io;
  std::mutex mu;
  std::vector<uint32_t> seen;
  std::atomic<int> gone{0}, failed{0};
  for (int c = 0; c < kClaimers; ++c) {
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
          auto claiming = this->meta().Claim(row.id, 200, this->deadline());
          Result<PasteMeta> got = co_await std::move(claiming);
          if (got.ok()) {
            std::lock_guard lock(mu);
            seen.push_back(got->views_left);
          } else if (got.error().code == ErrorCode::kNotFound) {
            ++gone;
          } else {
            ++failed;
          }
        },
        boost::asio::detached);
  }
  std::thread second([&io] { io.run(); });
  io.run();
  second.join();
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<uint32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(gone.load(), kClaimers - static_cast<int>(kViews));
  EXPECT_EQ(failed.load(), 0);
  auto after = RunSync(this->meta().Get(row.id, this->deadline()));
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->deleted);
  EXPECT_EQ(after->views_left, 0u);
  auto due = RunSync(this->meta().DueOutbox(200, 100, this->deadline()));
  ASSERT_TRUE(due.ok());
  EXPECT_EQ(due->size(), 1u);  // one body owed, by the last claim
  EXPECT_EQ(*RunSync(this->meta().LiveBytes(this->deadline())), live_before - row.size_bytes);
}

TYPED_TEST_P(StoreContract, LiveBytesFollowInsertsDeletesClaimsAndPurges) {
  auto live = [this] {
    auto r = RunSync(this->meta().LiveBytes(this->deadline()));
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : uint64_t{0};
  };
  EXPECT_EQ(live(), 0u);
  PasteMeta kept = Row("live00000001", 5000);
  kept.size_bytes = 1000;
  PasteMeta burn = BurnRow("live00000002", 5000);
  burn.size_bytes = 300;
  PasteMeta expiring = Row("live00000003", 150);
  expiring.size_bytes = 20;
  for (const PasteMeta& row : {kept, burn, expiring}) {
    ASSERT_TRUE(RunSync(this->meta().Insert(row, this->deadline())).ok());
  }
  EXPECT_EQ(live(), 1320u);
  // A refused duplicate adds nothing.
  EXPECT_FALSE(RunSync(this->meta().Insert(kept, this->deadline())).ok());
  EXPECT_EQ(live(), 1320u);
  ASSERT_TRUE(RunSync(this->meta().MarkDeleted(kept.id, 200, this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->meta().MarkDeleted(kept.id, 201, this->deadline())).ok());
  EXPECT_EQ(live(), 320u);
  ASSERT_TRUE(RunSync(this->meta().Claim(burn.id, 200, this->deadline())).ok());
  EXPECT_FALSE(RunSync(this->meta().Claim(burn.id, 200, this->deadline())).ok());
  EXPECT_EQ(live(), 20u);
  // Purging the expired live row frees it; purging tombstones frees nothing more.
  ASSERT_TRUE(RunSync(this->meta().Purge({expiring.id, kept.id, burn.id}, this->deadline())).ok());
  EXPECT_EQ(live(), 0u);
  ASSERT_TRUE(RunSync(this->meta().Insert(Row("live00000004", 5000), this->deadline())).ok());
  this->backend_.Reopen();
  EXPECT_EQ(live(), 5u);
}

// Moderation and burn together: a withheld or taken-down burn row is never claimed (the read
// answers 451 for it, src/service/paste_service_read.cc), and a dismissed one can be claimed again.
TYPED_TEST_P(StoreContract, ClaimNeverBurnsAModeratedRow) {
  ASSERT_TRUE(RunSync(this->meta().Insert(BurnRow("held00000001", 5000), this->deadline())).ok());
  ASSERT_TRUE(RunSync(this->meta().Insert(BurnRow("down00000001", 5000), this->deadline())).ok());
  ASSERT_TRUE(
      RunSync(this->meta().SetModeration(Id("held00000001"),
                                         ModerationChange{Moderation::kWithheld, "3 reports", 150},
                                         this->deadline()))
          .ok());
  ASSERT_TRUE(
      RunSync(this->meta().SetModeration(Id("down00000001"),
                                         ModerationChange{Moderation::kTakenDown, "malware", 150},
                                         this->deadline()))
          .ok());
  for (const char* id : {"held00000001", "down00000001"}) {
    auto r = RunSync(this->meta().Claim(Id(id), 200, this->deadline()));
    ASSERT_FALSE(r.ok()) << id;
    EXPECT_EQ(r.error().code, ErrorCode::kNotFound) << id;
  }
  this->backend_.Reopen();
  auto held = RunSync(this->meta().Get(Id("held00000001"), this->deadline()));
  ASSERT_TRUE(held.ok()) << held.error().message;
  EXPECT_FALSE(held->deleted);
  EXPECT_TRUE(held->burn);
  EXPECT_EQ(held->moderation, Moderation::kWithheld);
  auto live = RunSync(this->meta().LiveBytes(this->deadline()));
  ASSERT_TRUE(live.ok()) << live.error().message;
  EXPECT_EQ(*live, 10u);
  // Only the withholding's edge purge is owed, no body removal.
  auto due = RunSync(this->meta().DueOutbox(200, 10, this->deadline()));
  ASSERT_TRUE(due.ok());
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ((*due)[0].kind, OutboxEntry::Kind::kPurgeEdge);

  ASSERT_TRUE(RunSync(this->meta().SetModeration(Id("held00000001"),
                                                 ModerationChange{Moderation::kNone, "fine", 210},
                                                 this->deadline()))
                  .ok());
  auto won = RunSync(this->meta().Claim(Id("held00000001"), 220, this->deadline()));
  ASSERT_TRUE(won.ok()) << won.error().message;
  EXPECT_TRUE(won->burn);
  EXPECT_EQ(won->moderation, Moderation::kNone);
  live = RunSync(this->meta().LiveBytes(this->deadline()));
  ASSERT_TRUE(live.ok()) << live.error().message;
  EXPECT_EQ(*live, 5u);
}

// The storage quota as reservations (MetaStore::ReserveStorage; docs/overload.md, "Create", step
// 4a). Times are Unix seconds on the caller's clock, as the service passes them.

inline StorageRequest Hold(std::string_view id, uint64_t bytes, uint64_t quota, int64_t now = 100,
                           int64_t expires_at = 1000) {
  return StorageRequest{Id(id), bytes, quota, now, expires_at};
}

inline void ExpectQuotaRefusal(const Result<StorageReservation>& r) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInsufficientStorage);
  EXPECT_EQ(r.error().reason, kStorageQuota);
}

// A reservation given back by a store shared across processes goes by a statement of its own,
// sent when the reservation ends and not waited for: asks again for a few seconds.
inline Result<StorageReservation> ReserveOnceGivenBack(MetaStore& meta, StorageRequest request) {
  for (int attempt = 0;; ++attempt) {
    Result<StorageReservation> r = RunSync(meta.ReserveStorage(request, Deadline::Never()));
    if (r.ok() || r.error().code != ErrorCode::kInsufficientStorage || attempt == 100) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

TYPED_TEST_P(StoreContract, ReservationsHoldRoomUntilGivenBack) {
  auto reserve = [this](std::string_view id, uint64_t bytes) {
    return RunSync(this->meta().ReserveStorage(Hold(id, bytes, 100), this->deadline()));
  };
  auto a = reserve("res000000001", 40);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_TRUE(a->held());
  EXPECT_EQ(a->bytes(), 40u);
  EXPECT_EQ(a->id(), Id("res000000001"));
  auto b = reserve("res000000002", 40);
  ASSERT_TRUE(b.ok()) << b.error().message;
  ExpectQuotaRefusal(reserve("res000000003", 40));
  auto up_to_the_quota = reserve("res000000004", 20);
  ASSERT_TRUE(up_to_the_quota.ok()) << up_to_the_quota.error().message;
  ExpectQuotaRefusal(reserve("res000000005", 1));
  // One id holds one reservation.
  EXPECT_FALSE(
      RunSync(this->meta().ReserveStorage(Hold("res000000002", 1, 1000), this->deadline())).ok());
  // Reservations are not live bytes.
  EXPECT_EQ(*RunSync(this->meta().LiveBytes(this->deadline())), 0u);

  a->Release();
  EXPECT_FALSE(a->held());
  auto again = ReserveOnceGivenBack(this->meta(), Hold("res000000006", 40, 100));
  ASSERT_TRUE(again.ok()) << again.error().message;
  ExpectQuotaRefusal(reserve("res000000007", 1));
}

TYPED_TEST_P(StoreContract, AnInsertTakesItsReservationAsLiveBytes) {
  auto reserve = [this](std::string_view id, uint64_t bytes) {
    return RunSync(this->meta().ReserveStorage(Hold(id, bytes, 100), this->deadline()));
  };
  auto held = reserve("take00000001", 40);
  ASSERT_TRUE(held.ok()) << held.error().message;
  PasteMeta row = Row("take00000001", 5000);
  row.size_bytes = 30;  // less than declared: a body's framing is reserved too
  ASSERT_TRUE(RunSync(this->meta().Insert(row, this->deadline())).ok());
  held->Spent();
  EXPECT_EQ(*RunSync(this->meta().LiveBytes(this->deadline())), 30u);
  // The 40 reserved went with the insert, the 30 live count: 70 fit, 71 do not.
  ExpectQuotaRefusal(reserve("take00000002", 71));
  auto rest = reserve("take00000003", 70);
  ASSERT_TRUE(rest.ok()) << rest.error().message;
  rest->Release();

  // A reservation ended without Spent() after its row's insert gives nothing back twice.
  auto second = ReserveOnceGivenBack(this->meta(), Hold("take00000004", 20, 100));
  ASSERT_TRUE(second.ok()) << second.error().message;
  PasteMeta other = Row("take00000004", 5000);
  other.size_bytes = 20;
  ASSERT_TRUE(RunSync(this->meta().Insert(other, this->deadline())).ok());
  second->Release();
  EXPECT_EQ(*RunSync(this->meta().LiveBytes(this->deadline())), 50u);
  auto last = ReserveOnceGivenBack(this->meta(), Hold("take00000005", 50, 100));
  ASSERT_TRUE(last.ok()) << last.error().message;
  ExpectQuotaRefusal(reserve("take00000006", 1));
}

TYPED_TEST_P(StoreContract, ReservationsPastTheirExpiryNoLongerCount) {
  auto first = RunSync(
      this->meta().ReserveStorage(Hold("late00000001", 60, 100, 100, 110), this->deadline()));
  ASSERT_TRUE(first.ok()) << first.error().message;
  ExpectQuotaRefusal(RunSync(
      this->meta().ReserveStorage(Hold("late00000002", 60, 100, 109, 200), this->deadline())));
  auto after = RunSync(
      this->meta().ReserveStorage(Hold("late00000003", 60, 100, 110, 200), this->deadline()));
  ASSERT_TRUE(after.ok()) << after.error().message;
  // The expired one, released late, frees nothing more.
  first->Release();
  ExpectQuotaRefusal(RunSync(
      this->meta().ReserveStorage(Hold("late00000004", 41, 100, 111, 200), this->deadline())));
}

// The live bytes the reservations are weighed against follow every change the store counts, and
// survive reopening.
TYPED_TEST_P(StoreContract, ReservationsWeighLiveBytesAsTheyChange) {
  auto fits = [this](std::string_view id, uint64_t bytes, int64_t now = 100) {
    // Held only for the look: given back at once.
    return ReserveOnceGivenBack(this->meta(), Hold(id, bytes, 100, now)).ok();
  };
  PasteMeta kept = Row("wgh000000001", 5000);
  kept.size_bytes = 50;
  PasteMeta burn = BurnRow("wgh000000002", 5000);
  burn.size_bytes = 30;
  PasteMeta expiring = Row("wgh000000003", 150);
  expiring.size_bytes = 20;
  for (const PasteMeta& row : {kept, burn, expiring}) {
    ASSERT_TRUE(RunSync(this->meta().Insert(row, this->deadline())).ok());
  }
  this->backend_.Reopen();
  ExpectQuotaRefusal(
      RunSync(this->meta().ReserveStorage(Hold("wgh000000004", 1, 100), this->deadline())));
  ASSERT_TRUE(RunSync(this->meta().MarkDeleted(kept.id, 200, this->deadline())).ok());
  EXPECT_TRUE(fits("wgh000000005", 50));
  ASSERT_TRUE(RunSync(this->meta().Claim(burn.id, 120, this->deadline())).ok());
  EXPECT_TRUE(fits("wgh000000006", 80));
  ASSERT_TRUE(RunSync(this->meta().Purge({expiring.id, kept.id}, this->deadline())).ok());
  EXPECT_TRUE(fits("wgh000000007", 100));
}

// What many reservations made at once got back (ReserveConcurrently).
struct ConcurrentReservations {
  /// Each grant with the store (the process) that made it.
  std::vector<std::pair<MetaStore*, StorageReservation>> granted;
  int refused = 0;  // for the quota
  int failed = 0;   // anything else
};

// Makes `creates` reservations of `bytes` against `quota` at once, on two threads, the i-th for the
// id `prefix` + i (12 characters in all, `prefix` 4) through `store_for(i)`.
inline ConcurrentReservations ReserveConcurrently(int creates, uint64_t bytes, uint64_t quota,
                                                  const char* prefix,
                                                  const std::function<MetaStore*(int)>& store_for) {
  boost::asio::io_context io;
  std::mutex mu;
  ConcurrentReservations out;
  for (int i = 0; i < creates; ++i) {
    boost::asio::co_spawn(
        io,
        [&, i]() -> boost::asio::awaitable<void> {
          char id[24];
          std::snprintf(id, sizeof id, "%.4s%08d", prefix, i);
          MetaStore* store = store_for(i);
          auto reserving = store->ReserveStorage(Hold(id, bytes, quota), Deadline::Never());
          Result<StorageReservation> r = co_await std::move(reserving);
          std::lock_guard lock(mu);
          if (r.ok()) {
            out.granted.emplace_back(store, std::move(*r));
          } else if (r.error().code == ErrorCode::kInsufficientStorage) {
            ++out.refused;
          } else {
            ++out.failed;
          }
        },
        boost::asio::detached);
  }
  std::thread second([&io] { io.run(); });
  io.run();
  second.join();
  return out;
}

// Of many reservations at once, exactly as many as fit are granted.
TYPED_TEST_P(StoreContract, ConcurrentReservationsNeverPassTheQuota) {
  PasteMeta row = Row("conc00000000", 5000);
  ASSERT_TRUE(RunSync(this->meta().Insert(row, this->deadline())).ok());  // 5 bytes live
  constexpr int kCreates = 40;
  const ConcurrentReservations got =
      ReserveConcurrently(kCreates, 10, 95, "conc", [this](int) { return &this->meta(); });
  EXPECT_EQ(got.granted.size(), 9u);  // (95 - 5) / 10
  EXPECT_EQ(got.refused, kCreates - 9);
  EXPECT_EQ(got.failed, 0);
}

// A notice (docs/moderation.md, "Notices"): withholds the live pastes it names in its own
// transaction (an edge purge owed each), answers each paste, is stored once per sender and
// reference, stores nothing when it names none that could be withheld, respects its cap, and is
// closed paste by paste by the operator's action.
// A noticed paste that expires (or is deleted) before the operator acts is purged by the sweep;
// the purge closes it in every notice naming it, so the takedown clock of kind="notice" does not
// go on counting (and the deadline alert firing) for a paste that is gone.
TYPED_TEST_P(StoreContract, APurgedPasteClosesItsNotices) {
  const PasteMeta gone = Row("ntp000000001", 5000);
  const PasteMeta kept = Row("ntp000000002", 5000);
  for (const PasteMeta& r : {gone, kept}) {
    ASSERT_TRUE(RunSync(this->meta().Insert(r, this->deadline())).ok());
  }
  Notice n;
  n.sender = "abuse@hoster.example";
  n.reference = "CASE-9";
  n.category = "phishing";
  n.received_at = 300;
  n.pastes = {NoticePaste{gone.id.str(), "", false}, NoticePaste{kept.id.str(), "", false}};
  Notice only_gone = n;
  only_gone.reference = "CASE-10";
  only_gone.pastes = {NoticePaste{gone.id.str(), "", false}};
  for (const Notice& notice : {n, only_gone}) {
    auto added = RunSync(this->meta().AddNotice(notice, 10, this->deadline()));
    ASSERT_TRUE(added.ok()) << added.error().message;
    ASSERT_TRUE(added->created);
  }
  ASSERT_EQ(RunSync(this->meta().OpenNotices(10, this->deadline()))->size(), 2u);

  ASSERT_TRUE(RunSync(this->meta().Purge({gone.id}, this->deadline())).ok());
  auto open = RunSync(this->meta().OpenNotices(10, this->deadline()));
  ASSERT_TRUE(open.ok()) << open.error().message;
  // CASE-10 named only the purged paste: closed. CASE-9 waits on the paste still there.
  ASSERT_EQ(open->size(), 1u);
  EXPECT_EQ((*open)[0].reference, "CASE-9");
  EXPECT_EQ((*open)[0].open_pastes, 1);
  for (const NoticePaste& p : (*open)[0].pastes) EXPECT_EQ(p.open, p.paste == kept.id.str());
}

TYPED_TEST_P(StoreContract, NoticesWithholdAnswerEachPasteAndAreIdempotent) {
  const PasteMeta live = Row("ntc000000001", 5000);
  const PasteMeta also = Row("ntc000000002", 5000);
  const PasteMeta down = Row("ntc000000003", 5000);
  const PasteMeta expired = Row("ntc000000004", 200);
  for (const PasteMeta& r : {live, also, down, expired}) {
    ASSERT_TRUE(RunSync(this->meta().Insert(r, this->deadline())).ok());
  }
  ASSERT_TRUE(
      RunSync(this->meta().SetModeration(
                  down.id, ModerationChange{Moderation::kTakenDown, "down", 250}, this->deadline()))
          .ok());
  const auto notice = [](std::string reference, std::vector<std::string> ids) {
    Notice n;
    n.sender = "abuse@hoster.example";
    n.reference = std::move(reference);
    n.category = "phishing";
    n.received_at = 300;
    for (std::string& id : ids) n.pastes.push_back(NoticePaste{std::move(id), "", false});
    return n;
  };
  // None could be withheld: each answered, nothing stored.
  auto none = RunSync(this->meta().AddNotice(
      notice("NONE", {down.id.str(), expired.id.str(), "ntc000000009"}), 10, this->deadline()));
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_FALSE(none->stored);
  EXPECT_FALSE(none->created);
  ASSERT_EQ(none->notice.pastes.size(), 3u);
  EXPECT_EQ(none->notice.pastes[0].outcome, kNoticeTakenDown);
  EXPECT_EQ(none->notice.pastes[1].outcome, kNoticeNotFound);
  EXPECT_EQ(none->notice.pastes[2].outcome, kNoticeNotFound);
  EXPECT_TRUE(RunSync(this->meta().OpenNotices(10, this->deadline()))->empty());

  auto added = RunSync(this->meta().AddNotice(
      notice("CASE-1", {live.id.str(), down.id.str(), also.id.str()}), 10, this->deadline()));
  ASSERT_TRUE(added.ok()) << added.error().message;
  EXPECT_TRUE(added->created);
  EXPECT_TRUE(added->stored);
  EXPECT_EQ(added->notice.open_pastes, 2);
  EXPECT_GT(added->notice.id, 0);
  EXPECT_EQ(RunSync(this->meta().Get(live.id, this->deadline()))->moderation,
            Moderation::kWithheldNotice);
  EXPECT_EQ(RunSync(this->meta().Get(down.id, this->deadline()))->moderation,
            Moderation::kTakenDown);
  auto due = RunSync(this->meta().DueOutbox(300, 10, this->deadline()));
  ASSERT_TRUE(due.ok());
  EXPECT_EQ(
      std::count_if(due->begin(), due->end(),
                    [](const OutboxEntry& e) { return e.kind == OutboxEntry::Kind::kPurgeEdge; }),
      2);

  this->backend_.Reopen();
  // The same sender and reference: the stored notice, nothing changed.
  auto again =
      RunSync(this->meta().AddNotice(notice("CASE-1", {expired.id.str()}), 10, this->deadline()));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_TRUE(again->stored);
  EXPECT_EQ(again->notice.id, added->notice.id);
  ASSERT_EQ(again->notice.pastes.size(), 3u);
  EXPECT_EQ(again->notice.pastes[0].paste, live.id.str());
  EXPECT_EQ(again->notice.pastes[0].outcome, kNoticeWithheld);
  EXPECT_TRUE(again->notice.pastes[0].open);
  EXPECT_EQ(again->notice.pastes[1].outcome, kNoticeTakenDown);
  EXPECT_FALSE(again->notice.pastes[1].open);

  // The cap counts stored notices; an open one is not given up to make room.
  auto full =
      RunSync(this->meta().AddNotice(notice("CASE-2", {also.id.str()}), 1, this->deadline()));
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, ErrorCode::kInsufficientStorage);
  EXPECT_EQ(full.error().reason, kNoticesFull);

  auto open = RunSync(this->meta().OpenNotices(10, this->deadline()));
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->size(), 1u);
  EXPECT_EQ((*open)[0].reference, "CASE-1");
  EXPECT_EQ((*open)[0].received_at, 300);

  // The operator acts on one paste, then the other: the notice closes with the second.
  auto closed = RunSync(this->meta().CloseNotices(live.id, 400, this->deadline()));
  ASSERT_TRUE(closed.ok());
  ASSERT_EQ(closed->size(), 1u);
  EXPECT_EQ((*closed)[0].reference, "CASE-1");
  EXPECT_EQ((*closed)[0].received_at, 300);
  EXPECT_TRUE(RunSync(this->meta().CloseNotices(live.id, 401, this->deadline()))->empty());
  EXPECT_EQ(RunSync(this->meta().OpenNotices(10, this->deadline()))->size(), 1u);
  ASSERT_EQ(RunSync(this->meta().CloseNotices(also.id, 402, this->deadline()))->size(), 1u);
  EXPECT_TRUE(RunSync(this->meta().OpenNotices(10, this->deadline()))->empty());

  // Closed, CASE-1 makes room at the cap: CASE-2 is stored in its place, and CASE-1's reference
  // is new again (kept, it would be answered as stored, created false).
  auto room =
      RunSync(this->meta().AddNotice(notice("CASE-2", {also.id.str()}), 1, this->deadline()));
  ASSERT_TRUE(room.ok()) << room.error().message;
  EXPECT_TRUE(room->created);
  open = RunSync(this->meta().OpenNotices(10, this->deadline()));
  ASSERT_EQ(open->size(), 1u);
  EXPECT_EQ((*open)[0].reference, "CASE-2");
  auto anew =
      RunSync(this->meta().AddNotice(notice("CASE-1", {live.id.str()}), 2, this->deadline()));
  ASSERT_TRUE(anew.ok()) << anew.error().message;
  EXPECT_TRUE(anew->created);
  // Both open now: nothing to give up at the cap of two.
  auto still_full =
      RunSync(this->meta().AddNotice(notice("CASE-3", {live.id.str()}), 2, this->deadline()));
  ASSERT_FALSE(still_full.ok());
  EXPECT_EQ(still_full.error().reason, kNoticesFull);
  // A cap lowered under what is stored: as many closed notices as it takes make room at once.
  ASSERT_EQ(RunSync(this->meta().CloseNotices(live.id, 403, this->deadline()))->size(), 1u);
  ASSERT_EQ(RunSync(this->meta().CloseNotices(also.id, 403, this->deadline()))->size(), 1u);
  auto lowered =
      RunSync(this->meta().AddNotice(notice("CASE-4", {live.id.str()}), 1, this->deadline()));
  ASSERT_TRUE(lowered.ok()) << lowered.error().message;
  open = RunSync(this->meta().OpenNotices(10, this->deadline()));
  ASSERT_EQ(open->size(), 1u);
  EXPECT_EQ((*open)[0].reference, "CASE-4");
  auto kept_one =
      RunSync(this->meta().AddNotice(notice("CASE-2", {also.id.str()}), 2, this->deadline()));
  ASSERT_TRUE(kept_one.ok());
  EXPECT_TRUE(kept_one->created) << "CASE-2 was kept past a cap of one";
}

// A copy's notices (MetaStore::Notices, ImportNotice; `sluice admin migrate-store`): every
// stored notice, open and closed, walked once in id order a page at a time, and another store's
// notice stored exactly as it was there, once, without touching the pastes it names.
inline Notice NoticeOf(std::string reference, int64_t received_at,
                       std::vector<NoticePaste> pastes) {
  Notice n;
  n.sender = "abuse@hoster.example";
  n.reference = std::move(reference);
  n.category = "phishing";
  n.received_at = received_at;
  n.pastes = std::move(pastes);
  for (const NoticePaste& p : n.pastes) n.open_pastes += p.open ? 1 : 0;
  return n;
}

// Every field but the id, which each store gives, and the pastes in order with their state.
inline void ExpectSameNotice(const Notice& want, const Notice& got) {
  EXPECT_EQ(got.sender, want.sender);
  EXPECT_EQ(got.reference, want.reference);
  EXPECT_EQ(got.category, want.category);
  EXPECT_EQ(got.deadline_at, want.deadline_at);
  EXPECT_EQ(got.received_at, want.received_at);
  EXPECT_EQ(got.open_pastes, want.open_pastes);
  ASSERT_EQ(got.pastes.size(), want.pastes.size()) << want.reference;
  for (size_t i = 0; i < want.pastes.size(); ++i) {
    EXPECT_EQ(got.pastes[i].paste, want.pastes[i].paste) << want.reference << " paste " << i;
    EXPECT_EQ(got.pastes[i].outcome, want.pastes[i].outcome) << want.reference << " paste " << i;
    EXPECT_EQ(got.pastes[i].open, want.pastes[i].open) << want.reference << " paste " << i;
  }
}

TYPED_TEST_P(StoreContract, NoticesPageEveryNoticeOnceInIdOrder) {
  std::vector<std::string> references;
  for (int i = 0; i < 5; ++i) {
    const PasteMeta row = Row("ntw00000000" + std::to_string(i), 5000);
    ASSERT_TRUE(RunSync(this->meta().Insert(row, this->deadline())).ok());
    references.push_back("WALK-" + std::to_string(i));
    // Arrivals out of id order: the walk follows the ids, not the takedown clock.
    auto added = RunSync(this->meta().AddNotice(
        NoticeOf(references.back(), 500 - i, {NoticePaste{row.id.str(), "", false}}), 10,
        this->deadline()));
    ASSERT_TRUE(added.ok()) << added.error().message;
    // Every other one closed: the walk lists closed notices too.
    if (i % 2 == 0) {
      ASSERT_EQ(RunSync(this->meta().CloseNotices(row.id, 600, this->deadline()))->size(), 1u);
    }
  }
  std::vector<Notice> walked;
  int64_t after_id = 0;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = RunSync(this->meta().Notices(after_id, 2, this->deadline()));
    ASSERT_TRUE(page.ok()) << page.error().message;
    ASSERT_LE(page->size(), 2u);
    if (page->empty()) break;
    for (const Notice& n : *page) {
      EXPECT_GT(n.id, after_id);
      after_id = n.id;
      walked.push_back(n);
    }
  }
  ASSERT_EQ(walked.size(), 5u);
  for (size_t i = 0; i < walked.size(); ++i) {
    EXPECT_EQ(walked[i].reference, references[i]);
    EXPECT_EQ(walked[i].open_pastes, i % 2 == 0 ? 0 : 1);
    ASSERT_EQ(walked[i].pastes.size(), 1u);
    EXPECT_EQ(walked[i].pastes[0].outcome, kNoticeWithheld);
    EXPECT_EQ(walked[i].pastes[0].open, i % 2 != 0);
  }
  EXPECT_TRUE(RunSync(this->meta().Notices(after_id, 2, this->deadline()))->empty());
}

TYPED_TEST_P(StoreContract, AnImportedNoticeReadsBackAsGivenOnceAndWithholdsNothing) {
  const PasteMeta open = Row("nti000000001", 5000);
  const PasteMeta restored = Row("nti000000002", 5000);
  for (const PasteMeta& r : {open, restored}) {
    ASSERT_TRUE(RunSync(this->meta().Insert(r, this->deadline())).ok());
  }
  Notice waiting = NoticeOf("CASE-7", 300,
                            {NoticePaste{open.id.str(), std::string(kNoticeWithheld), true},
                             NoticePaste{restored.id.str(), std::string(kNoticeWithheld), false},
                             NoticePaste{"nti000000009", std::string(kNoticeNotFound), false}});
  waiting.deadline_at = 900;
  const Notice done =
      NoticeOf("CASE-8", 200, {NoticePaste{open.id.str(), std::string(kNoticeTakenDown), false}});
  for (const Notice& n : {done, waiting}) {
    auto imported = RunSync(this->meta().ImportNotice(n, 10, this->deadline()));
    ASSERT_TRUE(imported.ok()) << imported.error().message;
    EXPECT_TRUE(*imported) << n.reference;
  }
  this->backend_.Reopen();

  auto all = RunSync(this->meta().Notices(0, 10, this->deadline()));
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->size(), 2u);
  ExpectSameNotice(done, (*all)[0]);
  ExpectSameNotice(waiting, (*all)[1]);
  auto open_notices = RunSync(this->meta().OpenNotices(10, this->deadline()));
  ASSERT_TRUE(open_notices.ok());
  ASSERT_EQ(open_notices->size(), 1u);
  ExpectSameNotice(waiting, (*open_notices)[0]);

  // Again, even with other contents: the sender's reference is there, nothing changes.
  Notice again = waiting;
  again.category = "malware";
  again.pastes.pop_back();
  auto repeated = RunSync(this->meta().ImportNotice(again, 10, this->deadline()));
  ASSERT_TRUE(repeated.ok()) << repeated.error().message;
  EXPECT_FALSE(*repeated);
  all = RunSync(this->meta().Notices(0, 10, this->deadline()));
  ASSERT_EQ(all->size(), 2u);
  ExpectSameNotice(waiting, (*all)[1]);

  // The pastes' state is the copy of their rows': an import neither withholds nor owes a purge.
  for (const PasteMeta& r : {open, restored}) {
    EXPECT_EQ(RunSync(this->meta().Get(r.id, this->deadline()))->moderation, Moderation::kNone);
  }
  EXPECT_TRUE(RunSync(this->meta().DueOutbox(100'000, 10, this->deadline()))->empty());
  // And the operator's action closes it on this store as on the one it came from.
  ASSERT_EQ(RunSync(this->meta().CloseNotices(open.id, 400, this->deadline()))->size(), 1u);
  EXPECT_TRUE(RunSync(this->meta().OpenNotices(10, this->deadline()))->empty());
}

TYPED_TEST_P(StoreContract, ImportedNoticesKeepMaxNotices) {
  const auto one = [](std::string reference, bool open) {
    return NoticeOf(std::move(reference), 300,
                    {NoticePaste{"ntm000000001", std::string(kNoticeWithheld), open}});
  };
  for (const Notice& n : {one("CLOSED-1", false), one("OPEN-1", true)}) {
    auto imported = RunSync(this->meta().ImportNotice(n, 2, this->deadline()));
    ASSERT_TRUE(imported.ok()) << imported.error().message;
  }
  // At the cap, the oldest closed notice makes room, as for AddNotice.
  auto room = RunSync(this->meta().ImportNotice(one("OPEN-2", true), 2, this->deadline()));
  ASSERT_TRUE(room.ok()) << room.error().message;
  EXPECT_TRUE(*room);
  // Every stored notice open: refused, nothing given up.
  auto full = RunSync(this->meta().ImportNotice(one("OPEN-3", true), 2, this->deadline()));
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, ErrorCode::kInsufficientStorage);
  EXPECT_EQ(full.error().reason, kNoticesFull);
  auto all = RunSync(this->meta().Notices(0, 10, this->deadline()));
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].reference, "OPEN-1");
  EXPECT_EQ((*all)[1].reference, "OPEN-2");
}

REGISTER_TYPED_TEST_SUITE_P(
    StoreContract, InsertedRowReadsBackIdentically, BodySizeAndChecksumRoundTrip,
    MissingRowIsNotFound, DuplicateInsertFailsAndKeepsTheFirstRow,
    MarkDeletedLeavesATombstoneAndOneOutboxEntry, MarkDeletedOfMissingRowIsNotFound,
    OutboxRetryPostponesAndFinishRemoves, ExpiredListsOnlyDueRowsUpToTheLimit,
    PurgeRemovesRowsAndTheirOutboxEntries, RowsSurviveReopening, BodyReadsBackByteIdentically,
    MissingBodyIsNotFoundAndDeleteIsIdempotent, DeleteManyRemovesEachBodyOfTheBatchAndNoOther,
    ListPagesThroughBodiesInIdOrder, ConcurrentWritersAreAllDurable, ReportsCountEachNetworkOnce,
    TheReviewQueuePagesNewestFirstByCursor, WithholdingOwesAnEdgePurgeAndReviewClosesReports,
    ReportsWithholdAtTheThresholdOfVotingNetworks, ANetworkPastItsWithholdBudgetNoLongerVotes,
    PastMaxOpenReportsReportsAreCountedNotStored, TheCreatorsNetworkRoundTrips,
    PurgeReportsDeletesHandledReportsInBatchesAndKeepsOpenOnes,
    BlocksInForceAndTheAuditTrailNewestFirst, ClaimTakesABurnRowOnceAndOwesItsBody,
    TheEncryptedFlagReadsBackThroughGetAndClaim, ConcurrentClaimsHaveExactlyOneWinner,
    ConcurrentClaimsOfACountedRowHaveExactlyItsViews, LiveBytesFollowInsertsDeletesClaimsAndPurges,
    ClaimNeverBurnsAModeratedRow, ReservationsHoldRoomUntilGivenBack,
    AnInsertTakesItsReservationAsLiveBytes, ReservationsPastTheirExpiryNoLongerCount,
    ReservationsWeighLiveBytesAsTheyChange, ConcurrentReservationsNeverPassTheQuota,
    ContentBlocksAddOnceRemoveAndBumpTheVersion, CreatorTokensAddListRevokeAndBumpTheVersion,
    CreatorTokensStopAtTheCapOfLiveTokens, ContentBlocksPageInDigestOrderAndStopAtTheirMaximum,
    ATakedownBlocksItsDigestInItsOwnTransaction, ListPastesWalksEveryRowOnceInKeysetPages,
    ReportsOfListsAPastesOpenReportsAndTheirVotes, TheQueueKeepsEachEntrysArrivalAndItsOldest,
    TransparencyCountsAddUpByMonthKindAndLabel, ModerationActionsCountThemselvesWithTheirTime,
    NoticesWithholdAnswerEachPasteAndAreIdempotent, APurgedPasteClosesItsNotices,
    NoticesPageEveryNoticeOnceInIdOrder, AnImportedNoticeReadsBackAsGivenOnceAndWithholdsNothing,
    ImportedNoticesKeepMaxNotices);

}  // namespace sluice::store::contract
