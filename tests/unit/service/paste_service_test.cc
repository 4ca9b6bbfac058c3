#include "sluice/service/paste_service.h"

#include <gtest/gtest.h>

#include "../../support/faulty_stores.h"
#include "../../support/run_sync.h"
#include "sluice/store/backends.h"
#include "sluice/worker/janitor.h"

namespace sluice::service {
namespace {

using testing::FaultyBlobStore;
using testing::FaultyMetaStore;
using testing::RunSync;

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

  static AdmissionOptions GenerousLimits() {
    AdmissionOptions o;
    o.ip_create_count = o.global_create_count = {1e6, 1e6};
    o.ip_create_bytes = o.global_create_bytes = {1e12, 1e12};
    o.ip_read = {1e6, 1e6};
    return o;
  }

  Result<CreatedPaste> TryCreate(std::string body, std::string_view ttl = "") {
    auto ticket = RunSync(service_.AdmitCreate("10.0.0.1", {body.size(), false}));
    if (!ticket.ok()) return ticket.error();
    return RunSync(service_.Create(std::move(*ticket), std::move(body), ttl));
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
    store::PasteMeta meta{*store::PasteId::Parse(id), 0, 1, 1000, {}, false};
    cache.Put(CachedPaste{meta, std::make_shared<const std::string>(1000, 'x')});
  }
  EXPECT_LE(cache.bytes_used(), 16u * 4096u);
  EXPECT_GT(cache.entries(), 0u);
}

TEST(PasteCacheTest, TombstoneWinsOverARacingFill) {
  PasteCache cache(1 << 20);
  const auto id = *store::PasteId::Parse("tomb00000000");
  cache.MarkDeleted(id);
  cache.Put(CachedPaste{store::PasteMeta{id, 0, 1, 1, {}, false},
                        std::make_shared<const std::string>("x")});
  EXPECT_FALSE(cache.Get(id).has_value());
}

}  // namespace
}  // namespace sluice::service
