// What the operator is told as it happens (docs/moderation.md, "Push"): each report, each
// withholding, and later each notice and deadline warning. The service only publishes; where an
// event goes (a webhook, a local command) and how it gets there is src/notify's, so a dead or slow
// receiver is never the service's concern.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sluice::service {

struct OperatorEvent {
  /// "report", "withhold" (and, with the notice intake, "notice" and "deadline_warning").
  std::string kind;
  std::string paste_id;
  /// Unix seconds.
  int64_t at = 0;
  /// One line for a person reading a chat message or a mail subject.
  std::string summary;
  /// The event's own facts (reason, network, votes), as text.
  std::vector<std::pair<std::string, std::string>> fields{};
};

class OperatorEventSink {
 public:
  virtual ~OperatorEventSink() = default;
  /// Takes the event or drops it (counted); never blocks on delivery and never throws, since it
  /// is called on the path of a report.
  virtual void Publish(OperatorEvent event) noexcept = 0;
};

}  // namespace sluice::service
