// AbuseWatch: abuse told apart from growth at a glance (docs/overload.md, "Abuse or growth").
// Who created and who was refused most in the last minute, by client key and by network prefix
// (admission::HeavyHitters, bounded memory), and how the clients spread over their create budget
// (AdmissionControl::CreateBudgetUse): many keys each under budget means growth, a few keys at
// budget means abuse. /metrics gets the distribution and the saturation, never a key; /status gets
// the top lists with keys as pseudonyms; the admin API gets them in full.
#pragma once

#include <array>
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

struct AbuseView {
  int64_t window_seconds = 60;
  std::vector<AbuseRow> top_keys;
  std::vector<AbuseRow> top_prefixes;
  /// Keys by the share of their create budget used: counts for each of BudgetBounds(), then for
  /// above them all (not cumulative).
  std::vector<uint64_t> budget_use;
  /// Create slots in flight over the create cap, 0 to 1.
  double global_cap_saturation = 0;
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

  enum class Names {
    kFull,        // the admin API: keys as they are
    kPseudonyms,  // public: keys as Pseudonym(), prefixes that are not networks too
  };
  AbuseView View(Names names, size_t top = 10) const;

  /// A short name for a key, the same for the life of the process and unguessable without its
  /// random secret: the first 8 hex digits of HMAC-SHA-256(secret, key).
  std::string Pseudonym(std::string_view client_key) const;

 private:
  void Note(std::string_view client_key, admission::HeavyHitters::Event event);
  Histogram::Snapshot BudgetSnapshot() const;

  AdmissionControl& admission_;
  admission::HeavyHitters keys_;
  admission::HeavyHitters prefixes_;
  std::array<unsigned char, 32> secret_{};
  GaugeCallbacks gauges_;  // last: its callbacks read the members above
};

}  // namespace sluice::service
