// `sluice admin backup DEST`: a copy of the embedded store while it serves (docs/operations.md,
// "Backups"): meta.db as of one moment, read in file order, then the bodies' files.
#pragma once

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace sluice::app {

struct BackupOptions {
  /// The served data dir (serve's `data_dir`, or SLUICE_DATA_DIR); required.
  std::string data_dir;
  /// Where the copy goes: a folder that does not exist yet, or an empty one; required.
  std::string destination;
  /// Megabytes per second read from the data dir at most, so a backup takes a bounded share of
  /// the disk the server writes to; 0: no limit. Default: 0.
  double rate_mb = 0;
  /// After the copy, SQLite's quick_check of the copied database (reads it all again).
  /// Default: false.
  bool check = false;
};

/// Adds `backup` to `admin` (the `sluice admin` command); returns it, whose parsed() says it ran.
CLI::App* AddBackupCommand(CLI::App& admin, BackupOptions& options);

/// Runs it; the exit code: 0 copied (and checked), 1 a failure (named on stderr), 2 usage.
int RunBackup(const BackupOptions& options);

}  // namespace sluice::app
