// The declarations of every setting of `sluice serve` (settings.h): key, type, default, bounds
// and help, in one table that the loader (settings_loader.cc), the checks and the generated
// reference (reference.cc) all read.
#include "settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/un.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/admission/client_key.h"
#include "sluice/admission/reputation_feed.h"
#include "sluice/common/duration.h"
#include "sluice/service/text.h"

namespace sluice::app {

namespace {

using CheckFn = std::optional<std::string> (*)(std::string_view);

constexpr SettingSpec TextSetting(const char* key, const char* def, const char* help,
                                  CheckFn check = nullptr) {
  return {key, SettingType::kText, def, help, nullptr, nullptr, false, nullptr, check};
}
constexpr SettingSpec ListSetting(const char* key, const char* def, const char* help,
                                  CheckFn check) {
  return {key, SettingType::kList, def, help, nullptr, nullptr, false, nullptr, check};
}
constexpr SettingSpec ChoiceSetting(const char* key, const char* def, const char* choices,
                                    const char* help) {
  return {key, SettingType::kChoice, def, help, nullptr, nullptr, false, choices, nullptr};
}
constexpr SettingSpec BooleanSetting(const char* key, const char* def, const char* help) {
  return {key, SettingType::kBoolean, def, help};
}
constexpr SettingSpec IntegerSetting(const char* key, const char* def, const char* min,
                                     const char* max, const char* help) {
  return {key, SettingType::kInteger, def, help, min, max};
}
constexpr SettingSpec NumberSetting(const char* key, const char* def, const char* min,
                                    const char* max, const char* help) {
  return {key, SettingType::kNumber, def, help, min, max};
}
// Rates, bursts and shares: zero would stop everything (or divide by it), so only above it.
constexpr SettingSpec PositiveSetting(const char* key, const char* def, const char* max,
                                      const char* help) {
  return {key, SettingType::kNumber, def, help, "0", max, true};
}
constexpr SettingSpec DurationSetting(const char* key, const char* def, const char* min,
                                      const char* max, const char* help) {
  return {key, SettingType::kDuration, def, help, min, max};
}

std::optional<std::string> CheckListen(std::string_view value) {
  const size_t colon = value.rfind(':');
  const std::string_view port = colon == std::string_view::npos ? "" : value.substr(colon + 1);
  unsigned number = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (colon == 0 || port.empty() || ec != std::errc() || end != port.data() + port.size() ||
      number > 65535) {
    return "must be HOST:PORT with an IP address and a port from 0 to 65535";
  }
  return std::nullopt;
}

// HOST:PORT, or a Unix socket: "unix:/path" or "/path" (src/http/server.cc). The path must be
// absolute, since a relative one would depend on the directory the server happens to start in,
// and fit sockaddr_un's sun_path with its terminating NUL.
std::optional<std::string> CheckAdminListen(std::string_view value) {
  if (value.empty()) return std::nullopt;
  if (value.starts_with("/") || value.starts_with("unix:")) {
    const std::string_view path = value.starts_with("unix:") ? value.substr(5) : value;
    if (!path.starts_with("/")) {
      return "a Unix socket path must be absolute, e.g. unix:/run/sluice/admin.sock or "
             "/run/sluice/admin.sock";
    }
    constexpr size_t kMaxPath = sizeof(sockaddr_un{}.sun_path) - 1;
    if (path.size() > kMaxPath) {
      return fmt::format("a Unix socket path may be at most {} bytes; this one is {}", kMaxPath,
                         path.size());
    }
    if (path.back() == '/') return "a Unix socket path must name a file, not a directory";
    return std::nullopt;
  }
  return CheckListen(value);
}

std::optional<std::string> CheckNotEmpty(std::string_view value) {
  if (value.empty()) return "must not be empty";
  return std::nullopt;
}

std::optional<std::string> CheckMetaUrl(std::string_view value) {
  if (value.empty() || value.starts_with("postgres://") || value.starts_with("postgresql://")) {
    return std::nullopt;
  }
  return "must be empty (SQLite in data_dir) or postgres://USER@HOST:PORT/DB";
}

std::optional<std::string> CheckBlob(std::string_view value) {
  if (value == "files" || (value.starts_with("s3://") && value.size() > 5)) return std::nullopt;
  return "must be files or s3://BUCKET";
}

std::optional<std::string> CheckHttpUrl(std::string_view value) {
  if (value.starts_with("http://") || value.starts_with("https://")) return std::nullopt;
  return "must be an http:// or https:// URL";
}

std::optional<std::string> CheckOptionalHttpUrl(std::string_view value) {
  if (value.empty()) return std::nullopt;
  return CheckHttpUrl(value);
}

std::optional<std::string> CheckRedisUrl(std::string_view value) {
  if (value.empty() || value.starts_with("redis://") || value.starts_with("rediss://") ||
      value.starts_with("redis+sentinel://") || value.starts_with("rediss+sentinel://")) {
    return std::nullopt;
  }
  return "must be empty (in-process), redis[s]://[USER[:PASSWORD]@]HOST:PORT or "
         "redis[s]+sentinel://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/MASTER";
}

// RFC 9116 2.5.3: a Contact is a URI; the footer and /abuse make it a link, so only schemes a
// browser opens as contact are taken (never javascript: or data:).
std::optional<std::string> CheckContactUri(std::string_view value) {
  for (std::string_view scheme : {"mailto:", "https://", "tel:"}) {
    if (value.starts_with(scheme) && value.size() > scheme.size() &&
        std::none_of(value.begin(), value.end(),
                     [](char c) { return static_cast<unsigned char>(c) <= ' ' || c == 0x7f; })) {
      return std::nullopt;
    }
  }
  return "each entry must be a mailto:, https:// or tel: URI without spaces, e.g. "
         "mailto:abuse@paste.example";
}

// RFC 5646 in the shape RFC 9116's Preferred-Languages takes: "en", "de", "pt-BR".
std::optional<std::string> CheckLanguageTag(std::string_view value) {
  size_t start = 0;
  for (size_t i = 0; i <= value.size(); ++i) {
    if (i < value.size() && value[i] != '-') {
      if (!std::isalnum(static_cast<unsigned char>(value[i])) ||
          (start == 0 && !std::isalpha(static_cast<unsigned char>(value[i])))) {
        return "each entry must be a language tag such as en, de or pt-BR";
      }
      continue;
    }
    const size_t length = i - start;
    if (length < (start == 0 ? 2 : 1) || length > 8) {
      return "each entry must be a language tag such as en, de or pt-BR";
    }
    start = i + 1;
  }
  return std::nullopt;
}

// Shown on /abuse as one paragraph: bounded so the page stays a page.
std::optional<std::string> CheckPolicyText(std::string_view value) {
  if (value.size() > 4000) return "must be at most 4000 bytes";
  if (!service::IsValidUtf8(value)) return "must be UTF-8";
  return std::nullopt;
}

std::optional<std::string> CheckTrustedProxy(std::string_view value) {
  const std::string entries[] = {std::string(value)};
  if (admission::TrustedProxies::Parse(entries).ok()) return std::nullopt;
  return "each entry must be an IP address or a CIDR block, e.g. 10.0.0.0/8";
}

// One reputation feed, NAME=ACTION:PATH (admission::ParseFeedSpec); its file is read later.
std::optional<std::string> CheckFeed(std::string_view value) {
  auto spec = admission::ParseFeedSpec(value);
  if (spec.ok()) return std::nullopt;
  return spec.error().message;
}

// A header field name (RFC 9110 5.1: a token), e.g. X-Forwarded-User; empty turns it off.
std::optional<std::string> CheckHeaderName(std::string_view value) {
  constexpr std::string_view kTokenChars = "!#$%&'*+-.^_`|~";
  for (const char c : value) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && kTokenChars.find(c) == std::string_view::npos) {
      return "must be a header name such as X-Forwarded-User (letters, digits, '-'), or empty";
    }
  }
  return std::nullopt;
}

// Bounds are what the code below them can honour without surprise, wide enough for every
// deployment and test in the repository; the "why" of each default is in docs/overload.md.
constexpr SettingSpec kServeSettings[] = {
    TextSetting("listen", "127.0.0.1:8080",
                "Address and port to serve on (port 0 picks a free one)", CheckListen),
    TextSetting("data_dir", "./sluice-data",
                "Folder for the embedded store: meta.db (SQLite: rows and small bodies) and blobs/",
                CheckNotEmpty),
    TextSetting(
        "meta", "",
        "Metadata store: empty for SQLite in data_dir, or postgres://USER@HOST:PORT/DB?PARAMS "
        "(libpq's, e.g. sslmode=verify-full&sslrootcert=CA.pem; migrated at start; a password "
        "is best passed through PGPASSWORD or ~/.pgpass, kept out of the command line)",
        CheckMetaUrl),
    IntegerSetting("meta_read_connections", "50", "1", "10000",
                   "PostgreSQL connections for paste reads per process (size to fill_cap)"),
    IntegerSetting("meta_write_connections", "50", "1", "10000",
                   "PostgreSQL connections for creates and deletes per process (size to "
                   "create_slots)"),
    IntegerSetting("meta_cleanup_connections", "2", "1", "1000",
                   "PostgreSQL connections for the outbox, sweeper and reaper per process"),
    IntegerSetting("meta_moderation_connections", "2", "1", "1000",
                   "PostgreSQL connections for reports, reviews and the admin's reads per process "
                   "(their own, so a report flood takes none that creates or reads need)"),
    TextSetting("blob", "files",
                "Where paste bodies live: files (under data_dir/blobs) or s3://BUCKET (credentials "
                "and region from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION)",
                CheckBlob),
    TextSetting("s3_endpoint", "",
                "S3-compatible endpoint for an s3:// blob, e.g. http://127.0.0.1:9000 (default: "
                "AWS S3 in AWS_REGION)",
                CheckOptionalHttpUrl),
    ChoiceSetting("s3_path_style", "auto", "auto|true|false",
                  "true: path-style S3 URLs (MinIO, Ceph RGW, s3rver); false: virtual-host style; "
                  "auto: virtual-host on AWS, path-style with s3_endpoint"),
    TextSetting("public_url", "",
                "Base of the links handed out, e.g. https://paste.example (default: http://LISTEN, "
                "loopback for a wildcard LISTEN)",
                CheckOptionalHttpUrl),
    IntegerSetting("threads", "0", "0", "1024", "Event-loop threads (0: one per core)"),
    ChoiceSetting("default_ttl", "1w", "10m|1h|1d|1w|30d",
                  "Expiry when a creator names none: 10m, 1h, 1d, 1w or 30d"),
    ChoiceSetting("max_ttl", "30d", "10m|1h|1d|1w|30d",
                  "Longest expiry this server grants: 10m, 1h, 1d, 1w or 30d"),
    IntegerSetting("max_paste_bytes", "1000000", "1", "1073741824",
                   "Largest paste accepted, in bytes"),
    IntegerSetting("max_storage_bytes", "0", "0", "1000000000000000",
                   "Storage quota: live bytes of pastes past which creates answer 507 (0: none)"),
    IntegerSetting("cache_bytes", "67108864", "0", "1099511627776",
                   "Memory for recently read or created pastes, in bytes (0: off)"),
    DurationSetting("loop_slice", "100us", "0s", "100ms",
                    "Time slice the event-loop threads ask of the kernel's scheduler (Linux "
                    "6.12+, EEVDF): shorter than the default, a loop with ready requests runs "
                    "sooner after it wakes (0s: the kernel's default)"),
    IntegerSetting("read_threads", "16", "1", "1024",
                   "Threads for blocking reads of the embedded store"),
    IntegerSetting("cleanup_threads", "2", "1", "1024",
                   "Threads for deletes, sweeps and the reaper"),
    IntegerSetting("moderation_threads", "2", "1", "1024",
                   "Threads for the embedded store's review queue and admin reads (never the "
                   "read threads)"),
    DurationSetting("idle_timeout", "30s", "1ms", "1h",
                    "Longest wait for the next request on an open connection"),
    DurationSetting("first_byte_timeout", "5s", "1ms", "1h",
                    "Longest wait for the first byte on a new connection (an idle keep-alive "
                    "connection waits idle_timeout)"),
    DurationSetting("header_timeout", "10s", "1ms", "1h",
                    "Longest time a request's headers may take once started (cuts off slowloris "
                    "clients)"),
    DurationSetting("body_timeout", "30s", "1ms", "1h",
                    "Longest wait for an admitted request body, and for writing a response"),
    IntegerSetting("min_body_rate", "1024", "0", "1073741824",
                   "Slowest a request body (a create's, or the small one another route may "
                   "carry) may arrive, in bytes per second averaged from its start, once "
                   "min_body_rate_grace has passed (slower: 408; 0: off)"),
    DurationSetting("min_body_rate_grace", "5s", "0s", "1h",
                    "How long a request body may arrive at any rate before min_body_rate applies"),
    // Pressure (docs/overload.md, "Pressure"): as Envoy's overload manager scales its timeouts
    // down while a resource fills, the idle timeout shrinks as max_connections fills and the
    // required body rate rises as the create slots fill with work and with faster bodies, both
    // along one curve.
    NumberSetting("pressure_start", "0.5", "0", "1",
                  "Fill of max_connections (for the idle timeout) and of the create slots (for "
                  "a body's rate: the slots held by work and by bodies faster than it) at which "
                  "pressure begins: below it, idle_timeout and min_body_rate hold as set"),
    NumberSetting("pressure_full", "0.9", "0", "1",
                  "Fill at which pressure is full, linear from pressure_start: the idle timeout "
                  "is idle_timeout_floor and the required body rate min_body_rate_at_pressure "
                  "(at least pressure_start)"),
    DurationSetting("idle_timeout_floor", "1s", "1ms", "1h",
                    "Idle timeout of a keep-alive connection at full pressure on max_connections "
                    "(at the cap, a new connection also closes the one idle longest instead of "
                    "being refused)"),
    IntegerSetting("min_body_rate_at_pressure", "65536", "0", "1073741824",
                   "Rate a create body must keep at full pressure on the create slots (counting "
                   "only those held by work and by bodies faster than it), in bytes per second "
                   "averaged from its start (with every slot, or its network's share, taken, a "
                   "new create also cuts the slowest body under it with a 408; min_body_rate 0 "
                   "turns both off)"),
    DurationSetting("drain_timeout", "10s", "0s", "1h",
                    "On SIGTERM, how long in-flight requests may take to finish"),
    IntegerSetting("max_connections", "10000", "1", "10000000",
                   "Open connections per process; one more gets a 503 (kept below the "
                   "file-descriptor limit)"),
    IntegerSetting("max_connections_per_client", "256", "1", "10000000",
                   "Open connections per client address (by socket peer, IPv6 by /64; trusted "
                   "proxies are exempt); one more gets a 503"),
    IntegerSetting("max_connections_per_network", "1024", "1", "10000000",
                   "Open connections per client network (by socket peer: IPv4 by "
                   "network_prefix_v4, IPv6 by network_prefix_v6; trusted proxies are exempt), "
                   "so one /48 cannot take what one /64 cannot; one more gets a 503"),
    IntegerSetting("network_prefix_v4", "24", "8", "32",
                   "What makes a network for max_connections_per_network and "
                   "create_slots_per_network: IPv4 addresses by this prefix length"),
    IntegerSetting("network_prefix_v6", "48", "16", "56",
                   "What makes a network for max_connections_per_network and "
                   "create_slots_per_network: IPv6 addresses by this prefix length"),
    DurationSetting("create_budget", "2s", "1ms", "10m", "Whole time budget of one create"),
    DurationSetting("put_timeout", "1s", "1ms", "10m", "Timeout of the body write inside a create"),
    DurationSetting("insert_timeout", "50ms", "1ms", "10m",
                    "Timeout of the metadata insert inside a create"),
    DurationSetting("read_budget", "300ms", "1ms", "10m", "Whole time budget of one origin read"),
    DurationSetting("delete_budget", "1s", "1ms", "10m", "Whole time budget of one delete"),
    DurationSetting("meta_get_timeout", "20ms", "1ms", "10m", "Timeout of one metadata read"),
    DurationSetting("blob_get_timeout", "200ms", "1ms", "10m", "Timeout of one body read"),
    BooleanSetting("verify_bodies", "true",
                   "true: record each body's SHA-256 and serve a body only if it matches its row "
                   "(false only to measure what the check costs)"),
    // The cutover's window (docs/scale-out.md, "Outgrowing one box"): a setting so that a SIGHUP
    // opens it on a server with no admin listener; PUT /admin/read-only does it without the file.
    BooleanSetting("read_only", "false",
                   "true: refuse every write (creates, forks, deletes, claims of burn and counted "
                   "pastes, reports, moderation) with 503 read_only and Retry-After "
                   "read_only_retry_after, while reads go on: the short window of a move to new "
                   "stores (sluice admin read-only on|off does the same through admin_listen)"),
    DurationSetting("read_only_retry_after", "30s", "1s", "1h",
                    "The Retry-After of a write refused while read_only: about how long the "
                    "window lasts"),
    ListSetting("edge_purge", "",
                "Edge caches (Varnish, a CDN) to purge deleted pastes from: base URLs, "
                "comma-separated, e.g. http://127.0.0.1:6081",
                CheckHttpUrl),
    ListSetting("trusted_proxy", "",
                "Balancers (addresses or CIDRs, comma-separated) whose appended X-Forwarded-For "
                "hop is the client",
                CheckTrustedProxy),
    ChoiceSetting("create_access", "anyone", "anyone|tokens|networks|tokens_or_networks",
                  "Who may create pastes (reading stays open to everyone): anyone; tokens: only "
                  "creators with a creator token or named by forward_auth_header; networks: "
                  "only addresses in create_networks or create_networks_file; tokens_or_networks: "
                  "either (refused: 401 when a credential would help, else 403)"),
    TextSetting("create_access_text", "",
                "What a refused creator reads, on the page and in the JSON error: how to get "
                "access, in your words (empty: a sentence that explains create_access)"),
    ListSetting("create_networks", "",
                "Networks (addresses or CIDRs, comma-separated) that may create when create_access "
                "is networks or tokens_or_networks",
                CheckTrustedProxy),
    TextSetting("create_networks_file", "",
                "A file of more networks that may create, one address or CIDR a line, '#' or ';' "
                "comments (FireHOL netset, Spamhaus DROP); read again on SIGHUP"),
    ListSetting("feeds", "",
                "Reputation feeds, comma-separated NAME=ACTION:PATH: a netset file (FireHOL, "
                "Spamhaus DROP) and what a create from a network it lists gets: refuse (403), "
                "class:CLASS (the feed_class_* budgets) or challenge (for now the class "
                "'challenge'); the first feed that lists an address decides; read again on SIGHUP",
                CheckFeed),
    TextSetting("feed_refuse_text", "",
                "What a creator a refuse feed lists reads, '{feed}' replaced by the feed's name "
                "(empty: a sentence that names the feed)"),
    PositiveSetting("feed_class_ip_create_rate", "0.1", "1e15",
                    "Creates per second per client key of a feed's budget class, on top of "
                    "ip_create_rate"),
    PositiveSetting("feed_class_ip_create_burst", "3", "1e15",
                    "Creates a client key of a feed's budget class may make at once"),
    PositiveSetting("feed_class_global_create_rate", "2", "1e15",
                    "Creates per second of all the client keys of one budget class together"),
    PositiveSetting("feed_class_global_create_burst", "10", "1e15",
                    "Creates all the client keys of one budget class may make at once"),
    TextSetting("forward_auth_header", "",
                "Header in which a trusted forward-auth proxy (oauth2-proxy, a VPN gateway) names "
                "the creator, e.g. X-Forwarded-User: honoured only from trusted_proxy; the name "
                "gets per-key budgets of its own (empty: off)",
                CheckHeaderName),
    // The proof-of-work rung (docs/overload.md, "Proof of work").
    BooleanSetting("proof_of_work", "false",
                   "When the global create budget is spent, answer an anonymous create 429 with a "
                   "challenge (SHA-256, ALTCHA's format) whose solution draws on "
                   "proof_of_work_share instead of a flat refusal"),
    NumberSetting("proof_of_work_share", "0.2", "0.01", "0.9",
                  "Share of global_create_rate and global_create_burst kept for creates that "
                  "carry a solved challenge (only with proof_of_work)"),
    IntegerSetting("proof_of_work_difficulty", "100000", "1000", "2000000",
                   "The search a challenge asks for (its maxnumber; about half of it is hashed on "
                   "average) while the solvers' share is at least half left; doubled at each "
                   "halving of what is left, up to 8x"),
    DurationSetting("proof_of_work_expiry", "5m", "10s", "1h",
                    "How long a challenge may be solved and spent"),
    TextSetting("proof_of_work_key_file", "",
                "File holding the key (one line, at least 16 characters) that signs challenges; "
                "every process of a fleet needs the same one (empty: a random key per process, "
                "so a solution is taken only by the process that issued it)"),
    IntegerSetting("max_creator_tokens", "1000", "0", "1000000",
                   "Creator tokens in force (neither revoked nor expired) at most, across every "
                   "process sharing the store; each process holds them all in memory (sluice "
                   "admin token create refuses past it)"),
    DurationSetting("creator_tokens_refresh", "5s", "100ms", "1h",
                    "How often each process asks the store whether the creator tokens changed: a "
                    "token revoked or made through another process counts here within it, plus "
                    "one store call"),
    NumberSetting("token_reserved_share", "0", "0", "0.9",
                  "Share of global_create_burst kept for creates with a creator token: an "
                  "anonymous create is refused (429 global_count) once it would leave less; this "
                  "process's buckets only, not the shared limiter store's"),
    PositiveSetting("ip_create_rate", "1", "1e15", "Creates per second per client key"),
    PositiveSetting("ip_create_burst", "10", "1e15", "Creates a client key may make at once"),
    PositiveSetting("ip_create_bytes_rate", "100000", "1e15",
                    "Create bytes per second per client key"),
    PositiveSetting("ip_create_bytes_burst", "2000000", "1e15",
                    "Create bytes a client key may send at once"),
    PositiveSetting("global_create_rate", "350", "1e15",
                    "Creates per second across this process, or across all processes with a "
                    "shared cache"),
    PositiveSetting("global_create_burst", "350", "1e15",
                    "Creates this process (or the tier, when shared) may take at once"),
    PositiveSetting("global_create_bytes_rate", "10000000", "1e15",
                    "Create bytes per second across this process, or across all processes with a "
                    "shared cache"),
    PositiveSetting("global_create_bytes_burst", "10000000", "1e15",
                    "Create bytes this process (or the tier, when shared) may take at once"),
    IntegerSetting("create_slots", "50", "1", "1000000",
                   "Creates in flight per process (over it: 503)"),
    IntegerSetting("create_slots_per_client", "10", "1", "1000000",
                   "Of the create slots, how many one client key may hold (over it: 503)"),
    IntegerSetting("create_slots_per_network", "20", "1", "1000000",
                   "Of the create slots, how many the client keys of one network may hold "
                   "together (network_prefix_v4, network_prefix_v6; over it: 503)"),
    IntegerSetting("create_slot_bytes", "33554432", "1", "1099511627776",
                   "Create body bytes buffered per process (over it: 503)"),
    ChoiceSetting("create_cap", "static", "static|aimd",
                  "static: create_slots is the cap; aimd: adapt it to PUT latency, up to "
                  "create_slots"),
    DurationSetting("aimd_target", "500ms", "1ms", "1m",
                    "PUT latency the adaptive create cap aims under"),
    IntegerSetting("read_slots", "200", "1", "1000000",
                   "Origin reads (cache misses) in flight per process (over it: 503)"),
    PositiveSetting("ip_read_rate", "50", "1e15",
                    "Origin reads (cache misses) per second per client key (over it: 429)"),
    PositiveSetting("ip_read_burst", "50", "1e15", "Origin reads a client key may make at once"),
    IntegerSetting("fill_cap", "50", "1", "1000000",
                   "Concurrent metadata lookups of uncached pastes per process (over it: 503)"),
    IntegerSetting("fill_cap_per_client", "3", "1", "1000000",
                   "Of the fill cap, how many one client key may hold"),
    IntegerSetting("retry_after_min", "5", "0", "86400",
                   "Shortest Retry-After of a 503, in seconds"),
    IntegerSetting("retry_after_max", "15", "0", "86400",
                   "Longest Retry-After of a 503 or a 429, in seconds"),
    IntegerSetting("breaker_refusals", "5", "1", "1000000",
                   "Consecutive refused connections that open a store's breaker"),
    DurationSetting("breaker_open_for", "5s", "1ms", "1h",
                    "How long an open breaker refuses before one probe"),
    DurationSetting("breaker_open_for_failover", "250ms", "1ms", "1h",
                    "How long a breaker opened by a primary failing over (read-only, shutting "
                    "down, no writable host) refuses before one probe"),
    NumberSetting("retry_budget_ratio", "0.1", "0", "1",
                  "Retries allowed per request, over a 10 s window"),
    IntegerSetting("highlight_slots", "4", "1", "1024",
                   "Highlighter slots (and worker processes) per process; a view finding none is "
                   "shown plain at once"),
    IntegerSetting("highlight_cache_bytes", "33554432", "0", "1099511627776",
                   "Memory for highlighted renderings, in bytes (0: off)"),
    DurationSetting("render_timeout", "2s", "1ms", "10m",
                    "A highlight still running after this is shown plain instead"),
    IntegerSetting("large_paste_bytes", "262144", "0", "1099511627776",
                   "Under load, pastes at least this large are shown plain before any visitor is"),
    IntegerSetting("view_max_bytes", "2097152", "4096", "1073741824",
                   "The most bytes of rendered lines one view's page holds; past it the page shows "
                   "the paste's head and links to the raw text"),
    IntegerSetting("view_max_lines", "20000", "1", "1000000000",
                   "The most lines one view's page shows; past it the page shows the paste's head "
                   "and links to the raw text"),
    PositiveSetting("highlight_utilization", "0.8", "1",
                    "Share of the highlighter's sustainable rate (slots / service time) admitted "
                    "before views are shown plain"),
    PositiveSetting("shed_release_rate", "5", "100",
                    "As load falls, the share of views shown plain drops by at most this many "
                    "points a second"),
    DurationSetting("render_delay", "0s", "0s", "1m",
                    "Extra time every highlight takes, to shrink the highlighter in tests (needs "
                    "fault_injection)"),
    BooleanSetting("fault_injection", "false",
                   "true: wrap the stores in the fault injector and serve /debug/faults (tests "
                   "only)"),
    // Checked by the fault plan's own parser when the server starts (src/store/fault_injection.cc).
    TextSetting("faults", "",
                "Initial fault rules, e.g. 'blob.put:latency=2s; meta.get:refuse' (needs "
                "fault_injection)"),
    // The admin listener and moderation (docs/moderation.md).
    TextSetting("admin_listen", "127.0.0.1:8081",
                "Admin listener (moderation API, /metrics, /debug/faults): HOST:PORT on loopback "
                "or a private network, or a Unix socket unix:/PATH or /PATH (made with mode 0660; "
                "the token is still required); empty: no admin listener",
                CheckAdminListen),
    TextSetting("admin_token_file", "",
                "File holding the admin listener's bearer token (one line); empty: the admin "
                "listener refuses every request with 401"),
    BooleanSetting("metrics_on_public", "true",
                   "Serve /metrics on the public listener too (it is always on the admin one)"),
    IntegerSetting("report_hide_threshold", "3", "0", "1000000",
                   "Distinct networks (not the creator's, each with withholding budget left) whose "
                   "reports withhold a paste (451) until an operator reviews it; 0: never withheld "
                   "automatically, reports only queue it (docs/moderation.md)"),
    IntegerSetting("report_network_prefix_v4", "24", "8", "32",
                   "Reports are counted once per network: IPv4 addresses by this prefix length"),
    IntegerSetting("report_network_prefix_v6", "48", "16", "56",
                   "Reports are counted once per network: IPv6 addresses by this prefix length"),
    IntegerSetting("report_withholds_per_network_per_day", "5", "1", "1000000",
                   "Withholdings one reporting network may take part in per 24 h; past it its "
                   "reports queue pastes for review but withhold none"),
    PositiveSetting("report_withholds_per_hour", "30", "1e15",
                    "Pastes this process withholds an hour at most (also the burst); past it a "
                    "reported paste stays served and queued, and "
                    "sluice_report_withholds_total{result=\"deferred\"} counts it"),
    // Push (docs/moderation.md, "Push"): the sinks and their threads are built at start.
    TextSetting("push_webhook", "",
                "URL (http:// or https://) that gets each report and withholding, or a digest of "
                "many, as a JSON POST; empty: none",
                CheckOptionalHttpUrl),
    TextSetting("push_webhook_secret_file", "",
                "File holding the key (one line, at least 16 characters) that signs each webhook "
                "delivery (X-Sluice-Signature, HMAC-SHA256); empty: unsigned"),
    TextSetting("push_command", "",
                "Command run by /bin/sh -c for each delivery, its JSON on standard input and "
                "SLUICE_EVENT set to its kind (e.g. a sendmail pipeline); empty: none"),
    DurationSetting("push_timeout", "5s", "100ms", "5m",
                    "Longest one webhook delivery or one run of push_command may take"),
    IntegerSetting("push_queue", "1000", "1", "1000000",
                   "Events waiting per push sink; past it an event is dropped and counted"),
    PositiveSetting("push_per_minute", "6", "1e6",
                    "Deliveries per minute per push sink once push_burst is spent; what piles up "
                    "meanwhile leaves as one digest"),
    IntegerSetting("push_burst", "3", "1", "1000000", "Deliveries a push sink may make at once"),
    PositiveSetting("report_global_rate", "2", "1e15",
                    "Abuse reports per second this process takes from all clients together, "
                    "before any store call (over it: 429 report_global_rate)"),
    PositiveSetting("report_global_burst", "50", "1e15",
                    "Abuse reports this process takes at once from all clients together"),
    IntegerSetting("max_open_reports", "100000", "0", "1000000000",
                   "Open abuse reports stored at most; past it a report is counted on its paste's "
                   "queue row without its note and withholds nothing (a metric and a log line "
                   "say so)"),
    IntegerSetting("max_blocked_contents", "1000000", "0", "100000000",
                   "Digests the content blocklist holds at most (bodies refused 451 "
                   "blocked_content after a takedown or an operator's block); every process "
                   "holds them all in memory, 32 MB per million. Past it a takedown stands "
                   "without blocking its text again"),
    IntegerSetting("max_notices", "100000", "0", "100000000",
                   "Abuse notices (POST /admin/notices, sluice admin notice) stored at most, over "
                   "all processes sharing the store; at it a new notice takes the place of the "
                   "oldest closed one, and is refused 507 notices_full only when every stored "
                   "notice is still open (docs/moderation.md, \"Notices\")"),
    DurationSetting("moderation_timeout", "1s", "1ms", "10m",
                    "Timeout of one store call of moderation (a report, a review, the review "
                    "queue); a report's whole budget is twice it"),
    PositiveSetting("report_rate", "0.1", "1e15",
                    "Abuse reports per second per client key (over it: 429)"),
    PositiveSetting("report_burst", "5", "1e15", "Abuse reports a client key may send at once"),
    // The public contact (docs/moderation.md, "The public contact"): made once at start.
    ListSetting("abuse_contact", "",
                "Where abuse notices and security reports go: mailto:, https:// or tel: URIs, "
                "comma-separated; shown in every page's footer and on /abuse, and the Contact "
                "lines of /.well-known/security.txt (which answers 404 while this is empty, and "
                "the start log says so)",
                CheckContactUri),
    ListSetting("contact_languages", "en",
                "Languages the abuse contact reads, comma-separated tags (RFC 9116 "
                "Preferred-Languages)",
                CheckLanguageTag),
    DurationSetting("security_txt_lifetime", "4320h", "24h", "8760h",
                    "Expires of /.well-known/security.txt is this long after the day it is served "
                    "(RFC 9116 asks for less than a year). Default 180 days"),
    DurationSetting("takedown_deadline", "1h", "1m", "720h",
                    "How fast the operator acts on a report or an abuse notice, as /abuse promises "
                    "it; the alert SluiceTakedownDeadline fires when the oldest open one has "
                    "waited 75% of it (docs/moderation.md, \"The takedown clock\")"),
    TextSetting("abuse_policy_text", "",
                "The operator's own words on /abuse (what this site removes, which law applies), "
                "shown as written, at most 4000 bytes",
                CheckPolicyText),
    ChoiceSetting("robots", "site", "site|all|none",
                  "What /robots.txt lets crawlers fetch: site (the create page, /abuse and "
                  "/status, no paste), all (pastes too) or none"),
    DurationSetting("report_retention", "2160h", "0s", "87600h",
                    "Abuse reports are deleted this long after a review closed them (takedown or "
                    "dismissal; open reports of a paste that still exists never are), by the "
                    "expiry sweep; 0s: kept forever. Default 90 days"),
    PositiveSetting("delete_rate", "1", "1e15",
                    "Deletes per second per client key, right token or wrong (over it: 429 "
                    "delete_rate)"),
    PositiveSetting("delete_burst", "60", "1e15", "Deletes a client key may send at once"),
    DurationSetting("sweep_interval", "10s", "1ms", "24h",
                    "Pause between expiry sweeps when nothing is due"),
    NumberSetting("background_share", "0.25", "0.01", "1",
                  "Most of the time the expiry sweep, the outbox, the reaper and the report "
                  "retention each work while they have a backlog: after a full batch that took T "
                  "a loop pauses T*(1-share)/share, at least 50ms. On the embedded store this "
                  "bounds what a backlog takes from creates"),
    DurationSetting("background_start_delay", "60s", "0s", "1h",
                    "How long after the start the expiry sweep, the reaper and the report "
                    "retention begin (the outbox does not wait). After a reboot the page cache is "
                    "empty and what they read would be disk reads that creates wait behind; an "
                    "expired paste is answered as gone whether or not it is swept yet"),
    // Stores date bodies to the second, so the floor is counted in whole seconds.
    IntegerSetting("inline_body_bytes", "65536", "0", "1073741824",
                   "Bodies up to this size are written with their rows into data_dir/meta.db (or "
                   "data_dir/bodies.db beside a PostgreSQL meta): one flush per batch of creates, "
                   "isolated from other writers to the disk; larger ones are files under "
                   "data_dir/blobs; 0: files only. With --blob files"),
    DurationSetting("orphan_age_floor", "1h", "1s", "8760h",
                    "Bodies with no row are reaped only when older than this (a body the store "
                    "cannot date is kept)"),
    DurationSetting("reap_interval", "10s", "1ms", "24h",
                    "Pause between the orphan reaper's pages while it finds no orphans"),
    TextSetting(
        "cache", "",
        "Shared limiter and metadata cache of a tier: redis[s]://[USER[:PASSWORD]@]HOST:PORT, or "
        "under Redis Sentinel redis[s]+sentinel://[USER[:PASSWORD]@]HOST:PORT,HOST:PORT.../MASTER "
        "(default: in-process; the password may come from REDIS_PASSWORD instead)",
        CheckRedisUrl),
    TextSetting("redis_ca_file", "",
                "With rediss://: PEM file of the CAs that sign Redis' certificate (default: the "
                "system's)"),
    DurationSetting("cache_timeout", "5ms", "1us", "10s",
                    "Budget of one shared cache call; slower is a miss and the create limits fail "
                    "open"),
    IntegerSetting("processes", "1", "1", "10000",
                   "App processes sharing the cache: while it is down each enforces global caps / "
                   "processes"),
    DurationSetting("local_cache_ttl", "5s", "0s", "24h",
                    "With PostgreSQL or a shared cache: longest a paste is served from this "
                    "process's memory unchecked (0s: until evicted)"),
    ChoiceSetting("log_level", "info", "trace|debug|info|warn|error|critical|off",
                  "trace, debug, info, warn, error, critical or off"),
    // Operating it (issue 15): logs to ship, the plan the alert rules weigh against.
    NumberSetting("put_bytes_per_day_plan", "0", "0", "1e18",
                  "Body bytes a day the plan allows, exported as sluice_plan_put_bytes_per_day "
                  "for deploy/prometheus/sluice.rules.yml (0: no plan, no alert)"),
    ChoiceSetting("log_format", "text", "text|json",
                  "text: spdlog's lines; json: one object per line (time, level, message and, on "
                  "access log lines, the request's fields)"),
    BooleanSetting("access_log", "false",
                   "One log line per request: request id, method, route, status, reason, client "
                   "key prefix, latency (5xx always, the rest sampled)"),
    NumberSetting("access_log_sample", "1", "0", "1",
                  "Share of requests below 500 the access log writes, e.g. 0.01 (1: every one)"),
    IntegerSetting("log_queue_lines", "8192", "0", "1000000",
                   "Log lines queued for the log writer thread; when full the oldest is dropped "
                   "(sluice_log_lines_dropped_total) so no request waits for the log. 0: each "
                   "line written by the thread that logs it, none dropped, a stalled stdout "
                   "stalls requests"),
};

}  // namespace

std::span<const SettingSpec> ServeSettings() { return kServeSettings; }

}  // namespace sluice::app
