#include "share_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli_exchange.h"
#include "cli_output.h"
#include "crypt_command.h"
#include "polite_wait.h"
#include "server_url.h"
#include "token_store.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "dev"
#endif

namespace sluice::app {

namespace {

template <typename... Args>
void Inform(std::string_view command, fmt::format_string<Args...> format, Args&&... args) {
  Tell(command, fmt::format(format, std::forward<Args>(args)...));
}

// Get and delete may be sent again: both are idempotent. A 429 or 503 with a Retry-After is
// waited out (with jitter, within --max-wait), as a create's is; --max-wait counts the exchanges
// as well as the pauses, so a server that answers each 429 slowly cannot stretch the command.
Attempt Polite(std::string_view command, const ServerUrl& server, const CliRequest& request,
               Duration max_wait) {
  admission::Jitter jitter = FreshJitter();
  const auto started = std::chrono::steady_clock::now();
  for (;;) {
    Attempt a = Exchange(server, request);
    if (!(a.status == 429 || a.status == 503)) return a;
    const std::optional<int> retry_after = RetryAfterField(a);
    if (!retry_after) return a;
    const auto waited =
        std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - started);
    const auto pause = PoliteWait(*retry_after, waited, max_wait, jitter);
    if (!pause) return a;
    Inform(command, "server busy ({}), retrying in {:.1f} s", a.status, Seconds(*pause));
    std::this_thread::sleep_for(*pause);
  }
}

// What went wrong, for a person: the server's "error" when it said one (Tell escapes it), else
// what the exchange learned.
std::string Failure(const Attempt& a, const std::string& server) {
  if (a.fate != Attempt::Fate::kAnswered) {
    return fmt::format("{}: {}", server, a.what);
  }
  const auto doc = nlohmann::json::parse(a.body, nullptr, /*allow_exceptions=*/false);
  std::string reason = a.body_complete ? "no reason given" : a.what;
  if (doc.is_object() && doc.contains("error") && doc["error"].is_string()) {
    reason = doc["error"].get<std::string>();
  }
  return fmt::format("{} answered {}: {}", server, a.status, reason);
}

struct Target {
  PasteLink link;
  Duration max_wait{};
};

std::optional<Target> ResolveTarget(std::string_view command, const ShareCommandOptions& options) {
  auto link = ParsePasteLink(options.url);
  if (!link.ok()) {
    Inform(command, "{}", link.error().message);
    return std::nullopt;
  }
  const auto max_wait = ParseMaxWait(options.max_wait);
  if (!max_wait) {
    Inform(command, "--max-wait '{}': want a duration like 60s or 500ms, or 0", options.max_wait);
    return std::nullopt;
  }
  return Target{std::move(*link), *max_wait};
}

}  // namespace

void AddGetFlags(CLI::App& command, ShareCommandOptions& options) {
  command.add_option("URL", options.url, "The paste's link (any of its forms)")->required();
  command.add_option("--max-wait", options.max_wait, "Longest total wait for a busy server")
      ->capture_default_str();
  command.add_flag("--claim", options.claim,
                   "Spend one view of a burn or limited-views paste (without it, such a paste "
                   "is refused, so a script cannot burn it by accident)");
  command.footer(
      "Prints the text, byte for byte, on stdout. An encrypted paste's link carries its key "
      "after '#' (never sent): the envelope is decrypted here, its password (if any) from "
      "SLUICE_PASSWORD or asked on the terminal. Timeouts: connect 5 s, whole exchange 30 s; a "
      "paste over 64 MiB is refused. Exit status: 0 printed, 1 failed, 2 usage.");
}

void AddDeleteFlags(CLI::App& command, ShareCommandOptions& options) {
  command.add_option("URL", options.url, "The link of a paste this user made with sluice paste")
      ->required();
  command.add_option("--max-wait", options.max_wait, "Longest total wait for a busy server")
      ->capture_default_str();
  command.footer(
      "Deletes with the token `sluice paste` kept in $XDG_STATE_HOME/sluice/pastes and forgets "
      "it. The token is sent only to the server it was kept for (the scheme, host, port and "
      "path `sluice paste` sent the create to); a link naming another is refused.");
}

int RunGet(const ShareCommandOptions& options) {
  constexpr std::string_view kCommand = "sluice get";
  const auto target = ResolveTarget(kCommand, options);
  if (!target) return kExitUsage;
  const ServerUrl& server = target->link.server;
  const std::string& id = target->link.id;
  const std::string& key = target->link.key;  // never sent: no request carries a fragment
  CliRequest request;
  request.target = server.base_path + "/raw/" + id;
  // A paste is at most the server's max_paste_bytes, its envelope included (the server checks
  // the envelope against that limit); this is the most of one the CLI holds.
  request.answer_limit = kCliMaxPasteBytes;
  request.user_agent = "sluice/" SLUICE_VERSION;
  Attempt a = Polite(kCommand, server, request, target->max_wait);
  if (a.status == 409 && options.claim) {
    request.method = "POST";
    request.target = server.base_path + "/api/v1/pastes/" + id + "/claim?format=raw";
    a = Polite(kCommand, server, request, target->max_wait);
  }
  const std::string origin = server.Origin();
  if (a.status == 200 && a.body_complete) {
    // An encrypted paste is answered as its envelope, a JSON object (docs/encryption.md).
    if (a.content_type.starts_with("application/json") && a.body.starts_with('{')) {
      if (key.empty()) {
        Inform(kCommand,
               "this paste is encrypted and the link has no key (the part after '#'); ask for the "
               "whole link");
        return kExitFailed;
      }
      return PrintOpened(a.body, key, kCommand) == 0 ? 0 : kExitFailed;
    }
    if (!key.empty()) Inform(kCommand, "this paste is not encrypted; the key is unused");
    // The text itself, byte for byte, as curl prints it: it is what was asked for.
    std::fwrite(a.body.data(), 1, a.body.size(), stdout);
    std::fflush(stdout);
    return 0;
  }
  if (a.status == 409) {
    Inform(kCommand,
           "this paste is shown a limited number of times; `sluice get --claim` spends one view");
  } else {
    Inform(kCommand, "{}", Failure(a, origin));
  }
  return kExitFailed;
}

int RunDelete(const ShareCommandOptions& options) {
  constexpr std::string_view kCommand = "sluice delete";
  const auto target = ResolveTarget(kCommand, options);
  if (!target) return kExitUsage;
  const ServerUrl& server = target->link.server;
  const std::string& id = target->link.id;
  const std::string origin = server.Origin();
  const TokenStore store = TokenStore::Default();
  const std::vector<KeptPaste> kept = store.ForId(id);
  const KeptPaste* token = nullptr;
  for (const KeptPaste& k : kept) {
    if (k.origin == origin) token = &k;  // the last line wins
  }
  if (token == nullptr) {
    if (kept.empty()) {
      Inform(kCommand,
             "no delete token for {} in {}: only pastes made here with sluice paste can be deleted",
             id, store.path());
    } else {
      // The link names another server than the one that issued the token: a mistake, or a
      // link made to collect it. Either way the token stays here.
      Inform(kCommand,
             "the delete token of {} was kept for {}, not for {}; a token is sent only to the "
             "server that issued it. To delete that paste: sluice delete {}/{}",
             id, kept.back().origin, origin, kept.back().origin, id);
    }
    return kExitFailed;
  }
  CliRequest request;
  request.method = "DELETE";
  request.target = server.base_path + "/api/v1/pastes/" + id;
  request.headers = {{"Authorization", "Bearer " + token->token}, {"Accept", "application/json"}};
  request.user_agent = "sluice/" SLUICE_VERSION;
  const Attempt a = Polite(kCommand, server, request, target->max_wait);
  if (a.status == 204 || a.status == 404) {
    // 404: gone already (expired, burned, deleted elsewhere): the token is no use any more.
    if (Status s = store.Remove(id, origin); !s.ok()) Inform(kCommand, "{}", s.error().message);
    if (a.status == 204) {
      Inform(kCommand, "deleted {}", id);
      return 0;
    }
    Inform(kCommand, "{} was already gone", id);
    return kExitFailed;
  }
  Inform(kCommand, "{}; nothing was deleted", Failure(a, origin));
  return kExitFailed;
}

int RunList() {
  const TokenStore store = TokenStore::Default();
  const std::vector<KeptPaste> pastes = store.All();
  char now[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
  for (const KeptPaste& p : pastes) {
    // RFC 3339 in UTC compares as text.
    const bool expired = !p.expires_at.empty() && p.expires_at <= std::string(now);
    // The file's lines passed TokenStore's checks; escaped all the same, as the one rule for
    // what a server wrote.
    std::fputs(fmt::format("{}  {} {}\n", ForTerminal(p.url.empty() ? p.id : p.url),
                           expired ? "expired" : "expires",
                           p.expires_at.empty() ? "?" : ForTerminal(p.expires_at))
                   .c_str(),
               stdout);
  }
  return 0;
}

}  // namespace sluice::app
