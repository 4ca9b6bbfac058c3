// The shared limiter and metadata cache, with the in-memory SharedState standing in for Redis and a
// fault-injecting wrapper standing in for a Redis that is down or slow. Two AdmissionControls over
// one SharedState are two app processes of one tier.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>

#include "../../support/faulty_shared_state.h"
#include "../../support/run_sync.h"
#include "sluice/service/admission_control.h"
#include "sluice/service/paste_service.h"
#include "sluice/store/backends.h"

namespace sluice::service {
namespace {

using testing::FaultySharedState;
using testing::RunSync;
using Mode = FaultySharedState::Mode;

class SharedAdmissionTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  MetricsRegistry metrics_a_;
  MetricsRegistry metrics_b_;
  std::unique_ptr<store::SharedState> memory_ = store::MakeMemorySharedState(clock_);
  FaultySharedState shared_{*memory_};

  static AdmissionOptions Tier() {
    AdmissionOptions o;
    o.ip_create_count = {1, 3};
    o.ip_create_bytes = {1e6, 1e6};
    o.global_create_count = {100, 10};
    o.global_create_bytes = {1e9, 1e9};
    o.create_slots = 100;
    o.create_slot_bytes = 1 << 20;
    o.processes = 2;
    o.local_share_slack = 1.0;
    return o;
  }
  static Result<CreateAdmission> Admit(AdmissionControl& a, std::string client) {
    return RunSync(a.AdmitCreate(std::move(client), 10));
  }
  // Creates i = 0..n-1 from client(i), alternating over the processes of `tier`, keeping what is
  // admitted in `held` as overlapping requests would (declare it after the AdmissionControls: a
  // permit goes back to its limiter). Every refusal must be `refusal`. Returns the admitted.
  static int AdmitMany(std::vector<AdmissionControl*> tier, int n,
                       const std::function<std::string(int)>& client, const std::string& refusal,
                       std::vector<CreateAdmission>& held) {
    int admitted = 0;
    for (int i = 0; i < n; ++i) {
      auto p = Admit(*tier[static_cast<size_t>(i) % tier.size()], client(i));
      if (p.ok()) {
        ++admitted;
        held.push_back(std::move(*p));
      } else {
        EXPECT_EQ(p.error().reason, refusal) << i;
      }
    }
    return admitted;
  }
  static std::string Numbered(const char* prefix, int i) { return prefix + std::to_string(i); }
  static double FailOpenGauge(const MetricsRegistry& m) {
    const std::string text = m.Render();
    const auto at = text.find("\nsluice_limiter_fail_open ");
    if (at == std::string::npos) return -1;
    return std::stod(text.substr(at + std::string("\nsluice_limiter_fail_open ").size()));
  }
};

TEST_F(SharedAdmissionTest, DecidingBudgetsAreTheTiersOnEveryProcessAndLocalWhenSilent) {
  AdmissionControl a(Tier(), clock_, metrics_a_, &shared_);
  AdmissionControl b(Tier(), clock_, metrics_b_, &shared_);
  ASSERT_TRUE(Admit(a, "10.0.0.1").ok());
  ASSERT_TRUE(Admit(a, "10.0.0.1").ok());
  auto bucket = [](const ClientBudgets& budgets, const std::string& name) {
    for (const auto& candidate : budgets.buckets) {
      if (candidate.name == name) return candidate;
    }
    ADD_FAILURE() << "no bucket " << name;
    return ClientBudgets::Bucket{};
  };
  // b admitted nothing for this client: its own bucket is full, the tier's holds 3 - 2.
  EXPECT_NEAR(bucket(b.Budgets("10.0.0.1"), "ip_create_count").available, 3, 1e-9);
  const ClientBudgets tier = RunSync(b.DecidingBudgets("10.0.0.1"));
  EXPECT_EQ(tier.source, ClientBudgets::Source::kSharedStore);
  EXPECT_NEAR(bucket(tier, "ip_create_count").available, 1, 1e-9);
  EXPECT_NEAR(bucket(tier, "global_count").available, 8, 1e-9);
  EXPECT_EQ(bucket(tier, "global_count").policy.burst, 10);  // the tier's cap, not b's share
  EXPECT_NEAR(bucket(tier, "origin_get_ip").available, Tier().ip_read.burst, 1e-9);
  // Reading spent nothing: the client still has its last create.
  EXPECT_TRUE(Admit(b, "10.0.0.1").ok());

  shared_.mode = Mode::kDown;
  const ClientBudgets silent = RunSync(b.DecidingBudgets("10.0.0.1"));
  EXPECT_EQ(silent.source, ClientBudgets::Source::kThisProcessSharedStoreSilent);
  EXPECT_NEAR(bucket(silent, "ip_create_count").available, 3, 1e-9);
  EXPECT_EQ(FailOpenGauge(metrics_b_), 0);  // a status read is not a decision
}

TEST_F(SharedAdmissionTest, AFloodOfBudgetReadsAsksTheSharedStoreAtMostFiftyTimesASecond) {
  AdmissionControl a(Tier(), clock_, metrics_a_, &shared_);
  const int calls_before = shared_.calls.load();
  int from_store = 0;
  for (int i = 0; i < 200; ++i) {
    const ClientBudgets b = RunSync(a.DecidingBudgets("10.0.0.9"));
    if (b.source == ClientBudgets::Source::kSharedStore) {
      ++from_store;
    } else {
      EXPECT_EQ(b.source, ClientBudgets::Source::kThisProcessPeeksSpent);
    }
  }
  EXPECT_EQ(from_store, 50);
  EXPECT_EQ(shared_.calls.load() - calls_before, 50);
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(RunSync(a.DecidingBudgets("10.0.0.9")).source, ClientBudgets::Source::kSharedStore);
}

TEST_F(SharedAdmissionTest, OneClientKeyHasOneBudgetAcrossProcesses) {
  AdmissionControl a(Tier(), clock_, metrics_a_, &shared_);
  AdmissionControl b(Tier(), clock_, metrics_b_, &shared_);
  std::vector<CreateAdmission> held;
  const auto one_client = [](int) { return std::string("10.0.0.1"); };
  // The burst of one key, not one burst per process.
  EXPECT_EQ(AdmitMany({&a, &b}, 6, one_client, "ip_create_count", held), 3);
  auto refused = Admit(a, "10.0.0.1");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(refused.error().reason, "ip_create_count");
  ASSERT_TRUE(refused.error().limit.has_value());
  EXPECT_EQ(refused.error().limit->quota, 3);
  EXPECT_GE(refused.error().retry_after_seconds.value_or(0), 1);
  EXPECT_TRUE(Admit(b, "10.0.0.2").ok());  // another key has its own budget
}

TEST_F(SharedAdmissionTest, GlobalCapIsTheTiersTotalWhenShared) {
  AdmissionControl a(Tier(), clock_, metrics_a_, &shared_);
  AdmissionControl b(Tier(), clock_, metrics_b_, &shared_);
  std::vector<CreateAdmission> held;
  const auto clients = [](int i) { return Numbered("10.0.1.", i); };
  EXPECT_EQ(AdmitMany({&a, &b}, 20, clients, "global_count", held), 10);
}

TEST_F(SharedAdmissionTest, StoreDownOpensPerClientLimitsAndSaysSo) {
  AdmissionControl a(Tier(), clock_, metrics_a_, &shared_);
  clock_.Advance(std::chrono::seconds(1));  // the local share refills from the start
  std::vector<CreateAdmission> held;
  EXPECT_EQ(FailOpenGauge(metrics_a_), 0);
  shared_.mode = Mode::kDown;
  const auto one_client = [](int) { return std::string("10.0.0.1"); };
  // Over the key's burst of 3, within the local share of 5.
  EXPECT_EQ(AdmitMany({&a}, 5, one_client, "", held), 5);
  EXPECT_TRUE(a.FailingOpen());
  EXPECT_EQ(FailOpenGauge(metrics_a_), 1);
  EXPECT_EQ(
      metrics_a_.GetCounter("sluice_shared_limit_decisions_total", "", {{"outcome", "fail_open"}})
          .value(),
      5u);
}

TEST_F(SharedAdmissionTest, SlowStoreFallsBackToTheLocalShareOfTheGlobalCap) {
  AdmissionControl a(Tier(), clock_, metrics_a_, &shared_);
  clock_.Advance(std::chrono::seconds(1));  // the local share refills from the start
  std::vector<CreateAdmission> held;
  shared_.mode = Mode::kSlow;
  const auto clients = [](int i) { return Numbered("10.0.2.", i); };
  // Global burst 10 over 2 processes, no slack.
  EXPECT_EQ(AdmitMany({&a}, 12, clients, "global_count", held), 5);
}

TEST_F(SharedAdmissionTest, StoreBackRestoresSharedLimits) {
  AdmissionControl a(Tier(), clock_, metrics_a_, &shared_);
  clock_.Advance(std::chrono::seconds(1));  // the local share refills from the start
  std::vector<CreateAdmission> held;
  const auto one_client = [](int) { return std::string("10.0.0.1"); };
  shared_.mode = Mode::kDown;
  EXPECT_EQ(AdmitMany({&a}, 4, one_client, "", held), 4);
  shared_.mode = Mode::kUp;
  // The shared bucket never saw the fail-open creates.
  EXPECT_EQ(AdmitMany({&a}, 5, one_client, "ip_create_count", held), 3);
  EXPECT_FALSE(a.FailingOpen());
  EXPECT_EQ(FailOpenGauge(metrics_a_), 0);
}

// A local share starts empty and holds only what refilled since the shared store last decided a
// create of this process: a process that was just answered, or just started, has no burst to
// spend the moment the store goes silent, only its rate.
TEST_F(SharedAdmissionTest, ASilentDecisionSpendsTheLocalShareAtItsRateNeverAFreshBurst) {
  AdmissionControl a(Tier(), clock_, metrics_a_, &shared_);  // share: 50/s, burst 5
  std::vector<CreateAdmission> held;
  const auto clients = [](int i) { return Numbered("10.0.4.", i); };
  shared_.mode = Mode::kSlow;
  EXPECT_EQ(AdmitMany({&a}, 3, clients, "global_count", held), 0);  // nothing refilled yet
  clock_.Advance(std::chrono::milliseconds(40));
  EXPECT_EQ(AdmitMany({&a}, 5, clients, "global_count", held), 2);  // 40 ms at 50/s
  clock_.Advance(std::chrono::seconds(10));
  shared_.mode = Mode::kUp;
  ASSERT_TRUE(Admit(a, "10.0.4.100").ok());  // answered: the share is empty again
  shared_.mode = Mode::kSlow;
  EXPECT_EQ(AdmitMany({&a}, 3, clients, "global_count", held), 0);
  clock_.Advance(std::chrono::milliseconds(20));
  EXPECT_EQ(AdmitMany({&a}, 3, clients, "global_count", held), 1);
}

// The fleet (4 processes, the default 350/s global cap, 600 creates/s offered), with
// Redis past its budget on every tenth call and for half a second in a row besides. Over every
// 10 s window the tier admits at most the shared budget (burst + rate x 10 s) plus each
// process's local share rate for the time it went unanswered: from the store's last answer to
// it until each of its silent decisions (a silent decision may spend only what refilled in that
// time). The old local share (full, and refilled whatever the store said) passed it by hundreds.
TEST_F(SharedAdmissionTest, AFleetAdmitsTheSharedBudgetPlusTheLocalRateForTheSilentTime) {
  constexpr int kProcesses = 4;
  constexpr int kOffered = 600;  // per second, round-robin over the processes
  constexpr int kSeconds = 20;
  AdmissionOptions o;  // the global cap's defaults: 350/s, burst 350, 10 MB/s
  o.ip_create_count = {1e6, 1e6};
  o.ip_create_bytes = {1e12, 1e12};
  o.processes = kProcesses;
  const double share_rate =
      o.global_create_count.rate_per_second * o.local_share_slack / kProcesses;
  std::vector<std::unique_ptr<MetricsRegistry>> registries;
  std::vector<std::unique_ptr<AdmissionControl>> fleet;
  for (int p = 0; p < kProcesses; ++p) {
    registries.push_back(std::make_unique<MetricsRegistry>());
    fleet.push_back(std::make_unique<AdmissionControl>(o, clock_, *registries.back(), &shared_));
  }
  clock_.Advance(std::chrono::seconds(5));  // every bucket full: the worst start
  const TimePoint start = clock_.Now();
  bool slow_now = false;
  shared_.slow_when = [&] { return slow_now; };

  struct Decision {
    double at;
    bool admitted;
  };
  std::vector<Decision> decisions;
  // Per process: when the store last answered it, and the spans from such an answer to the
  // last silent decision after it (the time its local share stood in).
  // A process's local share starts drained, as if answered when it was made (5 s before start).
  std::vector<double> last_answer(kProcesses, -5.0);
  std::vector<std::vector<std::pair<double, double>>> unanswered(kProcesses);
  const Duration step = std::chrono::nanoseconds(1'000'000'000 / kOffered);
  int silent = 0;
  for (int i = 0; i < kOffered * kSeconds; ++i) {
    const double t = ToSeconds(clock_.Now() - start);
    const int p = i % kProcesses;
    slow_now = i % 10 == 9 || (t >= 4.0 && t < 4.5);
    auto admitted = Admit(*fleet[p], Numbered("10.5.", i % 50'000));
    decisions.push_back({t, admitted.ok()});
    if (slow_now) {
      ++silent;
      auto& spans = unanswered[p];
      if (!spans.empty() && spans.back().first == last_answer[p]) {
        spans.back().second = t;
      } else {
        spans.emplace_back(last_answer[p], t);
      }
    } else {
      last_answer[p] = t;
    }
    clock_.Advance(step);
  }
  ASSERT_GT(silent, kOffered * kSeconds / 10);
  // Each process measures the same silence (sluice_limiter_silent_seconds_total), so an outside
  // test of the real binary can weigh its bound with it.
  for (int p = 0; p < kProcesses; ++p) {
    double measured = 0;
    for (const auto& [begin, end] : unanswered[p]) measured += end - begin;
    EXPECT_NEAR(fleet[p]->SilentSeconds(), measured, 1e-6) << "process " << p;
  }

  const double burst = o.global_create_count.burst;
  const double rate = o.global_create_count.rate_per_second;
  for (int from = 0; from + 10 <= kSeconds; ++from) {
    const double to = from + 10;
    int admitted = 0;
    for (const Decision& d : decisions) admitted += d.admitted && d.at >= from && d.at < to;
    double silent_time = 0;
    for (const auto& spans : unanswered) {
      for (const auto& [begin, end] : spans) {
        if (end >= from && begin < to) silent_time += end - begin;  // whole, if it touches
      }
    }
    const double bound = burst + rate * 10 + share_rate * silent_time;
    EXPECT_LE(admitted, bound) << "window [" << from << ", " << to << "): silent time "
                               << silent_time << " s";
    // And the shared budget itself is used: the rule costs silent decisions, not answered ones
    // (less a token at each edge of the window, where the bucket's refill is cut).
    EXPECT_GE(admitted, rate * 10 - 2) << "window [" << from << ", " << to << ")";
    if (from == 0) {
      std::printf("first 10 s: %d admitted, bound %.0f (silent time %.2f s, %d silent)\n", admitted,
                  bound, silent_time, silent);
    }
  }
}

TEST_F(SharedAdmissionTest, ShedCreateGivesItsSharedTokensBack) {
  AdmissionOptions o = Tier();
  o.ip_create_count = {1, 2};
  o.create_slots = 1;
  AdmissionControl a(o, clock_, metrics_a_, &shared_);
  {
    auto first = Admit(a, "10.0.0.1");
    ASSERT_TRUE(first.ok());
    auto shed = Admit(a, "10.0.0.1");
    ASSERT_FALSE(shed.ok());
    EXPECT_EQ(shed.error().reason, "create_slots");
    EXPECT_EQ(shared_.refunds.load(), 1);
  }
  // The shed create cost nothing: one token of the burst of two is still there.
  EXPECT_TRUE(Admit(a, "10.0.0.1").ok());
  EXPECT_FALSE(Admit(a, "10.0.0.1").ok());
}

TEST_F(SharedAdmissionTest, WithoutSharedStateTheGlobalCapIsThisProcesssWhole) {
  AdmissionControl a(Tier(), clock_, metrics_a_);  // processes = 2 means nothing alone
  std::vector<CreateAdmission> held;
  const auto clients = [](int i) { return Numbered("10.0.3.", i); };
  EXPECT_EQ(AdmitMany({&a}, 12, clients, "global_count", held), 10);
  EXPECT_EQ(FailOpenGauge(metrics_a_), -1);  // no shared store, no fail-open gauge
}

TEST_F(SharedAdmissionTest, OriginReadLimitIsSharedAndFailsOpen) {
  AdmissionOptions o = Tier();
  o.ip_read = {0.001, 2};
  AdmissionControl a(o, clock_, metrics_a_, &shared_);
  AdmissionControl b(o, clock_, metrics_b_, &shared_);
  EXPECT_TRUE(RunSync(a.AdmitOriginRead("10.0.0.1")).ok());
  EXPECT_TRUE(RunSync(b.AdmitOriginRead("10.0.0.1")).ok());
  auto limited = RunSync(a.AdmitOriginRead("10.0.0.1"));
  ASSERT_FALSE(limited.ok());
  EXPECT_EQ(limited.error().reason, "origin_get_ip");
  shared_.mode = Mode::kDown;
  EXPECT_TRUE(RunSync(b.AdmitOriginRead("10.0.0.1")).ok());
  EXPECT_TRUE(b.FailingOpen());
}

TEST(MemorySharedStateTest, RefusedTakeSpendsNothingInAnyBucket) {
  ManualClock clock;
  auto shared = store::MakeMemorySharedState(clock);
  const admission::TokenBucketPolicy roomy{1, 5}, tight{1, 1};
  auto take = [&](double cost_tight) {
    return RunSync(
        shared->TakeAll({{"a", roomy, 2}, {"b", tight, cost_tight}}, admission::Deadline::Never()));
  };
  ASSERT_TRUE(take(1)->allowed);  // a: 3 left, b: 0 left
  auto refused = take(1);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->allowed);
  EXPECT_EQ(refused->refused_index, 1);
  EXPECT_GT(refused->retry_after, Duration::zero());
  // a was not charged by the refused take: it still holds 3, so a take of 3 from a alone passes.
  EXPECT_TRUE(RunSync(shared->TakeAll({{"a", roomy, 3}}, admission::Deadline::Never()))->allowed);
  EXPECT_FALSE(RunSync(shared->TakeAll({{"a", roomy, 1}}, admission::Deadline::Never()))->allowed);
}

TEST(MemorySharedStateTest, TombstoneWinsOverARacingFill) {
  ManualClock clock;
  auto shared = store::MakeMemorySharedState(clock);
  auto id = store::PasteId::Parse("abcdefABCDEF");
  store::PasteMeta live{*id, 1, 2'000'000'000, 5, {}, false, {}};
  store::PasteMeta dead = live;
  dead.deleted = true;
  const auto never = admission::Deadline::Never();
  ASSERT_TRUE(RunSync(shared->Invalidate(dead, std::chrono::seconds(60), never)).ok());
  ASSERT_TRUE(RunSync(shared->PutMeta(live, std::chrono::seconds(60), never)).ok());
  auto got = RunSync(shared->GetMeta(*id, never));
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  EXPECT_TRUE((*got)->deleted);
}

// Two PasteServices over one primary, one bucket and one SharedState: two processes of a tier.
class SharedCacheTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  MetricsRegistry metrics_a_, metrics_b_;
  std::unique_ptr<store::MetaStore> meta_ = store::MakeMemoryMetaStore();
  std::unique_ptr<store::BlobStore> blobs_ = store::MakeMemoryBlobStore();
  std::unique_ptr<store::SharedState> memory_ = store::MakeMemorySharedState(clock_);
  FaultySharedState shared_{*memory_};
  PasteCache cache_a_{1 << 20, clock_, std::chrono::seconds(5)};
  PasteCache cache_b_{1 << 20, clock_, std::chrono::seconds(5)};
  AdmissionControl admission_a_{AdmissionOptions{}, clock_, metrics_a_, &shared_};
  AdmissionControl admission_b_{AdmissionOptions{}, clock_, metrics_b_, &shared_};
  PasteService a_{*meta_, *blobs_,    cache_a_,         admission_a_,
                  clock_, metrics_a_, ServiceOptions{}, &shared_};
  PasteService b_{*meta_, *blobs_,    cache_b_,         admission_b_,
                  clock_, metrics_b_, ServiceOptions{}, &shared_};

  struct FixedClient final : ClientKeySource {
    std::string Key() const override { return "10.0.0.9"; }
  };
  CreatedPaste Create(PasteService& s, std::string body) {
    auto ticket = RunSync(s.AdmitCreate("10.0.0.9", {body.size(), false}));
    EXPECT_TRUE(ticket.ok());
    auto created = RunSync(s.Create(std::move(*ticket), std::move(body), ""));
    EXPECT_TRUE(created.ok());
    return *created;
  }
  Result<CachedPaste> Read(PasteService& s, const store::PasteId& id) {
    return RunSync(s.Read(FixedClient(), id.view()));
  }
};

TEST_F(SharedCacheTest, DeleteOnOneProcessIsNotServedByAnother) {
  const CreatedPaste p = Create(a_, "hello");
  ASSERT_TRUE(Read(b_, p.id).ok());  // now in b's local cache and in the shared cache
  ASSERT_TRUE(RunSync(a_.Delete(p.id.view(), p.delete_token)).ok());
  auto after = Read(b_, p.id);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.error().code, ErrorCode::kNotFound);
}

TEST_F(SharedCacheTest, SharedCacheHitSparesThePrimary) {
  const CreatedPaste p = Create(a_, "hello");
  ASSERT_TRUE(Read(a_, p.id).ok());  // a's local hit; nothing shared yet
  ASSERT_TRUE(Read(b_, p.id).ok());  // b fills from the primary and shares the row
  cache_b_.Erase(p.id);
  const auto hits = [&] {
    return metrics_b_.GetCounter("sluice_shared_meta_cache_total", "", {{"outcome", "hit"}})
        .value();
  };
  const uint64_t before = hits();
  ASSERT_TRUE(Read(b_, p.id).ok());
  EXPECT_EQ(hits(), before + 1);
}

TEST_F(SharedCacheTest, CacheDownIsAMissNotAnError) {
  const CreatedPaste p = Create(a_, "hello");
  shared_.mode = Mode::kDown;
  auto read = Read(b_, p.id);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read->body, "hello");
  EXPECT_TRUE(RunSync(a_.Delete(p.id.view(), p.delete_token)).ok());  // the delete still stands
}

TEST_F(SharedCacheTest, LocalEntriesAgeOutSoALostInvalidationIsBounded) {
  const CreatedPaste p = Create(a_, "hello");
  ASSERT_TRUE(Read(b_, p.id).ok());
  ASSERT_TRUE(cache_b_.Get(p.id).has_value());
  clock_.Advance(std::chrono::seconds(6));
  EXPECT_FALSE(cache_b_.Get(p.id).has_value());
}

}  // namespace
}  // namespace sluice::service
