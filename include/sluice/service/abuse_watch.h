// AbuseWatch: abuse told apart from growth at a glance (docs/overload.md, "Abuse or growth").
// Who created and who was refused most in the last minute, by client key and by network prefix
// (admission::HeavyHitters, bounded memory), and how the clients spread over their create budget
// (AdmissionControl::CreateBudgetUse): many keys each under budget means growth, a few keys at
// budget means abuse. /metrics and the public status (/status, /api/v1/status) get the
// aggregates, the distribution and the saturation, which name nobody; the top lists, keys and
// prefixes in full, are the admin listener's only (/admin/abuse, its /status): even a pseudonym
// or a /48 ties a public paste's creation to one client's network for whoever polls the page.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/admission/heavy_hitters.h"
#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/service/admission_control.h"

namespace sluice::service {

/// One row of a top list: a client key (or its pseudonym) or a prefix.
struct AbuseRow {
  std::string name;
  uint64_t creates = 0;
  uint64_t refusals = 0;
};

/// What may be shown to anyone: counts over all clients, none named.
struct AbuseAggregates {
  int64_t window_seconds = 60;
  /// Keys by the share of their create budget used: counts for each of BudgetBounds(), then for
  /// above them all (not cumulative).
  std::vector<uint64_t> budget_use;
  /// Create slots in flight over the create cap, 0 to 1.
  double global_cap_saturation = 0;
};

/// The operator's view: the aggregates and who is behind them.
struct AbuseView {
  AbuseAggregates aggregates;
  /// Client keys and their prefixes (IPv4 /24, IPv6 /48) as they are.
  std::vector<AbuseRow> top_keys;
  std::vector<AbuseRow> top_prefixes;
};

/// Thread-safe. `admission` must outlive it.
class AbuseWatch {
 public:
  /// The histogram's upper bounds: shares of the create budget a minute allows.
  static const std::vector<double>& BudgetBounds();

  AbuseWatch(AdmissionControl& admission, const Clock& clock, MetricsRegistry& metrics,
             admission::HeavyHittersOptions options = {});

  /// A create that was stored.
  void NoteCreate(std::string_view client_key);
  /// A create refused for this client: 429 (rate limits), 403 (blocked), 507 (storage quota).
  void NoteRefusal(std::string_view client_key);

  /// For the public status: nothing in it names a client or a network.
  AbuseAggregates Aggregates() const;
  /// For the admin listener only: the aggregates and the `top` keys and prefixes in full.
  AbuseView View(size_t top = 10) const;

 private:
  void Note(std::string_view client_key, admission::HeavyHitters::Event event);
  Histogram::Snapshot BudgetSnapshot() const;

  AdmissionControl& admission_;
  admission::HeavyHitters keys_;
  admission::HeavyHitters prefixes_;
  GaugeCallbacks gauges_;  // last: its callbacks read the members above
};

}  // namespace sluice::service
