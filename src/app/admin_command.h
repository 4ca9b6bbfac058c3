// `sluice admin ...`: the operator's client of the admin listener (docs/moderation.md). It
// reads the bearer token from a file, sends the request (the review queue page after page), prints
// the JSON answer, and says what went wrong otherwise.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace sluice::app {

struct AdminCommandOptions {
  /// The admin listener: http://HOST:PORT, or its Unix socket, unix:/PATH or /PATH. Default:
  /// http://127.0.0.1:8081 (or SLUICE_ADMIN).
  std::string admin = "http://127.0.0.1:8081";
  /// The file holding the token (or SLUICE_ADMIN_TOKEN_FILE); required.
  std::string token_file;
  /// Filled by the subcommand that was given.
  std::string method;
  std::string path;
  std::string body;
  /// block-content: the file or the hex digest named, and the reason, turned into `body` when
  /// the command runs (a file is hashed then).
  std::string content;
  std::string reason;
  /// `reports`: pastes to list at most, following the queue's pages (docs/moderation.md);
  /// 0 for every other subcommand. Default: 1000.
  size_t max_pastes = 0;
  /// `show --key KEY`: the link's key of an encrypted paste, to open its envelope here (never
  /// sent to the server). Default: none.
  std::string key;
  /// `notice`: what its flags say, turned into `body` when the command runs (with --email, after
  /// the e-mail on standard input is read).
  struct Notice {
    std::vector<std::string> pastes;
    std::string sender;
    std::string sender_kind;
    std::string reference;
    std::string category;
    std::string deadline;
    bool email = false;
  } notice{};
};

/// Adds `sluice admin` and its subcommands (reports, show, takedown, dismiss, block, audit,
/// notice, notices, token create|list|revoke) to
/// `app`; returns the `admin` command, whose parsed() says it ran.
CLI::App* AddAdminCommand(CLI::App& app, AdminCommandOptions& options);

/// Sends the request the subcommand built; the exit code: 0 success, 1 refused or failed, 2 usage.
int RunAdmin(AdminCommandOptions& options);

}  // namespace sluice::app
