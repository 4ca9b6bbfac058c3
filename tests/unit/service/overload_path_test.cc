// The overload path above admission/ (docs/overload.md, "Create" and "Retries, breakers,
// timeouts"), driven by a ManualClock: the service over guarded in-memory stores, as
// src/app/main.cc wires it, with no sockets and no sleeps. Every timer is an alarm on the clock,
// so each test moves time itself and finishes in milliseconds however loaded the machine is.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <deque>
#include <optional>

#include "../../support/faulty_stores.h"
#include "sluice/asio/completion.h"
#include "sluice/service/dependency.h"
#include "sluice/service/guarded_stores.h"
#include "sluice/service/ids.h"
#include "sluice/service/paste_service.h"
#include "sluice/store/backends.h"

namespace sluice::service {
namespace {

namespace asio = boost::asio;
using admission::BreakerState;
using admission::Deadline;
using testing::ConnectRefused;
using testing::FaultyMetaStore;

// A blob store whose PUTs answer, are refused, or hang until the test ends them.
class ScriptedBlobStore final : public store::BlobStore {
 public:
  enum class Put { kAnswer, kRefuse, kHang };
  explicit ScriptedBlobStore(store::BlobStore& inner) : inner_(inner) {}

  Put put = Put::kAnswer;
  int puts = 0;

  boost::asio::awaitable<Status> Put(store::PasteId id, std::shared_ptr<const std::string> body,
                                     Deadline d) override {
    ++puts;
    if (put == Put::kRefuse) co_return ConnectRefused();
    if (put == Put::kHang) {
      // Holds the body as a real PUT in flight would, until End.
      auto waiting = asio_glue::AwaitCompletion<Status>(
          [this, body](asio_glue::Completion<Status> done) mutable {
            hanging_.push_back({std::move(body), std::move(done)});
          });
      co_return co_await std::move(waiting);
    }
    auto stored = inner_.Put(id, std::move(body), d);
    co_return co_await std::move(stored);
  }
  boost::asio::awaitable<Result<std::string>> Get(store::PasteId id, Deadline d) override {
    return inner_.Get(id, d);
  }
  boost::asio::awaitable<Status> Delete(store::PasteId id, Deadline d) override {
    return inner_.Delete(id, d);
  }
  boost::asio::awaitable<Result<std::vector<store::BlobInfo>>> List(std::string after, size_t limit,
                                                                    Deadline d) override {
    return inner_.List(std::move(after), limit, d);
  }

  size_t Hanging() const { return hanging_.size(); }
  /// Ends the oldest hanging PUT with `status`; the store lets go of its body.
  void EndOne(Status status) {
    Hung hung = std::move(hanging_.front());
    hanging_.pop_front();
    hung.body.reset();
    hung.done(std::move(status));
  }

 private:
  struct Hung {
    std::shared_ptr<const std::string> body;
    asio_glue::Completion<Status> done;
  };
  store::BlobStore& inner_;
  std::deque<Hung> hanging_;
};

class OverloadPathTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  MetricsRegistry metrics_;
  asio::io_context io_;
  std::unique_ptr<store::MetaStore> meta_memory_ = store::MakeMemoryMetaStore();
  std::unique_ptr<store::BlobStore> blob_memory_ = store::MakeMemoryBlobStore(&clock_);
  FaultyMetaStore meta_inner_{*meta_memory_};
  ScriptedBlobStore blob_inner_{*blob_memory_};
  // As src/app/main.cc builds them: one retry budget, a breaker per dependency, the defaults of
  // docs/overload.md.
  admission::RetryBudget retry_budget_{admission::RetryBudgetOptions{}, clock_};
  Dependency meta_dependency_{"meta", clock_, metrics_, retry_budget_,
                              admission::CircuitBreakerOptions{}};
  Dependency blob_dependency_{"blob", clock_, metrics_, retry_budget_,
                              admission::CircuitBreakerOptions{}};
  std::unique_ptr<store::MetaStore> meta_ =
      MakeGuardedMetaStore(meta_inner_, meta_dependency_, CallTimeouts{});
  std::unique_ptr<store::BlobStore> blobs_ =
      MakeGuardedBlobStore(blob_inner_, blob_dependency_, CallTimeouts{});
  PasteCache cache_{1 << 20};
  AdmissionControl admission_{Limits(), clock_, metrics_};
  PasteService service_{*meta_, *blobs_, cache_, admission_, clock_, metrics_, ServiceOptions{}};

  static constexpr const char* kClient = "10.0.0.1";

  // The rates out of the way, so the caps and the dependencies are what these tests meet.
  static AdmissionOptions Limits() {
    AdmissionOptions o;
    o.ip_create_count = o.global_create_count = {1e6, 1e6};
    o.ip_create_bytes = o.global_create_bytes = {1e12, 1e12};
    o.ip_read = {1e6, 1e6};
    return o;
  }

  void TearDown() override {
    // Nothing left waiting on time: every timer the path armed was answered or cancelled.
    io_.poll();
    EXPECT_EQ(clock_.PendingAlarms(), 0u);
  }

  // Starts `task` on the test's io_context and runs what is ready now, without advancing time.
  template <typename T>
  std::shared_ptr<std::optional<T>> Start(asio::awaitable<T> task) {
    auto out = std::make_shared<std::optional<T>>();
    asio::co_spawn(
        io_,
        [out, task = std::move(task)]() mutable -> asio::awaitable<void> {
          out->emplace(co_await std::move(task));
        },
        asio::detached);
    Settle();
    return out;
  }
  void Settle() {
    io_.restart();
    io_.poll();
  }
  void Advance(Duration d) {
    clock_.Advance(d);
    Settle();
  }
  // Runs `task` to its end, moving time only to the next alarm whenever nothing else is ready.
  template <typename T>
  T Finish(asio::awaitable<T> task) {
    auto out = Start(std::move(task));
    while (!out->has_value()) {
      const std::optional<TimePoint> next = clock_.NextAlarm();
      if (!next) {
        ADD_FAILURE() << "the task waits, and not on the clock";
        break;
      }
      Advance(*next - clock_.Now());
    }
    return std::move(**out);
  }

  Result<CreateTicket> Admit(uint64_t bytes) {
    return Finish(service_.AdmitCreate(kClient, {bytes, false}));
  }
  Result<CreatedPaste> Create(std::string body) {
    auto ticket = Admit(body.size());
    if (!ticket.ok()) return ticket.error();
    return Finish(service_.Create(std::move(*ticket), std::move(body), ""));
  }
  admission::SlotGauges CreateSlots() const { return service_.Budgets(kClient).create_slots; }
  double Counted(const std::string& series) const {
    const std::string text = metrics_.Render();
    const size_t at = text.find(series + " ");
    if (at == std::string::npos) return 0;
    return std::stod(text.substr(at + series.size() + 1));
  }
  static void ExpectOverloadAnswer(const Error& e) {
    // kUnavailable is a 503 (StatusFor in src/http/server.cc); the Retry-After is drawn from the
    // caps' band so refused clients do not return as one wave.
    EXPECT_EQ(e.code, ErrorCode::kUnavailable) << e.message;
    ASSERT_TRUE(e.retry_after_seconds.has_value()) << e.message;
    EXPECT_GE(*e.retry_after_seconds, 5);
    EXPECT_LE(*e.retry_after_seconds, 15);
  }
};

TEST_F(OverloadPathTest, APutThatNeverAnswersTimesOutAtItsDeadlineAndKeepsItsBytesUntilItEnds) {
  const std::string body(1000, 'a');
  auto ticket = Admit(body.size());
  ASSERT_TRUE(ticket.ok());
  EXPECT_EQ(CreateSlots().in_use, 1);
  EXPECT_EQ(CreateSlots().bytes_in_use, 1000);

  blob_inner_.put = ScriptedBlobStore::Put::kHang;
  const TimePoint started = clock_.Now();
  auto created = Start(service_.Create(std::move(*ticket), body, ""));
  ASSERT_EQ(blob_inner_.Hanging(), 1u);
  // put_timeout (1 s) inside create_budget (2 s): the timer is set for the PUT's own deadline.
  ASSERT_EQ(clock_.NextAlarm(), started + std::chrono::seconds(1));
  Advance(std::chrono::seconds(1) - Duration(1));
  EXPECT_FALSE(created->has_value()) << "answered before the PUT's deadline";
  Advance(Duration(1));
  ASSERT_TRUE(created->has_value()) << "not answered at the PUT's deadline";
  ASSERT_FALSE((*created)->ok());
  ExpectOverloadAnswer((*created)->error());
  EXPECT_EQ(meta_inner_.calls.load(), 0) << "no row for a body that may not exist";

  // The answer frees the slot at once; the bytes the PUT still holds stay counted.
  EXPECT_EQ(CreateSlots().in_use, 0);
  EXPECT_EQ(CreateSlots().bytes_in_use, 1000);
  EXPECT_EQ(Counted("sluice_dependency_timeouts_total{dependency=\"blob\",op=\"put\"}"), 1);
  EXPECT_EQ(blob_dependency_.breaker_state(), BreakerState::kClosed) << "slowness is not refusal";
  EXPECT_EQ(blob_inner_.puts, 1) << "a create's PUT is never retried";

  blob_inner_.EndOne(Ok());
  Settle();
  EXPECT_EQ(CreateSlots().bytes_in_use, 0) << "the PUT ended: nothing is buffered for it now";
}

// A reload (docs/operations.md, "Reload") stores new per-call timeouts: the next call takes the new
// one, a call in flight keeps the one it started with.
TEST_F(OverloadPathTest, ReloadedCallTimeoutsApplyToTheNextPutNotToOneInFlight) {
  LiveCallTimeouts timeouts{CallTimeouts{}};  // the PUT's own 1 s
  auto blobs = MakeGuardedBlobStore(blob_inner_, blob_dependency_, timeouts);
  ServiceOptions options;
  options.create_budget = std::chrono::seconds(10);
  options.put_timeout = std::chrono::seconds(5);
  PasteService service(*meta_, *blobs, cache_, admission_, clock_, metrics_, options);
  blob_inner_.put = ScriptedBlobStore::Put::kHang;
  auto first_ticket = Finish(service.AdmitCreate(kClient, {1, false}));
  ASSERT_TRUE(first_ticket.ok());
  const TimePoint started = clock_.Now();
  auto first = Start(service.Create(std::move(*first_ticket), "a", ""));
  ASSERT_EQ(clock_.NextAlarm(), started + std::chrono::seconds(1));

  CallTimeouts longer;
  longer.blob_put = std::chrono::seconds(3);
  timeouts.Store(longer);
  EXPECT_EQ(timeouts.Load().blob_put, std::chrono::seconds(3));
  EXPECT_EQ(timeouts.Load().meta_get, CallTimeouts{}.meta_get);
  auto second_ticket = Finish(service.AdmitCreate(kClient, {1, false}));
  ASSERT_TRUE(second_ticket.ok());
  auto second = Start(service.Create(std::move(*second_ticket), "b", ""));
  ASSERT_EQ(blob_inner_.Hanging(), 2u);
  Advance(std::chrono::seconds(1));
  ASSERT_TRUE(first->has_value()) << "the call in flight kept its 1 s";
  EXPECT_FALSE(second->has_value()) << "the next call took the new 3 s";
  Advance(std::chrono::seconds(2));
  ASSERT_TRUE(second->has_value());
  ASSERT_FALSE((*second)->ok());
  EXPECT_EQ((*second)->error().reason, "deadline_exceeded");
  ExpectOverloadAnswer((*second)->error());
  blob_inner_.EndOne(Ok());
  blob_inner_.EndOne(Ok());
  Settle();
}

TEST(PasteCacheReloadTest, ANewMaxAgeAppliesToTheEntriesHeld) {
  ManualClock clock;
  PasteCache cache(1 << 20, clock, std::chrono::seconds(60));
  const store::PasteMeta meta{MintPasteId(), 0, 0, 1, {}, false, std::nullopt};
  cache.Put(CachedPaste{meta, std::make_shared<const std::string>("x")});
  clock.Advance(std::chrono::seconds(10));
  ASSERT_TRUE(cache.Get(meta.id).has_value());
  cache.SetMaxAge(std::chrono::seconds(5));  // stored 10 s ago: older than the new bound
  EXPECT_FALSE(cache.Get(meta.id).has_value());
}

TEST_F(OverloadPathTest, AFullByteCapRefusesWhileAnAbandonedPutStillHoldsItsBytes) {
  AdmissionOptions tight = Limits();
  tight.create_slot_bytes = 1500;
  AdmissionControl admission(tight, clock_, metrics_);
  PasteService service(*meta_, *blobs_, cache_, admission, clock_, metrics_, ServiceOptions{});
  blob_inner_.put = ScriptedBlobStore::Put::kHang;
  auto ticket = Finish(service.AdmitCreate(kClient, {1000, false}));
  ASSERT_TRUE(ticket.ok());
  auto first = Start(service.Create(std::move(*ticket), std::string(1000, 'a'), ""));
  Advance(std::chrono::seconds(1));
  ASSERT_TRUE(first->has_value());

  auto refused = Finish(service.AdmitCreate(kClient, {1000, false}));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().reason, "create_bytes");
  ExpectOverloadAnswer(refused.error());

  blob_inner_.EndOne(Ok());
  Settle();
  EXPECT_TRUE(Finish(service.AdmitCreate(kClient, {1000, false})).ok());
}

TEST_F(OverloadPathTest, ARefusingStoreOpensTheBreakerAfterFiveAndLetsOneProbeAWindow) {
  blob_inner_.put = ScriptedBlobStore::Put::kRefuse;
  for (int i = 1; i <= 5; ++i) {
    auto created = Create("x");
    ASSERT_FALSE(created.ok());
    ExpectOverloadAnswer(created.error());
    EXPECT_EQ(blob_dependency_.breaker_state(), i < 5 ? BreakerState::kClosed : BreakerState::kOpen)
        << "after refusal " << i;
  }
  EXPECT_EQ(blob_inner_.puts, 5);

  // Open: refused at once, nothing reaches the store, and the slot is not held.
  auto shed = Create("x");
  ASSERT_FALSE(shed.ok());
  EXPECT_EQ(shed.error().reason, "breaker_open");
  EXPECT_EQ(shed.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(shed.error().retry_after_seconds.has_value());
  EXPECT_EQ(blob_inner_.puts, 5);
  EXPECT_EQ(CreateSlots().in_use, 0);

  // Still open just before breaker_open_for (5 s) has passed.
  Advance(std::chrono::seconds(5) - Duration(1));
  EXPECT_EQ(Create("x").error().reason, "breaker_open");
  EXPECT_EQ(blob_inner_.puts, 5);

  // Then one probe goes; while it is out, the next call is refused without reaching the store.
  Advance(Duration(1));
  blob_inner_.put = ScriptedBlobStore::Put::kHang;
  auto probe_ticket = Admit(1);
  ASSERT_TRUE(probe_ticket.ok());
  auto probe = Start(service_.Create(std::move(*probe_ticket), "x", ""));
  EXPECT_EQ(blob_inner_.puts, 6);
  EXPECT_EQ(blob_dependency_.breaker_state(), BreakerState::kHalfOpen);
  EXPECT_EQ(Create("x").error().reason, "breaker_open");
  EXPECT_EQ(blob_inner_.puts, 6) << "a second probe in the same window";

  // The probe is refused too: open for another window.
  blob_inner_.EndOne(ConnectRefused());
  Settle();
  ASSERT_TRUE(probe->has_value());
  EXPECT_FALSE((*probe)->ok());
  EXPECT_EQ(blob_dependency_.breaker_state(), BreakerState::kOpen);
  blob_inner_.put = ScriptedBlobStore::Put::kAnswer;
  EXPECT_EQ(Create("x").error().reason, "breaker_open");
  EXPECT_EQ(blob_inner_.puts, 6);

  // The next window's probe succeeds: closed, and creates go through again.
  Advance(std::chrono::seconds(5));
  EXPECT_TRUE(Create("x").ok());
  EXPECT_EQ(blob_dependency_.breaker_state(), BreakerState::kClosed);
  EXPECT_TRUE(Create("x").ok());
  EXPECT_EQ(blob_inner_.puts, 8);
}

// A primary failing over (docs/overload.md, "Retries, breakers, timeouts"): the server answered
// each insert, read-only (25006), so nothing was refused before the send; those answers open the
// breaker all the same, for breaker_open_for_failover (250 ms), and the first create after that
// window is the probe that finds the new primary.
TEST_F(OverloadPathTest, APrimaryFailingOverOpensTheBreakerForItsShortWindowThenOneProbe) {
  Error read_only = MakeError(ErrorCode::kUnavailable,
                              "postgres: cannot execute INSERT in a read-only transaction (25006)",
                              std::string(store::kPrimaryFailover));
  meta_inner_.insert_error = read_only;
  for (int i = 1; i <= 5; ++i) {
    auto created = Create("x");
    ASSERT_FALSE(created.ok());
    EXPECT_EQ(created.error().reason, store::kPrimaryFailover);
    EXPECT_EQ(meta_dependency_.breaker_state(), i < 5 ? BreakerState::kClosed : BreakerState::kOpen)
        << "after answer " << i;
  }
  const int inserts = meta_inner_.calls.load();
  meta_inner_.insert_error.reset();  // promoted: the next insert that reaches the store lands

  auto shed = Create("x");
  ASSERT_FALSE(shed.ok());
  EXPECT_EQ(shed.error().reason, store::kPrimaryFailover);
  ExpectOverloadAnswer(shed.error());
  Advance(std::chrono::milliseconds(250) - Duration(1));
  EXPECT_EQ(Create("x").error().reason, store::kPrimaryFailover);
  EXPECT_EQ(meta_inner_.calls.load(), inserts) << "nothing reaches the store while open";

  Advance(Duration(1));
  EXPECT_TRUE(Create("x").ok());
  EXPECT_EQ(meta_dependency_.breaker_state(), BreakerState::kClosed);
}

// A blip on the same store (refused connects, a single-host URL) keeps breaker_open_for.
TEST_F(OverloadPathTest, RefusedConnectsToThePrimaryStillOpenItForBreakerOpenFor) {
  meta_inner_.insert_error = ConnectRefused();
  for (int i = 1; i <= 5; ++i) ASSERT_FALSE(Create("x").ok());
  ASSERT_EQ(meta_dependency_.breaker_state(), BreakerState::kOpen);
  meta_inner_.insert_error.reset();
  Advance(std::chrono::milliseconds(250));
  EXPECT_EQ(Create("x").error().reason, "breaker_open");
  Advance(std::chrono::seconds(5) - std::chrono::milliseconds(250));
  EXPECT_TRUE(Create("x").ok());
  EXPECT_EQ(meta_dependency_.breaker_state(), BreakerState::kClosed);
}

TEST_F(OverloadPathTest, ABlipSpendsTheRetryBudgetAndNoMore) {
  // The primary refuses every connect for a while. The breaker is set out of reach here, so the
  // budget alone limits the retries (the test above shows the breaker).
  admission::CircuitBreakerOptions patient;
  patient.refusals_to_open = 1'000'000;
  Dependency meta_dependency("meta_blip", clock_, metrics_, retry_budget_, patient);
  auto meta = MakeGuardedMetaStore(meta_inner_, meta_dependency, CallTimeouts{});
  PasteService service(*meta, *blobs_, cache_, admission_, clock_, metrics_, ServiceOptions{});
  struct Client final : ClientKeySource {
    std::string Key() const override { return kClient; }
  } client;

  meta_inner_.refuse_get = [] { return true; };
  constexpr int kReads = 400;
  const TimePoint started = clock_.Now();
  for (int i = 0; i < kReads; ++i) {
    // A fresh id each time: every read is a miss that asks the primary.
    Result<CachedPaste> read = Finish(service.Read(client, MintPasteId().view()));
    ASSERT_FALSE(read.ok());
    ExpectOverloadAnswer(read.error());
  }
  const double retries =
      Counted("sluice_dependency_retries_total{dependency=\"meta_blip\",op=\"get\"}");
  // The budget (src/admission/retry_budget.cc): 10% of the window's first attempts, plus a floor
  // of 10 a second over its 10 s window. All of the blip fell inside one window.
  const Duration took = clock_.Now() - started;
  ASSERT_LT(took, std::chrono::seconds(10));
  const double budget = 0.1 * kReads + 10 * 10;
  EXPECT_LE(retries, budget) << "more retries than the budget";
  EXPECT_GT(retries, budget - 1) << "the budget was not spent";
  EXPECT_EQ(meta_inner_.gets.load(), kReads + static_cast<int>(retries))
      << "a read was retried more than once";
  // Each retry waited its jittered pause (10 to 40 ms) on the clock, and nothing else took time.
  EXPECT_GE(took, static_cast<int>(retries) * Duration(std::chrono::milliseconds(10)));
  EXPECT_LE(took, static_cast<int>(retries) * Duration(std::chrono::milliseconds(40)));

  EXPECT_LT(retry_budget_.Balance(), 1);

  // The blip over, a read is answered again.
  meta_inner_.refuse_get = nullptr;
  EXPECT_EQ(Finish(service.Read(client, MintPasteId().view())).error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace sluice::service
