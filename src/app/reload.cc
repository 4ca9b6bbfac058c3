#include "reload.h"

#include <algorithm>
#include <array>

namespace sluice::app {

namespace {

// Each is read per request or per call from a snapshot or an atomic that ServerProcess::Reload
// replaces, or set on an object that keeps its state: the admission limits
// (service::AdmissionControl::Reconfigure), the edge's timeouts, caps, trusted proxies and access
// log (http::HttpServer::Reconfigure), the service's size, TTL, budget and quota limits
// (service::PasteService::Reconfigure), who may create (the same), the stores' per-call timeouts
// (service::LiveCallTimeouts), the breakers and the retry budget
// (admission::CircuitBreaker::SetThresholds, admission::RetryBudget::SetRatio), the view's ladder
// (render::ViewRenderer::Reconfigure), and the log level. Anything not here keeps the value the
// server started with, and a reload that finds it changed says so.
//
// Restart-only, and why (the backends, listeners, pools, threads and sizes of memory need no
// reason: they are what the process is built of):
// - create_cap: it chooses the kind of limiter (a fixed cap or an AIMD one), not its numbers;
//   replacing the limiter would orphan the permits in flight, which the one built keeps counting.
//   Its numbers (create_slots, create_slot_bytes, aimd_target) are live.
// - highlight_cache_bytes, cache_bytes: the caches are sized when built; shrinking one live would
//   mean evicting under every reader's lock.
// - sweep_interval, background_share, background_start_delay, reap_interval, orphan_age_floor,
//   report_retention: the janitor's loops take them when they start (worker::Janitor::Start);
//   they pace background work only, so waiting for a restart costs no request anything.
// - edge_purge: the purge client is built once and held by the janitor, whose outbox passes may be
//   using it at any moment.
// - fault_injection, faults: the fault layer wraps the stores when they are built; the plan itself
//   changes live through the admin listener (PUT /debug/faults).
// - inline_body_bytes: where a body goes decides where it is looked for; the blob store is built
//   with it.
// - proof_of_work, proof_of_work_expiry, proof_of_work_key_file: the challenges' signer is built
//   at start, and a new key or expiry would void the challenges clients are solving.
//   proof_of_work_share and proof_of_work_difficulty are live.
// - push_*: the sinks are threads with their queues, built at start (include/sluice/notify/push.h);
//   a sink swapped live would drop what its queue holds.
// - metrics_on_public, admin_token_file: the listeners' route tables and the admin token are set
//   when the listeners are built.
// - abuse_contact, contact_languages, security_txt_lifetime, takedown_deadline,
//   abuse_policy_text, robots: the public contact is made once at start and is in every page a
//   thread has prepared (src/http/public_contact.h); a new one would leave old footers behind.
// - moderation_timeout: the stores' moderation calls take a new one at once, but a report's whole
//   budget (twice it) is the moderation service's, set when it is built.
// highlight_slots is live up to the workers started, and PostgreSQL's statement timeouts stay as
// at start; ServerProcess::Reload names both when a reload asks for more.
constexpr std::array<std::string_view, 97> kLive = {
    // admission
    "ip_create_rate",
    "ip_create_burst",
    "ip_create_bytes_rate",
    "ip_create_bytes_burst",
    "global_create_rate",
    "token_reserved_share",
    "global_create_burst",
    "global_create_bytes_rate",
    "global_create_bytes_burst",
    "create_slots",
    "create_slot_bytes",
    "create_slots_per_client",
    "create_slots_per_network",
    "network_prefix_v4",
    "network_prefix_v6",
    "aimd_target",
    "read_slots",
    "ip_read_rate",
    "ip_read_burst",
    "report_rate",
    "report_burst",
    "delete_rate",
    "delete_burst",
    "fill_cap",
    "fill_cap_per_client",
    "retry_after_min",
    "retry_after_max",
    "processes",
    // the edge
    "trusted_proxy",
    "forward_auth_header",
    "access_log",
    "access_log_sample",
    "max_connections",
    "max_connections_per_client",
    "max_connections_per_network",
    "idle_timeout",
    "idle_timeout_floor",
    "pressure_start",
    "pressure_full",
    "first_byte_timeout",
    "header_timeout",
    "body_timeout",
    "min_body_rate",
    "min_body_rate_grace",
    "min_body_rate_at_pressure",
    "drain_timeout",
    // the log
    "log_level",
    // the service (service::PasteService::Reconfigure)
    "max_paste_bytes",
    "default_ttl",
    "max_ttl",
    "create_budget",
    "read_budget",
    "delete_budget",
    "max_storage_bytes",
    "verify_bodies",
    "read_only",
    "read_only_retry_after",
    // who may create; the networks file is read again on every reload, changed or not
    "create_access",
    "max_creator_tokens",
    "creator_tokens_refresh",
    "create_access_text",
    "create_networks",
    "create_networks_file",
    "proof_of_work_share",
    "proof_of_work_difficulty",
    "local_cache_ttl",
    // the reputation feeds: every file is read again on every reload, changed or not, on a thread
    // of its own (ServerProcess::ReloadFeeds)
    "feeds",
    "feed_refuse_text",
    "feed_class_ip_create_rate",
    "feed_class_ip_create_burst",
    "feed_class_global_create_rate",
    "feed_class_global_create_burst",
    // the stores' per-call timeouts (with the service's copies of put, insert and cache)
    "put_timeout",
    "insert_timeout",
    "meta_get_timeout",
    "blob_get_timeout",
    "cache_timeout",
    // breakers and the retry budget
    "breaker_refusals",
    "breaker_open_for",
    "breaker_open_for_failover",
    "retry_budget_ratio",
    // the view's ladder
    "highlight_slots",
    "render_timeout",
    "render_delay",
    "large_paste_bytes",
    "highlight_utilization",
    "shed_release_rate",
    // operating
    "report_hide_threshold",
    "report_network_prefix_v4",
    "report_network_prefix_v6",
    "report_withholds_per_network_per_day",
    "report_withholds_per_hour",
    "report_global_rate",
    "report_global_burst",
    "max_open_reports",
    "max_notices",
    "put_bytes_per_day_plan",
};

}  // namespace

bool IsLiveSetting(std::string_view key) {
  return std::find(kLive.begin(), kLive.end(), key) != kLive.end();
}

ReloadChanges CompareForReload(const Settings& running, const Settings& applied,
                               const Settings& next) {
  ReloadChanges changes;
  for (std::string& key : next.ChangedFrom(applied)) {
    if (IsLiveSetting(key)) changes.live.push_back(std::move(key));
  }
  for (std::string& key : next.ChangedFrom(running)) {
    if (!IsLiveSetting(key)) changes.restart.push_back(std::move(key));
  }
  return changes;
}

}  // namespace sluice::app
