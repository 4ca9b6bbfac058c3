// `sluice paste`: one create over HTTP/1.1, with the client side of the retry rule
// (docs/overload.md, "Retries, breakers, timeouts").
//
// What may be sent again, and why:
//  - a 429 or 503 that names a Retry-After: the server refused before creating anything (its order
//    of checks puts every refusal before the body is stored), so waiting and sending again cannot
//    make a second paste. We wait at least what it asked, plus up to 20% jitter so refused clients
//    do not come back as one wave, and only while the total stays within --max-wait;
//  - a connect that failed: nothing left this process. Once, after a short jittered pause.
// Everything else is final, including a 503 `outcome_unknown`: the server itself could not tell
// whether its insert committed, so that one is not a refusal at the door. A reset, a timeout or a
// 500 after the request may have left means the paste may exist: a second send could make a second
// paste, so we say so and stop.
//
// The exchange itself, its timeouts and its answer cap are cli_exchange.h's, shared with get,
// delete and admin; the body is announced with `Expect: 100-continue` there.
#include "paste_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>

#include "cli_config.h"
#include "cli_exchange.h"
#include "cli_output.h"
#include "crypt_command.h"
#include "polite_wait.h"
#include "server_url.h"
#include "sluice/admission/jitter.h"
#include "sluice/common/duration.h"
#include "sluice/common/result.h"
#include "sluice/service/proof_of_work.h"
#include "sluice/store/paste.h"
#include "token_store.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "dev"
#endif

namespace sluice::app {
namespace {

/// The pause before the one retry of a failed connect: short, and jittered.
constexpr auto kConnectRetryMin = std::chrono::milliseconds(100);
constexpr auto kConnectRetryMax = std::chrono::milliseconds(400);

constexpr int kExitCreated = kExitOk;

template <typename... Args>
void Say(fmt::format_string<Args...> format, Args&&... args) {
  Tell("sluice paste", fmt::format(format, std::forward<Args>(args)...));
}

// ---- the input ---------------------------------------------------------------------------------

Result<std::string> ReadInput(const std::string& file) {
  const bool from_stdin = file.empty() || file == "-";
  const std::string name = from_stdin ? std::string("stdin") : file;
  if (from_stdin && isatty(STDIN_FILENO)) {
    std::fputs("sluice paste: reading the paste from the terminal; end it with Ctrl-D\n", stderr);
  }
  std::FILE* f = from_stdin ? stdin : std::fopen(file.c_str(), "rb");
  if (f == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument,
                     fmt::format("cannot open {}: {}", name, std::strerror(errno)));
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const size_t n = std::fread(buf, 1, sizeof buf, f);
    out.append(buf, n);
    if (n < sizeof buf) break;
  }
  const bool failed = std::ferror(f) != 0;
  const int error = errno;
  if (!from_stdin) std::fclose(f);
  if (failed) {
    return MakeError(ErrorCode::kInvalidArgument,
                     fmt::format("cannot read {}: {}", name, std::strerror(error)));
  }
  return out;
}

// ---- reading the answer ------------------------------------------------------------------------

struct ErrorDoc {
  std::string error;
  std::string reason;
  std::optional<int> retry_after;
  /// A 429 that a proof of work lifts carries its challenge (docs/overload.md, "Proof of work").
  std::optional<service::PowChallenge> challenge;
};

ErrorDoc ParseErrorDoc(const Attempt& a) {
  ErrorDoc doc;
  const auto json = nlohmann::json::parse(a.body, nullptr, /*allow_exceptions=*/false);
  if (json.is_object()) {
    if (auto it = json.find("error"); it != json.end() && it->is_string()) doc.error = *it;
    if (auto it = json.find("reason"); it != json.end() && it->is_string()) doc.reason = *it;
    if (auto it = json.find("retry_after"); it != json.end() && it->is_number_integer()) {
      doc.retry_after = it->get<int>();
    }
    if (auto it = json.find("challenge"); it != json.end() && it->is_object()) {
      doc.challenge = service::PowChallenge::FromJson(it->dump());
    }
  }
  if (doc.error.empty()) doc.error = a.body_complete && !a.body.empty() ? a.body : a.status_text;
  while (!doc.error.empty() && (doc.error.back() == '\n' || doc.error.back() == '\r')) {
    doc.error.pop_back();
  }
  if (doc.reason.empty()) doc.reason = a.status_text;
  return doc;
}

/// Retry-After in delta-seconds (what sluice sends), else the JSON body's retry_after.
std::optional<int> RetryAfterSeconds(const Attempt& a, const ErrorDoc& doc) {
  if (auto field = RetryAfterField(a)) return field;
  return doc.retry_after;
}

// A 201's answer: the link goes to stdout, the token to stderr and to the token file. Every field
// came from the server, so each is checked before it reaches the terminal or the file (one line
// per paste there: a line break in a field would forge a line): the id must be a paste id, the
// token token-like, the link a printable one-line link of that id. A link that is not is replaced
// by one made from --server; a token that is not is neither shown nor kept.
// `fragment`: "#KEY" of an encrypted paste, added to the link (the server never had it).
int PrintCreated(const Attempt& a, const ServerUrl& server, bool json,
                 const std::string& fragment) {
  const auto doc = nlohmann::json::parse(a.body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    Say("created (201), but the answer is not a JSON object: {}", a.body);
    return kExitFailed;
  }
  const auto text = [&doc](const char* key) {
    return doc.contains(key) && doc[key].is_string() ? doc[key].get<std::string>() : "";
  };
  const std::string id = text("id");
  if (!store::PasteId::Parse(id)) {
    Say("created (201), but the answer's id '{}' is not a paste id: {}", id, a.body);
    return kExitFailed;
  }
  std::string url = text("url");
  const auto link = ParsePasteLink(url);
  if (!link.ok() || link->id != id || !link->key.empty()) {
    Say("the server's link '{}' is not a link to {}; printing one made from the server's address",
        url, id);
    url = fmt::format("{}://{}{}/{}", server.tls ? "https" : "http", server.host_header,
                      server.base_path, id);
  }
  const std::string token = text("delete_token");
  if (!IsTokenText(token)) {
    Say("the answer's delete token '{}' is not one; it is not kept", token);
  } else {
    // A paste is still created if the file cannot be written (the token is printed anyway).
    KeptPaste kept;
    kept.created_at = static_cast<int64_t>(std::time(nullptr));
    if (const std::string expires = text("expires_at"); IsTimestampText(expires)) {
      kept.expires_at = expires;
    }
    kept.id = id;
    kept.token = token;
    kept.url = url;
    kept.origin = server.Origin();
    if (Status s = TokenStore::Default().Add(kept); !s.ok()) {
      Say("the delete token was not kept: {}", s.error().message);
    }
  }
  const std::string out = json ? JsonForTerminal(doc.dump(2)) : url + fragment;
  std::fputs((out + "\n").c_str(), stdout);
  std::fflush(stdout);
  if (IsTokenText(token)) std::fputs(("delete token: " + token + "\n").c_str(), stderr);
  return kExitCreated;
}

}  // namespace

void AddPasteFlags(CLI::App& command, PasteCommandOptions& options) {
  command.add_option("FILE", options.file, "File to paste; stdin when absent or '-'");
  command
      .add_option("--server", options.server,
                  "Base URL of the sluice server: https:// (checked against the system's "
                  "certificates) or http://; default: `server` in ~/.config/sluice/cli.toml, "
                  "else http://127.0.0.1:8080")
      ->envname("SLUICE_SERVER");
  command.add_option("--ttl", options.ttl,
                     "Expiry: 10m, 1h, 1d, 1w or 30d (default: the server's default)");
  command
      .add_option("--max-wait", options.max_wait,
                  "Longest total wait for a busy server's Retry-After, or for solving the proof "
                  "of work it asks for (e.g. 60s, 500ms; 0 never waits and never solves)")
      ->capture_default_str();
  command.add_flag("--json", options.json,
                   "Print the server's whole JSON answer instead of the URL");
  command.add_option("--lang", options.lang,
                     "Language of the view (python, cpp, markdown...; default: from the file "
                     "name's extension, else detected by the server)");
  command.add_flag("--burn", options.burn, "Burn after reading: one reader gets the text");
  command
      .add_option("--token", options.token,
                  "A creator token (sluice admin token create): creates on its own budget; "
                  "default: `token` in ~/.config/sluice/cli.toml when the server is that file's")
      ->envname("SLUICE_TOKEN");
  command
      .add_option("--max-views", options.max_views,
                  "Expire after N views (each a POST to the claim; 1 is --burn)")
      ->check(CLI::Range(1, 10000));
  command.add_flag("--encrypt", options.encrypt,
                   "Encrypt here before sending; the link printed carries the key after '#'");
  command
      .add_flag("--password", options.password,
                "With --encrypt: a password too (asked on the terminal, or SLUICE_PASSWORD)")
      ->needs("--encrypt");
  command.footer(
      "Prints the URL on stdout and the delete token on stderr, and keeps the token in "
      "$XDG_STATE_HOME/sluice/pastes (mode 0600) for `sluice delete` and `sluice list`. Exit "
      "status: 0 created, 1 "
      "refused or failed, 2 usage.\n"
      "A 429 or 503 means the server refused before creating anything: sluice paste waits its "
      "Retry-After plus up to 20% jitter and sends again while the total wait stays within "
      "--max-wait. A failed connect is retried once. A create whose fate is unknown (a reset, a "
      "timeout, a 500) is never sent again: it could make a second paste.\n"
      "Timeouts: connect 5 s, whole exchange 30 s; an answer over 1 MiB is refused.");
}

int RunPaste(const PasteCommandOptions& given) {
  PasteCommandOptions options = given;
  auto configured = ReadCliConfig();
  if (!configured.ok()) {
    Say("{}", configured.error().message);
    return kExitUsage;
  }
  if (options.server.empty()) options.server = configured->server.value_or("http://127.0.0.1:8080");
  auto server = ParseServerUrl(options.server);
  if (!server.ok()) {
    Say("{}", server.error().message);
    return kExitUsage;
  }
  if (options.token.empty() && configured->token && configured->server) {
    // The file's token only to the file's server (src/app/cli_config.h).
    auto own = ParseServerUrl(*configured->server);
    if (own.ok() && own->Origin() == server->Origin()) options.token = *configured->token;
  }
  // It goes into a header line: only what a bearer credential may hold (token68, RFC 9110).
  if (!options.token.empty() && !IsTokenText(options.token)) {
    Say("the creator token is not one: letters, digits and '-', '_', '.', '~', '+', '/', '='");
    return kExitUsage;
  }
  const auto max_wait = ParseMaxWait(options.max_wait);
  if (!max_wait) {
    Say("--max-wait '{}': want a duration like 60s or 500ms, or 0", options.max_wait);
    return kExitUsage;
  }
  auto body = ReadInput(options.file);
  if (!body.ok()) {
    Say("{}", body.error().message);
    return kExitUsage;
  }
  std::string target = server->base_path + "/api/v1/pastes";
  std::string query;
  auto add = [&query](std::string_view name, std::string_view value) {
    query += query.empty() ? "?" : "&";
    query += name;
    query += "=";
    query += PercentEncode(value);
  };
  if (!options.ttl.empty()) add("ttl", options.ttl);
  // An encrypted paste's language and file name would tell the server what the text is.
  if (!options.lang.empty() && !options.encrypt) add("lang", options.lang);
  if (options.max_views > 0) {
    add("max_views", std::to_string(options.max_views));
  } else if (options.burn) {
    add("burn", "1");
  }
  std::string fragment;
  if (options.encrypt) {
    auto sealed = SealForPaste(*body, options.password);
    if (!sealed.ok()) {
      Say("{}", sealed.error().message);
      return sealed.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailed;
    }
    *body = std::move(sealed->envelope);
    fragment = "#" + sealed->key;
    add("encrypted", "1");
  }
  target += query;
  // Only the last part of the path: the server never needs the directories.
  std::string filename;
  if (!options.file.empty() && options.file != "-" && !options.encrypt) {
    filename = options.file.substr(options.file.find_last_of('/') + 1);
  }

  CliRequest request;
  request.method = "POST";
  request.target = target;
  request.body = std::move(*body);
  request.expect_continue = true;
  request.user_agent = "sluice-paste/" SLUICE_VERSION;
  request.headers = {{"Accept", "application/json"}, {"Content-Type", "text/plain; charset=utf-8"}};
  // The server takes the language of the link from the file name's extension (/ID.py).
  if (!filename.empty()) request.headers.emplace_back("Sluice-Filename", filename);
  if (!options.token.empty()) {
    request.headers.emplace_back("Authorization", "Bearer " + options.token);
  }

  admission::Jitter jitter = FreshJitter();
  // --max-wait counts the exchanges as well as the pauses, so a server that answers each 429
  // slowly cannot stretch the command to rounds x exchange timeout.
  const auto started = std::chrono::steady_clock::now();
  const auto waited = [&started] {
    return std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - started);
  };
  bool connect_retried = false;
  for (;;) {
    const Attempt a = Exchange(*server, request);

    if (a.fate == Attempt::Fate::kNotSent) {
      if (a.connect_failed && !connect_retried) {
        connect_retried = true;
        const auto pause = jitter.Between(Duration(kConnectRetryMin), Duration(kConnectRetryMax));
        Say("cannot connect to {} ({}); nothing was sent, trying once more in {} ms",
            options.server, a.what,
            std::chrono::duration_cast<std::chrono::milliseconds>(pause).count());
        std::this_thread::sleep_for(pause);
        continue;
      }
      Say("cannot connect to {} ({}); nothing was sent", options.server, a.what);
      return kExitFailed;
    }

    if (a.fate == Attempt::Fate::kUnknown) {
      Say("{}. The request may have reached the server, so the paste may or may not exist; not "
          "sending it again (that could make a second paste)",
          a.what);
      return kExitFailed;
    }

    if (a.status == 201) {
      if (!a.body_complete) {
        Say("the server created the paste (201), but its answer was cut off ({}), so its URL is "
            "lost; not sending it again (that would make a second paste)",
            a.what);
        return kExitFailed;
      }
      return PrintCreated(a, *server, options.json, fragment);
    }

    const ErrorDoc doc = ParseErrorDoc(a);
    const bool sent_proof =
        std::erase_if(request.headers, [](const auto& h) { return h.first == "Sluice-Proof"; }) > 0;
    // A refusal of a create that carried a solution (the solvers' share is spent too) waits its
    // Retry-After like any other, rather than solving again at once and hammering a busy server.
    if (a.status == 429 && doc.challenge && !sent_proof && waited() < *max_wait) {
      // Solving is the client's share of a busy server's budget: a second or two of CPU instead
      // of a wait, and the solved create draws on the share the server keeps for solvers.
      Say("server busy ({}): solving its proof of work (up to {} hashes)", doc.reason,
          doc.challenge->maxnumber + 1);
      const auto solving = std::chrono::steady_clock::now();
      const std::optional<uint64_t> number = service::SolvePow(*doc.challenge);
      if (number) {
        Say("solved in {:.1f} s, sending again", Seconds(std::chrono::duration_cast<Duration>(
                                                     std::chrono::steady_clock::now() - solving)));
        request.headers.emplace_back("Sluice-Proof", service::PowPayload(*doc.challenge, *number));
        continue;
      }
      Say("the server's challenge has no solution up to its maxnumber; not solving it");
    }
    if ((a.status == 429 || a.status == 503) && doc.reason != "outcome_unknown") {
      const std::optional<int> retry_after = RetryAfterSeconds(a, doc);
      if (retry_after) {
        if (const auto pause = PoliteWait(*retry_after, waited(), *max_wait, jitter)) {
          Say("server busy ({}), retrying in {:.1f} s", doc.reason, Seconds(*pause));
          std::this_thread::sleep_for(*pause);
          continue;
        }
        Say("server busy ({}): {}; it asks to retry in {} s, which is past --max-wait {} (waited "
            "{:.1f} s so far). Nothing was created",
            doc.reason, doc.error, *retry_after, options.max_wait, Seconds(waited()));
        return kExitFailed;
      }
      if (a.status == 429) {
        Say("refused with 429 ({}): {}. Nothing was created", doc.reason, doc.error);
        return kExitFailed;
      }
      // A 503 without a Retry-After is a dependency failure, not a refusal at the door.
    }

    if (a.status >= 500) {
      Say("server error {} ({}): {}. The paste may or may not exist; not sending it again (that "
          "could make a second paste)",
          a.status, doc.reason, doc.error);
      return kExitFailed;
    }
    Say("refused with {} {} ({}): {}", a.status, a.status_text, doc.reason, doc.error);
    if (a.body_complete && !a.body.empty())
      std::fputs((ForTerminal(a.body) + "\n").c_str(), stderr);
    return kExitFailed;
  }
}

}  // namespace sluice::app
