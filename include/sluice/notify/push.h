// Push: each operator event (include/sluice/service/operator_events.h) goes to the operator's
// sinks, a webhook and a local command, on threads of their own (docs/moderation.md, "Push").
//
// What a receiver can cost the server is bounded on purpose: Publish is a push onto a bounded
// queue under a mutex (a full queue drops the event and counts it), and everything slow (DNS, a
// connect, a receiver that answers after ten seconds, a command that hangs) happens on the sink's
// own thread with a timeout. A flood becomes a digest: deliveries are paced by a token bucket, and
// what piles up between two deliveries leaves as one post that counts it all.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/common/result.h"
#include "sluice/service/operator_events.h"

namespace sluice::notify {

struct PushOptions {
  /// http:// or https:// URL that gets each delivery as a JSON POST; empty: no webhook.
  std::string webhook_url;
  /// HMAC-SHA256 key of the X-Sluice-Signature header; empty: deliveries are not signed.
  std::string webhook_secret;
  /// Run by /bin/sh -c with a delivery's JSON on its standard input (sendmail, a script); empty:
  /// none.
  std::string command;
  /// One delivery, connect to answer (or the command's whole run). Default: 5 s.
  Duration timeout = std::chrono::seconds(5);
  /// Events waiting per sink; past it an event is dropped and counted. Default: 1000.
  size_t queue = 1000;
  /// Deliveries per minute per sink once the burst is spent. Default: 6.
  double deliveries_per_minute = 6;
  /// Deliveries a sink may make at once. Default: 3.
  double burst = 3;
  /// Events a digest lists whole; it counts the rest by kind. Default: 20.
  size_t digest_events = 20;
  /// Tries of one delivery, the retries drawn from a retry budget. Default: 3.
  int attempts = 3;
};

/// How a delivery leaves. One per sink, called only from that sink's thread.
class Transport {
 public:
  virtual ~Transport() = default;
  /// "webhook" or "command": the sink's label in metrics and logs.
  virtual std::string_view name() const = 0;
  /// Delivers one body of `kind` ("report", ..., "digest"). Gives up when `stop` becomes true.
  virtual Status Deliver(const std::string& body, std::string_view kind,
                         const std::atomic<bool>& stop) = 0;
};

/// A webhook over libcurl (src/notify/webhook.cc). Throws std::invalid_argument when `url` is not
/// http(s)://.
std::unique_ptr<Transport> MakeWebhook(std::string url, std::string secret, Duration timeout,
                                       const Clock& clock);
/// A local command (src/notify/command.cc).
std::unique_ptr<Transport> MakeCommand(std::string command, Duration timeout);

/// The JSON of one event.
std::string EventJson(const service::OperatorEvent& event);
/// The JSON of a digest: every event of `events` counted by kind, the first `listed` given whole.
std::string DigestJson(const std::vector<service::OperatorEvent>& events, size_t listed,
                       int64_t now);
/// The X-Sluice-Signature header's value, "t=UNIX,v1=HEX": HMAC-SHA256 under `secret` of
/// "UNIX.BODY", so a receiver can refuse a replayed delivery by its time.
std::string Signature(std::string_view secret, int64_t unix_seconds, std::string_view body);

class Push final : public service::OperatorEventSink {
 public:
  /// One sink per transport, each on its own thread from now on. `clock` and `metrics` must
  /// outlive the Push.
  Push(std::vector<std::unique_ptr<Transport>> transports, PushOptions options, const Clock& clock,
       MetricsRegistry& metrics);
  /// The sinks `options` names (webhook, command); none when it names none.
  static std::unique_ptr<Push> FromOptions(const PushOptions& options, const Clock& clock,
                                           MetricsRegistry& metrics);
  /// Stops the threads; a delivery under way is abandoned (its events counted as failed), and
  /// events still queued are counted as dropped.
  ~Push() override;

  void Publish(service::OperatorEvent event) noexcept override;
  size_t sinks() const { return sinks_.size(); }

 private:
  class Sink;
  std::vector<std::unique_ptr<Sink>> sinks_;
};

}  // namespace sluice::notify
