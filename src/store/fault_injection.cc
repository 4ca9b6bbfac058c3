// Fault injection over the store interfaces. See include/sluice/store/fault_injection.h.
#include "sluice/store/fault_injection.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <cmath>
#include <random>

#include "sluice/common/duration.h"

namespace sluice::store {
namespace {

namespace asio = boost::asio;
using asio::awaitable;

/// A hung call looks at the plan generation this often, so SetPlan can release it from any thread
/// without touching its timer (a timer is not safe to cancel from another thread).
constexpr Duration kHangPoll = std::chrono::milliseconds(100);

constexpr std::array<FaultRule::Kind, 4> kKinds = {
    FaultRule::Kind::kLatency, FaultRule::Kind::kError, FaultRule::Kind::kRefuse,
    FaultRule::Kind::kHang};

std::string_view Trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

bool KnownTarget(std::string_view target) {
  if (target == "*" || target == "blob.*" || target == "meta.*") return true;
  return std::find(kFaultTargets.begin(), kFaultTargets.end(), target) != kFaultTargets.end();
}

/// The largest unit that divides `d` exactly, so Parse(Format(d)) == d: "2s", "1500ms", "1h".
std::string FormatExact(Duration d) {
  struct Unit {
    const char* name;
    int64_t ns;
  };
  static constexpr Unit kUnits[] = {
      {"h", 3'600'000'000'000}, {"m", 60'000'000'000}, {"s", 1'000'000'000},
      {"ms", 1'000'000},        {"us", 1'000},         {"ns", 1}};
  const int64_t ns = d.count();
  if (ns == 0) return "0s";
  for (const Unit& unit : kUnits) {
    if (ns % unit.ns == 0) return fmt::format("{}{}", ns / unit.ns, unit.name);
  }
  return fmt::format("{}ns", ns);
}

std::string FormatProbability(double p) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, p);
  return ec == std::errc() ? std::string(buf, end) : fmt::format("{}", p);
}

Error BadRule(std::string_view rule, std::string_view why) {
  return MakeError(ErrorCode::kInvalidArgument,
                   fmt::format("fault rule '{}': {}; want TARGET:ACTION[@P] with ACTION one of "
                               "latency=D, latency=D1..D2, error, refuse, hang",
                               rule, why),
                   "bad_fault_plan");
}

Result<FaultRule> ParseRule(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return BadRule(text, "no ':' after the target");
  FaultRule rule;
  const std::string_view target = Trim(text.substr(0, colon));
  if (!KnownTarget(target)) {
    return BadRule(text, fmt::format("unknown target '{}' (known: {}, blob.*, meta.*, *)", target,
                                     fmt::join(kFaultTargets, ", ")));
  }
  rule.target = std::string(target);

  std::string_view action = Trim(text.substr(colon + 1));
  if (const size_t at = action.rfind('@'); at != std::string_view::npos) {
    const std::string_view p = Trim(action.substr(at + 1));
    double value = -1;
    const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
    if (p.empty() || ec != std::errc() || end != p.data() + p.size() || !std::isfinite(value) ||
        value < 0 || value > 1) {
      return BadRule(text, fmt::format("probability '{}' is not a number in [0, 1]", p));
    }
    rule.probability = value;
    action = Trim(action.substr(0, at));
  }

  if (action == "error") {
    rule.kind = FaultRule::Kind::kError;
  } else if (action == "refuse") {
    rule.kind = FaultRule::Kind::kRefuse;
  } else if (action == "hang") {
    rule.kind = FaultRule::Kind::kHang;
  } else if (action.starts_with("latency")) {
    rule.kind = FaultRule::Kind::kLatency;
    std::string_view range = Trim(action.substr(std::string_view("latency").size()));
    if (!range.starts_with('=')) return BadRule(text, "latency needs '=DURATION'");
    range = Trim(range.substr(1));
    const size_t dots = range.find("..");
    const std::string_view lo = Trim(range.substr(0, dots));
    const std::string_view hi = dots == std::string_view::npos ? lo : Trim(range.substr(dots + 2));
    auto min = ParseDuration(lo);
    if (!min.ok()) return BadRule(text, fmt::format("bad duration '{}'", lo));
    auto max = ParseDuration(hi);
    if (!max.ok()) return BadRule(text, fmt::format("bad duration '{}'", hi));
    if (*max < *min) return BadRule(text, "the latency range runs backwards");
    rule.min_latency = *min;
    rule.max_latency = *max;
  } else {
    return BadRule(text, fmt::format("unknown action '{}'", action));
  }
  return rule;
}

}  // namespace

// ---- FaultRule and FaultPlan -------------------------------------------------------------------

const char* FaultKindName(FaultRule::Kind kind) {
  switch (kind) {
    case FaultRule::Kind::kLatency:
      return "latency";
    case FaultRule::Kind::kError:
      return "error";
    case FaultRule::Kind::kRefuse:
      return "refuse";
    case FaultRule::Kind::kHang:
      return "hang";
  }
  return "unknown";
}

std::string FaultRule::ToString() const {
  std::string out = target + ":" + FaultKindName(kind);
  if (kind == Kind::kLatency) {
    out += "=" + FormatExact(min_latency);
    if (max_latency != min_latency) out += ".." + FormatExact(max_latency);
  }
  if (probability != 1.0) out += "@" + FormatProbability(probability);
  return out;
}

bool FaultRule::Matches(std::string_view op) const {
  if (target == "*") return true;
  if (target.size() >= 2 && target.ends_with(".*")) {
    return op.starts_with(std::string_view(target).substr(0, target.size() - 1));
  }
  return op == target;
}

Result<FaultPlan> FaultPlan::Parse(std::string_view text) {
  std::vector<FaultRule> rules;
  while (!text.empty()) {
    const size_t semi = text.find(';');
    const std::string_view part = Trim(text.substr(0, semi));
    text = semi == std::string_view::npos ? std::string_view() : text.substr(semi + 1);
    if (part.empty()) continue;
    auto rule = ParseRule(part);
    if (!rule.ok()) return rule.error();
    rules.push_back(std::move(*rule));
  }
  return FaultPlan(std::move(rules));
}

std::string FaultPlan::ToString() const {
  std::string out;
  for (const FaultRule& rule : rules_) {
    if (!out.empty()) out += "; ";
    out += rule.ToString();
  }
  return out;
}

// ---- FaultInjector -----------------------------------------------------------------------------

namespace {

uint64_t SeedOrRandom(uint64_t seed) {
  if (seed != 0) return seed;
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

void LogPlan(const char* when, const FaultPlan& plan) {
  spdlog::warn("FAULT INJECTION IS ON ({}): {}", when,
               plan.empty() ? std::string("no rules") : plan.ToString());
}

}  // namespace

FaultInjector::FaultInjector(MetricsRegistry& metrics, FaultPlan initial, uint64_t seed)
    : metrics_(metrics),
      random_(SeedOrRandom(seed)),
      plan_(std::make_shared<const FaultPlan>(std::move(initial))) {
  metrics_
      .GetGauge("sluice_fault_injection_enabled",
                "1 when the fault-injecting store decorator is configured: never on in production")
      .Set(1);
  // The callback holds its own count, not `this`, so rendering stays safe whatever the
  // destruction order of the registry and the injector.
  auto rule_count = std::make_shared<std::atomic<size_t>>(plan_->rules().size());
  rule_count_ = rule_count;
  metrics_.AddGaugeCallback("sluice_fault_rules", "Fault injection rules in the active plan", {},
                            [rule_count] { return static_cast<double>(rule_count->load()); });
  for (size_t i = 0; i < kFaultTargets.size(); ++i) {
    counters_[i] = LookUpCounters(kFaultTargets[i]);
  }
  LogPlan("at start", *plan_);
}

FaultInjector::TargetCounters FaultInjector::LookUpCounters(std::string_view target) {
  const std::string name(target);
  TargetCounters counters;
  counters.calls = &metrics_.GetCounter("sluice_store_calls_total",
                                        "Store calls through the fault injector, by operation",
                                        {{"target", name}});
  for (FaultRule::Kind kind : kKinds) {
    counters.faults[static_cast<size_t>(kind)] = &metrics_.GetCounter(
        "sluice_faults_injected_total", "Faults injected into store calls, by operation and kind",
        {{"target", name}, {"kind", FaultKindName(kind)}});
  }
  return counters;
}

FaultInjector::TargetCounters FaultInjector::CountersFor(std::string_view target) {
  for (size_t i = 0; i < kFaultTargets.size(); ++i) {
    if (kFaultTargets[i] == target) return counters_[i];
  }
  return LookUpCounters(target);
}

void FaultInjector::SetPlan(FaultPlan plan) {
  auto next = std::make_shared<const FaultPlan>(std::move(plan));
  LogPlan("plan replaced", *next);
  std::lock_guard lock(mu_);
  rule_count_->store(next->rules().size());
  plan_ = std::move(next);
  generation_.fetch_add(1);
}

FaultPlan FaultInjector::plan() const {
  std::lock_guard lock(mu_);
  return *plan_;
}

bool FaultInjector::Fires(double probability) {
  if (probability >= 1.0) return true;
  if (probability <= 0.0) return false;
  constexpr int64_t kSteps = 1'000'000'000;
  return random_.Between(int64_t{0}, kSteps - 1) <
         static_cast<int64_t>(std::llround(probability * static_cast<double>(kSteps)));
}

awaitable<std::optional<Error>> FaultInjector::Before(std::string_view target) {
  const TargetCounters counters = CountersFor(target);
  counters.calls->Inc();
  std::shared_ptr<const FaultPlan> plan;
  uint64_t generation = 0;
  {
    // Read together, so a SetPlan between the two cannot leave a call hung by a dead plan.
    std::lock_guard lock(mu_);
    plan = plan_;
    generation = generation_.load();
  }
  if (plan->empty()) co_return std::nullopt;

  Duration delay{};
  uint64_t latencies = 0;
  std::optional<FaultRule::Kind> outcome;
  for (const FaultRule& rule : plan->rules()) {
    if (!rule.Matches(target) || !Fires(rule.probability)) continue;
    if (rule.kind == FaultRule::Kind::kLatency) {
      delay += rule.min_latency == rule.max_latency
                   ? rule.min_latency
                   : random_.Between(rule.min_latency, rule.max_latency);
      ++latencies;
      continue;
    }
    outcome = rule.kind;
    break;
  }
  if (outcome) counters.faults[static_cast<size_t>(*outcome)]->Inc();

  if (outcome == FaultRule::Kind::kRefuse) {
    Error e = MakeError(ErrorCode::kUnavailable, "injected fault: connection refused",
                        "connection_refused");
    e.never_sent = true;
    co_return e;
  }
  if (latencies > 0)
    counters.faults[static_cast<size_t>(FaultRule::Kind::kLatency)]->Inc(latencies);

  const auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  boost::system::error_code ec;
  if (delay > Duration::zero()) {
    timer.expires_after(delay);
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (outcome == FaultRule::Kind::kError) {
    co_return MakeError(ErrorCode::kUnavailable, "injected fault: storage error", "injected_error");
  }
  if (outcome == FaultRule::Kind::kHang) {
    const auto until = std::chrono::steady_clock::now() + kHangFor;
    while (generation_.load() == generation) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= until) break;
      timer.expires_after(std::min<std::chrono::steady_clock::duration>(kHangPoll, until - now));
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }
  co_return std::nullopt;
}

// ---- the decorators ----------------------------------------------------------------------------

namespace {

class FaultInjectingBlobStore final : public BlobStore {
 public:
  FaultInjectingBlobStore(BlobStore& inner, FaultInjector& injector)
      : inner_(inner), injector_(injector) {}

  awaitable<Status> Put(PasteId id, std::shared_ptr<const std::string> body,
                        admission::Deadline d) override {
    // The frame holds `body` through an injected latency or hang, as a slow store would.
    std::optional<Error> injected = co_await injector_.Before("blob.put");
    if (injected) co_return std::move(*injected);
    auto op = inner_.Put(id, std::move(body), d);
    co_return co_await std::move(op);
  }

  awaitable<Result<std::string>> Get(PasteId id, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("blob.get");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.Get(id, d);
  }

  awaitable<Status> Delete(PasteId id, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("blob.delete");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.Delete(id, d);
  }

  // A batch is one call to the store, so a blob.delete rule meets it once, as a bucket's
  // DeleteObjects would fail whole; the sweep's body-by-body fallback then meets the rule per
  // body. Passing the batches on keeps the inner store's own batching (meta.db leaves inline
  // bodies to the purge) in a fault-injection run, which otherwise measured the old writes.
  awaitable<Status> DeleteMany(std::vector<PasteId> ids, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("blob.delete");
    if (injected) co_return std::move(*injected);
    auto op = inner_.DeleteMany(std::move(ids), d);
    co_return co_await std::move(op);
  }

  awaitable<Status> DeleteManyBeforePurge(std::vector<PasteId> ids,
                                          admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("blob.delete");
    if (injected) co_return std::move(*injected);
    auto op = inner_.DeleteManyBeforePurge(std::move(ids), d);
    co_return co_await std::move(op);
  }

  awaitable<Result<std::vector<BlobInfo>>> List(std::string after, size_t limit,
                                                admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("blob.list");
    if (injected) co_return std::move(*injected);
    auto op = inner_.List(std::move(after), limit, d);
    co_return co_await std::move(op);
  }

 private:
  BlobStore& inner_;
  FaultInjector& injector_;
};

class FaultInjectingMetaStore final : public MetaStore {
 public:
  FaultInjectingMetaStore(MetaStore& inner, FaultInjector& injector)
      : inner_(inner), injector_(injector) {}

  awaitable<Status> Insert(PasteMeta meta, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.insert");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.Insert(meta, d);
  }

  awaitable<Result<PasteMeta>> Get(PasteId id, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.get");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.Get(id, d);
  }

  awaitable<Status> MarkDeleted(PasteId id, int64_t now, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.mark_deleted");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.MarkDeleted(id, now, d);
  }

  awaitable<Result<std::vector<OutboxEntry>>> DueOutbox(int64_t now, size_t limit,
                                                        admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.outbox");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.DueOutbox(now, limit, d);
  }

  awaitable<Status> FinishOutbox(int64_t seq, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.outbox");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.FinishOutbox(seq, d);
  }

  awaitable<Status> RetryOutboxLater(int64_t seq, int64_t next_attempt_at,
                                     admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.outbox");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.RetryOutboxLater(seq, next_attempt_at, d);
  }

  awaitable<Result<int64_t>> OldestOutboxAge(int64_t now, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.outbox");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.OldestOutboxAge(now, d);
  }

  awaitable<Result<bool>> HoldLease(std::string name, std::string holder, int64_t now,
                                    int64_t seconds, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.sweep");
    if (injected) co_return std::move(*injected);
    auto op = inner_.HoldLease(std::move(name), std::move(holder), now, seconds, d);
    co_return co_await std::move(op);
  }

  awaitable<Result<std::vector<PasteId>>> Expired(int64_t now, size_t limit,
                                                  admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.sweep");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.Expired(now, limit, d);
  }

  awaitable<Status> Purge(std::vector<PasteId> ids, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.sweep");
    if (injected) co_return std::move(*injected);
    auto op = inner_.Purge(std::move(ids), d);
    co_return co_await std::move(op);
  }

  awaitable<Result<std::vector<PasteId>>> Existing(std::vector<PasteId> ids,
                                                   admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.sweep");
    if (injected) co_return std::move(*injected);
    auto op = inner_.Existing(std::move(ids), d);
    co_return co_await std::move(op);
  }

  awaitable<Result<std::vector<PasteMeta>>> ListPastes(std::optional<PasteId> after, size_t limit,
                                                       admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.sweep");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.ListPastes(after, limit, d);
  }

  // Moderation: one target for all of it.
  awaitable<Result<ReportOutcome>> AddReport(AbuseReport report, ReportPolicy policy,
                                             admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    auto op = inner_.AddReport(std::move(report), policy, d);
    co_return co_await std::move(op);
  }

  awaitable<Result<ModerationOutcome>> SetModeration(PasteId id, ModerationChange change,
                                                     admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    auto op = inner_.SetModeration(id, std::move(change), d);
    co_return co_await std::move(op);
  }

  awaitable<Result<size_t>> PurgeReports(int64_t closed_before, int64_t now, size_t limit,
                                         admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.sweep");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.PurgeReports(closed_before, now, limit, d);
  }

  awaitable<Result<ReportPage>> OpenReports(std::optional<ReportCursor> after, size_t limit,
                                            admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    auto op = inner_.OpenReports(after, limit, d);
    co_return co_await std::move(op);
  }

  awaitable<Result<ReportCounts>> CountReports(admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.CountReports(d);
  }

  awaitable<Status> AddBlock(ClientBlock block, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    auto op = inner_.AddBlock(std::move(block), d);
    co_return co_await std::move(op);
  }

  awaitable<Status> AddTransparency(std::vector<TransparencyCount> counts,
                                    admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    auto op = inner_.AddTransparency(std::move(counts), d);
    co_return co_await std::move(op);
  }

  awaitable<Result<std::vector<TransparencyCount>>> TransparencyCounts(
      std::string first_month, size_t limit, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    auto op = inner_.TransparencyCounts(std::move(first_month), limit, d);
    co_return co_await std::move(op);
  }

  awaitable<Result<std::vector<AbuseReport>>> ReportsOf(PasteId id,
                                                        admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.ReportsOf(id, d);
  }

  awaitable<Result<std::vector<ClientBlock>>> ActiveBlocks(int64_t now,
                                                           admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.ActiveBlocks(now, d);
  }

  awaitable<Result<bool>> BlockContent(BlockedContent entry, int64_t max_entries,
                                       admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    auto op = inner_.BlockContent(std::move(entry), max_entries, d);
    co_return co_await std::move(op);
  }

  awaitable<Result<bool>> UnblockContent(BodyDigest sha256, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.UnblockContent(sha256, d);
  }

  awaitable<Result<BlockedContentPage>> BlockedContents(std::optional<BodyDigest> after,
                                                        size_t limit,
                                                        admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.BlockedContents(after, limit, d);
  }

  awaitable<Result<NoticeOutcome>> AddNotice(Notice notice, int64_t max_notices,
                                             admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    auto op = inner_.AddNotice(std::move(notice), max_notices, d);
    co_return co_await std::move(op);
  }

  awaitable<Result<std::vector<Notice>>> Notices(int64_t after_id, size_t limit,
                                                 admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.Notices(after_id, limit, d);
  }

  awaitable<Result<bool>> ImportNotice(Notice notice, int64_t max_notices,
                                       admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    auto op = inner_.ImportNotice(std::move(notice), max_notices, d);
    co_return co_await std::move(op);
  }

  awaitable<Result<std::vector<Notice>>> OpenNotices(size_t limit, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.OpenNotices(limit, d);
  }

  awaitable<Result<std::vector<Notice>>> CloseNotices(PasteId id, int64_t at,
                                                      admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.CloseNotices(id, at, d);
  }

  awaitable<Result<BlockedContentsState>> BlockedContentsVersion(admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.BlockedContentsVersion(d);
  }

  awaitable<Status> AddCreatorToken(CreatorToken token, int64_t max_live, int64_t now,
                                    admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    auto op = inner_.AddCreatorToken(std::move(token), max_live, now, d);
    co_return co_await std::move(op);
  }

  awaitable<Result<bool>> RevokeCreatorToken(std::string id, int64_t now,
                                             admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    auto op = inner_.RevokeCreatorToken(std::move(id), now, d);
    co_return co_await std::move(op);
  }

  awaitable<Result<CreatorTokenList>> CreatorTokens(admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.CreatorTokens(d);
  }

  awaitable<Result<int64_t>> CreatorTokensVersion(admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.CreatorTokensVersion(d);
  }

  awaitable<Status> AddAudit(AuditEntry entry, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    auto op = inner_.AddAudit(std::move(entry), d);
    co_return co_await std::move(op);
  }

  awaitable<Result<std::vector<AuditEntry>>> AuditTrail(size_t limit,
                                                        admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.moderation");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.AuditTrail(limit, d);
  }

  // Burn after reading and storage accounting, under the existing targets.
  awaitable<Result<PasteMeta>> Claim(PasteId id, int64_t now, admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.mark_deleted");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.Claim(id, now, d);
  }

  awaitable<Result<uint64_t>> LiveBytes(admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.sweep");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.LiveBytes(d);
  }

  // The first write of a create: under the insert's target.
  awaitable<Result<StorageReservation>> ReserveStorage(StorageRequest request,
                                                       admission::Deadline d) override {
    std::optional<Error> injected = co_await injector_.Before("meta.insert");
    if (injected) co_return std::move(*injected);
    co_return co_await inner_.ReserveStorage(request, d);
  }

 private:
  MetaStore& inner_;
  FaultInjector& injector_;
};

}  // namespace

std::unique_ptr<BlobStore> MakeFaultInjectingBlobStore(BlobStore& inner, FaultInjector& injector) {
  return std::make_unique<FaultInjectingBlobStore>(inner, injector);
}

std::unique_ptr<MetaStore> MakeFaultInjectingMetaStore(MetaStore& inner, FaultInjector& injector) {
  return std::make_unique<FaultInjectingMetaStore>(inner, injector);
}

}  // namespace sluice::store
