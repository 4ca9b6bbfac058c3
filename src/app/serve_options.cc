#include "serve_options.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "sluice/service/text.h"

namespace sluice::app {

namespace {

// Raises the soft file-descriptor limit to the hard one and keeps the connection cap below it, with
// room for the stores' files and the listening sockets: refusing with a 503 beats failing accept().
int64_t ConnectionCap(int64_t wanted) {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) return wanted;
  if (files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
    ::getrlimit(RLIMIT_NOFILE, &files);
  }
  constexpr int64_t kReserved = 256;
  const int64_t room = files.rlim_cur == RLIM_INFINITY
                           ? wanted
                           : std::max<int64_t>(1, static_cast<int64_t>(files.rlim_cur) - kReserved);
  if (room < wanted) {
    spdlog::warn("max_connections {} lowered to {} to stay under the file-descriptor limit {}",
                 wanted, room, files.rlim_cur);
  }
  return std::min(wanted, room);
}

std::chrono::seconds TtlSetting(const Settings& s, std::string_view key) {
  auto ttl = service::ParseTtl(s.String(key));
  if (!ttl) throw std::invalid_argument(std::string(key) + ": choose one of 10m, 1h, 1d, 1w, 30d");
  return *ttl;
}

// For the options that still count in whole milliseconds or seconds: rounded up, so a value below
// the unit is never 0 (which would mean "never" or "at once").
template <typename To>
To In(const Settings& s, std::string_view key) {
  return std::chrono::ceil<To>(s.Duration(key));
}

// Who may create: the mode and the union of create_networks and create_networks_file, built once
// here (at start and on each reload, beside the set in use) and shared by every request. A file
// that cannot be read or has a line that is no network refuses the start or the reload, naming it.
admission::CreateAccessPolicy ReadCreateAccess(const Settings& s) {
  admission::CreateAccessPolicy policy;
  policy.mode = admission::ParseCreateAccess(s.String("create_access"))
                    .value_or(admission::CreateAccess::kAnyone);  // a choice: checked on load
  std::vector<admission::Cidr> blocks;
  for (const std::string& entry : CommaList(s.String("create_networks"))) {
    auto block = admission::Cidr::Parse(entry);
    if (!block) throw std::invalid_argument("create_networks: '" + entry + "' is not a network");
    blocks.push_back(*block);
  }
  if (const std::string path = s.String("create_networks_file"); !path.empty()) {
    std::ifstream file(path, std::ios::binary);
    std::ostringstream text;
    if (!file || !(text << file.rdbuf())) {
      throw std::invalid_argument("create_networks_file: cannot read " + path);
    }
    auto listed = admission::ParseNetset(text.str());
    if (!listed.ok()) {
      throw std::invalid_argument("create_networks_file: " + path + ": " + listed.error().message);
    }
    blocks.insert(blocks.end(), listed->begin(), listed->end());
  }
  if (policy.mode == admission::CreateAccess::kNetworks && blocks.empty()) {
    spdlog::warn(
        "create_access = networks with no create_networks or create_networks_file: "
        "nobody may create pastes");
  }
  policy.networks = std::make_shared<const admission::PrefixSet>(blocks);
  return policy;
}

service::ServiceOptions ReadService(const Settings& s) {
  service::ServiceOptions o;
  o.max_paste_bytes = static_cast<uint64_t>(s.Integer("max_paste_bytes"));
  o.default_ttl = TtlSetting(s, "default_ttl");
  o.max_ttl = TtlSetting(s, "max_ttl");
  o.create_budget = s.Duration("create_budget");
  o.put_timeout = s.Duration("put_timeout");
  o.insert_timeout = s.Duration("insert_timeout");
  o.read_budget = s.Duration("read_budget");
  o.delete_budget = s.Duration("delete_budget");
  o.cache_timeout = s.Duration("cache_timeout");
  o.verify_bodies = s.Boolean("verify_bodies");
  o.max_storage_bytes = static_cast<uint64_t>(s.Integer("max_storage_bytes"));
  // From admission to insert a create waits for its body, then spends its budget.
  o.reservation_lifetime = s.Duration("body_timeout") + s.Duration("create_budget");
  o.create_access = ReadCreateAccess(s);
  o.create_access_text = s.String("create_access_text");
  o.proof_of_work_difficulty = static_cast<uint64_t>(s.Integer("proof_of_work_difficulty"));
  o.read_only = s.Boolean("read_only");
  o.read_only_retry_after =
      std::chrono::duration_cast<std::chrono::seconds>(s.Duration("read_only_retry_after"));
  return o;
}

service::CallTimeouts ReadTimeouts(const Settings& s) {
  service::CallTimeouts t;
  t.blob_put = s.Duration("put_timeout");
  t.blob_get = s.Duration("blob_get_timeout");
  t.meta_insert = s.Duration("insert_timeout");
  t.meta_get = s.Duration("meta_get_timeout");
  // A delete's tombstone and a burn paste's claim commit within the delete's whole budget
  // (docs/overload.md, "Delete").
  t.meta_delete = s.Duration("delete_budget");
  t.meta_moderation = s.Duration("moderation_timeout");
  return t;
}

service::AdmissionOptions ReadAdmission(const Settings& s) {
  service::AdmissionOptions a;
  a.ip_create_count = {s.Number("ip_create_rate"), s.Number("ip_create_burst")};
  a.ip_create_bytes = {s.Number("ip_create_bytes_rate"), s.Number("ip_create_bytes_burst")};
  a.global_create_count = {s.Number("global_create_rate"), s.Number("global_create_burst")};
  a.token_reserved_share = s.Number("token_reserved_share");
  a.global_create_bytes = {s.Number("global_create_bytes_rate"),
                           s.Number("global_create_bytes_burst")};
  a.create_slots = s.Integer("create_slots");
  a.create_slot_bytes = s.Integer("create_slot_bytes");
  a.create_slots_per_client = s.Integer("create_slots_per_client");
  a.create_slots_per_network = s.Integer("create_slots_per_network");
  a.networks = {static_cast<int>(s.Integer("network_prefix_v4")),
                static_cast<int>(s.Integer("network_prefix_v6"))};
  a.adaptive_create_cap = s.String("create_cap") == "aimd";
  a.adaptive_target = s.Duration("aimd_target");
  a.read_slots = s.Integer("read_slots");
  a.ip_read = {s.Number("ip_read_rate"), s.Number("ip_read_burst")};
  a.ip_report = {s.Number("report_rate"), s.Number("report_burst")};
  a.ip_delete = {s.Number("delete_rate"), s.Number("delete_burst")};
  a.fill_cap = s.Integer("fill_cap");
  a.fill_cap_per_client = s.Integer("fill_cap_per_client");
  a.retry_after_min = static_cast<int>(s.Integer("retry_after_min"));
  a.retry_after_max = static_cast<int>(s.Integer("retry_after_max"));
  a.processes = s.Integer("processes");
  a.solver_share = s.Boolean("proof_of_work") ? s.Number("proof_of_work_share") : 0.0;
  a.shared_timeout = s.Duration("cache_timeout");
  return a;
}

service::ModerationOptions ReadModeration(const Settings& s) {
  service::ModerationOptions m;
  m.hide_threshold = s.Integer("report_hide_threshold");
  m.networks = {static_cast<int>(s.Integer("report_network_prefix_v4")),
                static_cast<int>(s.Integer("report_network_prefix_v6"))};
  m.withholds_per_network = s.Integer("report_withholds_per_network_per_day");
  const double per_hour = s.Number("report_withholds_per_hour");
  m.withhold_rate = {per_hour / 3600, per_hour};
  m.global_report_rate = {s.Number("report_global_rate"), s.Number("report_global_burst")};
  m.max_open_reports = s.Integer("max_open_reports");
  m.max_blocked_contents = s.Integer("max_blocked_contents");
  m.max_notices = s.Integer("max_notices");
  m.budget = s.Duration("moderation_timeout") * 2;
  m.takedown_deadline = In<std::chrono::seconds>(s, "takedown_deadline");
  return m;
}

http::ContactOptions ReadContact(const Settings& s) {
  http::ContactOptions c;
  c.contacts = CommaList(s.String("abuse_contact"));
  c.languages = CommaList(s.String("contact_languages"));
  c.security_txt_lifetime = In<std::chrono::seconds>(s, "security_txt_lifetime");
  c.takedown_deadline = In<std::chrono::seconds>(s, "takedown_deadline");
  c.policy_text = s.String("abuse_policy_text");
  const std::string robots = s.String("robots");
  c.robots = robots == "all"    ? http::ContactOptions::Robots::kAll
             : robots == "none" ? http::ContactOptions::Robots::kNone
                                : http::ContactOptions::Robots::kSite;
  return c;
}

http::ServerOptions ReadServer(const Settings& s) {
  http::ServerOptions o;
  auto trusted = admission::TrustedProxies::Parse(CommaList(s.String("trusted_proxy")));
  if (!trusted.ok()) throw std::invalid_argument("trusted_proxy: " + trusted.error().message);
  o.trusted_proxies = *trusted;
  o.forward_auth_header = s.String("forward_auth_header");
  if (!o.forward_auth_header.empty() && o.trusted_proxies.empty()) {
    spdlog::warn("forward_auth_header = '{}' without trusted_proxy: the header is never honoured",
                 o.forward_auth_header);
  }
  o.access_log = s.Boolean("access_log");
  o.access_log_sample = s.Number("access_log_sample");
  o.listen = s.String("listen");
  o.max_connections = ConnectionCap(s.Integer("max_connections"));
  o.max_connections_per_client = s.Integer("max_connections_per_client");
  o.max_connections_per_network = s.Integer("max_connections_per_network");
  o.networks = {static_cast<int>(s.Integer("network_prefix_v4")),
                static_cast<int>(s.Integer("network_prefix_v6"))};
  o.pressure = {s.Number("pressure_start"), s.Number("pressure_full")};  // ordered: kServeRules
  o.idle_timeout_floor = s.Duration("idle_timeout_floor");
  o.min_body_rate_at_pressure = s.Integer("min_body_rate_at_pressure");
  o.public_url = s.String("public_url");
  o.idle_timeout = s.Duration("idle_timeout");
  o.first_byte_timeout = s.Duration("first_byte_timeout");
  o.header_timeout = s.Duration("header_timeout");
  o.body_timeout = s.Duration("body_timeout");
  o.min_body_rate = s.Integer("min_body_rate");
  o.min_body_rate_grace = s.Duration("min_body_rate_grace");
  o.drain_timeout = s.Duration("drain_timeout");
  o.metrics_on_public = s.Boolean("metrics_on_public");
  o.contact = ReadContact(s);
  return o;
}

render::ViewRendererOptions ReadRender(const Settings& s) {
  render::ViewRendererOptions o;
  o.slots = static_cast<int>(s.Integer("highlight_slots"));
  o.cache_bytes = static_cast<size_t>(s.Integer("highlight_cache_bytes"));
  o.render_timeout = In<std::chrono::milliseconds>(s, "render_timeout");
  o.large_paste_bytes = s.Integer("large_paste_bytes");
  o.bounds.max_bytes = static_cast<size_t>(s.Integer("view_max_bytes"));
  o.bounds.max_lines = static_cast<size_t>(s.Integer("view_max_lines"));
  o.render_delay = In<std::chrono::milliseconds>(s, "render_delay");
  o.release_points_per_second = s.Number("shed_release_rate");
  o.target_utilization = s.Number("highlight_utilization");
  // The server's own binary, by the kernel's link to it: still the right one if a deploy replaces
  // the file while this process runs.
  o.worker_command = {"/proc/self/exe", "highlight-worker"};
  return o;
}

}  // namespace

std::vector<std::string> CommaList(const std::string& list) {
  std::vector<std::string> entries;
  for (size_t start = 0; start < list.size();) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string entry = list.substr(start, comma - start);
    entry.erase(0, entry.find_first_not_of(' '));
    entry.erase(entry.find_last_not_of(' ') + 1);
    if (!entry.empty()) entries.push_back(entry);
    start = comma + 1;
  }
  return entries;
}

ServeOptions ReadServeOptions(const Settings& s) {
  ServeOptions o;
  for (const std::string& entry : CommaList(s.String("feeds"))) {
    auto spec = admission::ParseFeedSpec(entry);
    if (!spec.ok()) throw std::invalid_argument("feeds: " + spec.error().message);
    for (const admission::FeedSpec& seen : o.feeds) {
      if (seen.name == spec->name) {
        throw std::invalid_argument("feeds: the name '" + seen.name + "' is declared twice");
      }
    }
    o.feeds.push_back(std::move(*spec));
  }
  o.feed_rates.per_key = {s.Number("feed_class_ip_create_rate"),
                          s.Number("feed_class_ip_create_burst")};
  o.feed_rates.per_class = {s.Number("feed_class_global_create_rate"),
                            s.Number("feed_class_global_create_burst")};
  o.feed_refuse_text = s.String("feed_refuse_text");
  o.data_dir = s.String("data_dir");
  o.threads = static_cast<int>(s.Integer("threads"));
  if (o.threads == 0)
    o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.loop_slice = s.Duration("loop_slice");
  o.read_threads = static_cast<size_t>(s.Integer("read_threads"));
  o.cleanup_threads = static_cast<size_t>(s.Integer("cleanup_threads"));
  o.service = ReadService(s);
  o.timeouts = ReadTimeouts(s);
  o.admission = ReadAdmission(s);
  o.retry_budget.ratio = s.Number("retry_budget_ratio");
  o.breaker.refusals_to_open = static_cast<int>(s.Integer("breaker_refusals"));
  o.breaker.open_for = s.Duration("breaker_open_for");
  o.breaker.failover_open_for = s.Duration("breaker_open_for_failover");
  o.cache_bytes = static_cast<size_t>(s.Integer("cache_bytes"));
  // Wherever another process can change a row under this one's cache, its entries are trusted
  // only for local_cache_ttl: with PostgreSQL another process deletes or withholds a paste (and
  // a promotion can lose rows) without telling this one, and with a shared cache the message
  // that tells it can be lost. Only the embedded store, one process per data dir, has no other
  // writer.
  const bool shared_rows = !s.String("meta").empty() || !s.String("cache").empty();
  o.local_cache_ttl = shared_rows ? s.Duration("local_cache_ttl") : Duration::zero();
  o.edge_purge = CommaList(s.String("edge_purge"));
  o.janitor.sweep_interval = In<std::chrono::milliseconds>(s, "sweep_interval");
  o.janitor.background_share = s.Number("background_share");
  o.janitor.background_start_delay = In<std::chrono::milliseconds>(s, "background_start_delay");
  o.janitor.reap_interval = In<std::chrono::milliseconds>(s, "reap_interval");
  o.janitor.orphan_age_floor = In<std::chrono::seconds>(s, "orphan_age_floor");
  o.janitor.report_retention = In<std::chrono::seconds>(s, "report_retention");
  o.render = ReadRender(s);
  o.server = ReadServer(s);
  o.moderation_threads = static_cast<size_t>(s.Integer("moderation_threads"));
  o.moderation = ReadModeration(s);
  o.creator_tokens.max_tokens = s.Integer("max_creator_tokens");
  o.creator_tokens.refresh =
      std::chrono::duration_cast<std::chrono::milliseconds>(s.Duration("creator_tokens_refresh"));
  o.creator_tokens.budget = s.Duration("moderation_timeout") * 2;
  o.moderation.shared_meta_ttl = o.service.shared_meta_ttl;
  o.service.creator_networks = o.moderation.networks;
  o.admin_listen = s.String("admin_listen");
  o.admin_token_file = s.String("admin_token_file");
  o.push.webhook_url = s.String("push_webhook");
  o.push_webhook_secret_file = s.String("push_webhook_secret_file");
  o.proof_of_work = s.Boolean("proof_of_work");
  o.proof_of_work_options.expiry =
      std::chrono::duration_cast<std::chrono::seconds>(s.Duration("proof_of_work_expiry"));
  o.proof_of_work_key_file = s.String("proof_of_work_key_file");
  o.push.command = s.String("push_command");
  o.push.timeout = s.Duration("push_timeout");
  o.push.queue = static_cast<size_t>(s.Integer("push_queue"));
  o.push.deliveries_per_minute = s.Number("push_per_minute");
  o.push.burst = static_cast<double>(s.Integer("push_burst"));
  return o;
}

}  // namespace sluice::app
