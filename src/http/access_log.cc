#include "access_log.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <random>

#include "sluice/common/log_fields.h"

namespace sluice::http {

namespace {

constexpr size_t kMaxRequestId = 128;

bool ValidRequestId(std::string_view id) {
  if (id.empty() || id.size() > kMaxRequestId) return false;
  for (const char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '+' || c == '/' || c == '=' ||
                    c == '-';
    if (!ok) return false;
  }
  return true;
}

// One generator per loop thread: no lock, and nothing shared between threads.
std::mt19937_64& Generator() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return generator;
}

}  // namespace

std::string RequestIdFor(std::string_view header, const std::string& peer,
                         const admission::TrustedProxies& trusted) {
  if (!header.empty() && !trusted.empty() && ValidRequestId(header)) {
    const auto ip = admission::IpAddress::Parse(peer);
    if (ip && trusted.Contains(*ip)) return std::string(header);
  }
  return fmt::format("{:016x}", Generator()());
}

std::string ClientKeyPrefix(std::string_view key) {
  if (key.find(':') != std::string_view::npos) {
    // "2001:db8:1:2::/64" -> "2001:db8:1::/48"
    size_t end = 0;
    for (int colons = 0; end < key.size(); ++end) {
      if (key[end] == ':' && ++colons == 3) break;
    }
    // Fewer groups ("::/64", "fe80::/64"): what there is before the slash.
    std::string_view head = end < key.size() ? key.substr(0, end) : key.substr(0, key.find('/'));
    while (head.ends_with(':')) head.remove_suffix(1);  // "2001:db8::/64" is "2001:db8" first
    return fmt::format("{}::/48", head);
  }
  const size_t last = key.rfind('.');
  if (last == std::string_view::npos) return "?";
  return fmt::format("{}.0/24", key.substr(0, last));
}

bool AccessLogWants(unsigned status, double sample) {
  if (status >= 500 || sample >= 1.0) return true;
  if (sample <= 0.0) return false;
  return std::uniform_real_distribution<double>(0.0, 1.0)(Generator()) < sample;
}

void LogAccess(const AccessEntry& e) {
  const std::array<LogField, 7> fields{{
      {"request_id", std::string(e.request_id)},
      {"method", std::string(e.method)},
      {"route", std::string(e.route)},
      {"status", std::to_string(e.status), true},
      {"reason", std::string(e.reason)},
      {"client", ClientKeyPrefix(e.client_key)},
      {"latency_ms", fmt::format("{:.3f}", e.seconds * 1000.0), true},
  }};
  const std::span<const LogField> shown(fields);
  if (g_json_logs.load(std::memory_order_relaxed)) {
    t_log_fields = shown;
    spdlog::info("access");
    t_log_fields = {};
    return;
  }
  std::string line = "access";
  for (const LogField& f : shown) {
    if (f.value.empty()) continue;
    fmt::format_to(std::back_inserter(line), " {}={}", f.key, f.value);
  }
  spdlog::info("{}", line);
}

}  // namespace sluice::http
