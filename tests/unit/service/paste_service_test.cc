#include "sluice/service/paste_service.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <filesystem>

#include "../../support/faulty_shared_state.h"
#include "../../support/faulty_stores.h"
#include "../../support/run_sync.h"
#include "sluice/asio/completion.h"
#include "sluice/service/body_check.h"
#include "sluice/store/backends.h"
#include "sluice/store/shared_state.h"
#include "sluice/worker/janitor.h"

namespace sluice::service {
namespace {

using testing::FaultyBlobStore;
using testing::FaultyMetaStore;
using testing::RunSync;

AdmissionOptions GenerousLimits() {
  AdmissionOptions o;
  o.ip_create_count = o.global_create_count = {1e6, 1e6};
  o.ip_create_bytes = o.global_create_bytes = {1e12, 1e12};
  o.ip_read = {1e6, 1e6};
  return o;
}

class PasteServiceTest : public ::testing::Test {
 protected:
  std::unique_ptr<store::MetaStore> meta_impl_ = store::MakeMemoryMetaStore();
  std::unique_ptr<store::BlobStore> blob_impl_ = store::MakeMemoryBlobStore(&clock_);
  FaultyMetaStore meta_{*meta_impl_};
  FaultyBlobStore blobs_{*blob_impl_};
  PasteCache cache_{1 << 20};
  ManualClock clock_;
  MetricsRegistry metrics_;
  AdmissionControl admission_{GenerousLimits(), clock_, metrics_};
  PasteService service_{meta_, blobs_, cache_, admission_, clock_, metrics_, ServiceOptions{}};

  Result<CreatedPaste> TryCreate(std::string body, std::string_view ttl = "") {
    auto ticket = RunSync(service_.AdmitCreate("10.0.0.1", {body.size(), false}));
    if (!ticket.ok()) return ticket.error();
    // With the clock: a create whose insert answer was lost pauses before its second look.
    return RunSync(service_.Create(std::move(*ticket), std::move(body), ttl), clock_);
  }
  struct FixedClient final : ClientKeySource {
    std::string Key() const override { return "10.0.0.1"; }
  };
  Result<CachedPaste> Read(std::string_view id) {
    return RunSync(service_.Read(FixedClient(), id));
  }
  worker::Janitor janitor_{meta_, blobs_, cache_, clock_, metrics_, worker::JanitorOptions{}};

  CreatedPaste MustCreate(std::string body, std::string_view ttl = "") {
    auto created = TryCreate(std::move(body), ttl);
    EXPECT_TRUE(created.ok()) << created.error().message;
    return *created;
  }

  // Rows and bodies that exist, of any state.
  size_t StoredRows() {
    return RunSync(meta_impl_->Expired(std::numeric_limits<int64_t>::max(), 1'000'000,
                                       admission::Deadline::Never()))
        ->size();
  }
  // Runs `janitor`'s loops on the manual clock, moving it to each next alarm, until no row is
  // stored or `limit` has passed, then stops them. Returns the clock's time at the start.
  TimePoint RunJanitorUntilSwept(worker::Janitor& janitor, Duration limit) {
    boost::asio::io_context io;
    const TimePoint began = clock_.Now();
    janitor.Start(io.get_executor());
    const auto step = [&] {
      io.restart();
      io.poll();
      const std::optional<TimePoint> next = clock_.NextAlarm();
      if (!next) return false;
      clock_.Advance(*next - clock_.Now());
      return true;
    };
    while (StoredRows() > 0 && clock_.Now() - began < limit && step()) {
    }
    janitor.Stop();
    while (step()) {
    }
    return began;
  }
  size_t StoredBodies() {
    return RunSync(blob_impl_->List("", 1'000'000, admission::Deadline::Never()))->size();
  }
};

TEST_F(PasteServiceTest, CreatedPasteReadsBackWithItsExpiry) {
  const CreatedPaste p = MustCreate("hello", "1h");
  EXPECT_EQ(p.expires_at, clock_.UnixSeconds() + 3600);
  auto read = Read((p.id.view()));
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read->body, "hello");
}

TEST_F(PasteServiceTest, DefaultExpiryIsOneWeek) {
  EXPECT_EQ(MustCreate("x").expires_at, clock_.UnixSeconds() + 7 * 86400);
}

TEST_F(PasteServiceTest, RejectedCreatesWriteNothing) {
  const std::pair<std::string, std::string> bad[] = {
      {"", ""},     {"\xff", ""},      {std::string("a\0b", 3), ""},
      {"ok", "2h"}, {"ok", "forever"}, {std::string(1'000'001, 'a'), ""}};
  for (const auto& [body, ttl] : bad) {
    auto created = TryCreate(body, ttl);
    ASSERT_FALSE(created.ok());
    EXPECT_TRUE(created.error().code == ErrorCode::kInvalidArgument ||
                created.error().code == ErrorCode::kTooLarge);
  }
  EXPECT_EQ(blobs_.calls.load(), 0);
  EXPECT_EQ(meta_.calls.load(), 0);
  EXPECT_EQ(StoredRows(), 0u);
  EXPECT_EQ(StoredBodies(), 0u);
}

TEST_F(PasteServiceTest, ExpiryAboveTheOperatorsMaximumIsRefused) {
  ServiceOptions options;
  options.max_ttl = std::chrono::hours(24);
  PasteService strict(meta_, blobs_, cache_, admission_, clock_, metrics_, options);
  auto create = [&](std::string_view ttl) {
    auto ticket = RunSync(strict.AdmitCreate("10.0.0.1", {1, false}));
    return RunSync(strict.Create(std::move(*ticket), "x", ttl));
  };
  EXPECT_EQ(create("1w").error().reason, "ttl_over_max");
  EXPECT_TRUE(create("1d").ok());
}

TEST_F(PasteServiceTest, FailedBodyWriteIsUnavailableAndLeavesNoRow) {
  blobs_.fail = true;
  auto created = TryCreate("hello");
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(StoredRows(), 0u);
}

TEST_F(PasteServiceTest, InsertIntoAnUnavailablePrimaryIsUnavailableAndNotAcknowledged) {
  meta_.fail = true;
  auto created = TryCreate("hello");
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(created.error().retry_after_seconds.has_value());
  EXPECT_EQ(StoredRows(), 0u);
  EXPECT_EQ(StoredBodies(), 1u);  // left for the orphan reaper, never served
}

TEST_F(PasteServiceTest, MalformedIdIsNotFoundWithoutTouchingStorage) {
  for (const char* id : {"", "short", "../../etc/pa", "aaaaaaaaaaaaa", "aaaaaaaaaa.a"}) {
    EXPECT_EQ(Read((id)).error().code, ErrorCode::kNotFound) << id;
    EXPECT_EQ(RunSync(service_.Delete(id, "token")).error().code, ErrorCode::kNotFound) << id;
  }
  EXPECT_EQ(meta_.calls.load(), 0);
  EXPECT_EQ(blobs_.calls.load(), 0);
}

TEST_F(PasteServiceTest, StoreFailureOnReadIsUnavailableNeverNotFound) {
  const CreatedPaste p = MustCreate("hello");
  cache_.Erase(p.id);
  meta_.fail = true;
  EXPECT_EQ(Read((p.id.view())).error().code, ErrorCode::kUnavailable);
  meta_.fail = false;
  blobs_.fail = true;
  EXPECT_EQ(Read((p.id.view())).error().code, ErrorCode::kUnavailable);
}

TEST_F(PasteServiceTest, ExpiredPasteIsNotFoundAtOnceEvenWhenCached) {
  const CreatedPaste p = MustCreate("hello", "10m");
  clock_.Advance(std::chrono::seconds(599));
  EXPECT_TRUE(Read((p.id.view())).ok());
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Read((p.id.view())).error().code, ErrorCode::kNotFound);
}

TEST_F(PasteServiceTest, DeleteNeedsTheTokenAndIsIdempotent) {
  const CreatedPaste p = MustCreate("hello");
  EXPECT_EQ(RunSync(service_.Delete(p.id.view(), "wrong")).error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(Read((p.id.view())).ok());
  EXPECT_TRUE(RunSync(service_.Delete(p.id.view(), p.delete_token)).ok());
  EXPECT_TRUE(RunSync(service_.Delete(p.id.view(), p.delete_token)).ok());
  EXPECT_EQ(Read((p.id.view())).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(RunSync(service_.Delete(p.id.view(), "wrong")).error().code, ErrorCode::kNotFound);
}

// An asynchronous promotion lost the row of a paste this process created and still caches. The
// creator's delete cannot be proven (the token's hash was in the row) and is 404, but the paste
// stops being served: the cache said yes where the store of record says no.
TEST_F(PasteServiceTest, ADeleteThatFindsNoRowStopsServingTheCachedPaste) {
  const CreatedPaste p = MustCreate("hello");
  ASSERT_TRUE(Read(p.id.view()).ok());                                        // from the cache
  std::unique_ptr<store::MetaStore> promoted = store::MakeMemoryMetaStore();  // never had it
  PasteService after(*promoted, blobs_, cache_, admission_, clock_, metrics_, ServiceOptions{});
  ASSERT_TRUE(RunSync(after.Read(FixedClient(), p.id.view())).ok()) << "served from the cache";
  EXPECT_EQ(RunSync(after.Delete(p.id.view(), p.delete_token)).error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(cache_.Get(p.id).has_value());
  EXPECT_EQ(RunSync(after.Read(FixedClient(), p.id.view())).error().code, ErrorCode::kNotFound);
}

// The same with a shared cache that a fill filled: every process would fill from it, so the
// delete replaces it with a tombstone and tells them all.
TEST_F(PasteServiceTest, ADeleteThatFindsNoRowDropsThePasteFromTheSharedCacheToo) {
  std::unique_ptr<store::SharedState> shared = store::MakeMemorySharedState(clock_);
  PasteCache first_cache(1 << 20);
  PasteService first(meta_, blobs_, first_cache, admission_, clock_, metrics_, ServiceOptions{},
                     shared.get());
  auto ticket = RunSync(first.AdmitCreate("10.0.0.1", {5, false}));
  ASSERT_TRUE(ticket.ok());
  auto created = RunSync(first.Create(std::move(*ticket), "hello", ""));
  ASSERT_TRUE(created.ok());
  first_cache.Erase(created->id);
  ASSERT_TRUE(RunSync(first.Read(FixedClient(), created->id.view())).ok());  // kept shared
  std::unique_ptr<store::MetaStore> promoted = store::MakeMemoryMetaStore();
  PasteCache other_cache(1 << 20);
  PasteService other(*promoted, blobs_, other_cache, admission_, clock_, metrics_, ServiceOptions{},
                     shared.get());
  ASSERT_TRUE(RunSync(other.Read(FixedClient(), created->id.view())).ok()) << "from Redis";
  EXPECT_EQ(RunSync(other.Delete(created->id.view(), created->delete_token)).error().code,
            ErrorCode::kNotFound);
  EXPECT_EQ(RunSync(other.Read(FixedClient(), created->id.view())).error().code,
            ErrorCode::kNotFound);
  EXPECT_FALSE(first_cache.Get(created->id).has_value());
}

TEST_F(PasteServiceTest, OutboxRemovesTheBodyOfADeletedPaste) {
  const CreatedPaste p = MustCreate("hello");
  ASSERT_TRUE(RunSync(service_.Delete(p.id.view(), p.delete_token)).ok());
  EXPECT_EQ(StoredBodies(), 1u);  // the delete itself only commits the tombstone
  EXPECT_EQ(RunSync(janitor_.DrainOutboxOnce()), 1u);
  EXPECT_EQ(StoredBodies(), 0u);
  EXPECT_EQ(RunSync(janitor_.DrainOutboxOnce()), 0u);
}

TEST_F(PasteServiceTest, OutboxRetriesLaterWhenTheBodyStoreFails) {
  const CreatedPaste p = MustCreate("hello");
  ASSERT_TRUE(RunSync(service_.Delete(p.id.view(), p.delete_token)).ok());
  blobs_.fail = true;
  EXPECT_EQ(RunSync(janitor_.DrainOutboxOnce()), 1u);
  blobs_.fail = false;
  EXPECT_EQ(RunSync(janitor_.DrainOutboxOnce()), 0u);  // backed off: not due yet
  clock_.Advance(std::chrono::seconds(10));
  EXPECT_EQ(RunSync(janitor_.DrainOutboxOnce()), 1u);
  EXPECT_EQ(StoredBodies(), 0u);
}

TEST_F(PasteServiceTest, SweeperRemovesExpiredRowsAndBodiesUnread) {
  MustCreate("short", "10m");
  MustCreate("long", "1w");
  clock_.Advance(std::chrono::minutes(11));
  EXPECT_EQ(RunSync(janitor_.SweepExpiredOnce()), 1u);
  EXPECT_EQ(StoredRows(), 1u);
  EXPECT_EQ(StoredBodies(), 1u);
}

// The sweep removes a batch's bodies in one call; when that fails, one at a time, so one body the
// store keeps refusing holds back only its own row.
TEST_F(PasteServiceTest, ABodyTheStoreRefusesHoldsBackOnlyItsOwnExpiredRow) {
  const CreatedPaste stuck = MustCreate("stuck", "10m");
  MustCreate("first", "10m");
  MustCreate("second", "10m");
  blobs_.refuse_delete_of = std::string(stuck.id.view());
  clock_.Advance(std::chrono::minutes(11));
  EXPECT_EQ(RunSync(janitor_.SweepExpiredOnce()), 2u);
  EXPECT_EQ(StoredRows(), 1u);
  EXPECT_EQ(StoredBodies(), 1u);
  blobs_.refuse_delete_of.clear();
  EXPECT_EQ(RunSync(janitor_.SweepExpiredOnce()), 1u);
  EXPECT_EQ(StoredRows(), 0u);
  EXPECT_EQ(StoredBodies(), 0u);
}

// Two processes on one store: only the holder of the reaper's lease lists the bucket; when the
// holder stops renewing (its process died), the other takes over once the lease has run out, and
// not before.
TEST_F(PasteServiceTest, OneProcessOfAFleetReapsAtATimeAndAnotherTakesOverWhenItStops) {
  MetricsRegistry first_metrics, second_metrics;
  worker::Janitor first{meta_, blobs_, cache_, clock_, first_metrics, worker::JanitorOptions{}};
  worker::Janitor second{meta_, blobs_, cache_, clock_, second_metrics, worker::JanitorOptions{}};
  const auto shows = [](const MetricsRegistry& m, std::string_view series) {
    return m.Render().find(series) != std::string::npos;
  };
  const auto lists = [&](worker::Janitor& janitor) {
    const int before = blobs_.calls.load();
    RunSync(janitor.ReapOrphansOnce());
    return blobs_.calls.load() - before;
  };
  EXPECT_EQ(lists(first), 1);
  EXPECT_EQ(lists(second), 0) << "listed under the other process's lease";
  EXPECT_TRUE(shows(second_metrics, "sluice_background_lease_held{job=\"orphan_reaper\"} 0"));
  // The holder renews at each pass; 29 s after its last one the lease still runs.
  clock_.Advance(std::chrono::seconds(29));
  EXPECT_EQ(lists(second), 0);
  EXPECT_EQ(lists(first), 1);
  // The holder stops (its process died): 31 s on, the lease has run out and the other reaps.
  clock_.Advance(std::chrono::seconds(31));
  EXPECT_EQ(lists(second), 1);
  EXPECT_TRUE(shows(second_metrics, "sluice_background_lease_held{job=\"orphan_reaper\"} 1"));
  EXPECT_EQ(lists(first), 0);
  EXPECT_TRUE(shows(first_metrics, "sluice_background_lease_held{job=\"orphan_reaper\"} 0"));
}

// A batch that runs out of time is a slow store: the sweep does not go on one body at a time
// (each its own commit, slower still), and the rows wait for the next sweep.
TEST_F(PasteServiceTest, ASweepBatchOutOfTimeIsNotRetriedBodyByBody) {
  MustCreate("first", "10m");
  MustCreate("second", "10m");
  clock_.Advance(std::chrono::minutes(11));
  blobs_.slow_batches = true;
  const int calls_before = blobs_.calls;
  EXPECT_EQ(RunSync(janitor_.SweepExpiredOnce()), 0u);
  EXPECT_EQ(blobs_.calls - calls_before, 1) << "the batch's bodies were deleted one by one";
  EXPECT_EQ(StoredRows(), 2u);
  blobs_.slow_batches = false;
  EXPECT_EQ(RunSync(janitor_.SweepExpiredOnce()), 2u);
  EXPECT_EQ(StoredRows(), 0u);
}

// A loop with a backlog works at most its share of the time, whatever a pass costs; the floor
// leaves creates a gap even after a pass that took no time.
TEST(PauseAfterFullPass, HoldsALoopToItsShareOfTheTime) {
  using std::chrono::milliseconds;
  EXPECT_EQ(worker::PauseAfterFullPass(milliseconds(400), 0.25), milliseconds(1200));
  EXPECT_EQ(worker::PauseAfterFullPass(milliseconds(400), 0.5), milliseconds(400));
  EXPECT_EQ(worker::PauseAfterFullPass(milliseconds(10), 0.25), worker::kMinBacklogPause);
  EXPECT_EQ(worker::PauseAfterFullPass(milliseconds(400), 1.0), worker::kMinBacklogPause);
  // Out of range shares are clamped, never a division by zero or a negative pause.
  EXPECT_EQ(worker::PauseAfterFullPass(milliseconds(400), 0.0), milliseconds(39600));
  EXPECT_EQ(worker::PauseAfterFullPass(milliseconds(400), 2.0), worker::kMinBacklogPause);
}

// The running sweep paces itself by the pass it just made: with batches that each take 400 ms of
// the store, a backlog's passes start 400 + 1,200 ms apart at a share of 0.25 (not 450 ms, as a
// fixed 50 ms pause gave), and the backlog still drains completely.
TEST_F(PasteServiceTest, ABacklogsSweepPausesInProportionToItsPasses) {
  for (int i = 0; i < 6; ++i) MustCreate("doomed " + std::to_string(i), "10m");
  clock_.Advance(std::chrono::minutes(11));
  worker::JanitorOptions options;
  options.batch_size = 2;
  options.sweep_batch_size = 2;
  options.background_share = 0.25;
  options.background_start_delay = std::chrono::milliseconds(0);
  MetricsRegistry metrics;
  worker::Janitor janitor{meta_, blobs_, cache_, clock_, metrics, options};
  std::vector<TimePoint> batch_starts;
  blobs_.before_delete_many = [&] {
    batch_starts.push_back(clock_.Now());
    clock_.Advance(std::chrono::milliseconds(400));
  };
  RunJanitorUntilSwept(janitor, std::chrono::minutes(1));
  blobs_.before_delete_many = nullptr;
  EXPECT_EQ(StoredRows(), 0u);
  ASSERT_EQ(batch_starts.size(), 3u);
  for (size_t i = 1; i < batch_starts.size(); ++i) {
    EXPECT_EQ(batch_starts[i] - batch_starts[i - 1], std::chrono::milliseconds(1600)) << i;
  }
}

TEST_F(PasteServiceTest, TheSweepBeginsItsStartDelayAfterTheStart) {
  // After a restart with the page cache empty its reads would be the disk's, ahead of the creates'
  // (bench/results/cold-start.md): the first pass waits background_start_delay.
  for (int i = 0; i < 2; ++i) MustCreate("doomed " + std::to_string(i), "10m");
  clock_.Advance(std::chrono::minutes(11));
  worker::JanitorOptions options;
  options.background_start_delay = std::chrono::seconds(45);
  MetricsRegistry metrics;
  worker::Janitor janitor{meta_, blobs_, cache_, clock_, metrics, options};
  std::vector<TimePoint> batch_starts;
  blobs_.before_delete_many = [&] { batch_starts.push_back(clock_.Now()); };
  const TimePoint began = RunJanitorUntilSwept(janitor, std::chrono::minutes(2));
  blobs_.before_delete_many = nullptr;
  EXPECT_EQ(StoredRows(), 0u);
  ASSERT_EQ(batch_starts.size(), 1u);
  EXPECT_EQ(batch_starts[0] - began, std::chrono::seconds(45));
}

TEST_F(PasteServiceTest, ReaperRemovesOnlyBodiesWithoutRows) {
  const CreatedPaste kept = MustCreate("kept");
  meta_.fail = true;
  ASSERT_FALSE(TryCreate("orphan").ok());
  meta_.fail = false;
  ASSERT_EQ(StoredBodies(), 2u);
  RunSync(janitor_.ReapOrphansOnce());
  EXPECT_EQ(StoredBodies(), 2u);  // younger than the age floor
  clock_.Advance(worker::JanitorOptions{}.orphan_age_floor);
  RunSync(janitor_.ReapOrphansOnce());
  EXPECT_EQ(StoredBodies(), 1u);
  EXPECT_TRUE(Read((kept.id.view())).ok());
}

// ---- body checks: the blob store answering wrongly -------------------------------------------

class BodyCheckTest : public PasteServiceTest {
 protected:
  // A created paste, dropped from the process cache so the next read goes to the stores.
  CreatedPaste Uncached(std::string body) {
    const CreatedPaste p = MustCreate(std::move(body));
    cache_.Erase(p.id);
    return p;
  }
  uint64_t Mismatches(const char* kind) {
    return metrics_.GetCounter("sluice_body_mismatches_total", "", {{"kind", kind}}).value();
  }
  // A read that must be refused as a damaged body, and leave nothing cached.
  void ExpectMismatch(const CreatedPaste& p) {
    auto read = Read(p.id.view());
    ASSERT_FALSE(read.ok()) << "served a damaged body: " << *read->body;
    EXPECT_EQ(read.error().code, ErrorCode::kUnavailable);
    EXPECT_EQ(read.error().reason, "body_mismatch");
    EXPECT_TRUE(read.error().retry_after_seconds.has_value());
    EXPECT_FALSE(cache_.Get(p.id).has_value());
  }
};

TEST_F(BodyCheckTest, CreateRecordsTheBodysSizeAndChecksum) {
  const CreatedPaste p = MustCreate("hello, world");
  auto row = RunSync(meta_impl_->Get(p.id, admission::Deadline::Never()));
  ASSERT_TRUE(row.ok());
  EXPECT_EQ(row->size_bytes, 12u);
  ASSERT_TRUE(row->body_sha256.has_value());
  EXPECT_EQ(*row->body_sha256, DigestBody("hello, world"));
}

TEST_F(BodyCheckTest, ShortBodyIs503NotServedNotCachedAndCounted) {
  const CreatedPaste p = Uncached("hello, world");
  blobs_.damage = [](std::string& body) { body.resize(body.size() - 5); };
  ExpectMismatch(p);
  ExpectMismatch(p);  // still not cached: the second read went to the store again
  EXPECT_EQ(Mismatches("size"), 2u);
  blobs_.damage = nullptr;  // the store recovers: the paste reads back whole, and is cached
  auto read = Read(p.id.view());
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read->body, "hello, world");
  EXPECT_TRUE(cache_.Get(p.id).has_value());
}

TEST_F(BodyCheckTest, EmptyBodyIs503) {
  const CreatedPaste p = Uncached("hello");
  blobs_.damage = [](std::string& body) { body.clear(); };
  ExpectMismatch(p);
}

TEST_F(BodyCheckTest, BodyOfTheRightSizeWithAFlippedByteIs503) {
  const CreatedPaste p = Uncached("hello, world");
  blobs_.damage = [](std::string& body) { body[3] ^= 0x20; };
  ExpectMismatch(p);
  EXPECT_EQ(Mismatches("checksum"), 1u);
  EXPECT_EQ(Mismatches("size"), 0u);
}

TEST_F(BodyCheckTest, AnotherPastesBodyIsNotServedAsThisOne) {
  const CreatedPaste p = Uncached("first paste");
  blobs_.damage = [](std::string& body) { body = "other paste"; };  // same length
  ExpectMismatch(p);
}

TEST_F(BodyCheckTest, RowFromBeforeChecksumsIsCheckedBySizeAlone) {
  const auto id = *store::PasteId::Parse("old000000001");
  store::PasteMeta old{id, clock_.UnixSeconds(), clock_.UnixSeconds() + 3600, 5, {}, false, {}};
  ASSERT_TRUE(RunSync(meta_impl_->Insert(old, admission::Deadline::Never())).ok());
  ASSERT_TRUE(RunSync(blob_impl_->Put(id, std::make_shared<const std::string>("hello"),
                                      admission::Deadline::Never()))
                  .ok());
  auto read = Read(id.view());
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read->body, "hello");
  cache_.Erase(id);
  blobs_.damage = [](std::string& body) { body += "!"; };
  auto longer = Read(id.view());
  ASSERT_FALSE(longer.ok());
  EXPECT_EQ(longer.error().reason, "body_mismatch");
}

TEST_F(BodyCheckTest, MissingBodyOfALiveRowIs503NotAnInternalError) {
  const CreatedPaste p = Uncached("hello");
  ASSERT_TRUE(RunSync(blob_impl_->Delete(p.id, admission::Deadline::Never())).ok());
  auto read = Read(p.id.view());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(read.error().reason, "body_missing");
  EXPECT_TRUE(read.error().retry_after_seconds.has_value());
}

TEST_F(BodyCheckTest, RowOfAMismatchIsNotPutInTheSharedCache) {
  std::unique_ptr<store::SharedState> shared = store::MakeMemorySharedState(clock_);
  PasteCache cache(1 << 20);
  PasteService service(meta_, blobs_, cache, admission_, clock_, metrics_, ServiceOptions{},
                       shared.get());
  auto ticket = RunSync(service.AdmitCreate("10.0.0.1", {5, false}));
  ASSERT_TRUE(ticket.ok());
  auto created = RunSync(service.Create(std::move(*ticket), "hello", ""));
  ASSERT_TRUE(created.ok());
  cache.Erase(created->id);
  blobs_.damage = [](std::string& body) { body[0] = 'j'; };
  auto read = RunSync(service.Read(FixedClient(), created->id.view()));
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().reason, "body_mismatch");
  EXPECT_FALSE(cache.Get(created->id).has_value());
  auto kept = RunSync(shared->GetMeta(created->id, admission::Deadline::Never()));
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(kept->has_value());
  blobs_.damage = nullptr;
  ASSERT_TRUE(RunSync(service.Read(FixedClient(), created->id.view())).ok());
  kept = RunSync(shared->GetMeta(created->id, admission::Deadline::Never()));
  ASSERT_TRUE(kept.ok() && kept->has_value());
  EXPECT_EQ((*kept)->body_sha256, DigestBody("hello"));
}

TEST_F(BodyCheckTest, WithChecksOffTheBodyIsServedAsTheStoreGaveIt) {
  // The switch exists to measure the checks' cost (bench/run_body_checks_bench.sh), and this is
  // what turning them off gives up.
  ServiceOptions options;
  options.verify_bodies = false;
  PasteCache cache(1 << 20);
  PasteService unchecked(meta_, blobs_, cache, admission_, clock_, metrics_, options);
  auto ticket = RunSync(unchecked.AdmitCreate("10.0.0.1", {5, false}));
  auto created = RunSync(unchecked.Create(std::move(*ticket), "hello", ""));
  ASSERT_TRUE(created.ok());
  EXPECT_FALSE(
      RunSync(meta_impl_->Get(created->id, admission::Deadline::Never()))->body_sha256.has_value());
  cache.Erase(created->id);
  blobs_.damage = [](std::string& body) { body.clear(); };
  auto read = RunSync(unchecked.Read(FixedClient(), created->id.view()));
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read->body, "");
}

// ---- creates whose insert answer was lost -------------------------------------------------------

TEST_F(PasteServiceTest, LostInsertAnswerOfARowThatLandedIsACreatedPaste) {
  meta_.lose_insert_answer = true;
  auto created = TryCreate("hello");
  ASSERT_TRUE(created.ok()) << created.error().message;
  EXPECT_GE(meta_.gets.load(), 1);  // checked by id before answering
  meta_.lose_insert_answer = false;
  cache_.Erase(created->id);
  auto read = Read(created->id.view());
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read->body, "hello");
  EXPECT_TRUE(RunSync(service_.Delete(created->id.view(), created->delete_token)).ok());
  EXPECT_EQ(
      metrics_.GetCounter("sluice_insert_outcome_unknown_total", "", {{"outcome", "confirmed"}})
          .value(),
      1u);
}

TEST_F(PasteServiceTest, LostInsertAnswerWithoutARowIsOutcomeUnknownAndKeepsTheBody) {
  meta_.lose_insert_answer = true;
  meta_.insert_lands = false;
  auto created = TryCreate("hello");
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(created.error().reason, "outcome_unknown");
  EXPECT_TRUE(created.error().retry_after_seconds.has_value());
  EXPECT_NE(created.error().message.find("may or may not"), std::string::npos);
  EXPECT_EQ(created.error().message.find("nothing was published"), std::string::npos);
  EXPECT_GE(meta_.gets.load(), 1);
  EXPECT_EQ(StoredRows(), 0u);
  EXPECT_EQ(StoredBodies(), 1u);  // not deleted while the outcome is unknown
}

TEST_F(PasteServiceTest, LostInsertAnswerThatCannotBeCheckedIsOutcomeUnknownNeverNothingPublished) {
  meta_.lose_insert_answer = true;
  meta_.fail_gets = true;
  auto created = TryCreate("hello");
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(created.error().reason, "outcome_unknown");
  EXPECT_EQ(created.error().message.find("nothing was published"), std::string::npos);
  EXPECT_EQ(StoredRows(), 1u);  // it did land: "nothing was published" would have been a lie
  EXPECT_EQ(StoredBodies(), 1u);
  EXPECT_EQ(metrics_.GetCounter("sluice_insert_outcome_unknown_total", "", {{"outcome", "unknown"}})
                .value(),
            1u);
}

TEST_F(PasteServiceTest, InsertTimeoutIsCheckedUnlessTheStatementNeverLeft) {
  Error timeout = MakeError(ErrorCode::kDeadlineExceeded, "no answer in time", "deadline_exceeded");
  meta_.insert_error = timeout;
  auto sent = TryCreate("hello");
  ASSERT_FALSE(sent.ok());
  EXPECT_EQ(sent.error().reason, "outcome_unknown");  // it may have run: looked for, not found
  EXPECT_GE(meta_.gets.load(), 1);
  const int gets = meta_.gets.load();
  timeout.never_sent = true;
  meta_.insert_error = timeout;
  auto unsent = TryCreate("hello");
  ASSERT_FALSE(unsent.ok());
  EXPECT_EQ(unsent.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(unsent.error().message.find("nothing was published"), std::string::npos);
  EXPECT_EQ(meta_.gets.load(), gets);  // nothing to check
}

TEST_F(PasteServiceTest, InsertThatSurelyFailedSaysNothingWasPublishedWithoutChecking) {
  meta_.fail = true;
  auto created = TryCreate("hello");
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.error().message.find("nothing was published"), std::string::npos);
  EXPECT_EQ(meta_.gets.load(), 0);
}

TEST_F(PasteServiceTest, HeadersAloneDecideLengthRequiredAndTooLarge) {
  EXPECT_EQ(service_.CheckCreateHeaders({std::nullopt, false}).error().code,
            ErrorCode::kLengthRequired);
  EXPECT_EQ(service_.CheckCreateHeaders({10, true}).error().code, ErrorCode::kLengthRequired);
  EXPECT_EQ(service_.CheckCreateHeaders({1'000'001, false}).error().code, ErrorCode::kTooLarge);
  EXPECT_TRUE(service_.CheckCreateHeaders({1'000'000, false}).ok());
  EXPECT_TRUE(service_.CheckCreateHeaders({1'000'100, false}, 1024).ok());
}

TEST(PasteCacheTest, EvictsLeastRecentlyUsedWithinItsByteBound) {
  PasteCache cache(16 * 4096);  // 16 shards of 4 KiB
  for (int i = 0; i < 200; ++i) {
    char id[24];
    std::snprintf(id, sizeof id, "c%011d", i);
    store::PasteMeta meta{*store::PasteId::Parse(id), 0, 1, 1000, {}, false, {}};
    cache.Put(CachedPaste{meta, std::make_shared<const std::string>(1000, 'x')});
  }
  EXPECT_LE(cache.bytes_used(), 16u * 4096u);
  EXPECT_GT(cache.entries(), 0u);
}

TEST(PasteCacheTest, TombstoneWinsOverARacingFill) {
  PasteCache cache(1 << 20);
  const auto id = *store::PasteId::Parse("tomb00000000");
  cache.MarkDeleted(id);
  cache.Put(CachedPaste{store::PasteMeta{id, 0, 1, 1, {}, false, {}},
                        std::make_shared<const std::string>("x")});
  EXPECT_FALSE(cache.Get(id).has_value());
}

// ---- singleflight: joiners of a fill in flight ride along ------------------------------------

// A blob store whose GETs wait until the test lets them go, so misses pile up on one fill.
class HeldBlobStore final : public store::BlobStore {
 public:
  explicit HeldBlobStore(store::BlobStore& inner) : inner_(inner) {}
  int gets = 0;

  boost::asio::awaitable<Status> Put(store::PasteId id, std::shared_ptr<const std::string> body,
                                     admission::Deadline d) override {
    return inner_.Put(id, std::move(body), d);
  }
  boost::asio::awaitable<Result<std::string>> Get(store::PasteId id,
                                                  admission::Deadline d) override {
    ++gets;
    auto waiting = asio_glue::AwaitCompletion<bool>(
        [this](asio_glue::Completion<bool> done) { held_.push_back(std::move(done)); });
    co_await std::move(waiting);
    auto got = inner_.Get(id, d);
    co_return co_await std::move(got);
  }
  boost::asio::awaitable<Status> Delete(store::PasteId id, admission::Deadline d) override {
    return inner_.Delete(id, d);
  }
  boost::asio::awaitable<Result<std::vector<store::BlobInfo>>> List(
      std::string after, size_t limit, admission::Deadline d) override {
    return inner_.List(std::move(after), limit, d);
  }
  size_t Held() const { return held_.size(); }
  void ReleaseAll() {
    auto held = std::move(held_);
    for (auto& done : held) done(true);
  }

 private:
  store::BlobStore& inner_;
  std::vector<asio_glue::Completion<bool>> held_;
};

TEST_F(PasteServiceTest, MissesThatJoinAFillInFlightSpendNoOriginReadBudget) {
  // A budget of 2 origin reads for the client: the leader spends one, 63 joiners none.
  AdmissionOptions tight = GenerousLimits();
  tight.ip_read = {0.001, 2};
  AdmissionControl admission{tight, clock_, metrics_};
  HeldBlobStore held{*blob_impl_};
  PasteCache cache{1 << 20};
  PasteService service{meta_, held, cache, admission, clock_, metrics_, ServiceOptions{}};
  const auto id = *store::PasteId::Parse("hot000000001");
  store::PasteMeta row{id, clock_.UnixSeconds(), clock_.UnixSeconds() + 3600, 3, {}, false, {}};
  ASSERT_TRUE(RunSync(meta_impl_->Insert(row, admission::Deadline::Never())).ok());
  ASSERT_TRUE(RunSync(blob_impl_->Put(id, std::make_shared<const std::string>("hot"),
                                      admission::Deadline::Never()))
                  .ok());

  boost::asio::io_context io;
  std::vector<std::optional<Result<CachedPaste>>> reads(64);
  FixedClient client;
  for (auto& out : reads) {
    boost::asio::co_spawn(
        io,
        [&service, &client, &out, id]() -> boost::asio::awaitable<void> {
          auto reading = service.Read(client, id.view());
          out.emplace(co_await std::move(reading));
        },
        boost::asio::detached);
  }
  io.poll();
  // One fill reached the body store; everyone else is waiting on it.
  ASSERT_EQ(held.gets, 1);
  ASSERT_EQ(held.Held(), 1u);
  held.ReleaseAll();
  io.restart();
  io.run();
  size_t served = 0;
  for (const auto& out : reads) {
    ASSERT_TRUE(out.has_value());
    if (out->ok()) {
      ++served;
      EXPECT_EQ(*(*out)->body, "hot");
    } else {
      ADD_FAILURE() << out->error().reason << ": " << out->error().message;
    }
  }
  EXPECT_EQ(served, 64u);
  EXPECT_EQ(held.gets, 1);
  EXPECT_EQ(metrics_.GetCounter("sluice_fills_shared_total", "", {}).value(), 63u);
  // The leader spent one unit of the budget of 2; the joiners none.
  for (const auto& bucket : service.Budgets(client.Key()).buckets) {
    if (bucket.name == "origin_get_ip") {
      EXPECT_NEAR(bucket.available, 1, 0.01);
    }
  }
}

// docs/overload.md, "Create", step 1b: from the declared length, before the body, and a delete
// frees its bytes at once.
TEST_F(PasteServiceTest, StorageQuotaRefusesFromTheDeclaredLengthAndADeleteFreesRoom) {
  ServiceOptions options;
  options.max_storage_bytes = 10;
  PasteService quota(meta_, blobs_, cache_, admission_, clock_, metrics_, options);
  auto admit = [&](uint64_t n) { return RunSync(quota.AdmitCreate("10.0.0.1", {n, false})); };
  auto first = admit(6);
  ASSERT_TRUE(first.ok()) << first.error().message;
  auto created = RunSync(quota.Create(std::move(*first), "123456", ""));
  ASSERT_TRUE(created.ok()) << created.error().message;
  EXPECT_EQ(quota.Storage().live_bytes, 6u);

  auto refused = admit(5);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInsufficientStorage);
  EXPECT_EQ(refused.error().reason, "storage_quota");
  EXPECT_TRUE(refused.error().retry_after_seconds.has_value());
  EXPECT_TRUE(admit(4).ok());  // exactly up to the quota passes

  ASSERT_TRUE(RunSync(quota.Delete(created->id.view(), created->delete_token)).ok());
  EXPECT_EQ(quota.Storage().live_bytes, 0u);
  EXPECT_TRUE(admit(10).ok());
  EXPECT_FALSE(admit(11).ok());
}

// docs/overload.md, "Create", step 4a: a create in flight holds its declared bytes from its
// admission, so of 20 admitted before any body arrives against a quota that fits 5, exactly 5 get
// through; what a create that ends without its row held comes back at once.
TEST_F(PasteServiceTest, CreatesInFlightReserveTheirBytesSoOnlyWhatFitsIsAdmitted) {
  ServiceOptions options;
  options.max_storage_bytes = 5 * 90 + 89;
  PasteService quota(meta_, blobs_, cache_, admission_, clock_, metrics_, options);
  auto admit = [&](int client, uint64_t bytes) {
    return RunSync(quota.AdmitCreate("10.0.1." + std::to_string(client), {bytes, false}));
  };
  std::vector<CreateTicket> in_flight;
  int refused = 0;
  for (int i = 0; i < 20; ++i) {
    auto ticket = admit(i, 90);
    if (ticket.ok()) {
      EXPECT_TRUE(ticket->reservation.held());
      in_flight.push_back(std::move(*ticket));
      continue;
    }
    ++refused;
    EXPECT_EQ(ticket.error().code, ErrorCode::kInsufficientStorage);
    EXPECT_EQ(ticket.error().reason, "storage_quota");
    EXPECT_TRUE(ticket.error().retry_after_seconds.has_value());
  }
  ASSERT_EQ(in_flight.size(), 5u);
  EXPECT_EQ(refused, 15);
  EXPECT_EQ(metrics_.GetCounter("sluice_storage_quota_refusals_total", "", {}).value(), 15u);

  // One body never arrives (the session answers 408 and drops the ticket); one is not text.
  in_flight.pop_back();
  auto bad = RunSync(quota.Create(std::move(in_flight.back()), std::string(90, '\xff'), ""));
  in_flight.pop_back();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().reason, "invalid_utf8");
  // Their room is free again: two more fit, a third does not.
  for (int i = 20; i < 22; ++i) {
    auto ticket = admit(i, 90);
    ASSERT_TRUE(ticket.ok()) << ticket.error().message;
    in_flight.push_back(std::move(*ticket));
  }
  EXPECT_FALSE(admit(22, 90).ok());
  for (CreateTicket& ticket : in_flight) {
    auto created = RunSync(quota.Create(std::move(ticket), std::string(90, 'a'), ""), clock_);
    ASSERT_TRUE(created.ok()) << created.error().message;
  }
  // The five are live now, their reservations taken: the rest of the quota, and no more.
  EXPECT_EQ(quota.Storage().live_bytes, 450u);
  EXPECT_EQ(*RunSync(meta_impl_->LiveBytes(admission::Deadline::Never())), 450u);
  EXPECT_FALSE(admit(30, 90).ok());
  EXPECT_TRUE(admit(31, 89).ok());
}

// docs/overload.md, "Create": a create the reservation finds over the quota is refused after the
// rate limits took its tokens, and gives them back, as the quota check before them spends none.
// The client's burst of 2 and the tier's of 3 would turn the third refusal into a 429 otherwise;
// each way the tokens may have been taken (this process's buckets, the shared store, the local
// share while the store is silent) is refunded.
TEST_F(PasteServiceTest, ACreateTheReservationRefusesGivesItsTokensBack) {
  enum class Limits { kLocal, kShared, kSharedSilent };
  for (Limits limits : {Limits::kLocal, Limits::kShared, Limits::kSharedSilent}) {
    SCOPED_TRACE(static_cast<int>(limits));
    AdmissionOptions tight = GenerousLimits();
    tight.ip_create_count = {0.001, 2};
    tight.global_create_count = {0.001, 3};
    tight.local_share_slack = 1.0;
    std::unique_ptr<store::SharedState> memory = store::MakeMemorySharedState(clock_);
    testing::FaultySharedState shared(*memory);
    if (limits == Limits::kSharedSilent) shared.mode = testing::FaultySharedState::Mode::kDown;
    MetricsRegistry metrics;
    AdmissionControl admission(tight, clock_, metrics,
                               limits == Limits::kLocal ? nullptr : &shared);
    ServiceOptions options;
    options.max_storage_bytes = 100;
    PasteService quota(meta_, blobs_, cache_, admission, clock_, metrics, options);
    // A local share starts empty with a shared store (AdmissionControl::NoteCreateAnswered):
    // time enough to fill its burst, and no more.
    if (limits == Limits::kSharedSilent) clock_.Advance(std::chrono::hours(1));

    auto holder = RunSync(quota.AdmitCreate("10.0.2.1", {90, false}));
    ASSERT_TRUE(holder.ok()) << holder.error().message;
    for (int i = 0; i < 5; ++i) {
      auto refused = RunSync(quota.AdmitCreate("10.0.2.2", {90, false}));
      ASSERT_FALSE(refused.ok());
      EXPECT_EQ(refused.error().reason, "storage_quota") << "refusal " << i;
    }
    // The room comes back with the holder's ticket; the refused client's burst is whole.
    { CreateTicket dropped = std::move(*holder); }
    for (int i = 0; i < 2; ++i) {
      auto admitted = RunSync(quota.AdmitCreate("10.0.2.2", {40, false}));
      ASSERT_TRUE(admitted.ok()) << admitted.error().reason;
    }
    auto over = RunSync(quota.AdmitCreate("10.0.2.2", {1, false}));
    ASSERT_FALSE(over.ok());
    if (limits == Limits::kSharedSilent) {
      // Per-client limits are open while the store is silent: the tier's share decides.
      EXPECT_EQ(over.error().reason, "global_count");
    } else {
      EXPECT_EQ(over.error().reason, "ip_create_count");
    }
  }
}

// A store that cannot take the reservation refuses the create (503, its slot given back) rather
// than let it past a quota nobody checked; without a quota nothing is reserved at all.
TEST_F(PasteServiceTest, AStoreThatCannotReserveRefusesTheCreate) {
  ServiceOptions options;
  options.max_storage_bytes = 1000;
  PasteService quota(meta_, blobs_, cache_, admission_, clock_, metrics_, options);
  meta_.fail = true;
  auto refused = RunSync(quota.AdmitCreate("10.0.0.1", {10, false}));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(refused.error().retry_after_seconds.has_value());
  EXPECT_EQ(quota.Budgets("10.0.0.1").create_slots.in_use, 0);
  meta_.fail = false;
  EXPECT_TRUE(RunSync(quota.AdmitCreate("10.0.0.1", {10, false})).ok());

  const int before = meta_.reservations.load();
  ASSERT_TRUE(TryCreate("no quota here").ok());
  EXPECT_EQ(meta_.reservations.load(), before);
}

// ---- creates on a store that keeps bodies beside their rows (the embedded one) -----------------

// A fresh folder, removed with everything in it.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    char name[] = "/tmp/sluice-colocated-XXXXXX";
    path = ::mkdtemp(name);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

class ColocatedPasteServiceTest : public ::testing::Test {
 protected:
  static constexpr size_t kInlineMax = 64;
  ScratchDir dir_;
  boost::asio::thread_pool pool_{2};
  std::unique_ptr<store::MetaStore> meta_impl_ =
      store::MakeSqliteMetaStore(dir_.path / "meta.db", {&pool_, &pool_}, kInlineMax);
  std::unique_ptr<store::BlobStore> blob_impl_ = store::MakeTieredBlobStore(
      store::MakeSqliteMetaBodies(*meta_impl_),
      store::MakeFsBlobStore(dir_.path / "blobs", {&pool_, &pool_}), kInlineMax);
  FaultyMetaStore meta_{*meta_impl_};
  FaultyBlobStore blobs_{*blob_impl_};
  PasteCache cache_{1 << 20};
  // Real time: the SQLite stores answer from their own threads, which a manual clock's RunSync
  // takes for a hang. Nothing here asserts a duration.
  const Clock& clock_ = SystemClock::Instance();
  MetricsRegistry metrics_;
  AdmissionControl admission_{GenerousLimits(), clock_, metrics_};
  PasteService service_{meta_, blobs_, cache_, admission_, clock_, metrics_, ServiceOptions{}};

  Result<CreatedPaste> TryCreate(std::string body) {
    auto ticket = RunSync(service_.AdmitCreate("10.0.0.1", {body.size(), false}));
    if (!ticket.ok()) return ticket.error();
    return RunSync(service_.Create(std::move(*ticket), std::move(body), ""));
  }
  std::string ReadBack(const store::PasteId& id) {
    cache_.Erase(id);
    struct FixedClient final : ClientKeySource {
      std::string Key() const override { return "10.0.0.1"; }
    };
    auto read = RunSync(service_.Read(FixedClient(), id.view()));
    return read.ok() ? *read->body : "error: " + read.error().message;
  }
  Result<std::string> StoredBody(const store::PasteId& id) {
    return RunSync(blob_impl_->Get(id, admission::Deadline::Never()));
  }
};

TEST_F(ColocatedPasteServiceTest, ASmallPasteIsOneCallWithItsRowAndNoPut) {
  auto created = TryCreate("beside its row");
  ASSERT_TRUE(created.ok()) << created.error().message;
  EXPECT_EQ(meta_.inserts_with_body.load(), 1);
  EXPECT_EQ(blobs_.calls.load(), 0);  // no PUT
  EXPECT_EQ(ReadBack(created->id), "beside its row");
  EXPECT_FALSE(std::filesystem::exists(dir_.path / "blobs" / created->id.str().substr(0, 2) /
                                       created->id.str()));
}

TEST_F(ColocatedPasteServiceTest, ALargePasteIsAPutToTheFilesThenTheRow) {
  const std::string large(kInlineMax + 1, 'x');
  auto created = TryCreate(large);
  ASSERT_TRUE(created.ok()) << created.error().message;
  EXPECT_EQ(meta_.inserts_with_body.load(), 0);
  EXPECT_EQ(blobs_.calls.load(), 1);
  EXPECT_TRUE(std::filesystem::exists(dir_.path / "blobs" / created->id.str().substr(0, 2) /
                                      created->id.str()));
  EXPECT_EQ(ReadBack(created->id), large);
}

TEST_F(ColocatedPasteServiceTest, AFailedCommitIs503AndLeavesNeitherRowNorBody) {
  meta_.fail = true;
  auto created = TryCreate("never stored");
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(created.error().retry_after_seconds.has_value());
  meta_.fail = false;
  auto listed = RunSync(blob_impl_->List("", 10, admission::Deadline::Never()));
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

TEST_F(ColocatedPasteServiceTest, ALostAnswerOfACommitThatLandedIsACreatedPaste) {
  meta_.lose_insert_answer = true;
  auto created = TryCreate("landed");
  ASSERT_TRUE(created.ok()) << created.error().message;
  EXPECT_GE(meta_.gets.load(), 1);  // checked by id before answering
  meta_.lose_insert_answer = false;
  EXPECT_EQ(ReadBack(created->id), "landed");
  EXPECT_EQ(*StoredBody(created->id), "landed");
}

TEST_F(ColocatedPasteServiceTest, ALostAnswerOfACommitThatDidNotLandIsOutcomeUnknown) {
  meta_.lose_insert_answer = true;
  meta_.insert_lands = false;
  auto created = TryCreate("lost");
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.error().reason, "outcome_unknown");
  auto listed = RunSync(blob_impl_->List("", 10, admission::Deadline::Never()));
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

// The sweep's bodies-then-rows on meta.db: a body beside its row is left to the purge, which
// deletes both in one transaction (one write of the row's page, not two); a body in the files
// goes first, as before, so a crash between the two steps leaves no orphan.
TEST_F(ColocatedPasteServiceTest, TheSweepLeavesABodyBesideItsRowToThePurgeAndDeletesAFileFirst) {
  auto small = TryCreate("beside its row");
  auto large = TryCreate(std::string(kInlineMax + 1, 'x'));
  ASSERT_TRUE(small.ok() && large.ok());
  const auto file = dir_.path / "blobs" / large->id.str().substr(0, 2) / large->id.str();
  ASSERT_TRUE(std::filesystem::exists(file));
  ASSERT_TRUE(RunSync(blob_impl_->DeleteManyBeforePurge({small->id, large->id},
                                                        admission::Deadline::Never()))
                  .ok());
  EXPECT_EQ(*StoredBody(small->id), "beside its row");
  EXPECT_FALSE(std::filesystem::exists(file));
  ASSERT_TRUE(
      RunSync(meta_impl_->Purge({small->id, large->id}, admission::Deadline::Never())).ok());
  auto gone = StoredBody(small->id);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
  auto listed = RunSync(blob_impl_->List("", 10, admission::Deadline::Never()));
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty()) << listed->size() << " bodies left after the purge";
}

}  // namespace
}  // namespace sluice::service

namespace sluice::service {
namespace {

// Who may create (PasteService::AdmitCreate, docs/admission.md "Who may create"): refused first,
// before any budget is spent, and a named creator keyed apart from its address.
class CreateAccessServiceTest : public ::testing::Test {
 protected:
  static AdmissionOptions OneCreatePerKey() {
    AdmissionOptions o = GenerousLimits();
    o.ip_create_count = {1e-6, 1};  // one create per key, and none refilled during the test
    return o;
  }
  static ServiceOptions Restricted(admission::CreateAccess mode, std::string text = {}) {
    ServiceOptions o;
    const std::vector<admission::Cidr> office = {*admission::Cidr::Parse("10.0.0.0/8")};
    o.create_access = {mode, std::make_shared<const admission::PrefixSet>(office)};
    o.create_access_text = std::move(text);
    return o;
  }

  std::unique_ptr<store::MetaStore> meta_ = store::MakeMemoryMetaStore();
  ManualClock clock_;
  std::unique_ptr<store::BlobStore> blobs_ = store::MakeMemoryBlobStore(&clock_);
  PasteCache cache_{1 << 20};
  MetricsRegistry metrics_;
  AdmissionControl admission_{OneCreatePerKey(), clock_, metrics_};
};

TEST_F(CreateAccessServiceTest, ARefusedCreatorIsToldTheOperatorsTextAndSpendsNothing) {
  PasteService service(*meta_, *blobs_, cache_, admission_, clock_, metrics_,
                       Restricted(admission::CreateAccess::kNetworks, "ask ops"));
  const admission::Creator outsider{"203.0.113.7", {}, {}};
  for (int i = 0; i < 3; ++i) {
    auto refused = RunSync(service.AdmitCreate(outsider, {1, false}));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::kPermissionDenied);
    EXPECT_EQ(refused.error().reason, "create_access_network");
    EXPECT_EQ(refused.error().message, "ask ops");
  }
  // The refusals took nothing of the key's one create: once let in, it still has it.
  service.Reconfigure(Restricted(admission::CreateAccess::kAnyone));
  EXPECT_TRUE(RunSync(service.AdmitCreate(outsider, {1, false})).ok());
}

TEST_F(CreateAccessServiceTest, ACredentialRefusalSaysWhatTheModeTakesWithoutTheOperatorsText) {
  PasteService service(*meta_, *blobs_, cache_, admission_, clock_, metrics_,
                       Restricted(admission::CreateAccess::kTokensOrNetworks));
  auto refused =
      RunSync(service.AdmitCreate(admission::Creator{"203.0.113.7", {}, {}}, {1, false}));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().reason, "create_access_credential");
  EXPECT_EQ(refused.error().message,
            DefaultCreateAccessText(admission::CreateAccess::kTokensOrNetworks));
  EXPECT_TRUE(
      RunSync(service.AdmitCreate(admission::Creator{"10.9.9.9", {}, {}}, {1, false})).ok());
}

TEST_F(CreateAccessServiceTest, ANamedCreatorHasItsOwnBudgetAndKeepsItsAddressForTheNetwork) {
  PasteService service(*meta_, *blobs_, cache_, admission_, clock_, metrics_,
                       Restricted(admission::CreateAccess::kTokens));
  const admission::Creator alice{"203.0.113.7", "alice", {}};
  auto ticket = RunSync(service.AdmitCreate(alice, {1, false}));
  ASSERT_TRUE(ticket.ok());
  EXPECT_EQ(ticket->client_key, "user:alice");
  EXPECT_EQ(ticket->address_key, "203.0.113.7");
  // alice's one create is spent; bob behind the same address has his own.
  EXPECT_EQ(RunSync(service.AdmitCreate(alice, {1, false})).error().reason, "ip_create_count");
  EXPECT_TRUE(
      RunSync(service.AdmitCreate(admission::Creator{"203.0.113.7", "bob", {}}, {1, false})).ok());
  // The paste records the network it came from, not the name.
  auto created = RunSync(service.Create(std::move(*ticket), "x", ""), clock_);
  ASSERT_TRUE(created.ok());
  auto row = RunSync(meta_->Get(created->id, admission::Deadline::Never()));
  ASSERT_TRUE(row.ok());
  EXPECT_EQ(row->creator_network,
            admission::PackNetwork("203.0.113.7", ServiceOptions{}.creator_networks));
}

}  // namespace
}  // namespace sluice::service

namespace sluice::service {
namespace {

// The read-only window of a cutover (ServiceOptions::read_only, docs/scale-out.md): every write is
// refused first, spending nothing, and reads go on.
class ReadOnlyWindowServiceTest : public CreateAccessServiceTest {
 protected:
  static ServiceOptions Window(bool on) {
    ServiceOptions o;
    o.read_only = on;
    o.read_only_retry_after = std::chrono::seconds(45);
    return o;
  }
  struct Reader final : ClientKeySource {
    std::string Key() const override { return "10.0.0.1"; }
  };
  static void ExpectReadOnly(const Status& s) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
    EXPECT_EQ(s.error().reason, "read_only");
    EXPECT_EQ(s.error().retry_after_seconds, 45);
  }
};

TEST_F(ReadOnlyWindowServiceTest, WritesAreRefusedFirstAndSpendNothingWhileReadsGoOn) {
  PasteService service(*meta_, *blobs_, cache_, admission_, clock_, metrics_, Window(false));
  auto ticket = RunSync(service.AdmitCreate("10.0.0.1", {5, false}));
  ASSERT_TRUE(ticket.ok());
  auto made = RunSync(service.Create(std::move(*ticket), "plain", ""), clock_);
  ASSERT_TRUE(made.ok());
  // The key's one create (OneCreatePerKey) is spent; another key's is kept for after the window.
  service.Reconfigure(Window(true));
  for (int i = 0; i < 3; ++i) {
    auto refused = RunSync(service.AdmitCreate("10.0.0.2", {5, false}));
    ExpectReadOnly(refused.ok() ? Ok() : Status(refused.error()));
  }
  ExpectReadOnly(RunSync(service.Delete(made->id.str(), made->delete_token)));
  auto claim = RunSync(service.Claim(Reader(), made->id.str()));
  ExpectReadOnly(claim.ok() ? Ok() : Status(claim.error()));
  EXPECT_TRUE(RunSync(service.Read(Reader(), made->id.str())).ok());
  EXPECT_TRUE(service.options()->read_only);

  service.SetReadOnly(false);
  EXPECT_TRUE(RunSync(service.AdmitCreate("10.0.0.2", {5, false})).ok());
  EXPECT_TRUE(RunSync(service.Delete(made->id.str(), made->delete_token)).ok());
}

// A create refused at a full cap may free a slot (the edge cuts the slowest body) and is asked for
// the slot once more: the counter holds one refusal per create answered 503, none for one the
// freed slot admitted, and a proof of work spent on the first ask is not asked for again (it would
// be refused as replayed). A CI run saw 221 rejections counted for 220 creates answered 503.
class FullCapServiceTest : public ::testing::Test {
 protected:
  static AdmissionOptions OneSlot() {
    AdmissionOptions o = GenerousLimits();
    o.create_slots = 1;
    o.solver_share = 0.5;
    return o;
  }
  uint64_t CreateSlotsRefused() {
    return metrics_
        .GetCounter("sluice_admission_rejections_total", "", {{"reason", "create_slots"}})
        .value();
  }
  std::unique_ptr<store::MetaStore> meta_ = store::MakeMemoryMetaStore();
  std::unique_ptr<store::BlobStore> blobs_ = store::MakeMemoryBlobStore(&clock_);
  PasteCache cache_{1 << 20};
  ManualClock clock_;
  MetricsRegistry metrics_;
  AdmissionControl admission_{OneSlot(), clock_, metrics_};
  PasteService service_{*meta_, *blobs_, cache_, admission_, clock_, metrics_, ServiceOptions{}};
  ProofOfWork pow_{"full-cap-test-key-0123456789", ProofOfWorkOptions{}, clock_};
};

TEST_F(FullCapServiceTest, OneRefusalIsCountedPerCreateAndAFreedSlotAdmitsASolverOnce) {
  service_.UseProofOfWork(&pow_, metrics_);
  Result<CreateTicket> held = RunSync(service_.AdmitCreate("10.0.0.9", {5, false}));
  ASSERT_TRUE(held.ok());
  std::optional<CreateTicket> holder(std::move(*held));
  const uint64_t before = CreateSlotsRefused();

  // Nothing to free: one refusal, counted once.
  int asked = 0;
  const FreeCreateSlot nothing = [&asked](bool own_network) -> boost::asio::awaitable<bool> {
    EXPECT_FALSE(own_network);
    ++asked;
    co_return false;
  };
  auto refused = RunSync(service_.AdmitCreate("10.0.0.1", {5, false}, 0, &nothing));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().reason, "create_slots");
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(CreateSlotsRefused(), before + 1);

  // Freed, as it said, but taken again before the second ask: still one refusal.
  const FreeCreateSlot claims_in_vain = [](bool) -> boost::asio::awaitable<bool> {
    co_return true;
  };
  refused = RunSync(service_.AdmitCreate("10.0.0.1", {5, false}, 0, &claims_in_vain));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().reason, "create_slots");
  EXPECT_EQ(CreateSlotsRefused(), before + 2);

  // Freed for real: a solver's create is admitted on its one proof, and nothing is counted.
  const PowChallenge challenge = pow_.Issue(500);
  const std::string proof = PowPayload(challenge, SolvePow(challenge).value_or(0));
  const FreeCreateSlot frees = [&holder](bool) -> boost::asio::awaitable<bool> {
    holder.reset();
    co_return true;
  };
  auto admitted = RunSync(service_.AdmitCreate("10.0.0.1", {5, false, proof}, 0, &frees));
  ASSERT_TRUE(admitted.ok()) << admitted.error().reason;
  EXPECT_FALSE(holder.has_value());
  EXPECT_EQ(CreateSlotsRefused(), before + 2);
  EXPECT_EQ(
      metrics_.GetCounter("sluice_pow_challenges_total", "", {{"outcome", "replayed"}}).value(),
      0u);
}

}  // namespace
}  // namespace sluice::service
