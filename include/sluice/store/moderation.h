// The rows of moderation (README.md, "Moderation"): abuse reports, blocked clients and the audit
// trail of operator actions. The MetaStore keeps them beside the pastes they are about.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sluice/store/paste.h"

namespace sluice::store {

/// One client's report of one paste. `reason` is one of the names the service accepts
/// (src/service/moderation.cc); `note` is free text of at most 1000 bytes.
struct AbuseReport {
  PasteId id;
  std::string client_key;
  std::string reason;
  std::string note;
  int64_t at = 0;
};

struct ReportOutcome {
  /// False when this client key had already reported the paste: stored once, counted once.
  bool counted = false;
  /// Distinct client keys with an open report of the paste, this one included.
  int64_t open_reports = 0;
};

/// A paste with open reports, as the review queue lists it.
struct ReportSummary {
  PasteId id;
  int64_t reports = 0;
  /// The distinct reasons given, sorted.
  std::vector<std::string> reasons{};
  /// The newest open report's time and note.
  int64_t latest_at = 0;
  std::string latest_note{};
  Moderation moderation = Moderation::kNone;
};

/// Creates from `prefix` (a client key, an address or a CIDR block) are refused until `until`.
struct ClientBlock {
  std::string prefix;
  std::string reason;
  int64_t created_at = 0;
  int64_t until = 0;
};

/// One operator action (or the automatic withholding of a paste) as the audit trail keeps it.
struct AuditEntry {
  int64_t at = 0;
  /// "withhold", "takedown", "dismiss", "block".
  std::string action;
  /// The paste id or the blocked prefix.
  std::string target;
  std::string detail;
};

}  // namespace sluice::store
