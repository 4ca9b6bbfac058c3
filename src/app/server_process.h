// The composition root of `sluice serve`: every part of the server is a member, declared in the
// order the parts depend on each other, so C++ builds them in that order and tears them down in
// reverse. The three steps that cannot follow that order are in ShutdownOrder (the last member,
// so it runs first), each with its reason.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "data_dir_lock.h"
#include "serve_options.h"
#include "settings.h"
#include "sluice/admission/retry_budget.h"
#include "sluice/common/metrics.h"
#include "sluice/http/server.h"
#include "sluice/render/view_renderer.h"
#include "sluice/service/admission_control.h"
#include "sluice/service/dependency.h"
#include "sluice/service/guarded_stores.h"
#include "sluice/service/moderation.h"
#include "sluice/service/paste_cache.h"
#include "sluice/service/paste_service.h"
#include "sluice/store/blob_store.h"
#include "sluice/store/edge_cache.h"
#include "sluice/store/fault_injection.h"
#include "sluice/store/meta_store.h"
#include "sluice/store/shared_state.h"
#include "sluice/worker/janitor.h"

namespace sluice::app {

/// One event loop per thread (see http::HttpServer).
class EventLoops {
 public:
  /// `slice`: what each loop's thread asks of the scheduler (src/app/thread_slice.h).
  EventLoops(int count, std::chrono::nanoseconds slice);
  boost::asio::io_context& front() { return *loops_.front(); }
  std::vector<boost::asio::io_context*> pointers() const;
  /// Runs every loop (the calling thread runs the first) until all are stopped.
  void Run();
  void Stop();
  /// Destroys the loops, and with them the coroutine frames still queued in them.
  void Destroy() { loops_.clear(); }

 private:
  std::vector<std::unique_ptr<boost::asio::io_context>> loops_;
  std::chrono::nanoseconds slice_;
};

/// The stores a fault plan wraps, when fault injection is configured: it then says so loudly, in
/// the log, on /metrics (sluice_fault_injection_enabled) and at /debug/faults.
struct FaultLayer {
  FaultLayer(const Settings& s, MetricsRegistry& metrics, store::MetaStore& meta,
             store::BlobStore& blobs);
  /// The control of /debug/faults, or unset options when there is no plan.
  http::ServerOptions Control(http::ServerOptions options);

  std::unique_ptr<store::FaultInjector> injector;
  std::unique_ptr<store::MetaStore> faulty_meta;
  std::unique_ptr<store::BlobStore> faulty_blobs;
  store::MetaStore& meta;
  store::BlobStore& blobs;
};

class ServerProcess {
 public:
  /// Reads the settings again (the config file; flags and environment as at start), throwing
  /// what Resolve throws.
  using Reread = std::function<Settings()>;
  /// Builds every part; throws std::invalid_argument or std::runtime_error naming what is wrong.
  /// `reread`, when given, is what SIGHUP calls (docs/operations.md, "Reload").
  explicit ServerProcess(const Settings& settings, Reread reread = {});
  /// Listens and serves until SIGTERM or SIGINT, then drains; the exit code. SIGHUP reloads.
  int Run();
  /// Reads the settings again on reload_thread_, then applies on the first event loop what can
  /// change live to new requests; the result counted in sluice_config_reloads_total. Called on
  /// the first event loop.
  void Reload();

 private:
  void ApplyReload(const Settings& next, ServeOptions next_options);
  /// Lowers the calling thread (the reload thread) below the loops' priority.
  static void RunBehindTheLoops();
  /// Reads every feed's file again on reload_thread_ and swaps the new sets in when built, so the
  /// loops never wait for a million prefixes; a broken file keeps its feed's networks.
  void ReloadFeeds(std::vector<admission::FeedSpec> specs);
  http::ServerOptions PublicOptions();
  std::unique_ptr<http::HttpServer> MakeAdminServer();

  const Settings& settings_;
  const ServeOptions options_;
  Reread reread_;
  // The settings the live parts run on now: the start's, then each reload's.
  Settings applied_;
  // Two processes on one embedded metadata store each trust their own memory of it, so a delete
  // through one is still served by the other: the data dir is locked when its SQLite is in use.
  std::optional<DataDirLock> data_dir_lock_;
  // Store threads post their completions to the loops until the stores are gone.
  EventLoops loops_;
  const Clock& clock_;
  // put_bytes_per_day_plan for its gauge: the start's, then each reload's.
  std::atomic<double> put_bytes_plan_;
  MetricsRegistry metrics_;
  GaugeCallbacks process_gauges_;
  Counter& reloads_ok_;
  Counter& reloads_partial_;
  Counter& reloads_invalid_;
  boost::asio::thread_pool read_pool_;
  boost::asio::thread_pool cleanup_pool_;
  boost::asio::thread_pool moderation_pool_;
  std::unique_ptr<store::MetaStore> meta_backend_;
  GaugeCallbacks meta_gauges_;
  std::unique_ptr<store::BlobStore> blob_backend_;
  FaultLayer faults_;
  // The guarded stores' per-call timeouts, which a reload replaces.
  service::LiveCallTimeouts call_timeouts_;
  admission::RetryBudget retry_budget_;
  GaugeCallbacks budget_gauges_;
  service::Dependency meta_dependency_;
  service::Dependency blob_dependency_;
  std::unique_ptr<store::MetaStore> meta_;
  std::unique_ptr<store::BlobStore> blobs_;
  service::PasteCache cache_;
  GaugeCallbacks cache_gauges_;
  // After the cache it invalidates, so it stops delivering before the cache goes.
  std::unique_ptr<store::SharedState> shared_state_;
  service::AdmissionControl admission_;
  service::AbuseWatch abuse_;
  service::Blocklist blocks_;
  service::ContentBlocklist blocked_contents_;
  // Before the service that redeems through it; null unless proof_of_work.
  std::unique_ptr<service::ProofOfWork> pow_;
  service::ReputationFeeds feeds_;
  // Reloads read their settings and feeds here, one at a time, in the order of the SIGHUPs, so
  // the last one wins. After feeds_, so it is joined (a load in progress finishes) before feeds_
  // goes; ShutdownOrder joins it first, since a read's apply is posted to the first loop.
  boost::asio::thread_pool reload_thread_{1};
  service::PasteService service_;
  // Before the moderation that publishes to it; null when no sink is set.
  std::unique_ptr<notify::Push> push_;
  service::ModerationService moderation_;
  GaugeCallbacks moderation_gauges_;  // after moderation_: its callback reads it
  service::CreatorTokens creator_tokens_;
  std::unique_ptr<store::EdgeCache> edge_cache_;
  worker::Janitor janitor_;
  render::ViewRenderer renderer_;
  std::unique_ptr<http::HttpServer> server_;
  // The operator's listener (docs/moderation.md); null when admin_listen is empty.
  std::unique_ptr<http::HttpServer> admin_server_;

  // Runs first on the way out, once the loops have stopped.
  struct ShutdownOrder {
    ServerProcess& p;
    ~ShutdownOrder();
  } shutdown_order_{*this};
};

}  // namespace sluice::app
