// Abuse told apart from growth (docs/overload.md, "Abuse or growth"), the delete limit, and
// moderation's invalidation of the shared metadata cache (a dismissed paste is served again by
// every process, never 404 from a cached "deleted").
#include "sluice/service/abuse_watch.h"

#include <gtest/gtest.h>

#include "../../support/run_sync.h"
#include "sluice/service/moderation.h"
#include "sluice/service/paste_service.h"
#include "sluice/store/backends.h"

namespace sluice::service {
namespace {

using testing::RunSync;

AdmissionOptions Loose() {
  AdmissionOptions o;
  o.ip_create_count = {1, 3};  // at most 63 a minute per key
  o.global_create_count = {1e6, 1e6};
  o.ip_create_bytes = o.global_create_bytes = {1e12, 1e12};
  o.ip_read = {1e6, 1e6};
  o.ip_report = {1e6, 1e6};
  o.ip_delete = {0.001, 2};
  return o;
}

class AbuseWatchTest : public ::testing::Test {
 protected:
  Result<CreatedPaste> Create(const std::string& key, std::string body = "text") {
    auto ticket = RunSync(service_.AdmitCreate(key, {body.size(), false}));
    if (!ticket.ok()) return ticket.error();
    return RunSync(service_.Create(std::move(*ticket), std::move(body), ""), clock_);
  }
  static const AbuseRow* Find(const std::vector<AbuseRow>& rows, const std::string& name) {
    for (const auto& r : rows) {
      if (r.name == name) return &r;
    }
    return nullptr;
  }

  ManualClock clock_;
  MetricsRegistry metrics_;
  std::unique_ptr<store::MetaStore> meta_ = store::MakeMemoryMetaStore();
  std::unique_ptr<store::BlobStore> blobs_ = store::MakeMemoryBlobStore(&clock_);
  PasteCache cache_{1 << 20};
  AdmissionControl admission_{Loose(), clock_, metrics_};
  AbuseWatch abuse_{admission_, clock_, metrics_};
  Blocklist blocks_;
  PasteService service_{*meta_,   *blobs_,          cache_,  admission_, clock_,
                        metrics_, ServiceOptions{}, nullptr, &blocks_,   &abuse_};
};

TEST_F(AbuseWatchTest, CountsStoredCreatesAndTheRefusalsAboutTheClient) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Create("198.51.100.7").ok());
  for (int i = 0; i < 5; ++i) {
    auto refused = Create("198.51.100.7");
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
  }
  blocks_.Add(store::ClientBlock{"203.0.113.0/24", "test", 0, clock_.UnixSeconds() + 60});
  ASSERT_EQ(Create("203.0.113.5").error().code, ErrorCode::kPermissionDenied);
  ASSERT_TRUE(Create("192.0.2.1").ok());
  // Too large is the client's mistake, not a rate: not counted.
  ASSERT_FALSE(RunSync(service_.AdmitCreate("192.0.2.99", {5'000'000, false})).ok());

  const AbuseView full = abuse_.View();
  EXPECT_EQ(full.aggregates.window_seconds, 60);
  ASSERT_FALSE(full.top_keys.empty());
  EXPECT_EQ(full.top_keys.front().name, "198.51.100.7");
  EXPECT_EQ(full.top_keys.front().creates, 3u);
  EXPECT_EQ(full.top_keys.front().refusals, 5u);
  const AbuseRow* blocked = Find(full.top_keys, "203.0.113.5");
  ASSERT_NE(blocked, nullptr);
  EXPECT_EQ(blocked->refusals, 1u);
  EXPECT_EQ(Find(full.top_keys, "192.0.2.99"), nullptr);
  ASSERT_NE(Find(full.top_prefixes, "198.51.100.0/24"), nullptr);
  ASSERT_NE(Find(full.top_prefixes, "203.0.113.0/24"), nullptr);

  // Two keys created (a refused create spends nothing): both light, under a tenth of 63.
  ASSERT_EQ(full.aggregates.budget_use.size(), AbuseWatch::BudgetBounds().size() + 1);
  EXPECT_EQ(full.aggregates.budget_use[0], 2u);

  // Public: the same aggregates, which are all it has (no list to name anyone in).
  const AbuseAggregates shown = abuse_.Aggregates();
  EXPECT_EQ(shown.window_seconds, full.aggregates.window_seconds);
  EXPECT_EQ(shown.budget_use, full.aggregates.budget_use);
  EXPECT_EQ(shown.global_cap_saturation, full.aggregates.global_cap_saturation);

  // /metrics: the distribution as a histogram and the saturation, never a key.
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("# TYPE sluice_client_budget_use histogram"), std::string::npos);
  EXPECT_NE(text.find("sluice_client_budget_use_bucket{le=\"0.1\"} 2"), std::string::npos);
  EXPECT_NE(text.find("sluice_client_budget_use_count 2"), std::string::npos);
  EXPECT_NE(text.find("sluice_global_cap_saturation 0"), std::string::npos);
  EXPECT_EQ(text.find("198.51.100"), std::string::npos);
  EXPECT_EQ(text.find("203.0.113"), std::string::npos);
}

TEST_F(AbuseWatchTest, DeletesHaveALooseLimitOfTheirOwnBeforeAnyStoreCall) {
  auto p = Create("192.0.2.1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(RunSync(service_.Delete(p->id.view(), "wrong", "192.0.2.50")).error().code,
            ErrorCode::kNotFound);
  EXPECT_EQ(RunSync(service_.Delete(p->id.view(), "wrong", "192.0.2.50")).error().code,
            ErrorCode::kNotFound);
  Status third = RunSync(service_.Delete(p->id.view(), p->delete_token, "192.0.2.50"));
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(third.error().reason, "delete_rate");
  ASSERT_TRUE(third.error().retry_after_seconds.has_value());
  EXPECT_GE(*third.error().retry_after_seconds, 1);
  // Another client's budget is its own, and the paste is still there to delete.
  EXPECT_TRUE(RunSync(service_.Delete(p->id.view(), p->delete_token, "192.0.2.51")).ok());
}

// Two processes over one primary and one shared metadata cache (the in-memory SharedState standing
// in for Redis): a report withholds on A, B has the row cached, A's operator dismisses, and B
// serves the paste again at once instead of 404 from a cached tombstone.
TEST(ModerationSharedCacheTest, ADismissedPasteIsServedAgainByTheOtherProcess) {
  ManualClock clock;
  MetricsRegistry metrics_a, metrics_b;
  auto meta = store::MakeMemoryMetaStore();
  auto blobs = store::MakeMemoryBlobStore(&clock);
  auto shared = store::MakeMemorySharedState(clock);
  PasteCache cache_a{1 << 20, clock, std::chrono::seconds(5)};
  PasteCache cache_b{1 << 20, clock, std::chrono::seconds(5)};
  AdmissionControl admission_a{Loose(), clock, metrics_a, shared.get()};
  AdmissionControl admission_b{Loose(), clock, metrics_b, shared.get()};
  PasteService a{*meta, *blobs,    cache_a,          admission_a,
                 clock, metrics_a, ServiceOptions{}, shared.get()};
  PasteService b{*meta, *blobs,    cache_b,          admission_b,
                 clock, metrics_b, ServiceOptions{}, shared.get()};
  Blocklist blocks;
  ModerationOptions mo;
  mo.hide_threshold = 1;
  ModerationService moderation{*meta,  *blobs, cache_a, admission_a,
                               blocks, clock,  mo,      shared.get()};
  struct Client final : ClientKeySource {
    std::string Key() const override { return "192.0.2.1"; }
  } client;

  auto ticket = RunSync(a.AdmitCreate("192.0.2.1", {5, false}));
  ASSERT_TRUE(ticket.ok());
  auto created = RunSync(a.Create(std::move(*ticket), "hello", ""), clock);
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(RunSync(b.Read(client, created->id.view())).ok());  // b and the shared cache hold it

  auto receipt = RunSync(moderation.Report("198.51.100.1", created->id.view(), "spam", ""));
  ASSERT_TRUE(receipt.ok());
  ASSERT_TRUE(receipt->withheld);
  EXPECT_EQ(moderation.PendingReports(), 1);
  auto withheld = RunSync(b.Read(client, created->id.view()));
  ASSERT_FALSE(withheld.ok());
  EXPECT_EQ(withheld.error().code, ErrorCode::kWithheld);

  ASSERT_TRUE(RunSync(moderation.Dismiss(created->id.view(), "fine")).ok());
  EXPECT_EQ(moderation.PendingReports(), 0);
  auto cached = RunSync(shared->GetMeta(created->id, admission::Deadline::Never()));
  ASSERT_TRUE(cached.ok() && cached->has_value());
  EXPECT_FALSE((*cached)->deleted) << "moderation must not cache a tombstone";
  auto again = RunSync(b.Read(client, created->id.view()));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(*again->body, "hello");
  auto on_a = RunSync(a.Read(client, created->id.view()));
  ASSERT_TRUE(on_a.ok()) << on_a.error().message;
}

}  // namespace
}  // namespace sluice::service
