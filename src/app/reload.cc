#include "reload.h"

#include <algorithm>
#include <array>

namespace sluice::app {

namespace {

// Each is read per request from a snapshot that ServerProcess::Reload replaces: the admission
// limits (service::AdmissionControl::Reconfigure), the edge's timeouts, caps, trusted proxies and
// access log (http::HttpServer::Reconfigure), the service's size, TTL, budget and quota limits
// (service::PasteService::Reconfigure), and the log level. Anything not here keeps the value
// the server started with, and a reload that finds it changed says so.
constexpr std::array<std::string_view, 42> kLive = {
    // admission
    "ip_create_rate",
    "ip_create_burst",
    "ip_create_bytes_rate",
    "ip_create_bytes_burst",
    "global_create_rate",
    "global_create_burst",
    "global_create_bytes_rate",
    "global_create_bytes_burst",
    "create_slots",
    "create_slot_bytes",
    "create_slots_per_client",
    "aimd_target",
    "read_slots",
    "ip_read_rate",
    "ip_read_burst",
    "report_rate",
    "report_burst",
    "fill_cap",
    "fill_cap_per_client",
    "retry_after_min",
    "retry_after_max",
    "processes",
    // the edge
    "trusted_proxy",
    "access_log",
    "access_log_sample",
    "max_connections",
    "max_connections_per_client",
    "idle_timeout",
    "first_byte_timeout",
    "header_timeout",
    "body_timeout",
    "min_body_rate",
    "min_body_rate_grace",
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
