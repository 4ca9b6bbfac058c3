// `sluice admin migrate-store`: copies every live paste from one set of backends to another
// (docs/scale-out.md, "Outgrowing one box"), through the store interfaces, so it does not care how
// either side lays its rows out. Both sides are opened in this process from their settings files,
// never through HTTP.
#pragma once

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace sluice::app {

struct MigrateStoreOptions {
  /// The source's settings file (the TOML `sluice serve --config` reads); required.
  std::string from;
  /// The target's settings file; required.
  std::string to;
  /// Where the copy's cursor is kept between runs. Default: the target's file plus
  /// ".migrate-state".
  std::string state;
  /// Report what would move, write nothing. Default: false.
  bool dry_run = false;
  /// Skip the copy; compare what is on the target with the source. Default: false.
  bool verify_only = false;
  /// Pastes read from the source per second at most (a token bucket), so a copy made while the
  /// source serves takes a bounded share of it; 0: no limit. Default: 200.
  double rate = 200;
  /// Rows per page of the source's listing, and per save of the cursor. Default: 100.
  size_t page = 100;
  /// Pastes of a page copied at once: each copy is a chain of round trips to both sides, so
  /// several in flight keep the stores busy. Default: 4.
  size_t jobs = 4;
  /// The cutover's last pass (docs/scale-out.md, "Outgrowing one box"): each source row is
  /// compared with the target's, and only the pastes whose rows differ or are missing, and those
  /// with open reports, are copied and verified; the bodies of unchanged rows, checked when they
  /// were copied, are not read again. Default: false (every paste copied and verified).
  bool changed = false;
};

/// Adds `migrate-store` to `admin` (the `sluice admin` command); returns it, whose parsed() says
/// it ran.
CLI::App* AddMigrateStoreCommand(CLI::App& admin, MigrateStoreOptions& options);

/// Runs it; the exit code: 0 everything moved and verified, 1 a difference or a failure (each
/// named on stdout), 2 usage.
int RunMigrateStore(const MigrateStoreOptions& options);

}  // namespace sluice::app
