// `sluice get URL`, `sluice delete URL` and `sluice list`: the rest of a paste's life from the
// command line (docs/sharing.md, "The command line"). Each request has the limits of
// cli_exchange.h; a server's text is shown through cli_output.h; a kept delete token is sent only
// to the origin it was kept for (token_store.h).
#pragma once

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace sluice::app {

struct ShareCommandOptions {
  /// A paste's link (http://HOST/ID, /ID.py, /raw/ID, ?lang=...). Required for get and delete.
  std::string url;
  /// Longest total time spent waiting out 429 and 503 answers. Default: 60s.
  std::string max_wait = "60s";
  /// get: spend one view of a burn or limited-views paste (POST .../claim). Default: false.
  bool claim = false;
};
void AddGetFlags(CLI::App& command, ShareCommandOptions& options);
void AddDeleteFlags(CLI::App& command, ShareCommandOptions& options);
/// Exit codes: 0 done, 1 refused or failed, 2 usage (a link that is not one, a bad --max-wait).
int RunGet(const ShareCommandOptions& options);
int RunDelete(const ShareCommandOptions& options);
int RunList();

}  // namespace sluice::app
