// `sluice paste [FILE]`: the polite client. It creates one paste and prints its URL; it waits out a
// 429 or 503 for the Retry-After the server named (plus jitter, within --max-wait), retries a
// connect that failed before anything was sent once, and never re-sends a create whose fate it
// does not know (docs/overload.md, "Retries, breakers, timeouts": nobody retries a create that may
// have landed). Its limits (connect 5 s, exchange 30 s, answer 1 MiB) are cli_exchange.h's.
#pragma once

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace sluice::app {

struct PasteCommandOptions {
  /// The file to paste; stdin when empty or "-". Default: stdin.
  std::string file;
  /// Base URL of the server, https:// or http://; empty: the `server` of CliConfigPath()'s file,
  /// else http://127.0.0.1:8080. Default: "".
  std::string server;
  /// Expiry asked of the server (10m, 1h, 1d, 1w, 30d); empty leaves it to the server. Default: "".
  std::string ttl;
  /// Longest total time spent waiting out 429 and 503 answers; "0" never waits. Default: 60s.
  std::string max_wait = "60s";
  /// Print the server's whole JSON answer instead of the URL. Default: false.
  bool json = false;
  /// Encrypt before sending (docs/encryption.md); the URL printed carries the key. Default: false.
  bool encrypt = false;
  /// With encrypt, ask for a password too (or take SLUICE_PASSWORD). Default: false.
  bool password = false;
  /// The view's language (?lang=); empty: the file name's extension, else the server's guess.
  /// Default: "".
  std::string lang;
  /// Burn after reading (?burn=1). Default: false.
  bool burn = false;
  /// Expire after this many views (?max_views=N); 0: no limit. Default: 0.
  int max_views = 0;
  /// A creator token, sent as "Authorization: Bearer TOKEN" (or SLUICE_TOKEN); empty: the
  /// `token` of CliConfigPath()'s file when the server is that file's, else none. Default: "".
  std::string token;
};

/// Adds the flags of `sluice paste` to `command`: FILE (positional, optional), --server (or the
/// SLUICE_SERVER variable), --ttl, --max-wait, --json, --encrypt and --password.
void AddPasteFlags(CLI::App& command, PasteCommandOptions& options);

/// Runs `sluice paste`; returns the process exit code: 0 created, 1 refused or failed, 2 usage
/// (bad flag value, unreadable file). The URL (or JSON) goes to stdout, everything else to stderr.
int RunPaste(const PasteCommandOptions& options);

}  // namespace sluice::app
