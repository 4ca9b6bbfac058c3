#include "sluice/service/abuse_watch.h"

#include "sluice/admission/client_key.h"

namespace sluice::service {

namespace {

constexpr const char* kBudgetHelp =
    "Client keys that created in the last minute, by the share of their create budget they used "
    "(a snapshot: read the buckets as they are, not through rate()). Many keys low: growth; a few "
    "at 1: abuse";

}  // namespace

const std::vector<double>& AbuseWatch::BudgetBounds() {
  static const std::vector<double> kBounds = {0.1, 0.25, 0.5, 0.75, 0.9, 1.0};
  return kBounds;
}

AbuseWatch::AbuseWatch(AdmissionControl& admission, const Clock& clock, MetricsRegistry& metrics,
                       admission::HeavyHittersOptions options)
    : admission_(admission), keys_(options, clock), prefixes_(options, clock), gauges_(metrics) {
  gauges_.AddHistogram("sluice_client_budget_use", kBudgetHelp, {}, BudgetBounds(),
                       [this] { return BudgetSnapshot(); });
  gauges_.Add("sluice_global_cap_saturation",
              "Create slots in flight over the create cap, 0 to 1 (docs/overload.md, \"Abuse or "
              "growth\")",
              {}, [this] { return admission_.CreateSlotSaturation(); });
}

void AbuseWatch::Note(std::string_view client_key, admission::HeavyHitters::Event event) {
  keys_.Note(client_key, event);
  prefixes_.Note(admission::ClientPrefix(client_key), event);
}

void AbuseWatch::NoteCreate(std::string_view client_key) {
  Note(client_key, admission::HeavyHitters::Event::kCreate);
}

void AbuseWatch::NoteRefusal(std::string_view client_key) {
  Note(client_key, admission::HeavyHitters::Event::kRefusal);
}

Histogram::Snapshot AbuseWatch::BudgetSnapshot() const {
  const auto& bounds = BudgetBounds();
  const std::vector<uint64_t> counts = admission_.CreateBudgetUse(bounds);
  Histogram::Snapshot snap;
  uint64_t running = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    running += counts[i];
    if (i < bounds.size()) snap.cumulative.push_back(running);
    // The sum takes each bucket at its upper bound (the +Inf bucket at 1): only a rough mean.
    snap.sum += double(counts[i]) * (i < bounds.size() ? bounds[i] : 1.0);
  }
  snap.count = running;
  return snap;
}

AbuseAggregates AbuseWatch::Aggregates() const {
  AbuseAggregates out;
  out.window_seconds =
      std::chrono::duration_cast<std::chrono::seconds>(keys_.options().window).count();
  out.budget_use = admission_.CreateBudgetUse(BudgetBounds());
  out.global_cap_saturation = admission_.CreateSlotSaturation();
  return out;
}

AbuseView AbuseWatch::View(size_t top) const {
  AbuseView view;
  view.aggregates = Aggregates();
  for (const auto& h : keys_.Top(top)) view.top_keys.push_back({h.key, h.creates, h.refusals});
  for (const auto& h : prefixes_.Top(top)) {
    view.top_prefixes.push_back({h.key, h.creates, h.refusals});
  }
  return view;
}

}  // namespace sluice::service
