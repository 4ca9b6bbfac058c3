// The sluice binary's commands: `sluice serve` (its parts are built in server_process.cc, its
// backends chosen in backends.cc), `sluice paste`, `sluice plan` (the Little's-law arithmetic of
// the admission caps), `sluice migrate` (PostgreSQL's schema) and `sluice admin` (the operator's
// client of the admin listener, admin_command.cc; `sluice admin migrate-store` copies between
// backends, migrate_store.cc; `sluice admin backup` copies the embedded store, backup_command.cc),
// and the reference generated from the same declarations as --help (reference.cc): `sluice man` and
// `sluice config`.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "admin_command.h"
#include "backends.h"
#include "backup_command.h"
#include "build_commit.h"
#include "crypt_command.h"
#include "log_format.h"
#include "log_queue.h"
#include "migrate_store.h"
#include "paste_command.h"
#include "reference.h"
#include "server_process.h"
#include "settings.h"
#include "share_command.h"
#include "sluice/admission/littles_law.h"
#include "sluice/common/allocator.h"
#include "sluice/common/duration.h"
#include "sluice/render/highlight_workers.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "dev"
#endif

namespace sluice::app {
namespace {

// Ample for 8,192 lines to a disk or a journald that reads; a supervisor's stop timeout
// (systemd's TimeoutStopSec, a container runtime's grace period) is longer.
constexpr std::chrono::seconds kLogCloseTimeout{5};

int Serve(const Settings& s, const SettingsLoader& loader) {
  // Before any thread of the server exists, and gone after they have all stopped (log_queue.h).
  std::optional<LogQueue> log_queue;
  if (const int64_t lines = s.Integer("log_queue_lines"); lines > 0)
    log_queue.emplace(static_cast<std::size_t>(lines));
  spdlog::set_level(spdlog::level::from_str(s.String("log_level")));
  SetLogFormat(s.String("log_format"));
  // SIGHUP reads the same sources again: the config file anew, flags and environment as parsed.
  const int code = ServerProcess(s, [&loader] { return loader.Resolve(); }).Run();
  spdlog::info("sluice stopped");
  // A stdout nobody reads holds the log's writer, and would hold exit()'s flush of stdout after
  // it: a stop must not wait for a reader that may never come
  // (tests/integration/test_log_stall.py).
  if (log_queue && !log_queue->Close(kLogCloseTimeout)) std::_Exit(code);
  return code;
}

// `sluice config --check FILE`: the file alone, with the checks a start (or a reload) applies, so
// an operator can try an edit before `systemctl reload sluice`.
int CheckConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "%s: cannot read it\n", path.c_str());
    return 2;
  }
  std::ostringstream text;
  text << in.rdbuf();
  try {
    (void)SettingsLoader::FromToml(text.str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), e.what());
    return 2;
  }
  std::printf("%s: every key is known and every value allowed\n", path.c_str());
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
  app.set_version_flag("--version", [] {
    return std::string("sluice ") + SLUICE_VERSION + "\ncommit: " + sluice::app::kBuildCommit +
           "\nallocator: " + sluice::AllocatorDescription();
  });
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
  sluice::app::ShareCommandOptions get_options, delete_options;
  CLI::App* get = app.add_subcommand(
      "get", "Print a paste's text, given its link (an encrypted one's carries its key after '#')");
  sluice::app::AddGetFlags(*get, get_options);
  CLI::App* del =
      app.add_subcommand("delete", "Delete a paste made here, with the token sluice paste kept");
  sluice::app::AddDeleteFlags(*del, delete_options);
  CLI::App* list = app.add_subcommand(
      "list", "List the pastes made here with sluice paste, and when each expires");

  sluice::app::AdminCommandOptions admin_options;
  CLI::App* admin = sluice::app::AddAdminCommand(app, admin_options);
  sluice::app::MigrateStoreOptions migrate_store_options;
  CLI::App* migrate_store = sluice::app::AddMigrateStoreCommand(*admin, migrate_store_options);
  sluice::app::BackupOptions backup_options;
  CLI::App* backup = sluice::app::AddBackupCommand(*admin, backup_options);

  CLI::App* migrate = app.add_subcommand(
      "migrate", "Apply the PostgreSQL metadata schema migrations (safe to repeat or run at once)");
  std::string migrate_meta;
  migrate->add_option("--meta", migrate_meta, "postgres://USER@HOST:PORT/DB")
      ->envname("SLUICE_META")
      ->required();

  CLI::App* man = app.add_subcommand(
      "man", "Print the manual page sluice(1), generated from the declarations --help lists");
  CLI::App* completions = app.add_subcommand(
      "completions", "Print the bash or zsh completion script, generated like the manual page");
  std::string completions_shell;
  completions->add_option("SHELL", completions_shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
  CLI::App* config = app.add_subcommand("config", "Print an example configuration or check one");
  bool config_example = false;
  std::string config_check;
  config->add_flag("--example", config_example,
                   "Print a TOML file with every setting of serve commented out at its default");
  bool config_markdown = false;
  config->add_flag("--markdown", config_markdown,
                   "Print docs/configuration.md, the reference of every setting of serve");
  config->add_option("--check", config_check, "Check FILE as serve would read it, then exit")
      ->envname("SLUICE_CONFIG");

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
    if (serve->parsed()) return sluice::app::Serve(*settings, loader);
    if (paste->parsed()) return sluice::app::RunPaste(paste_options);
    if (get->parsed()) return sluice::app::RunGet(get_options);
    if (del->parsed()) return sluice::app::RunDelete(delete_options);
    if (list->parsed()) return sluice::app::RunList();
    if (migrate_store->parsed()) return sluice::app::RunMigrateStore(migrate_store_options);
    if (backup->parsed()) return sluice::app::RunBackup(backup_options);
    if (admin->parsed()) return sluice::app::RunAdmin(admin_options);
    if (migrate->parsed()) return sluice::app::Migrate(migrate_meta);
    if (completions->parsed()) {
      std::fputs(sluice::app::Completions(app, completions_shell).c_str(), stdout);
      return 0;
    }
    if (man->parsed()) {
      std::fputs(sluice::app::ManPage(app, SLUICE_VERSION).c_str(), stdout);
      return 0;
    }
    if (config->parsed()) {
      if (config_example) {
        std::fputs(sluice::app::ExampleConfig(SLUICE_VERSION).c_str(), stdout);
        return 0;
      }
      if (config_markdown) {
        std::fputs(sluice::app::ConfigurationMarkdown().c_str(), stdout);
        return 0;
      }
      if (!config_check.empty()) return sluice::app::CheckConfigFile(config_check);
      std::fputs("sluice config: give --example, --markdown, or --check FILE (or SLUICE_CONFIG)\n",
                 stderr);
      return 2;
    }
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
