// The sluice binary: `sluice serve` wires the concrete backends (the only place that names them),
// `sluice plan` does the Little's-law arithmetic of the admission caps, `sluice migrate` brings a
// PostgreSQL metadata schema up to date.
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/thread_pool.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "data_dir_lock.h"
#include "paste_command.h"
#include "settings.h"
#include "sluice/admission/littles_law.h"
#include "sluice/admission/retry_budget.h"
#include "sluice/common/duration.h"
#include "sluice/http/server.h"
#include "sluice/render/view_renderer.h"
#include "sluice/service/admission_control.h"
#include "sluice/service/dependency.h"
#include "sluice/service/guarded_stores.h"
#include "sluice/service/paste_service.h"
#include "sluice/service/text.h"
#include "sluice/store/backends.h"
#include "sluice/store/edge_cache.h"
#include "sluice/store/fault_injection.h"
#include "sluice/store/postgres.h"
#include "sluice/store/s3.h"
#include "sluice/store/shared_state.h"
#include "sluice/worker/janitor.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "dev"
#endif

namespace sluice::app {
namespace {

namespace asio = boost::asio;

// Resident memory, for the operator and for the slow-bucket scenario's memory bound.
void AddProcessMetrics(MetricsRegistry& metrics) {
  metrics.AddGaugeCallback(
      "process_resident_memory_bytes", "Resident memory size in bytes", {}, [] {
        long pages = 0, resident = 0;
        if (FILE* f = std::fopen("/proc/self/statm", "r")) {
          if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
          std::fclose(f);
        }
        return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
      });
}

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

// "a, b ,c" -> {"a", "b", "c"}; empty entries dropped.
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

std::chrono::seconds TtlSetting(const Settings& s, std::string_view key) {
  auto ttl = service::ParseTtl(s.String(key));
  if (!ttl) throw std::invalid_argument(std::string(key) + ": choose one of 10m, 1h, 1d, 1w, 30d");
  return *ttl;
}

// --- metadata store choice: embedded SQLite, or PostgreSQL when `meta` is a postgres:// URL ------
// Serve migrates a PostgreSQL schema itself (idempotent, and safe with many processes starting at
// once), so one process or a fleet starts with no separate step; `sluice migrate` exists for
// deployments that migrate before rolling out.
std::unique_ptr<store::MetaStore> MakeMetaStore(const Settings& s,
                                                const service::CallTimeouts& timeouts,
                                                store::BlockingPools pools,
                                                const std::filesystem::path& data_dir,
                                                MetricsRegistry& metrics) {
  const std::string url = s.String("meta");
  if (url.empty()) return store::MakeSqliteMetaStore(data_dir / "meta.db", pools);
  if (!store::IsPostgresUrl(url)) {
    throw std::invalid_argument(
        "meta: leave empty for SQLite, or give postgres://USER@HOST:PORT/DB");
  }
  if (Status migrated = store::MigratePostgres(url); !migrated.ok()) {
    throw std::runtime_error("meta: " + migrated.error().message);
  }
  store::PostgresOptions options;
  options.url = url;
  auto connections = [&s](const char* key) {
    return static_cast<size_t>(std::max<int64_t>(1, s.Integer(key)));
  };
  // A few connections open at start: a connect rarely fits in a 20 ms read or a 50 ms insert.
  constexpr size_t kWarm = 4;
  options.read = {connections("meta_read_connections"), timeouts.meta_get,
                  std::min(kWarm, connections("meta_read_connections"))};
  // Creates and deletes share the write pool; its statement timeout follows the longer of the two.
  options.write = {connections("meta_write_connections"),
                   std::max(timeouts.meta_insert, timeouts.meta_delete),
                   std::min(kWarm, connections("meta_write_connections"))};
  options.cleanup = {connections("meta_cleanup_connections"), timeouts.meta_background, 1};
  auto meta = store::MakePostgresMetaStore(options);
  // Not ready until the warm connections are: a request that arrives first would connect inside
  // its own 20 ms or 50 ms timeout and fail. Bounded, since a slow primary must not stop a start.
  const auto ready_by = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto warmed = [&] {
    return meta->Stats(store::PostgresPurpose::kRead).idle >= options.read.warm &&
           meta->Stats(store::PostgresPurpose::kWrite).idle >= options.write.warm;
  };
  while (!warmed() && std::chrono::steady_clock::now() < ready_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!warmed()) spdlog::warn("PostgreSQL connections not all open after 5 s; serving anyway");
  const std::pair<const char*, store::PostgresPurpose> pools_by_name[] = {
      {"read", store::PostgresPurpose::kRead},
      {"write", store::PostgresPurpose::kWrite},
      {"cleanup", store::PostgresPurpose::kCleanup}};
  for (const auto& [name, purpose] : pools_by_name) {
    store::PostgresMetaStore* pg = meta.get();
    const store::PostgresPurpose p = purpose;
    metrics.AddGaugeCallback("sluice_meta_pool_connections", "PostgreSQL connections open, by pool",
                             {{"pool", name}}, [pg, p] { return double(pg->Stats(p).open); });
    metrics.AddGaugeCallback("sluice_meta_pool_in_use", "PostgreSQL connections lent, by pool",
                             {{"pool", name}}, [pg, p] {
                               const auto st = pg->Stats(p);
                               return double(st.open - std::min(st.open, st.idle));
                             });
    metrics.AddGaugeCallback("sluice_meta_pool_waiting", "Calls waiting for a connection, by pool",
                             {{"pool", name}}, [pg, p] { return double(pg->Stats(p).waiting); });
  }
  spdlog::info("metadata in PostgreSQL (schema version {})", store::PostgresSchemaVersion());
  return meta;
}

int Migrate(const std::string& url) {
  if (!store::IsPostgresUrl(url)) {
    std::fprintf(stderr, "--meta: give postgres://USER@HOST:PORT/DB (SQLite migrates on open)\n");
    return 2;
  }
  int applied = 0;
  if (Status s = store::MigratePostgres(url, &applied); !s.ok()) {
    std::fprintf(stderr, "migrate: %s\n", s.error().message.c_str());
    return 1;
  }
  std::printf("metadata schema at version %d (%d migration%s applied now)\n",
              store::PostgresSchemaVersion(), applied, applied == 1 ? "" : "s");
  return 0;
}

// The bucket: files under the data folder, or an S3-compatible store when `blob` is s3://BUCKET.
// The S3 pools are sized to the slots that feed them (docs/overload.md, "Read"): GET to the read
// slots, PUT to the create slots, cleanup to the cleanup threads. Its sockets run on one event
// loop; the signing and body hashing run on the callers' loops.
std::unique_ptr<store::BlobStore> MakeBlobBackend(const Settings& s,
                                                  const std::filesystem::path& data_dir,
                                                  store::BlockingPools pools,
                                                  const asio::any_io_executor& executor) {
  const std::string blob = s.String("blob");
  if (blob == "files") {
    if (!s.String("s3_endpoint").empty()) {
      throw std::invalid_argument("s3_endpoint is set but blob is files, not s3://BUCKET");
    }
    return store::MakeFsBlobStore(data_dir / "blobs", pools);
  }
  auto bucket = store::ParseS3BlobUrl(blob);
  if (!bucket) throw std::invalid_argument("blob: '" + blob + "' is neither files nor s3://BUCKET");
  auto options = store::S3Options::FromEnvironment(*bucket, s.String("s3_endpoint"),
                                                   s.String("s3_path_style"));
  if (!options.ok()) throw std::invalid_argument(options.error().message);
  options->get_connections = static_cast<size_t>(s.Integer("read_slots"));
  options->put_connections = static_cast<size_t>(s.Integer("create_slots"));
  options->cleanup_connections =
      static_cast<size_t>(std::max<int64_t>(1, s.Integer("cleanup_threads")));
  spdlog::info("paste bodies in S3 bucket {} at {} ({} style, region {})", *bucket,
               options->endpoint.empty() ? "AWS" : options->endpoint,
               options->path_style ? "path" : "virtual-host", options->region);
  return store::MakeS3BlobStore(std::move(*options), executor);
}

// The tier's shared limiter and metadata cache: none (everything in-process) or Redis.
std::unique_ptr<store::SharedState> MakeSharedState(const Settings& s, const Clock& clock,
                                                    MetricsRegistry& metrics) {
  const std::string url = s.String("cache");
  if (url.empty()) return nullptr;
  auto options = store::ParseRedisUrl(url);
  if (!options.ok()) throw std::invalid_argument("cache: " + options.error().message);
  if (s.Integer("processes") < 1) throw std::invalid_argument("processes must be at least 1");
  // Kept out of the URL (and so out of ps and shell history) where the environment allows it.
  if (const char* password = std::getenv("REDIS_PASSWORD");
      options->password.empty() && password != nullptr) {
    options->password = password;
  }
  options->ca_file = s.String("redis_ca_file");
  spdlog::info("shared limiter and cache: {} (budget {} ms, {} processes)",
               store::RedactedRedisUrl(*options),
               std::chrono::duration<double, std::milli>(s.Duration("cache_timeout")).count(),
               s.Integer("processes"));
  return store::MakeRedisSharedState(*options, clock, metrics);
}

int Serve(const Settings& s) {
  spdlog::set_level(spdlog::level::from_str(s.String("log_level")));
  const std::filesystem::path data_dir = s.String("data_dir");
  std::filesystem::create_directories(data_dir);
  // Two processes on one embedded metadata store each trust their own memory of it, so a delete
  // through one is still served by the other. With PostgreSQL the data dir holds at most bodies,
  // which are immutable, and a shared folder of them is a bucket like any other.
  std::optional<DataDirLock> data_dir_lock;
  if (s.String("meta").empty()) data_dir_lock.emplace(data_dir);

  service::ServiceOptions service_options;
  service_options.max_paste_bytes = static_cast<uint64_t>(s.Integer("max_paste_bytes"));
  service_options.default_ttl = TtlSetting(s, "default_ttl");
  service_options.max_ttl = TtlSetting(s, "max_ttl");
  if (service_options.default_ttl > service_options.max_ttl) {
    throw std::invalid_argument("default_ttl is longer than max_ttl");
  }
  service_options.create_budget = s.Duration("create_budget");
  service_options.put_timeout = s.Duration("put_timeout");
  service_options.insert_timeout = s.Duration("insert_timeout");
  service_options.read_budget = s.Duration("read_budget");
  service_options.delete_budget = s.Duration("delete_budget");
  service_options.cache_timeout = s.Duration("cache_timeout");
  service_options.verify_bodies = s.Boolean("verify_bodies");

  service::CallTimeouts timeouts;
  timeouts.blob_put = s.Duration("put_timeout");
  timeouts.blob_get = s.Duration("blob_get_timeout");
  timeouts.meta_insert = s.Duration("insert_timeout");
  timeouts.meta_get = s.Duration("meta_get_timeout");

  service::AdmissionOptions admission;
  admission.ip_create_count = {s.Number("ip_create_rate"), s.Number("ip_create_burst")};
  admission.ip_create_bytes = {s.Number("ip_create_bytes_rate"), s.Number("ip_create_bytes_burst")};
  admission.global_create_count = {s.Number("global_create_rate"), s.Number("global_create_burst")};
  admission.global_create_bytes = {s.Number("global_create_bytes_rate"),
                                   s.Number("global_create_bytes_burst")};
  admission.create_slots = s.Integer("create_slots");
  admission.create_slot_bytes = s.Integer("create_slot_bytes");
  const std::string create_cap = s.String("create_cap");
  if (create_cap != "static" && create_cap != "aimd") {
    throw std::invalid_argument("create_cap: choose static or aimd");
  }
  admission.adaptive_create_cap = create_cap == "aimd";
  admission.adaptive_target = s.Duration("aimd_target");
  admission.read_slots = s.Integer("read_slots");
  admission.ip_read = {s.Number("ip_read_rate"), s.Number("ip_read_burst")};
  admission.fill_cap = s.Integer("fill_cap");
  admission.fill_cap_per_client = s.Integer("fill_cap_per_client");
  admission.retry_after_min = static_cast<int>(s.Integer("retry_after_min"));
  admission.retry_after_max = static_cast<int>(s.Integer("retry_after_max"));
  admission.processes = s.Integer("processes");
  admission.shared_timeout = s.Duration("cache_timeout");
  for (const auto* bucket :
       {&admission.ip_create_count, &admission.ip_create_bytes, &admission.global_create_count,
        &admission.global_create_bytes, &admission.ip_read}) {
    if (bucket->rate_per_second <= 0 || bucket->burst <= 0) {
      throw std::invalid_argument("every rate and burst must be above zero");
    }
  }
  if (admission.create_slots < 1 || admission.read_slots < 1 || admission.fill_cap < 1 ||
      admission.fill_cap_per_client < 1 || admission.retry_after_min > admission.retry_after_max) {
    throw std::invalid_argument(
        "slots and caps must be at least 1, retry_after_min <= retry_after_max");
  }

  http::ServerOptions server_options;
  {
    auto trusted = admission::TrustedProxies::Parse(CommaList(s.String("trusted_proxy")));
    if (!trusted.ok()) throw std::invalid_argument("trusted_proxy: " + trusted.error().message);
    server_options.trusted_proxies = *trusted;
  }
  server_options.listen = s.String("listen");
  server_options.max_connections = ConnectionCap(s.Integer("max_connections"));
  server_options.public_url = s.String("public_url");
  // TODO(lead): ServerOptions keeps Duration. Until then round up, so 500ms is 1 s, never 0 s.
  server_options.idle_timeout = std::chrono::ceil<std::chrono::seconds>(s.Duration("idle_timeout"));
  server_options.header_timeout =
      std::chrono::ceil<std::chrono::seconds>(s.Duration("header_timeout"));
  server_options.body_timeout = std::chrono::ceil<std::chrono::seconds>(s.Duration("body_timeout"));
  server_options.drain_timeout =
      std::chrono::ceil<std::chrono::seconds>(s.Duration("drain_timeout"));

  worker::JanitorOptions janitor_options;
  // JanitorOptions counts pauses in ms and ages in s (stores date bodies to the second): round up.
  janitor_options.sweep_interval =
      std::chrono::ceil<std::chrono::milliseconds>(s.Duration("sweep_interval"));
  janitor_options.reap_interval =
      std::chrono::ceil<std::chrono::milliseconds>(s.Duration("reap_interval"));
  janitor_options.orphan_age_floor =
      std::chrono::ceil<std::chrono::seconds>(s.Duration("orphan_age_floor"));

  int threads = static_cast<int>(s.Integer("threads"));
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  // Declared first so they are destroyed last: store threads post their completions to them until
  // the stores are gone. One event loop per thread (see HttpServer).
  std::vector<std::unique_ptr<asio::io_context>> loops;
  std::vector<asio::io_context*> loop_ptrs;
  for (int i = 0; i < threads; ++i) {
    loops.push_back(std::make_unique<asio::io_context>(1));
    loop_ptrs.push_back(loops.back().get());
  }
  asio::io_context& io = *loops.front();
  asio::thread_pool read_pool(static_cast<size_t>(std::max<int64_t>(1, s.Integer("read_threads"))));
  asio::thread_pool cleanup_pool(
      static_cast<size_t>(std::max<int64_t>(1, s.Integer("cleanup_threads"))));
  const store::BlockingPools pools{&read_pool, &cleanup_pool};

  const Clock& clock = SystemClock::Instance();
  MetricsRegistry metrics;
  AddProcessMetrics(metrics);
  auto meta_backend = MakeMetaStore(s, timeouts, pools, data_dir, metrics);
  auto blob_backend = MakeBlobBackend(s, data_dir, pools, io.get_executor());
  store::MetaStore* meta_inner = meta_backend.get();
  store::BlobStore* blob_inner = blob_backend.get();

  // Fault injection exists only when configured, and then says so loudly: in the log here, on
  // /metrics (sluice_fault_injection_enabled) and at /debug/faults.
  std::unique_ptr<store::FaultInjector> faults;
  std::unique_ptr<store::MetaStore> faulty_meta;
  std::unique_ptr<store::BlobStore> faulty_blobs;
  if (s.Boolean("fault_injection")) {
    auto plan = store::FaultPlan::Parse(s.String("faults"));
    if (!plan.ok()) throw std::invalid_argument("faults: " + plan.error().message);
    faults = std::make_unique<store::FaultInjector>(metrics, *plan);
    faulty_meta = store::MakeFaultInjectingMetaStore(*meta_inner, *faults);
    faulty_blobs = store::MakeFaultInjectingBlobStore(*blob_inner, *faults);
    meta_inner = faulty_meta.get();
    blob_inner = faulty_blobs.get();
    server_options.get_faults = [&faults] { return faults->plan().ToString(); };
    server_options.set_faults = [&faults](std::string_view text) -> Status {
      auto parsed = store::FaultPlan::Parse(text);
      if (!parsed.ok()) return parsed.error();
      faults->SetPlan(*parsed);
      return Ok();
    };
  } else if (!s.String("faults").empty()) {
    throw std::invalid_argument("faults are set but fault_injection is false");
  }

  admission::RetryBudgetOptions budget_options;
  budget_options.ratio = s.Number("retry_budget_ratio");
  admission::RetryBudget retry_budget(budget_options, clock);
  metrics.AddGaugeCallback("sluice_retry_budget_balance", "Retries the budget would allow now", {},
                           [&retry_budget] { return retry_budget.Balance(); });
  admission::CircuitBreakerOptions breaker_options;
  breaker_options.refusals_to_open = static_cast<int>(s.Integer("breaker_refusals"));
  breaker_options.open_for = s.Duration("breaker_open_for");
  service::Dependency meta_dependency("meta", clock, metrics, retry_budget, breaker_options);
  service::Dependency blob_dependency("blob", clock, metrics, retry_budget, breaker_options);
  auto meta = service::MakeGuardedMetaStore(*meta_inner, meta_dependency, timeouts);
  auto blobs = service::MakeGuardedBlobStore(*blob_inner, blob_dependency, timeouts);

  // With a shared cache another process's delete reaches this one by a message that can be lost,
  // so local entries are trusted only for local_cache_ttl; alone, nothing else can change them.
  const Duration local_cache_ttl =
      s.String("cache").empty() ? Duration::zero() : Duration(s.Duration("local_cache_ttl"));
  service::PasteCache cache(static_cast<size_t>(s.Integer("cache_bytes")), clock, local_cache_ttl);
  metrics.AddGaugeCallback("sluice_paste_cache_bytes", "Bytes held by the paste cache", {},
                           [&cache] { return static_cast<double>(cache.bytes_used()); });
  // Declared after the cache it invalidates, so it stops delivering before the cache goes.
  std::unique_ptr<store::SharedState> shared_state = MakeSharedState(s, clock, metrics);
  service::AdmissionControl admission_control(admission, clock, metrics, shared_state.get());
  service::PasteService service(*meta, *blobs, cache, admission_control, clock, metrics,
                                service_options, shared_state.get());
  std::unique_ptr<store::EdgeCache> edge;
  if (auto edge_urls = CommaList(s.String("edge_purge")); !edge_urls.empty()) {
    edge = store::MakeHttpPurgeEdgeCache(edge_urls, clock);
  }
  worker::Janitor janitor(*meta, *blobs, cache, clock, metrics, janitor_options, edge.get());

  render::ViewRendererOptions render_options;
  render_options.slots = static_cast<int>(s.Integer("highlight_slots"));
  render_options.cache_bytes = static_cast<size_t>(s.Integer("highlight_cache_bytes"));
  // ViewRendererOptions counts in ms: round up, so a sub-millisecond value is never 0.
  render_options.render_timeout =
      std::chrono::ceil<std::chrono::milliseconds>(s.Duration("render_timeout"));
  render_options.large_paste_bytes = s.Integer("large_paste_bytes");
  render_options.render_delay =
      std::chrono::ceil<std::chrono::milliseconds>(s.Duration("render_delay"));
  render_options.release_points_per_second = s.Number("shed_release_rate");
  render_options.target_utilization = s.Number("highlight_utilization");
  if (render_options.target_utilization <= 0 || render_options.target_utilization > 1) {
    throw std::invalid_argument("highlight_utilization must be in (0, 1]");
  }
  if (render_options.slots < 1) throw std::invalid_argument("highlight_slots must be at least 1");
  if (render_options.render_delay.count() > 0 && !s.Boolean("fault_injection")) {
    throw std::invalid_argument("render_delay is set but fault_injection is false");
  }
  // The server's own binary, by the kernel's link to it: still the right one if a deploy replaces
  // the file while this process runs.
  render_options.worker_command = {"/proc/self/exe", "highlight-worker"};
  render::ViewRenderer renderer(render_options, clock, metrics);

  auto server =
      std::make_unique<http::HttpServer>(loop_ptrs, server_options, service, renderer, metrics);
  server->Start();
  janitor.Start(io.get_executor());
  spdlog::info("sluice {} listening on http://{}:{} (links: {}) with {} threads, data in {};{}",
               SLUICE_VERSION, server->bound_address(), server->port(), server->base_url(), threads,
               std::filesystem::absolute(data_dir).string(), s.Describe());
  spdlog::default_logger()->flush();

  auto signals = std::make_unique<asio::signal_set>(io, SIGTERM, SIGINT);
  signals->async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    spdlog::info("signal {}: draining in-flight requests", signal);
    janitor.Stop();
    server->Drain([&loops] {
      for (auto& loop : loops) loop->stop();
    });
  });

  std::vector<std::thread> runners;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> keep_running;
  for (auto& loop : loops) keep_running.push_back(asio::make_work_guard(*loop));
  for (int i = 1; i < threads; ++i) runners.emplace_back([loop = loops[i].get()] { loop->run(); });
  io.run();
  for (auto& t : runners) t.join();

  read_pool.join();
  cleanup_pool.join();
  server.reset();
  blobs.reset();
  meta.reset();
  blob_backend.reset();  // the committers finish their last batch here
  meta_backend.reset();
  // Its thread answers calls still pending by posting to the loops, which must still exist.
  shared_state.reset();
  // Requests abandoned at the drain timeout are coroutine frames still queued in the loops; they
  // hold permits and leases of the admission control, so they go now, while it still exists.
  signals.reset();
  keep_running.clear();
  loops.clear();
  spdlog::info("sluice stopped");
  return 0;
}

}  // namespace
}  // namespace sluice::app

int main(int argc, char** argv) {
  // Not a CLI subcommand: the server starts it (src/render/highlight_workers.cc), people do not.
  if (argc > 1 && std::string_view(argv[1]) == "highlight-worker") {
    return sluice::render::HighlightWorkerMain(argc, argv);
  }
  CLI::App app{"sluice: a pastebin that stays up when its dependencies do not"};
  app.set_version_flag("--version", std::string("sluice ") + SLUICE_VERSION);
  app.require_subcommand(1);

  CLI::App* serve = app.add_subcommand("serve", "Serve the pastebin over HTTP");
  sluice::app::SettingsLoader loader(*serve);
  std::optional<sluice::app::Settings> settings;

  CLI::App* plan = app.add_subcommand(
      "plan", "What the in-flight caps let through at a dependency latency (Little's law)");
  sluice::admission::PlanInput plan_input;
  std::string plan_latency = "5s";
  plan->add_option("--slots", plan_input.slots_per_process, "In-flight slots per process")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  plan->add_option("--processes", plan_input.processes, "App processes")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  plan->add_option("--rate", plan_input.arrival_rate, "Peak arrivals per second, all processes")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  plan->add_option("--latency", plan_latency, "Dependency latency per call, e.g. 5s or 250ms")
      ->capture_default_str();

  CLI::App* paste =
      app.add_subcommand("paste", "Create a paste from FILE or stdin and print its URL");
  sluice::app::PasteCommandOptions paste_options;
  sluice::app::AddPasteFlags(*paste, paste_options);

  CLI::App* migrate = app.add_subcommand(
      "migrate", "Apply the PostgreSQL metadata schema migrations (safe to repeat or run at once)");
  std::string migrate_meta;
  migrate->add_option("--meta", migrate_meta, "postgres://USER@HOST:PORT/DB")
      ->envname("SLUICE_META")
      ->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (serve->parsed()) {
    // A refused setting is a usage error: to stderr, like CLI11's own, before any logging starts.
    try {
      settings.emplace(loader.Resolve());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sluice serve: %s\n", e.what());
      return 2;
    }
  }
  try {
    if (serve->parsed()) return sluice::app::Serve(*settings);
    if (paste->parsed()) return sluice::app::RunPaste(paste_options);
    if (migrate->parsed()) return sluice::app::Migrate(migrate_meta);
    if (plan->parsed()) {
      auto latency = sluice::ParseDuration(plan_latency);
      if (!latency.ok() || latency->count() <= 0) {
        std::fprintf(stderr, "--latency: '%s' is not a positive duration like 5s or 250ms\n",
                     plan_latency.c_str());
        return 2;
      }
      plan_input.latency = *latency;
      std::fputs(
          sluice::admission::FormatPlan(plan_input, sluice::admission::PlanCapacity(plan_input))
              .c_str(),
          stdout);
      return 0;
    }
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    return 2;
  }
  return 0;
}
