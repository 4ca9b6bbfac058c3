// Fault injection: a decorator over BlobStore and MetaStore that adds latency, errors, refusals or
// hangs to chosen store operations, so overload scenarios run against the real server process
// (LevelDB's fault-injecting Env, userver's chaos gate). It exists only when configuration enables
// it, and it says so: a warning in the log at start and on every plan change, and
// sluice_fault_injection_enabled = 1 on /metrics, so it can never be left on silently.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/admission/jitter.h"
#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/common/result.h"
#include "sluice/store/blob_store.h"
#include "sluice/store/meta_store.h"

namespace sluice::store {

/// One rule: which operation, what happens, how often. A value type.
struct FaultRule {
  enum class Kind { kLatency, kError, kRefuse, kHang };

  /// The operation: "blob.put", "blob.get", "blob.delete", "blob.list", "meta.insert" (Insert,
  /// InsertWithBody, ReserveStorage), "meta.get",
  /// "meta.mark_deleted" (MarkDeleted, Claim), "meta.outbox" (DueOutbox, FinishOutbox,
  /// RetryOutboxLater, OldestOutboxAge), "meta.sweep" (Expired, Purge, Existing, LiveBytes),
  /// "meta.moderation" (reports, moderation states, blocks, audit); or a wildcard "blob.*",
  /// "meta.*", "*". Default: "*".
  std::string target = "*";
  /// What happens. Default: kLatency.
  Kind kind = Kind::kLatency;
  /// kLatency only: the added wait is uniform in [min_latency, max_latency]; fixed when equal.
  /// Precondition: 0 <= min_latency <= max_latency. Default: 0.
  Duration min_latency{};
  Duration max_latency{};
  /// Chance that the rule applies to one call, drawn independently per call, in [0, 1].
  /// Default: 1 (every call).
  double probability = 1.0;

  /// The rule in the text form FaultPlan::Parse reads, e.g. "meta.get:latency=10ms..50ms@0.5".
  std::string ToString() const;
  /// True if this rule applies to operation `op` (a concrete target such as "blob.put").
  bool Matches(std::string_view op) const;
};

/// The name of a kind as it appears in the text form and in metric labels ("latency", "error",
/// "refuse", "hang").
const char* FaultKindName(FaultRule::Kind kind);

/// The concrete targets a decorator reports, in a fixed order.
inline constexpr std::array<std::string_view, 10> kFaultTargets = {
    "blob.put", "blob.get",          "blob.delete", "blob.list",  "meta.insert",
    "meta.get", "meta.mark_deleted", "meta.outbox", "meta.sweep", "meta.moderation"};

/// A set of rules. A value type; copy freely.
class FaultPlan {
 public:
  FaultPlan() = default;
  explicit FaultPlan(std::vector<FaultRule> rules) : rules_(std::move(rules)) {}

  /// Parses rules separated by ';', each `TARGET:ACTION[@PROBABILITY]` where ACTION is
  /// `latency=D`, `latency=D1..D2`, `error`, `refuse` or `hang` and durations read like "250ms",
  /// "2s", "1h". Example: "blob.put:latency=2s; meta.get:latency=10ms..50ms@0.5; meta.*:refuse;
  /// blob.get:error@0.1; meta.insert:hang". Whitespace around parts is ignored; empty text is a
  /// plan with no rules. kInvalidArgument names the offending rule: unknown target or kind, a bad
  /// duration, a range that runs backwards, a probability outside [0, 1].
  static Result<FaultPlan> Parse(std::string_view text);

  /// The plan in the form Parse reads ("" when empty); Parse(ToString()) gives the same rules.
  std::string ToString() const;

  const std::vector<FaultRule>& rules() const { return rules_; }
  bool empty() const { return rules_.empty(); }

 private:
  std::vector<FaultRule> rules_;
};

/// Decides, per store call, what the current plan injects, and waits it out on the caller's
/// executor. Thread-safe; the plan can be replaced at runtime (a debug endpoint and the scenario
/// tests do that). Must outlive every call in flight through it.
class FaultInjector {
 public:
  /// Registers sluice_fault_injection_enabled = 1, sluice_fault_rules and the call and fault
  /// counters on `metrics`, which must outlive the injector, and logs the plan as a warning.
  /// `seed` fixes the random draws for tests; 0 seeds from the machine's random device.
  explicit FaultInjector(MetricsRegistry& metrics, FaultPlan initial = {}, uint64_t seed = 0);
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  /// Replaces the rules for calls that start from now on, and releases every call hung by an
  /// earlier plan (it then goes on to the inner store, as a stuck dependency that recovers finishes
  /// the work it was given, late). Logged as a warning.
  void SetPlan(FaultPlan plan);
  FaultPlan plan() const;

  /// Applies the matching rules, in plan order, to one call of `target` (a concrete target, e.g.
  /// "blob.put"). Each rule fires independently with its probability. Every latency that fires is
  /// waited with an Asio timer on the caller's executor (never blocking a thread), one after the
  /// other. The first refuse, error or hang that fires decides the outcome:
  ///  - kRefuse: Unavailable, reason "connection_refused", never_sent = true, returned at once
  ///    without the latencies (a refused connect is fast);
  ///  - kError: Unavailable, reason "injected_error", never_sent = false, after the latencies;
  ///  - kHang: waits one hour or until SetPlan releases it, then returns nothing (the call goes
  ///  on);
  ///    the caller's timeout is what ends it for the request.
  /// Returns the injected error, or nothing when the call should proceed. Counts every call on
  /// sluice_store_calls_total{target} and every fault that fired on
  /// sluice_faults_injected_total{target,kind}.
  boost::asio::awaitable<std::optional<Error>> Before(std::string_view target);

  /// How long a hang lasts when nothing releases it. Default: one hour.
  static constexpr Duration kHangFor = std::chrono::hours(1);

 private:
  struct TargetCounters {
    Counter* calls = nullptr;
    std::array<Counter*, 4> faults{};  // by FaultRule::Kind
  };
  TargetCounters LookUpCounters(std::string_view target);
  TargetCounters CountersFor(std::string_view target);
  bool Fires(double probability);
  std::shared_ptr<const FaultPlan> Current() const;

  MetricsRegistry& metrics_;
  admission::Jitter random_;
  mutable std::mutex mu_;
  std::shared_ptr<const FaultPlan> plan_;  // guarded by mu_; the pointee is immutable
  /// Bumped by SetPlan; a hung call ends when it changes.
  std::atomic<uint64_t> generation_{0};
  /// What the sluice_fault_rules callback reads; shared so the callback never outlives it.
  std::shared_ptr<std::atomic<size_t>> rule_count_;
  /// Cached per known target; another target (a test's own name) is looked up per call.
  std::array<TargetCounters, kFaultTargets.size()> counters_;
};

/// Decorators: every call goes through injector.Before(target), then to `inner` unless an error
/// was injected. `inner` and `injector` must outlive them. Thread-safe if `inner` is.
std::unique_ptr<BlobStore> MakeFaultInjectingBlobStore(BlobStore& inner, FaultInjector& injector);
std::unique_ptr<MetaStore> MakeFaultInjectingMetaStore(MetaStore& inner, FaultInjector& injector);

}  // namespace sluice::store
