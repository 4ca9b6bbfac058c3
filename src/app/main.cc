// The sluice binary: `sluice serve` wires the concrete backends (the only place that names them),
// `sluice plan` does the Little's-law arithmetic of the admission caps.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/thread_pool.hpp>
#include <csignal>
#include <filesystem>
#include <thread>
#include <vector>

#include "settings.h"
#include "sluice/admission/littles_law.h"
#include "sluice/http/server.h"
#include "sluice/service/paste_service.h"
#include "sluice/service/text.h"
#include "sluice/store/backends.h"
#include "sluice/worker/janitor.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "dev"
#endif

namespace sluice::app {
namespace {

namespace asio = boost::asio;

std::chrono::seconds TtlSetting(const Settings& s, std::string_view key) {
  auto ttl = service::ParseTtl(s.String(key));
  if (!ttl) throw std::invalid_argument(std::string(key) + ": choose one of 10m, 1h, 1d, 1w, 30d");
  return *ttl;
}

int Serve(const Settings& s) {
  spdlog::set_level(spdlog::level::from_str(s.String("log_level")));
  const std::filesystem::path data_dir = s.String("data_dir");
  std::filesystem::create_directories(data_dir);

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

  http::ServerOptions server_options;
  server_options.listen = s.String("listen");
  server_options.public_url = s.String("public_url");
  server_options.idle_timeout =
      std::chrono::duration_cast<std::chrono::seconds>(s.Duration("idle_timeout"));
  server_options.body_timeout =
      std::chrono::duration_cast<std::chrono::seconds>(s.Duration("body_timeout"));
  server_options.drain_timeout =
      std::chrono::duration_cast<std::chrono::seconds>(s.Duration("drain_timeout"));

  worker::JanitorOptions janitor_options;
  janitor_options.sweep_interval = s.Duration("sweep_interval");
  janitor_options.orphan_age_floor =
      std::chrono::duration_cast<std::chrono::seconds>(s.Duration("orphan_age_floor"));

  int threads = static_cast<int>(s.Integer("threads"));
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  // Declared first so it is destroyed last: store threads post their completions to it until the
  // stores are gone.
  asio::io_context io(threads);
  asio::thread_pool read_pool(static_cast<size_t>(std::max<int64_t>(1, s.Integer("read_threads"))));
  asio::thread_pool cleanup_pool(
      static_cast<size_t>(std::max<int64_t>(1, s.Integer("cleanup_threads"))));
  const store::BlockingPools pools{&read_pool, &cleanup_pool};

  auto meta = store::MakeSqliteMetaStore(data_dir / "meta.db", pools);
  auto blobs = store::MakeFsBlobStore(data_dir / "blobs", pools);
  MetricsRegistry metrics;
  service::PasteCache cache(static_cast<size_t>(s.Integer("cache_bytes")));
  metrics.AddGaugeCallback("sluice_paste_cache_bytes", "Bytes held by the paste cache", {},
                           [&cache] { return static_cast<double>(cache.bytes_used()); });
  service::PasteService service(*meta, *blobs, cache, SystemClock::Instance(), metrics,
                                service_options);
  worker::Janitor janitor(*meta, *blobs, cache, SystemClock::Instance(), metrics, janitor_options);

  auto server = std::make_unique<http::HttpServer>(io, server_options, service, metrics);
  server->Start();
  janitor.Start(io.get_executor());
  spdlog::info("sluice {} listening on {} with {} threads, data in {};{}", SLUICE_VERSION,
               server->base_url(), threads, std::filesystem::absolute(data_dir).string(),
               s.Describe());
  spdlog::default_logger()->flush();

  asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    spdlog::info("signal {}: draining in-flight requests", signal);
    janitor.Stop();
    server->Drain([&io] { io.stop(); });
  });

  std::vector<std::thread> runners;
  for (int i = 1; i < threads; ++i) runners.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& t : runners) t.join();

  read_pool.join();
  cleanup_pool.join();
  server.reset();
  blobs.reset();  // the committers finish their last batch here
  meta.reset();
  spdlog::info("sluice stopped");
  return 0;
}

}  // namespace
}  // namespace sluice::app

int main(int argc, char** argv) {
  CLI::App app{"sluice: a pastebin that stays up when its dependencies do not"};
  app.set_version_flag("--version", std::string("sluice ") + SLUICE_VERSION);
  app.require_subcommand(1);

  CLI::App* serve = app.add_subcommand("serve", "Serve the pastebin over HTTP");
  sluice::app::SettingsLoader loader(*serve);

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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (serve->parsed()) return sluice::app::Serve(loader.Resolve());
    if (plan->parsed()) {
      auto latency = sluice::admission::ParseDuration(plan_latency);
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
