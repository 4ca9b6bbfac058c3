#include "sluice/store/fault_injection.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>

#include "../../support/faulty_stores.h"
#include "../../support/run_sync.h"
#include "sluice/store/backends.h"

namespace sluice::store {
namespace {

using sluice::testing::FaultyBlobStore;
using sluice::testing::FaultyMetaStore;
using sluice::testing::RunSync;

namespace asio = boost::asio;
using namespace std::chrono_literals;

// A line of the /metrics text, whole: "name{labels} value".
::testing::AssertionResult HasLine(const std::string& text, const std::string& line) {
  if (("\n" + text).find("\n" + line + "\n") != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no line '" << line << "' in:\n" << text;
}

PasteId Id(std::string_view text = "abcdefghijkl") { return *PasteId::Parse(text); }

admission::Deadline Never() { return admission::Deadline::Never(); }

FaultPlan MustParse(std::string_view text) {
  auto plan = FaultPlan::Parse(text);
  EXPECT_TRUE(plan.ok()) << plan.error().message;
  return plan.ok() ? *plan : FaultPlan();
}

// ---- FaultPlan ---------------------------------------------------------------------------------

TEST(FaultPlanTest, ParsesEveryKindOfRule) {
  const FaultPlan plan = MustParse(
      "blob.put:latency=2s; meta.get:latency=10ms..50ms@0.5; meta.*:refuse; blob.get:error@0.1; "
      "meta.insert:hang");
  ASSERT_EQ(plan.rules().size(), 5u);
  const auto& r = plan.rules();
  EXPECT_EQ(r[0].target, "blob.put");
  EXPECT_EQ(r[0].kind, FaultRule::Kind::kLatency);
  EXPECT_EQ(r[0].min_latency, 2s);
  EXPECT_EQ(r[0].max_latency, 2s);
  EXPECT_EQ(r[0].probability, 1.0);
  EXPECT_EQ(r[1].target, "meta.get");
  EXPECT_EQ(r[1].min_latency, 10ms);
  EXPECT_EQ(r[1].max_latency, 50ms);
  EXPECT_EQ(r[1].probability, 0.5);
  EXPECT_EQ(r[2].target, "meta.*");
  EXPECT_EQ(r[2].kind, FaultRule::Kind::kRefuse);
  EXPECT_EQ(r[3].kind, FaultRule::Kind::kError);
  EXPECT_EQ(r[3].probability, 0.1);
  EXPECT_EQ(r[4].target, "meta.insert");
  EXPECT_EQ(r[4].kind, FaultRule::Kind::kHang);
}

TEST(FaultPlanTest, ToStringRoundTrips) {
  const std::string text =
      "blob.put:latency=2s; meta.get:latency=10ms..50ms@0.5; meta.*:refuse; blob.get:error@0.1; "
      "meta.insert:hang; *:latency=1500us@0.25";
  const FaultPlan plan = MustParse(text);
  EXPECT_EQ(plan.ToString(), text);
  EXPECT_EQ(MustParse(plan.ToString()).ToString(), text);
}

TEST(FaultPlanTest, ToStringIsCanonicalWhateverTheSpacing) {
  EXPECT_EQ(MustParse("  blob.list : latency = 1000ms ;; meta.sweep:error @ 1 ; ").ToString(),
            "blob.list:latency=1s; meta.sweep:error");
}

TEST(FaultPlanTest, EmptyTextIsAPlanWithNoRules) {
  EXPECT_TRUE(MustParse("").empty());
  EXPECT_TRUE(MustParse(" ; ;").empty());
  EXPECT_EQ(MustParse("").ToString(), "");
}

TEST(FaultPlanTest, RejectsBadText) {
  for (const char* bad : {
           "blob.put:explode",               // unknown kind
           "blob.put:latency",               // latency without a duration
           "blob.put:latency=",              // empty duration
           "blob.put:latency=2parsecs",      // bad unit
           "blob.put:latency=2",             // no unit
           "blob.put:latency=50ms..10ms",    // backwards range
           "blob.put:latency=1s..",          // half a range
           "blob.put:error@1.5",             // probability above 1
           "blob.put:error@-0.1",            // below 0
           "blob.put:error@often",           // not a number
           "blob.put:error@",                // missing
           "blob.push:error",                // unknown target
           "bucket.*:error",                 // unknown wildcard
           "blob.put",                       // no action
           "blob.put:error; meta.get:nope",  // one bad rule spoils the plan
       }) {
    auto plan = FaultPlan::Parse(bad);
    EXPECT_FALSE(plan.ok()) << bad;
    if (!plan.ok()) {
      EXPECT_EQ(plan.error().code, ErrorCode::kInvalidArgument) << bad;
      EXPECT_FALSE(plan.error().message.empty()) << bad;
    }
  }
}

TEST(FaultPlanTest, WildcardsMatchTheirFamily) {
  const FaultPlan plan = MustParse("meta.*:error; *:refuse; blob.get:hang");
  const auto& r = plan.rules();
  EXPECT_TRUE(r[0].Matches("meta.outbox"));
  EXPECT_TRUE(r[0].Matches("meta.insert"));
  EXPECT_FALSE(r[0].Matches("blob.get"));
  EXPECT_TRUE(r[1].Matches("blob.list"));
  EXPECT_TRUE(r[1].Matches("meta.sweep"));
  EXPECT_TRUE(r[2].Matches("blob.get"));
  EXPECT_FALSE(r[2].Matches("blob.put"));
}

// ---- FaultInjector and the decorators ----------------------------------------------------------

class FaultInjectorTest : public ::testing::Test {
 protected:
  MetricsRegistry metrics_;
  std::unique_ptr<BlobStore> blob_impl_ = MakeMemoryBlobStore();
  std::unique_ptr<MetaStore> meta_impl_ = MakeMemoryMetaStore();
  FaultyBlobStore inner_blobs_{*blob_impl_};  // counts the calls that got through
  FaultyMetaStore inner_meta_{*meta_impl_};
  FaultInjector injector_{metrics_, {}, /*seed=*/42};
  std::unique_ptr<BlobStore> blobs_ = MakeFaultInjectingBlobStore(inner_blobs_, injector_);
  std::unique_ptr<MetaStore> meta_ = MakeFaultInjectingMetaStore(inner_meta_, injector_);

  Status Put(std::string body = "hello") {
    auto op = blobs_->Put(Id(), std::make_shared<const std::string>(std::move(body)), Never());
    return RunSync(std::move(op));
  }
  std::string Metrics() { return metrics_.Render(); }
};

TEST_F(FaultInjectorTest, NoRulesPassEveryCallThrough) {
  ASSERT_TRUE(Put().ok());
  auto body = RunSync(blobs_->Get(Id(), Never()));
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(*body, "hello");
  EXPECT_EQ(inner_blobs_.calls, 2);
}

TEST_F(FaultInjectorTest, RefuseIsANeverSentUnavailableAndSkipsTheInnerStore) {
  injector_.SetPlan(MustParse("blob.put:refuse"));
  Status s = Put();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(s.error().reason, "connection_refused");
  EXPECT_TRUE(s.error().never_sent);
  EXPECT_EQ(inner_blobs_.calls, 0);
}

TEST_F(FaultInjectorTest, ErrorIsAnUnavailableThatMayHaveBeenSent) {
  injector_.SetPlan(MustParse("meta.get:error"));
  auto row = RunSync(meta_->Get(Id(), Never()));
  ASSERT_FALSE(row.ok());
  EXPECT_EQ(row.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(row.error().reason, "injected_error");
  EXPECT_FALSE(row.error().never_sent);
  EXPECT_EQ(inner_meta_.calls, 0);
}

TEST_F(FaultInjectorTest, RulesTouchOnlyTheirTargets) {
  injector_.SetPlan(MustParse("meta.*:error"));
  EXPECT_TRUE(Put().ok());
  EXPECT_FALSE(RunSync(meta_->DueOutbox(0, 10, Never())).ok());
  EXPECT_FALSE(RunSync(meta_->Existing({Id()}, Never())).ok());
  EXPECT_EQ(inner_blobs_.calls, 1);
  EXPECT_EQ(inner_meta_.calls, 0);
}

TEST_F(FaultInjectorTest, ProbabilityZeroNeverFiresAndOneAlwaysDoes) {
  injector_.SetPlan(MustParse("blob.put:error@0"));
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(Put().ok());
  injector_.SetPlan(MustParse("blob.put:error@1"));
  for (int i = 0; i < 200; ++i) ASSERT_FALSE(Put().ok());
  EXPECT_EQ(inner_blobs_.calls, 200);
}

TEST_F(FaultInjectorTest, ProbabilityInBetweenFiresSometimes) {
  injector_.SetPlan(MustParse("blob.put:error@0.5"));
  int failed = 0;
  for (int i = 0; i < 400; ++i) failed += Put().ok() ? 0 : 1;
  EXPECT_GT(failed, 0);
  EXPECT_LT(failed, 400);
  EXPECT_EQ(inner_blobs_.calls, 400 - failed);
}

TEST_F(FaultInjectorTest, RefuseWinsOverALatencyAndIsNotDelayed) {
  // A one-hour latency before a refusal: if the latency were waited, RunSync would not return.
  injector_.SetPlan(MustParse("blob.put:latency=1h; blob.put:refuse"));
  Status s = Put();
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.error().never_sent);
}

// Starts a Put through the decorator on `io` and reports when it finishes.
void SpawnPut(asio::io_context& io, BlobStore& blobs, std::optional<Status>& done) {
  asio::co_spawn(
      io,
      [&blobs, &done]() -> asio::awaitable<void> {
        auto op = blobs.Put(Id(), std::make_shared<const std::string>("late"),
                            admission::Deadline::Never());
        Status s = co_await std::move(op);
        done.emplace(std::move(s));
      },
      asio::detached);
}

TEST_F(FaultInjectorTest, LatencyIsWaitedOnTheCallersExecutor) {
  injector_.SetPlan(MustParse("blob.put:latency=1h"));
  asio::io_context io;
  std::optional<Status> done;
  SpawnPut(io, *blobs_, done);
  io.run_for(50ms);
  EXPECT_FALSE(done.has_value()) << "the call must wait out the injected latency";
  EXPECT_EQ(inner_blobs_.calls, 0);
  io.stop();
}

TEST_F(FaultInjectorTest, WithoutALatencyTheSameCallCompletes) {
  asio::io_context io;
  std::optional<Status> done;
  SpawnPut(io, *blobs_, done);
  io.run_for(5s);  // returns as soon as the call is done
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(done->ok());
}

TEST_F(FaultInjectorTest, ShortLatencyThenTheCallGoesThrough) {
  injector_.SetPlan(MustParse("blob.put:latency=1ms..2ms"));
  EXPECT_TRUE(Put().ok());
  EXPECT_EQ(inner_blobs_.calls, 1);
  EXPECT_TRUE(
      HasLine(Metrics(), "sluice_faults_injected_total{target=\"blob.put\",kind=\"latency\"} 1"));
}

TEST_F(FaultInjectorTest, HangHoldsTheCallUntilThePlanIsReplaced) {
  injector_.SetPlan(MustParse("blob.put:hang"));
  asio::io_context io;
  std::optional<Status> done;
  SpawnPut(io, *blobs_, done);
  io.run_for(50ms);
  EXPECT_FALSE(done.has_value());
  EXPECT_EQ(inner_blobs_.calls, 0);

  injector_.SetPlan(FaultPlan());  // the dependency recovers: the stuck call lands, late
  io.restart();
  io.run_for(10s);  // returns as soon as the call is done
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(done->ok());
  EXPECT_EQ(inner_blobs_.calls, 1);
}

TEST_F(FaultInjectorTest, SetPlanReplacesTheRulesAtRuntime) {
  injector_.SetPlan(MustParse("blob.put:error"));
  EXPECT_FALSE(Put().ok());
  injector_.SetPlan(MustParse("blob.get:refuse"));
  EXPECT_EQ(injector_.plan().ToString(), "blob.get:refuse");
  EXPECT_TRUE(Put().ok());
  EXPECT_FALSE(RunSync(blobs_->Get(Id(), Never())).ok());
  injector_.SetPlan(FaultPlan());
  EXPECT_TRUE(RunSync(blobs_->Get(Id(), Never())).ok());
}

TEST_F(FaultInjectorTest, ABatchOfDeletesReachesTheStoreAsOneBatchAndMeetsARuleOnce) {
  const std::vector<PasteId> ids = {Id("aaaaaaaaaaaa"), Id("bbbbbbbbbbbb"), Id("cccccccccccc")};
  // The inner store fails any batch it is handed, counting one call; a decorator that split the
  // batch into Deletes would reach it three times, and they would succeed.
  inner_blobs_.slow_batches = true;
  Status many = RunSync(blobs_->DeleteMany(ids, Never()));
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.error().reason, "deadline_exceeded");
  Status before_purge = RunSync(blobs_->DeleteManyBeforePurge(ids, Never()));
  ASSERT_FALSE(before_purge.ok());
  EXPECT_EQ(before_purge.error().reason, "deadline_exceeded");
  EXPECT_EQ(inner_blobs_.calls, 2);

  injector_.SetPlan(MustParse("blob.delete:refuse"));
  Status refused = RunSync(blobs_->DeleteMany(ids, Never()));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().reason, "connection_refused");
  EXPECT_EQ(inner_blobs_.calls, 2);
  EXPECT_TRUE(HasLine(Metrics(), "sluice_store_calls_total{target=\"blob.delete\"} 3"));
}

TEST_F(FaultInjectorTest, MetricsShowItIsOnAndCountCallsAndFaults) {
  injector_.SetPlan(MustParse("blob.put:refuse@1; meta.get:error@0"));
  EXPECT_FALSE(Put().ok());
  EXPECT_FALSE(Put().ok());
  EXPECT_FALSE(RunSync(meta_->Get(Id(), Never())).ok());  // NotFound from the inner store
  const std::string text = Metrics();
  EXPECT_TRUE(HasLine(text, "sluice_fault_injection_enabled 1"));
  EXPECT_TRUE(HasLine(text, "sluice_fault_rules 2"));
  EXPECT_TRUE(HasLine(text, "sluice_store_calls_total{target=\"blob.put\"} 2"));
  EXPECT_TRUE(HasLine(text, "sluice_store_calls_total{target=\"meta.get\"} 1"));
  EXPECT_TRUE(HasLine(text, "sluice_faults_injected_total{target=\"blob.put\",kind=\"refuse\"} 2"));
  EXPECT_TRUE(HasLine(text, "sluice_faults_injected_total{target=\"meta.get\",kind=\"error\"} 0"));

  injector_.SetPlan(FaultPlan());
  EXPECT_TRUE(HasLine(Metrics(), "sluice_fault_rules 0"));
}

}  // namespace
}  // namespace sluice::store
