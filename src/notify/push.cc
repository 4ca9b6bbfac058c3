// The sinks' threads, queues and pacing (include/sluice/notify/push.h says why it is shaped so).
#include "sluice/notify/push.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "sluice/admission/retry_budget.h"
#include "sluice/admission/token_bucket.h"
#include "sluice/common/thread_name.h"

namespace sluice::notify {
namespace {

using service::OperatorEvent;

constexpr char kEventsHelp[] =
    "Operator events by sink and outcome: delivered, failed (every try failed or the budget "
    "allowed no retry), dropped (the sink's queue was full, or the server stopped first)";
constexpr char kDeliveriesHelp[] =
    "Deliveries (posts, command runs) by sink and result; a digest is one delivery of many events";

nlohmann::json EventObject(const OperatorEvent& event) {
  nlohmann::json fields = nlohmann::json::object();
  for (const auto& [name, value] : event.fields) fields[name] = value;
  return {{"kind", event.kind},
          {"paste", event.paste_id},
          {"at", event.at},
          {"summary", event.summary},
          {"fields", std::move(fields)}};
}

}  // namespace

std::string EventJson(const OperatorEvent& event) {
  // Invalid UTF-8 cannot reach here (reports' notes are checked), but a receiver's parser must
  // never see it: replace rather than throw.
  return EventObject(event).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string DigestJson(const std::vector<OperatorEvent>& events, size_t listed, int64_t now) {
  std::map<std::string, size_t> by_kind;
  for (const OperatorEvent& event : events) ++by_kind[event.kind];
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < events.size() && i < listed; ++i) list.push_back(EventObject(events[i]));
  std::vector<std::string> counts;
  for (const auto& [kind, n] : by_kind) counts.push_back(fmt::format("{} {}", n, kind));
  nlohmann::json digest = {
      {"kind", "digest"},
      {"at", now},
      {"count", events.size()},
      {"by_kind", by_kind},
      {"summary", fmt::format("{} events: {}", events.size(), fmt::join(counts, ", "))},
      {"events", std::move(list)},
      {"unlisted", events.size() - std::min(events.size(), listed)}};
  return digest.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Signature(std::string_view secret, int64_t unix_seconds, std::string_view body) {
  const std::string signed_text = fmt::format("{}.{}", unix_seconds, body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(signed_text.data()), signed_text.size(), mac, &size);
  return fmt::format("t={},v1={:02x}", unix_seconds,
                     fmt::join(std::basic_string_view<unsigned char>(mac, size), ""));
}

// One sink: its queue, its pacing, its retry budget and its thread.
class Push::Sink {
 public:
  Sink(std::unique_ptr<Transport> transport, const PushOptions& options, const Clock& clock,
       MetricsRegistry& metrics)
      : transport_(std::move(transport)),
        options_(options),
        clock_(clock),
        deliveries_(admission::TokenBucketPolicy{options.deliveries_per_minute / 60, options.burst},
                    clock),
        // A receiver that is down is not retried into the ground: retries are a tenth of the
        // deliveries, with a floor of one a minute for a quiet sink.
        retries_(admission::RetryBudgetOptions{0.1, 1.0 / 60, std::chrono::minutes(1), 6}, clock),
        delivered_(Events(metrics, "delivered")),
        failed_(Events(metrics, "failed")),
        dropped_(Events(metrics, "dropped")),
        deliveries_ok_(
            metrics.GetCounter("sluice_push_deliveries_total", kDeliveriesHelp,
                               {{"sink", std::string(transport_->name())}, {"result", "ok"}})),
        deliveries_failed_(
            metrics.GetCounter("sluice_push_deliveries_total", kDeliveriesHelp,
                               {{"sink", std::string(transport_->name())}, {"result", "failed"}})),
        thread_([this] { Run(); }) {}

  ~Sink() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    stop_.store(true);
    wake_.notify_all();
    thread_.join();
    dropped_.Inc(queue_.size());
  }

  void Publish(const OperatorEvent& event) noexcept {
    {
      std::lock_guard lock(mu_);
      if (queue_.size() < options_.queue) {
        try {
          queue_.push_back(event);
        } catch (...) {
          dropped_.Inc();
          return;
        }
        wake_.notify_one();
        return;
      }
    }
    dropped_.Inc();
  }

 private:
  Counter& Events(MetricsRegistry& metrics, const char* outcome) {
    return metrics.GetCounter("sluice_push_events_total", kEventsHelp,
                              {{"sink", std::string(transport_->name())}, {"outcome", outcome}});
  }

  void Run() {
    NameThisThread(fmt::format("sluice-push-{}", transport_->name()));
    std::unique_lock lock(mu_);
    while (true) {
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      // Pacing: while the bucket is empty the queue fills, and what waited leaves as one digest.
      while (!stopping_) {
        const admission::TakeDecision taken = deliveries_.TryTake();
        if (taken.allowed) break;
        wake_.wait_for(lock, std::min<Duration>(taken.retry_after, std::chrono::seconds(1)));
      }
      if (stopping_) return;
      std::vector<OperatorEvent> batch(std::make_move_iterator(queue_.begin()),
                                       std::make_move_iterator(queue_.end()));
      queue_.clear();
      lock.unlock();
      Deliver(batch);
      lock.lock();
    }
  }

  void Deliver(const std::vector<OperatorEvent>& batch) {
    const bool single = batch.size() == 1;
    const std::string body = single
                                 ? EventJson(batch.front())
                                 : DigestJson(batch, options_.digest_events, clock_.UnixSeconds());
    const std::string_view kind = single ? std::string_view(batch.front().kind) : "digest";
    retries_.RecordRequest();
    Status delivered = transport_->Deliver(body, kind, stop_);
    for (int attempt = 1; !delivered.ok() && attempt < options_.attempts && !stop_.load();
         ++attempt) {
      if (!retries_.TryWithdrawRetry()) break;
      // 1 s, 2 s, 4 s ... between tries, cut short by a stop.
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, std::chrono::seconds(1 << std::min(attempt - 1, 5)),
                     [&] { return stopping_; });
      lock.unlock();
      if (stop_.load()) break;
      delivered = transport_->Deliver(body, kind, stop_);
    }
    if (delivered.ok()) {
      deliveries_ok_.Inc();
      delivered_.Inc(batch.size());
      return;
    }
    deliveries_failed_.Inc();
    failed_.Inc(batch.size());
    // One line a minute at most: a dead receiver must not become a flood of log lines either.
    const int64_t now = clock_.UnixSeconds();
    if (now - last_warned_ >= 60) {
      last_warned_ = now;
      spdlog::warn(
          "push: the {} sink failed to deliver {} event(s): {} (this line once a minute "
          "at most; sluice_push_events_total{{outcome=\"failed\"}} counts them)",
          transport_->name(), batch.size(), delivered.error().message);
    }
  }

  const std::unique_ptr<Transport> transport_;
  const PushOptions options_;
  const Clock& clock_;
  admission::TokenBucket deliveries_;
  admission::RetryBudget retries_;
  Counter& delivered_;
  Counter& failed_;
  Counter& dropped_;
  Counter& deliveries_ok_;
  Counter& deliveries_failed_;
  int64_t last_warned_ = 0;  // the sink's thread only

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<OperatorEvent> queue_;
  bool stopping_ = false;
  std::atomic<bool> stop_{false};  // what a transport checks while it waits on a receiver
  std::thread thread_;             // last: it starts once everything above exists
};

Push::Push(std::vector<std::unique_ptr<Transport>> transports, PushOptions options,
           const Clock& clock, MetricsRegistry& metrics) {
  for (auto& transport : transports) {
    sinks_.push_back(std::make_unique<Sink>(std::move(transport), options, clock, metrics));
  }
}

std::unique_ptr<Push> Push::FromOptions(const PushOptions& options, const Clock& clock,
                                        MetricsRegistry& metrics) {
  std::vector<std::unique_ptr<Transport>> transports;
  if (!options.webhook_url.empty()) {
    transports.push_back(
        MakeWebhook(options.webhook_url, options.webhook_secret, options.timeout, clock));
  }
  if (!options.command.empty()) transports.push_back(MakeCommand(options.command, options.timeout));
  if (transports.empty()) return nullptr;
  return std::make_unique<Push>(std::move(transports), options, clock, metrics);
}

Push::~Push() = default;

void Push::Publish(OperatorEvent event) noexcept {
  for (auto& sink : sinks_) sink->Publish(event);
}

}  // namespace sluice::notify
