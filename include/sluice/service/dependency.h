// Dependency: the one place every call to a store goes through (docs/overload.md, "Retries,
// breakers, timeouts": "Every dependency call goes through one wrapper that applies its timeout,
// its pool, its breaker and the retry rule, and records its latency histogram"). The pools are the
// stores' own (read pool, cleanup pool, write committer), already split by purpose; this wrapper
// adds the rest.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "sluice/admission/circuit_breaker.h"
#include "sluice/admission/deadline.h"
#include "sluice/admission/jitter.h"
#include "sluice/admission/retry_budget.h"
#include "sluice/admission/retry_rule.h"
#include "sluice/asio/completion.h"
#include "sluice/asio/spawn.h"
#include "sluice/asio/timer.h"
#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/common/result.h"
#include "sluice/store/meta_store.h"

namespace sluice::service {

/// How one kind of call is made.
struct CallPolicy {
  /// Operation name for metrics ("get", "put", ...).
  const char* op = "call";
  /// The call's own timeout, capped by what is left of the request's deadline.
  Duration timeout = std::chrono::seconds(1);
  /// A second copy is harmless (reads, deletes). A create's PUT and insert are not.
  bool idempotent = false;
};

/// One dependency ("blob", "meta"): its breaker, its metrics, and the shared retry budget.
/// Thread-safe.
class Dependency {
 public:
  /// `clock`, `metrics` and `retry_budget` must outlive it. The clock decides deadlines and makes
  /// the timers of the timeout and the retry's pause, so a ManualClock drives both in tests.
  Dependency(std::string name, const Clock& clock, MetricsRegistry& metrics,
             admission::RetryBudget& retry_budget, admission::CircuitBreakerOptions breaker);

  /// Makes one call, and at most one retry when the rule allows it. Every parameter is taken by
  /// value: this is a coroutine, and a reference to a caller's temporary would dangle. `attempt`
  /// starts the call with the deadline it may use. On timeout the caller is answered
  /// DeadlineExceeded at once while the call goes on in the background until it ends; whatever it
  /// needs must be owned by `attempt`.
  template <typename T>
  boost::asio::awaitable<Result<T>> Call(
      CallPolicy policy, admission::Deadline request_deadline,
      std::function<boost::asio::awaitable<Result<T>>(admission::Deadline)> attempt);

  admission::BreakerState breaker_state() const { return breaker_.state(); }
  /// New breaker thresholds from now on; the breaker keeps its state (docs/operations.md,
  /// "Reload").
  void SetBreakerThresholds(int refusals_to_open, Duration open_for, Duration failover_open_for) {
    breaker_.SetThresholds(refusals_to_open, open_for, failover_open_for);
  }
  const std::string& name() const { return name_; }

 private:
  struct OpStats {
    Histogram* latency;
    Counter* timeouts;
    Counter* retries;
    Counter* errors;
  };
  OpStats& StatsFor(const char* op);
  Error BreakerOpen(Duration retry_after);

  template <typename T>
  static boost::asio::awaitable<Result<T>> RaceTimeout(
      const Clock& clock,
      std::function<boost::asio::awaitable<Result<T>>(admission::Deadline)> attempt,
      admission::Deadline call_deadline);

  const std::string name_;
  const Clock& clock_;
  MetricsRegistry& metrics_;
  admission::RetryBudget& retry_budget_;
  admission::CircuitBreaker breaker_;
  // Whether the latest refusal was a primary failing over: the breaker's 503 then says so, so a
  // client and an operator see a failover, not an unexplained outage.
  std::atomic<bool> refused_by_failover_{false};
  admission::Jitter jitter_;
  Counter& breaker_rejections_;
  std::mutex stats_mu_;
  std::map<std::string, OpStats> stats_;
  GaugeCallbacks callbacks_;  // last: its callback reads breaker_
};

template <typename T>
boost::asio::awaitable<Result<T>> Dependency::RaceTimeout(
    const Clock& clock,
    std::function<boost::asio::awaitable<Result<T>>(admission::Deadline)> attempt,
    admission::Deadline call_deadline) {
  namespace asio = boost::asio;
  // Whichever ends first, the call or the timer, answers the caller; the other is ignored. The
  // call keeps running after a timeout: a request cannot be taken back once sent (docs/overload.md,
  // "Retries, breakers, timeouts").
  struct Race {
    std::mutex mu;
    bool answered = false;
    asio_glue::Completion<Result<T>> answer;
    void Finish(Result<T> result) {
      asio_glue::Completion<Result<T>> to_call;
      {
        std::lock_guard lock(mu);
        if (answered) return;
        answered = true;
        to_call = std::move(answer);
      }
      to_call(std::move(result));
    }
  };
  auto race = std::make_shared<Race>();
  auto strand = asio::make_strand(co_await asio::this_coro::executor);
  auto start = [&clock, race, strand, attempt = std::move(attempt),
                call_deadline](asio_glue::Completion<Result<T>> answer) mutable {
    race->answer = std::move(answer);
    std::shared_ptr<asio_glue::Timer> timer;
    if (!call_deadline.IsNever()) {
      timer = std::make_shared<asio_glue::Timer>(clock, strand);
      timer->AsyncWaitUntil(call_deadline.at(), [race](bool reached) {
        if (reached) {
          race->Finish(MakeError(ErrorCode::kDeadlineExceeded, "the call did not answer in time",
                                 "deadline_exceeded"));
        }
      });
    }
    // The race holds the caller's completion and the caller's frame holds the race: a call never
    // resumed (its loop torn down at exit) must still break that cycle, or the caller's frames
    // leak. So the guard is a capture of the spawned function, not a local of its body: co_spawn
    // only posts the body's start to the strand (Boost 1.74, asio/impl/co_spawn.hpp,
    // co_spawn_entry_point), and a loop stopped before that runs (SIGTERM just after start)
    // destroys the function with a body that never existed. DependencyShutdownTest in
    // tests/unit/service/dependency_test.cc stops a loop in that window.
    struct ForgetUnanswered {
      std::shared_ptr<Race> race;  // null once moved from
      explicit ForgetUnanswered(std::shared_ptr<Race> r) : race(std::move(r)) {}
      ForgetUnanswered(ForgetUnanswered&&) = default;
      ~ForgetUnanswered() {
        if (!race) return;
        asio_glue::Completion<Result<T>> dropped;  // destroyed after the lock is released
        std::lock_guard lock(race->mu);
        if (!race->answered) dropped = std::move(race->answer);
      }
    };
    asio::co_spawn(
        strand,
        [race, forget = ForgetUnanswered(race), timer, attempt = std::move(attempt),
         call_deadline]() -> asio::awaitable<void> {
          Result<T> result = MakeError(ErrorCode::kInternal, "the call failed", "internal");
          try {
            auto call = attempt(call_deadline);
            result = co_await std::move(call);
          } catch (const std::exception& e) {
            result = MakeError(ErrorCode::kInternal, e.what(), "internal");
          }
          if (timer) timer->Cancel();
          race->Finish(std::move(result));
        },
        asio_glue::LogIfThrown("dependency call"));
  };
  auto waiting = asio_glue::AwaitCompletion<Result<T>>(std::move(start));
  co_return co_await std::move(waiting);
}

template <typename T>
boost::asio::awaitable<Result<T>> Dependency::Call(
    CallPolicy policy, admission::Deadline request_deadline,
    std::function<boost::asio::awaitable<Result<T>>(admission::Deadline)> attempt) {
  namespace asio = boost::asio;
  OpStats& stats = StatsFor(policy.op);
  retry_budget_.RecordRequest();
  for (int attempts = 1;; ++attempts) {
    auto admission = breaker_.TryPass();
    if (!admission.allowed()) {
      breaker_rejections_.Inc();
      co_return BreakerOpen(admission.retry_after);
    }
    admission::CircuitBreaker::Pass pass = std::move(*admission.pass);
    const admission::Deadline call_deadline = request_deadline.ForCall(clock_, policy.timeout);
    if (call_deadline.Expired(clock_)) {
      pass.TimedOut();
      stats.timeouts->Inc();
      Error e = MakeError(ErrorCode::kDeadlineExceeded, "no time left in the request's budget",
                          "deadline_exceeded");
      e.never_sent = true;  // the attempt never started: a write surely did not happen
      co_return e;
    }
    const TimePoint started = clock_.Now();
    auto race = RaceTimeout<T>(clock_, attempt, call_deadline);
    Result<T> result = co_await std::move(race);
    stats.latency->Observe(std::chrono::duration<double>(clock_.Now() - started).count());
    if (result.ok() || result.error().code == ErrorCode::kNotFound) {
      pass.Succeeded();
      co_return result;
    }
    const Error& error = result.error();
    if (error.code == ErrorCode::kDeadlineExceeded) {
      pass.TimedOut();  // slowness is the caps' business, not the breaker's
      stats.timeouts->Inc();
    } else if (error.reason == store::kPrimaryFailover) {
      // Sent or not, the server said it takes no writes (or none of the hosts does): a failover,
      // whose breaker window is short so that a probe finds the new primary soon after the
      // promotion (docs/overload.md, "Retries, breakers, timeouts").
      refused_by_failover_ = true;
      pass.NotPrimary();
      stats.errors->Inc();
    } else if (error.never_sent) {
      refused_by_failover_ = false;
      pass.Refused();
      stats.errors->Inc();
    } else {
      pass.Succeeded();  // it answered, with an error: not a refusal
      stats.errors->Inc();
    }
    admission::RetryContext context;
    context.attempts = attempts;
    context.idempotent = policy.idempotent;
    context.error = &error;
    context.deadline = request_deadline;
    context.clock = &clock_;
    constexpr auto kMaxJitter = std::chrono::milliseconds(40);
    context.attempt_needs = policy.timeout + kMaxJitter;  // the retry's own timeout must fit
    context.budget = &retry_budget_;
    if (admission::ShouldRetry(context) != admission::RetryVerdict::kRetry) co_return result;
    stats.retries->Inc();
    // A jittered pause of tens of milliseconds, so processes that failed together do not retry
    // together.
    auto pause = asio_glue::SleepFor(
        clock_, jitter_.Between(Duration(std::chrono::milliseconds(10)), Duration(kMaxJitter)));
    co_await std::move(pause);
  }
}

}  // namespace sluice::service
