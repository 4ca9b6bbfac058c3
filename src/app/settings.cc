#include "settings.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "sluice/admission/littles_law.h"

namespace sluice::app {

namespace {

constexpr SettingSpec kServeSettings[] = {
    {"listen", "127.0.0.1:8080", "Address and port to serve on (port 0 picks a free one)"},
    {"data_dir", "./sluice-data", "Folder for the embedded store: meta.db (SQLite) and blobs/"},
    {"meta", "",
     "Metadata store: empty for SQLite in data_dir, or postgres://USER@HOST:PORT/DB (migrated at "
     "start; pass a password through PGPASSWORD or ~/.pgpass, not the URL, which is logged)"},
    {"meta_read_connections", "50",
     "PostgreSQL connections for paste reads per process (size to fill_cap)"},
    {"meta_write_connections", "50",
     "PostgreSQL connections for creates and deletes per process (size to create_slots)"},
    {"meta_cleanup_connections", "2",
     "PostgreSQL connections for the outbox, sweeper and reaper per process"},
    {"blob", "files",
     "Where paste bodies live: files (under data_dir/blobs) or s3://BUCKET (credentials and "
     "region from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION)"},
    {"s3_endpoint", "",
     "S3-compatible endpoint for an s3:// blob, e.g. http://127.0.0.1:9000 (default: AWS S3 in "
     "AWS_REGION)"},
    {"s3_path_style", "auto",
     "true: path-style S3 URLs (MinIO, Ceph RGW, s3rver); false: virtual-host style; auto: "
     "virtual-host on AWS, path-style with s3_endpoint"},
    {"public_url", "",
     "Base of the links handed out, e.g. https://paste.example (default: http://LISTEN)"},
    {"threads", "0", "Event-loop threads (0: one per core)"},
    {"default_ttl", "1w", "Expiry when a creator names none: 10m, 1h, 1d, 1w or 30d"},
    {"max_ttl", "30d", "Longest expiry this server grants: 10m, 1h, 1d, 1w or 30d"},
    {"max_paste_bytes", "1000000", "Largest paste accepted, in bytes"},
    {"cache_bytes", "67108864", "Memory for recently read or created pastes, in bytes (0: off)"},
    {"read_threads", "16", "Threads for blocking reads of the embedded store"},
    {"cleanup_threads", "2", "Threads for deletes, sweeps and the reaper"},
    {"idle_timeout", "30s", "Longest wait for the next request on an open connection"},
    {"header_timeout", "10s",
     "Longest time a request's headers may take once started (cuts off slowloris clients)"},
    {"body_timeout", "30s",
     "Longest wait for an admitted request body, and for writing a response"},
    {"drain_timeout", "10s", "On SIGTERM, how long in-flight requests may take to finish"},
    {"max_connections", "10000",
     "Open connections per process; one more gets a 503 (kept below the file-descriptor limit)"},
    {"create_budget", "2s", "Whole time budget of one create"},
    {"put_timeout", "1s", "Timeout of the body write inside a create"},
    {"insert_timeout", "50ms", "Timeout of the metadata insert inside a create"},
    {"read_budget", "300ms", "Whole time budget of one origin read"},
    {"delete_budget", "1s", "Whole time budget of one delete"},
    {"meta_get_timeout", "20ms", "Timeout of one metadata read"},
    {"blob_get_timeout", "200ms", "Timeout of one body read"},
    {"verify_bodies", "true",
     "true: record each body's SHA-256 and serve a body only if it matches its row (false only "
     "to measure what the check costs)"},
    {"edge_purge", "",
     "Edge caches (Varnish, a CDN) to purge deleted pastes from: base URLs, comma-separated, "
     "e.g. http://127.0.0.1:6081"},
    {"trusted_proxy", "",
     "Balancers (addresses or CIDRs, comma-separated) whose appended X-Forwarded-For hop is the "
     "client"},
    {"ip_create_rate", "1", "Creates per second per client key"},
    {"ip_create_burst", "10", "Creates a client key may make at once"},
    {"ip_create_bytes_rate", "100000", "Create bytes per second per client key"},
    {"ip_create_bytes_burst", "2000000", "Create bytes a client key may send at once"},
    {"global_create_rate", "350",
     "Creates per second across this process, or across all processes with a shared cache"},
    {"global_create_burst", "350",
     "Creates this process (or the tier, when shared) may take at once"},
    {"global_create_bytes_rate", "10000000",
     "Create bytes per second across this process, or across all processes with a shared cache"},
    {"global_create_bytes_burst", "10000000",
     "Create bytes this process (or the tier, when shared) may take at once"},
    {"create_slots", "50", "Creates in flight per process (over it: 503)"},
    {"create_slot_bytes", "33554432", "Create body bytes buffered per process (over it: 503)"},
    {"create_cap", "static",
     "static: create_slots is the cap; aimd: adapt it to PUT latency, up to create_slots"},
    {"aimd_target", "500ms", "PUT latency the adaptive create cap aims under"},
    {"read_slots", "200", "Origin reads (cache misses) in flight per process (over it: 503)"},
    {"ip_read_rate", "50", "Origin reads (cache misses) per second per client key (over it: 429)"},
    {"ip_read_burst", "50", "Origin reads a client key may make at once"},
    {"fill_cap", "50", "Concurrent metadata lookups of uncached pastes per process (over it: 503)"},
    {"fill_cap_per_client", "3", "Of the fill cap, how many one client key may hold"},
    {"retry_after_min", "5", "Shortest Retry-After of a 503, in seconds"},
    {"retry_after_max", "15", "Longest Retry-After of a 503 or a 429, in seconds"},
    {"breaker_refusals", "5", "Consecutive refused connections that open a store's breaker"},
    {"breaker_open_for", "5s", "How long an open breaker refuses before one probe"},
    {"retry_budget_ratio", "0.1", "Retries allowed per request, over a 10 s window"},
    {"highlight_slots", "4",
     "Highlighter slots (and worker processes) per process; a view finding none is shown plain at "
     "once"},
    {"highlight_cache_bytes", "33554432", "Memory for highlighted renderings, in bytes (0: off)"},
    {"render_timeout", "2s", "A highlight still running after this is shown plain instead"},
    {"large_paste_bytes", "262144",
     "Under load, pastes at least this large are shown plain before any visitor is"},
    {"highlight_utilization", "0.8",
     "Share of the highlighter's sustainable rate (slots / service time) admitted before views "
     "are shown plain"},
    {"shed_release_rate", "5",
     "As load falls, the share of views shown plain drops by at most this many points a second"},
    {"render_delay", "0s",
     "Extra time every highlight takes, to shrink the highlighter in tests (needs "
     "fault_injection)"},
    {"fault_injection", "false",
     "true: wrap the stores in the fault injector and serve /debug/faults (tests only)"},
    {"faults", "",
     "Initial fault rules, e.g. 'blob.put:latency=2s; meta.get:refuse' (needs fault_injection)"},
    {"sweep_interval", "10s", "Pause between expiry sweeps when nothing is due"},
    {"orphan_age_floor", "1h",
     "Bodies with no row are reaped only when older than this (a body the store cannot date is "
     "kept)"},
    {"reap_interval", "10s", "Pause between the orphan reaper's pages while it finds no orphans"},
    {"cache", "",
     "Shared limiter and metadata cache of a tier: redis[s]://[USER[:PASSWORD]@]HOST:PORT "
     "(default: in-process; the password may come from REDIS_PASSWORD instead)"},
    {"redis_ca_file", "",
     "With rediss://: PEM file of the CAs that sign Redis' certificate (default: the system's)"},
    {"cache_timeout", "5ms",
     "Budget of one shared cache call; slower is a miss and the create limits fail open"},
    {"processes", "1",
     "App processes sharing the cache: while it is down each enforces global caps / processes"},
    {"local_cache_ttl", "5s",
     "With a shared cache: longest a paste is served from this process's memory unchecked"},
    {"log_level", "info", "trace, debug, info, warn, error"},
};

std::string Dashed(std::string_view key) {
  std::string s(key);
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

std::string EnvName(std::string_view key) {
  std::string s = "SLUICE_";
  for (char c : key) s += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

const SettingSpec* FindSpec(std::string_view key) {
  for (const SettingSpec& spec : kServeSettings) {
    if (key == spec.key) return &spec;
  }
  return nullptr;
}

}  // namespace

std::string Settings::String(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw std::logic_error(fmt::format("setting {} is not declared", key));
  return it->second.first;
}

int64_t Settings::Integer(std::string_view key) const {
  const std::string text = String(key);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
    throw std::invalid_argument(fmt::format("{}: '{}' is not a non-negative integer", key, text));
  }
  return value;
}

double Settings::Number(std::string_view key) const {
  const std::string text = String(key);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
    throw std::invalid_argument(fmt::format("{}: '{}' is not a non-negative number", key, text));
  }
  return value;
}

bool Settings::Boolean(std::string_view key) const {
  const std::string text = String(key);
  if (text == "true" || text == "1" || text == "yes") return true;
  if (text == "false" || text == "0" || text == "no" || text.empty()) return false;
  throw std::invalid_argument(fmt::format("{}: '{}' is not true or false", key, text));
}

std::chrono::milliseconds Settings::Duration(std::string_view key) const {
  const std::string text = String(key);
  auto d = admission::ParseDuration(text);
  if (!d.ok()) {
    throw std::invalid_argument(
        fmt::format("{}: '{}' is not a duration like 250ms, 5s, 1h", key, text));
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
}

// "scheme://user:password@host" as "scheme://user:***@host": a password in a URL setting (the
// cache's rediss://, a database's) must not reach the log.
static std::string WithoutPassword(const std::string& value) {
  const size_t scheme = value.find("://");
  if (scheme == std::string::npos) return value;
  const size_t at = value.rfind('@');
  if (at == std::string::npos || at < scheme) return value;
  const size_t colon = value.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return value;
  return value.substr(0, colon + 1) + "***" + value.substr(at);
}

std::string Settings::Describe() const {
  std::string out;
  for (const auto& [key, value] : values_) {
    if (value.second != "default")
      out += fmt::format(" {}={} ({})", key, WithoutPassword(value.first), value.second);
  }
  return out.empty() ? " all defaults" : out;
}

SettingsLoader::SettingsLoader(CLI::App& command) {
  config_option_ =
      command.add_option("--config", config_path_, "TOML file with any of the keys below")
          ->envname("SLUICE_CONFIG");
  for (const SettingSpec& spec : kServeSettings) {
    auto slot = std::make_unique<std::string>();
    CLI::Option* opt = command.add_option("--" + Dashed(spec.key), *slot, spec.help)
                           ->envname(EnvName(spec.key))
                           ->default_str(spec.default_value)
                           ->group("Settings (flag, SLUICE_* variable or TOML key)");
    options_[spec.key] = opt;
    flag_values_[spec.key] = std::move(slot);
  }
}

namespace {

toml::table ParseConfig(std::string_view text, std::string_view origin) {
  // toml++ 3.3.0 (Debian 12) reaches __builtin_unreachable on many non-ASCII characters where it
  // looks for whitespace (found by config_fuzz: "crecre\u0280t "), which is undefined behaviour in
  // a release build. No setting needs more than ASCII, so such a file is refused instead.
  for (size_t i = 0; i < text.size(); ++i) {
    if (static_cast<unsigned char>(text[i]) >= 0x80) {
      const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + i, '\n'));
      throw std::runtime_error(fmt::format(
          "config file {}: line {}: only ASCII is accepted in a config file", origin, line));
    }
  }
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    throw std::runtime_error(fmt::format("config file {}: {}", origin, e.description()));
  }
}

// The one merge of every source: a flag or SLUICE_* variable (when `flag` has one), else the TOML
// table, else the default. `origin` names the file in errors.
void MergeSettings(
    const toml::table& file, std::string_view origin,
    const std::function<std::optional<std::string>(const SettingSpec&)>& flag,
    std::map<std::string, std::pair<std::string, std::string>, std::less<>>& values) {
  for (const auto& [key, node] : file) {
    if (!FindSpec(key.str())) {
      throw std::runtime_error(fmt::format("config file {}: unknown key '{}'", origin, key.str()));
    }
  }
  for (const SettingSpec& spec : kServeSettings) {
    std::pair<std::string, std::string> resolved{spec.default_value, "default"};
    if (auto from_flag = flag(spec)) {
      resolved = {*from_flag, "flag/env"};
    } else if (const toml::node* node = file.get(spec.key)) {
      if (auto s = node->value<std::string>())
        resolved = {*s, "config file"};
      else if (auto i = node->value<int64_t>())
        resolved = {std::to_string(*i), "config file"};
      else if (auto d = node->value<double>())
        resolved = {fmt::format("{}", *d), "config file"};
      else if (auto b = node->value<bool>())
        resolved = {*b ? "true" : "false", "config file"};
      else
        throw std::runtime_error(
            fmt::format("config file {}: '{}' must be a string or a number", origin, spec.key));
    }
    values[spec.key] = std::move(resolved);
  }
}

}  // namespace

Settings SettingsLoader::Resolve() const {
  toml::table file;
  if (!config_path_.empty()) {
    std::ifstream in(config_path_, std::ios::binary);
    if (!in) throw std::runtime_error(fmt::format("config file {}: cannot read it", config_path_));
    std::ostringstream text;
    text << in.rdbuf();
    file = ParseConfig(text.str(), config_path_);
  }
  Settings settings;
  MergeSettings(
      file, config_path_,
      [this](const SettingSpec& spec) -> std::optional<std::string> {
        if (options_.at(spec.key)->count() == 0) return std::nullopt;
        return *flag_values_.at(spec.key);
      },
      settings.values_);
  return settings;
}

std::vector<std::string> SettingsLoader::Keys() {
  std::vector<std::string> keys;
  for (const SettingSpec& spec : kServeSettings) keys.emplace_back(spec.key);
  return keys;
}

Settings SettingsLoader::FromToml(std::string_view toml_text) {
  const toml::table file = ParseConfig(toml_text, "config");
  Settings settings;
  MergeSettings(
      file, "config", [](const SettingSpec&) { return std::optional<std::string>(); },
      settings.values_);
  return settings;
}

}  // namespace sluice::app
