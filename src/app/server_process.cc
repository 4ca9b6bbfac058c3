#include "server_process.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "backends.h"
#include "build_commit.h"
#include "feed_loader.h"
#include "log_queue.h"
#include "reload.h"
#include "sluice/common/allocator.h"
#include "sluice/common/thread_name.h"
#include "sluice/service/guarded_stores.h"
#include "sluice/service/ids.h"
#include "systemd_notify.h"
#include "thread_slice.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "dev"
#endif

namespace sluice::app {

namespace asio = boost::asio;

namespace {

// Resident memory, for the operator and for the slow-bucket scenario's memory bound.
double ResidentBytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

// A secret from the file a setting names (one line; surrounding whitespace is not part of it). A
// file that is named but unreadable, empty or short stops the start: an operator who set one
// expects it to be in force.
std::string ReadSecretFile(std::string_view setting, const std::string& path) {
  std::ifstream in(path);
  std::string secret;
  if (!in || !std::getline(in, secret)) {
    throw std::invalid_argument(fmt::format("{}: cannot read {}", setting, path));
  }
  const size_t first = secret.find_first_not_of(" \t\r\n");
  const size_t last = secret.find_last_not_of(" \t\r\n");
  if (first == std::string::npos)
    throw std::invalid_argument(fmt::format("{}: {} is empty", setting, path));
  secret = secret.substr(first, last - first + 1);
  if (secret.size() < 16) {
    throw std::invalid_argument(
        fmt::format("{}: the secret in {} is shorter than 16 characters", setting, path));
  }
  return secret;
}

// The admin token's digest, from its file.
std::optional<std::array<unsigned char, 32>> ReadAdminToken(const std::string& path) {
  if (path.empty()) return std::nullopt;
  return service::HashDeleteToken(ReadSecretFile("admin_token_file", path));
}

// The push sinks the settings name, with the webhook's key read from its file; null for none.
std::unique_ptr<notify::Push> MakePush(const ServeOptions& options, const Clock& clock,
                                       MetricsRegistry& metrics) {
  notify::PushOptions push = options.push;
  if (!options.push_webhook_secret_file.empty()) {
    push.webhook_secret =
        ReadSecretFile("push_webhook_secret_file", options.push_webhook_secret_file);
  }
  auto sinks = notify::Push::FromOptions(push, clock, metrics);
  if (sinks) {
    // The webhook's host only: a path often holds a secret (an ntfy topic, a chat hook's token).
    std::string_view host = push.webhook_url;
    host.remove_prefix(std::min(host.size(), host.find("://") + 3));
    host = host.substr(0, host.find('/'));
    if (const size_t at = host.rfind('@'); at != std::string_view::npos) host.remove_prefix(at + 1);
    spdlog::info("push: {}{}",
                 push.webhook_url.empty()
                     ? ""
                     : fmt::format("webhook to {} ({}){}", host,
                                   push.webhook_secret.empty() ? "unsigned" : "signed",
                                   push.command.empty() ? "" : ", "),
                 push.command.empty() ? "" : "a command");
  }
  return sinks;
}

// The proof-of-work signer the settings ask for, with its key from its file or made at random;
// null when proof_of_work is off.
std::unique_ptr<service::ProofOfWork> MakeProofOfWork(const ServeOptions& options,
                                                      const Clock& clock) {
  if (!options.proof_of_work) return nullptr;
  std::string key;
  if (!options.proof_of_work_key_file.empty()) {
    key = ReadSecretFile("proof_of_work_key_file", options.proof_of_work_key_file);
  } else {
    key.resize(32);
    service::FillRandom(reinterpret_cast<unsigned char*>(key.data()), key.size());
    if (options.admission.processes > 1) {
      spdlog::warn(
          "proof_of_work: no proof_of_work_key_file, so each process signs with its own random "
          "key and takes only the solutions of its own challenges; give the {} processes one "
          "key file",
          options.admission.processes);
    }
  }
  spdlog::info("proof of work: on, {:.0f}% of the global create budget kept for solvers",
               100 * options.admission.solver_share);
  return std::make_unique<service::ProofOfWork>(std::move(key), options.proof_of_work_options,
                                                clock);
}

std::optional<DataDirLock> LockIfEmbedded(const Settings& s, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  // With PostgreSQL the data dir holds at most bodies, which are immutable, and a shared folder of
  // them is a bucket like any other.
  if (!s.String("meta").empty()) return std::nullopt;
  return std::optional<DataDirLock>(std::in_place, dir);
}

// The embedded blob store fills the data disk: a quota the disk cannot hold is a promise the
// server would break with failed PUTs (503) instead of the quota's 507.
void WarnIfDiskBelowQuota(const Settings& s, const std::filesystem::path& dir, uint64_t quota) {
  if (quota == 0 || s.String("blob") != "files") return;
  std::error_code ec;
  const std::filesystem::space_info space = std::filesystem::space(dir, ec);
  if (ec) {
    spdlog::warn("max_storage_bytes: cannot tell the free space of {}: {}", dir.string(),
                 ec.message());
  } else if (space.available < quota) {
    spdlog::warn(
        "max_storage_bytes is {} bytes but {} has only {} bytes free: the disk may fill before "
        "the quota answers 507",
        quota, dir.string(), space.available);
  }
}

// processes > 1 means a fleet sharing limits through Redis; on an embedded store each process still
// keeps its own pastes, and a paste made on one is 404 on the others (docs/scale-out.md).
void WarnIfFleetOnEmbeddedStores(const Settings& s) {
  const int64_t processes = s.Integer("processes");
  if (processes <= 1) return;
  std::vector<std::string> embedded;
  if (s.String("meta").empty()) embedded.push_back("metadata in SQLite (meta is empty)");
  if (s.String("blob") == "files") embedded.push_back("bodies in files (blob = files)");
  if (embedded.empty()) return;
  spdlog::warn(
      "processes = {} but this process keeps {} in its own data dir: each process has its own "
      "pastes, and a paste made on one is 404 on the others; a fleet needs PostgreSQL (meta) and "
      "S3 (blob), see the README, 'Scale out'",
      processes, fmt::join(embedded, " and "));
}

// A public pastebin nobody can reach gets its abuse notices sent to its host and registrar, which
// is how such sites lose their domain: the start log names the setting until it is set.
void WarnIfNoAbuseContact(const Settings& s) {
  if (!s.String("abuse_contact").empty()) return;
  spdlog::warn(
      "abuse_contact is not set: /.well-known/security.txt answers 404 and no page names an "
      "address for abuse notices, which then go to your host or registrar; set abuse_contact, "
      "e.g. mailto:abuse@paste.example (docs/moderation.md, \"The public contact\")");
}

// Live settings that a reload applies only up to what the process was built with: each entry says
// which, the bound, and that a restart lifts it. Empty when nothing is held back.
std::vector<std::string> HeldByStart(const ServeOptions& started, const ServeOptions& next,
                                     const Settings& s) {
  std::vector<std::string> held;
  // The pool's threads and the worker processes are started once (render::ViewRenderer).
  if (next.render.slots > started.render.slots) {
    held.push_back(fmt::format(
        "highlight_slots = {} is more than the {} highlighter workers this process started: "
        "{} apply until a restart",
        next.render.slots, started.render.slots, started.render.slots));
  }
  // PostgreSQL's statement_timeout is set on each connection when it opens, a little above the
  // pool's timeout at start (store::StatementTimeoutFor): a longer timeout is cut there.
  if (!s.String("meta").empty()) {
    const auto writes = [](const service::CallTimeouts& t) {
      return std::max(t.meta_insert, t.meta_delete);
    };
    if (next.timeouts.meta_get > started.timeouts.meta_get ||
        writes(next.timeouts) > writes(started.timeouts)) {
      held.push_back(
          "meta_get_timeout, insert_timeout and delete_budget above their values at start are "
          "still cut by PostgreSQL's statement_timeout, set per connection at start; restart to "
          "raise it");
    }
  }
  return held;
}

}  // namespace

EventLoops::EventLoops(int count, std::chrono::nanoseconds slice) : slice_(slice) {
  for (int i = 0; i < count; ++i) loops_.push_back(std::make_unique<asio::io_context>(1));
}

std::vector<asio::io_context*> EventLoops::pointers() const {
  std::vector<asio::io_context*> out;
  for (const auto& loop : loops_) out.push_back(loop.get());
  return out;
}

void EventLoops::Run() {
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> keep_running;
  for (auto& loop : loops_) keep_running.push_back(asio::make_work_guard(*loop));
  std::vector<std::thread> runners;
  for (size_t i = 1; i < loops_.size(); ++i) {
    runners.emplace_back([loop = loops_[i].get(), i, slice = slice_] {
      // The main thread runs loop 0 and keeps its name, the process's.
      NameThisThread("loop-" + std::to_string(i));
      RequestThreadSlice(slice);
      loop->run();
    });
  }
  // A new thread inherits its creator's slice: asked this late, so that the pools and committers
  // this thread started before keep the kernel's default.
  spdlog::info("event loops' time slice: {}", RequestThreadSlice(slice_));
  loops_.front()->run();
  for (auto& t : runners) t.join();
}

void EventLoops::Stop() {
  for (auto& loop : loops_) loop->stop();
}

FaultLayer::FaultLayer(const Settings& s, MetricsRegistry& metrics, store::MetaStore& inner_meta,
                       store::BlobStore& inner_blobs)
    : meta(inner_meta), blobs(inner_blobs) {
  if (!s.Boolean("fault_injection")) return;
  auto plan = store::FaultPlan::Parse(s.String("faults"));
  if (!plan.ok()) throw std::invalid_argument("faults: " + plan.error().message);
  injector = std::make_unique<store::FaultInjector>(metrics, *plan);
  faulty_meta = store::MakeFaultInjectingMetaStore(inner_meta, *injector);
  faulty_blobs = store::MakeFaultInjectingBlobStore(inner_blobs, *injector);
}

http::ServerOptions FaultLayer::Control(http::ServerOptions options) {
  if (!injector) return options;
  store::FaultInjector* faults = injector.get();
  options.get_faults = [faults] { return faults->plan().ToString(); };
  options.set_faults = [faults](std::string_view text) -> Status {
    auto parsed = store::FaultPlan::Parse(text);
    if (!parsed.ok()) return parsed.error();
    faults->SetPlan(*parsed);
    return Ok();
  };
  return options;
}

const char* const kReloadsHelp =
    "Configuration reloads (SIGHUP) by result: ok (all applied), partial (the live settings "
    "applied, some changed ones need a restart), invalid (refused, nothing changed)";

ServerProcess::ServerProcess(const Settings& settings, Reread reread)
    : settings_(settings),
      options_(ReadServeOptions(settings)),
      reread_(std::move(reread)),
      applied_(settings),
      data_dir_lock_(LockIfEmbedded(settings, options_.data_dir)),
      loops_(options_.threads, options_.loop_slice),
      clock_(SystemClock::Instance()),
      put_bytes_plan_(settings.Number("put_bytes_per_day_plan")),
      process_gauges_(metrics_),
      reloads_ok_(
          metrics_.GetCounter("sluice_config_reloads_total", kReloadsHelp, {{"result", "ok"}})),
      reloads_partial_(metrics_.GetCounter("sluice_config_reloads_total", kReloadsHelp,
                                           {{"result", "partial"}})),
      reloads_invalid_(metrics_.GetCounter("sluice_config_reloads_total", kReloadsHelp,
                                           {{"result", "invalid"}})),
      read_pool_(options_.read_threads),
      cleanup_pool_(options_.cleanup_threads),
      moderation_pool_(options_.moderation_threads),
      meta_backend_(MakeMetaStore(settings, options_.timeouts,
                                  {&read_pool_, &cleanup_pool_, &moderation_pool_},
                                  options_.data_dir, &metrics_)),
      meta_gauges_(metrics_),
      blob_backend_(MakeBlobBackend(settings, options_.data_dir, {&read_pool_, &cleanup_pool_},
                                    loops_.front().get_executor(), *meta_backend_, &metrics_)),
      faults_(settings, metrics_, *meta_backend_, *blob_backend_),
      call_timeouts_(options_.timeouts),
      retry_budget_(options_.retry_budget, clock_),
      budget_gauges_(metrics_),
      meta_dependency_("meta", clock_, metrics_, retry_budget_, options_.breaker),
      blob_dependency_("blob", clock_, metrics_, retry_budget_, options_.breaker),
      meta_(service::MakeGuardedMetaStore(faults_.faulty_meta ? *faults_.faulty_meta : faults_.meta,
                                          meta_dependency_, call_timeouts_)),
      blobs_(service::MakeGuardedBlobStore(
          faults_.faulty_blobs ? *faults_.faulty_blobs : faults_.blobs, blob_dependency_,
          call_timeouts_)),
      cache_(options_.cache_bytes, clock_, options_.local_cache_ttl),
      cache_gauges_(metrics_),
      shared_state_(MakeSharedState(settings, clock_, metrics_)),
      admission_(options_.admission, clock_, metrics_, shared_state_.get()),
      abuse_(admission_, clock_, metrics_),
      pow_(MakeProofOfWork(options_, clock_)),
      feeds_(clock_, metrics_, options_.feed_rates, options_.feed_refuse_text),
      service_(*meta_, *blobs_, cache_, admission_, clock_, metrics_, options_.service,
               shared_state_.get(), &blocks_, &abuse_, &blocked_contents_),
      push_(MakePush(options_, clock_, metrics_)),
      moderation_(*meta_, *blobs_, cache_, admission_, blocks_, clock_, options_.moderation,
                  shared_state_.get(), &service_, &metrics_, &blocked_contents_),
      moderation_gauges_(metrics_),
      creator_tokens_(*meta_, clock_, metrics_, options_.creator_tokens),
      edge_cache_(options_.edge_purge.empty()
                      ? nullptr
                      : store::MakeHttpPurgeEdgeCache(options_.edge_purge, clock_)),
      janitor_(*meta_, *blobs_, cache_, clock_, metrics_, options_.janitor, edge_cache_.get()),
      renderer_(options_.render, clock_, metrics_),
      server_(std::make_unique<http::HttpServer>(loops_.pointers(), PublicOptions(), service_,
                                                 renderer_, metrics_, clock_)),
      admin_server_(MakeAdminServer()) {
  {
    // At start a feed that cannot be read refuses the start, as create_networks_file does: there
    // are no networks of it to keep.
    FeedLoad load = LoadFeeds(options_.feeds, nullptr);
    if (!load.failures.empty()) {
      throw std::invalid_argument(fmt::format("feeds: {}", fmt::join(load.failures, "; ")));
    }
    feeds_.Replace(std::move(load.feeds));
    service_.UseReputationFeeds(&feeds_);
  }
  WarnIfFleetOnEmbeddedStores(settings_);
  moderation_.TellOperator(push_.get());
  if (pow_) service_.UseProofOfWork(pow_.get(), metrics_);
  WarnIfNoAbuseContact(settings_);
  process_gauges_.Add("process_resident_memory_bytes", "Resident memory size in bytes", {},
                      ResidentBytes);
  // Read at every scrape: the allocator's counts are its own snapshot, cheap to refresh.
  for (const char* state : {"allocated", "held"}) {
    process_gauges_.Add(
        "sluice_allocator_bytes",
        "Heap bytes by state: allocated (in use by sluice) and held (the "
        "allocator's arenas, in use or free; compare process_resident_memory_bytes)",
        {{"state", state}}, [held = std::string_view(state) == "held"] {
          const auto bytes = ReadAllocatorBytes();
          if (!bytes) return 0.0;
          return held ? bytes->held : bytes->allocated;
        });
  }
  process_gauges_.AddCounter(
      "sluice_log_lines_dropped_total",
      "Log lines dropped because the log writer was behind by a full queue (src/app/log_queue.h): "
      "the event loops never wait for the log",
      {}, [] { return static_cast<double>(LogLinesDropped()); });
  process_gauges_.Add(
      "sluice_build_info", "The running build: its version, its commit and its malloc",
      {{"version", SLUICE_VERSION}, {"commit", kBuildCommit}, {"allocator", AllocatorName()}},
      [] { return 1.0; });
  process_gauges_.Add("sluice_plan_put_bytes_per_day",
                      "put_bytes_per_day_plan: body bytes a day the plan allows (0: none)", {},
                      [this] { return put_bytes_plan_.load(std::memory_order_relaxed); });
  AddMetaPoolGauges(*meta_backend_, meta_gauges_);
  budget_gauges_.Add("sluice_retry_budget_balance", "Retries the budget would allow now", {},
                     [this] { return retry_budget_.Balance(); });
  cache_gauges_.Add("sluice_paste_cache_bytes", "Bytes held by the paste cache", {},
                    [this] { return static_cast<double>(cache_.bytes_used()); });
  moderation_gauges_.Add(
      "sluice_reports_pending",
      "Pastes with open abuse reports awaiting review (the store's count, read after every report "
      "and review action and every blocks_refresh)",
      {}, [this] { return static_cast<double>(moderation_.PendingReports()); });
  moderation_gauges_.Add(
      "sluice_blocked_contents",
      "Digests in the content blocklist as this process holds them (read again every "
      "blocks_refresh when the store's version changed), of max_blocked_contents",
      {}, [this] { return static_cast<double>(blocked_contents_.size()); });
  moderation_gauges_.Add(
      "sluice_reports_open",
      "Open abuse reports stored, of max_open_reports (read with sluice_reports_pending)", {},
      [this] { return static_cast<double>(moderation_.OpenReportRows()); });
}

http::ServerOptions ServerProcess::PublicOptions() {
  http::ServerOptions o = options_.server;
  o.moderation = &moderation_;  // the public reports
  o.abuse = &abuse_;            // /api/v1/status, with pseudonyms
  o.creator_tokens = &creator_tokens_;
  return o;
}

std::unique_ptr<http::HttpServer> ServerProcess::MakeAdminServer() {
  if (options_.admin_listen.empty()) return nullptr;
  http::ServerOptions o = faults_.Control(options_.server);
  o.surface = http::ServerOptions::Surface::kAdmin;
  o.listen = options_.admin_listen;
  o.public_url.clear();
  o.moderation = &moderation_;
  o.abuse = &abuse_;
  o.creator_tokens = &creator_tokens_;
  o.admin_token_sha256 = ReadAdminToken(options_.admin_token_file);
  return std::make_unique<http::HttpServer>(loops_.pointers(), std::move(o), service_, renderer_,
                                            metrics_, clock_);
}

void ServerProcess::Reload() {
  if (!reread_) {
    spdlog::warn("reload: this server cannot read its settings again; nothing changed");
    reloads_invalid_.Inc();
    return;
  }
  // systemd shows the unit as reloading until READY=1 (and Type=notify-reload, systemd 253, waits
  // for it): every path below ends with NotifyReloaded.
  systemd::NotifyReloading("reloading the configuration");
  // Reading is off the loops: this runs on the first one, which serves requests too, and a
  // create_networks_file of a million lines took 1.3 s to parse. The reload thread reads and
  // checks everything before anything is applied, so a bad file changes nothing; the apply comes
  // back to the first loop, in the order of the reads.
  boost::asio::post(reload_thread_, [this] {
    RunBehindTheLoops();
    std::optional<Settings> next;
    std::optional<ServeOptions> next_options;
    try {
      next.emplace(reread_());
      next_options.emplace(ReadServeOptions(*next));
    } catch (const std::exception& e) {
      reloads_invalid_.Inc();
      spdlog::error("reload refused, nothing changed: {}", e.what());
      systemd::NotifyReloaded(std::string("reload refused, nothing changed: ") + e.what());
      return;
    }
    auto read = std::make_shared<std::pair<Settings, ServeOptions>>(std::move(*next),
                                                                    std::move(*next_options));
    boost::asio::post(loops_.front(), [this, read] { ApplyReload(read->first, read->second); });
  });
}

void ServerProcess::ApplyReload(const Settings& next, ServeOptions next_options) {
  const ReloadChanges changes = CompareForReload(settings_, applied_, next);
  const std::vector<std::string> held = HeldByStart(options_, next_options, settings_);
  admission_.Reconfigure(next_options.admission);
  // The stores' own timeouts before the service's: the tighter of the two bounds a call.
  call_timeouts_.Store(next_options.timeouts);
  // The read-only window follows the file only when the file's value changed: a reload for
  // something else leaves a window opened or closed through the admin listener as it is.
  if (std::find(changes.live.begin(), changes.live.end(), "read_only") == changes.live.end()) {
    next_options.service.read_only = service_.options()->read_only;
  }
  service_.Reconfigure(next_options.service);
  feeds_.Reconfigure(next_options.feed_rates, next_options.feed_refuse_text);
  ReloadFeeds(next_options.feeds);
  for (service::Dependency* dependency : {&meta_dependency_, &blob_dependency_}) {
    dependency->SetBreakerThresholds(next_options.breaker.refusals_to_open,
                                     next_options.breaker.open_for,
                                     next_options.breaker.failover_open_for);
  }
  retry_budget_.SetRatio(next_options.retry_budget.ratio);
  cache_.SetMaxAge(next_options.local_cache_ttl);
  renderer_.Reconfigure(next_options.render);
  moderation_.Reconfigure(next_options.moderation);
  creator_tokens_.SetOptionsForReload(next_options.creator_tokens);
  put_bytes_plan_.store(next.Number("put_bytes_per_day_plan"), std::memory_order_relaxed);
  server_->Reconfigure(next_options.server);
  if (admin_server_) admin_server_->Reconfigure(next_options.server);
  spdlog::set_level(spdlog::level::from_str(next.String("log_level")));
  applied_ = next;
  if (!changes.restart.empty()) {
    spdlog::warn("reload: {} cannot change while running and keep their values; restart to apply",
                 fmt::join(changes.restart, ", "));
  }
  for (const std::string& limit : held) spdlog::warn("reload: {}", limit);
  spdlog::info("reload: {}", changes.live.empty()
                                 ? std::string("no live setting changed")
                                 : fmt::format("applied {}", fmt::join(changes.live, ", ")));
  const bool whole = changes.restart.empty() && held.empty();
  (whole ? reloads_ok_ : reloads_partial_).Inc();
  systemd::NotifyReloaded(whole ? "reloaded" : "reloaded; some settings need a restart");
}

// How much nicer than the loops the reload thread runs (whatever the process's own nice value).
constexpr int kReloadThreadNicer = 10;

void ServerProcess::RunBehindTheLoops() {
  // The reload thread yields the cores to the loops: on a small machine a load of a million
  // prefixes (a second of CPU) run at the loops' priority doubled their p99 while it ran
  // (bench/results/feeds.md). Linux takes a thread's id for a thread's nice value.
  NameThisThread("reload");
  // The main thread's value (the loops'), so that every task sets the same one.
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::getpid()));
  if (errno == 0) {
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()),
                  std::min(19, nice + kReloadThreadNicer));
  }
}

void ServerProcess::ReloadFeeds(std::vector<admission::FeedSpec> specs) {
  boost::asio::post(reload_thread_, [this, specs = std::move(specs)] {
    RunBehindTheLoops();
    const std::shared_ptr<const admission::FeedSet> previous = feeds_.Current();
    if (specs.empty() && previous->empty()) return;
    FeedLoad load = LoadFeeds(specs, previous.get());
    feeds_.Replace(std::move(load.feeds));
    const double seconds = std::chrono::duration<double>(load.took).count();
    metrics_
        .GetGauge("sluice_feed_load_seconds",
                  "Time the last load of the reputation feeds took (every file read, parsed and "
                  "built, off the event loops)")
        .Set(seconds);
    for (const std::string& failure : load.failures) {
      const std::string name = failure.substr(0, failure.find(':'));
      metrics_
          .GetCounter("sluice_feed_load_errors_total",
                      "Reloads at which a reputation feed's file could not be read or parsed (the "
                      "feed kept the networks it had)",
                      {{"feed", name}})
          .Inc();
      spdlog::error("reload: feed {}", failure);
    }
    metrics_
        .GetCounter("sluice_feed_loads_total",
                    "Loads of the reputation feeds at a reload, by result: ok (every file read), "
                    "partial (some feeds kept the networks they had)",
                    {{"result", load.failures.empty() ? "ok" : "partial"}})
        .Inc();
    spdlog::info("reload: feeds loaded in {:.0f} ms{}", seconds * 1e3,
                 load.failures.empty() ? "" : " (some kept their networks)");
  });
}

int ServerProcess::Run() {
  {
    // Armed before the listening line: a supervisor may send SIGTERM the moment it reads it.
    asio::signal_set signals(loops_.front(), SIGTERM, SIGINT);
    asio::signal_set hangups(loops_.front(), SIGHUP);
    std::function<void(const boost::system::error_code&, int)> on_hangup =
        [&](const boost::system::error_code& ec, int) {
          if (ec) return;
          Reload();
          hangups.async_wait(on_hangup);
        };
    hangups.async_wait(on_hangup);
    bool draining = false;
    std::function<void(const boost::system::error_code&, int)> on_signal =
        [&](const boost::system::error_code& ec, int signal) {
          if (ec) return;
          if (draining) {
            spdlog::info("signal {}: already draining", signal);
          } else {
            draining = true;
            spdlog::info("signal {}: draining in-flight requests", signal);
            systemd::NotifyStopping("draining in-flight requests");
            hangups.cancel();
            janitor_.Stop();
            moderation_.Stop();
            creator_tokens_.Stop();
            // The admin side closes with the public one; the loops stop when the public drain
            // ends, which also ends whatever the admin side still serves.
            if (admin_server_) admin_server_->Drain([] {});
            server_->Drain([this] {
              // The re-uploads refused since the last flush are stored before the loops stop
              // (docs/moderation.md, "Transparency"), within a budget that keeps the shutdown
              // inside drain_timeout + 1 s.
              asio::co_spawn(loops_.front(),
                             moderation_.FlushTransparency(std::chrono::milliseconds(500)),
                             [this](std::exception_ptr, Status flushed) {
                               if (!flushed.ok()) {
                                 spdlog::warn("shutdown: transparency counts not stored: {}",
                                              flushed.error().message);
                               }
                               loops_.Stop();
                             });
            });
          }
          signals.async_wait(on_signal);
        };
    signals.async_wait(on_signal);
    server_->Start();
    if (admin_server_) {
      admin_server_->Start();
      const std::string path = admin_server_->unix_path();
      spdlog::info("admin listener at {}{}",
                   path.empty() ? fmt::format("http://{}:{}", admin_server_->bound_address(),
                                              admin_server_->port())
                                : "unix:" + path,
                   options_.admin_token_file.empty()
                       ? " without a token (admin_token_file unset): every admin request is "
                         "refused with 401"
                       : "");
    }
    janitor_.Start(loops_.front().get_executor());
    WarnIfDiskBelowQuota(settings_, options_.data_dir, options_.service.max_storage_bytes);
    // The live bytes for /metrics, /status and the quota, read once now; creates re-read them.
    asio::co_spawn(loops_.front(), service_.RefreshStorage(), asio::detached);
    moderation_.Start(loops_.front().get_executor());
    creator_tokens_.Start(loops_.front().get_executor());
    spdlog::info(
        "sluice {} ({}) listening on http://{}:{} (links: {}) with {} threads, data in {};{}",
        SLUICE_VERSION, kBuildCommit, server_->bound_address(), server_->port(),
        server_->base_url(), options_.threads,
        std::filesystem::absolute(options_.data_dir).string(), settings_.Describe());
    DrainLog(std::chrono::seconds(1));
    // After the line, as a supervisor reading the log would see it: systemd starts the units
    // ordered after sluice.service (deploy/systemd/sluice.service) once the listeners are bound.
    systemd::NotifyReady(
        fmt::format("serving on {}:{}", server_->bound_address(), server_->port()));
    loops_.Run();
  }
  // Removing the signal set restored the default action, which would turn a supervisor's repeated
  // SIGTERM during the teardown (pools joined, stores flushed) into a kill and a non-zero status.
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGHUP, SIG_IGN);
  return 0;
}

ServerProcess::ShutdownOrder::~ShutdownOrder() {
  // 1. Blocking work queued on the pools calls into the embedded stores: it finishes first. The
  //    render threads end too: each one's last step cancels its view's timer on a loop, so they
  //    must not outlive the loops (a shutdown with renders in progress, test_highlight_workers.py).
  p.reload_thread_.join();
  p.read_pool_.join();
  p.cleanup_pool_.join();
  p.moderation_pool_.join();
  p.renderer_.Shutdown();
  // 2. The stores' own threads post completions to the loops, so they stop while the loops
  //    exist; the committers finish their last batch here.
  p.server_.reset();
  p.admin_server_.reset();
  p.blobs_.reset();
  p.meta_.reset();
  p.blob_backend_.reset();
  p.meta_gauges_.Clear();
  p.meta_backend_.reset();
  p.shared_state_.reset();
  // 3. Requests abandoned at the drain timeout are coroutine frames still queued in the loops;
  //    they hold permits of the admission control and entries of the service, so they go now,
  //    while those still exist. The rest goes in reverse order of declaration.
  p.loops_.Destroy();
}

}  // namespace sluice::app
