#include "admin_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_exchange.h"
#include "cli_output.h"
#include "crypt_command.h"
#include "server_url.h"
#include "sluice/notice/email.h"
#include "sluice/service/body_check.h"
#include "sluice/service/content_blocklist.h"
#include "sluice/store/paste.h"

namespace sluice::app {

namespace {

std::string JsonBody(std::initializer_list<std::pair<const char*, const std::string*>> fields) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : fields) {
    if (!value->empty()) j[name] = *value;
  }
  return j.dump();
}

}  // namespace

CLI::App* AddAdminCommand(CLI::App& app, AdminCommandOptions& o) {
  CLI::App* admin = app.add_subcommand(
      "admin", "Review abuse reports, take pastes down, block clients (talks to admin_listen)");
  admin
      ->add_option("--admin", o.admin,
                   "The admin listener: http://HOST:PORT, or its Unix socket, unix:/PATH or /PATH "
                   "(admin_listen)")
      ->envname("SLUICE_ADMIN")
      ->capture_default_str();
  // Required by every subcommand that talks to the listener (RunAdmin), not by migrate-store,
  // which talks to the stores (migrate_store.h).
  admin->add_option("--token-file", o.token_file, "File holding the admin token")
      ->envname("SLUICE_ADMIN_TOKEN_FILE");
  admin->require_subcommand(1);

  // The subcommands' values live as long as the app (static: one parse per process).
  static std::string id, reason, note, prefix, duration = "1d", content, after;
  static size_t most = 1000;
  static bool keep = false;
  static std::string window = "status";
  CLI::App* read_only = admin->add_subcommand(
      "read-only",
      "Open (on) or close (off) the read-only window of a cutover: writes answer 503 read_only, "
      "reads go on (docs/scale-out.md, 'Outgrowing one box'); status: whether it is open");
  read_only->add_option("on|off|status", window, "What to do")
      ->check(CLI::IsMember({"on", "off", "status"}))
      ->capture_default_str();
  read_only->callback([&o] {
    o.path = "/admin/read-only";
    if (window == "status") {
      o.method = "GET";
      return;
    }
    o.method = "PUT";
    o.body = nlohmann::json{{"read_only", window == "on"}}.dump();
  });
  CLI::App* reports = admin->add_subcommand(
      "reports", "Pastes with open reports, newest first, page after page of the queue");
  reports->add_option("--limit", most, "List at most this many pastes")->capture_default_str();
  reports->callback([&o] {
    o.method = "GET";
    o.path = "/admin/reports";
    o.max_pastes = std::max<size_t>(1, most);
  });
  admin
      ->add_subcommand("top",
                       "Who created and who was refused most in the last minute (keys in full), "
                       "and the keys by share of their create budget")
      ->callback([&o] {
        o.method = "GET";
        o.path = "/admin/abuse";
      });
  admin->add_subcommand("audit", "The last operator actions")->callback([&o] {
    o.method = "GET";
    o.path = "/admin/audit";
  });
  CLI::App* notice = admin->add_subcommand(
      "notice",
      "Take in an abuse notice: its pastes are withheld at once (451 withheld_notice) and it waits "
      "in the queue on the takedown clock (docs/moderation.md, 'Notices')");
  notice->add_option("--paste", o.notice.pastes, "A paste id or link (repeat for each)");
  notice->add_option("--sender", o.notice.sender,
                     "Who sent it (an abuse desk's address); with --email: the From address");
  notice->add_option("--sender-kind", o.notice.sender_kind,
                     "hosting, registrar, authority, rights_holder or other: what the "
                     "transparency report counts the notice under (default: unclassified)");
  notice->add_option("--reference", o.notice.reference,
                     "The sender's reference (case number); with --email: the Message-ID. The "
                     "same sender and reference again is the same notice");
  notice->add_option("--category", o.notice.category,
                     "copyright, malware, phishing, personal_data, illegal, spam, terrorism or "
                     "other (default)");
  notice->add_option("--deadline", o.notice.deadline,
                     "The sender's deadline: RFC 3339 (2026-12-05T18:00:00Z) or a duration (1h, "
                     "2d); default: takedown_deadline");
  notice->add_flag("--email", o.notice.email,
                   "Read the notice from an e-mail on standard input (RFC 5322, MIME; at most "
                   "1 MiB): paste links from its text, the sender from From, the reference from "
                   "Message-ID, unless given");
  notice->callback([&o] {
    o.method = "POST";
    o.path = "/admin/notices";
  });
  admin->add_subcommand("notices", "Open notices, the oldest first, each with its clock")
      ->callback([&o] {
        o.method = "GET";
        o.path = "/admin/notices";
      });
  CLI::App* show = admin->add_subcommand("show", "A paste's metadata and text");
  show->add_option("ID", id, "Paste id")->required();
  show->add_option("--key", o.key,
                   "An encrypted paste's key (the link's part after '#', from a report): decrypt "
                   "here, never on the server");
  show->callback([&o] {
    o.method = "GET";
    o.path = "/admin/pastes/" + id;
  });
  CLI::App* takedown = admin->add_subcommand("takedown", "451 from now on; the body is deleted");
  takedown->add_option("ID", id, "Paste id")->required();
  takedown->add_option("--reason", reason, "Kept with the paste and in the audit trail");
  takedown->callback([&o] {
    o.method = "POST";
    o.path = "/admin/pastes/" + id + "/takedown";
    o.body = JsonBody({{"reason", &reason}});
  });
  CLI::App* dismiss = admin->add_subcommand("dismiss", "Close the reports; the paste is served");
  dismiss->add_option("ID", id, "Paste id")->required();
  dismiss->add_option("--note", note, "Kept in the audit trail");
  dismiss->add_flag("--keep", keep,
                    "Reviewed, keep: later reports queue the paste for review but never withhold "
                    "it");
  dismiss->callback([&o] {
    o.method = "POST";
    o.path = "/admin/pastes/" + id + "/dismiss";
    nlohmann::json j = nlohmann::json::object();
    if (!note.empty()) j["note"] = note;
    if (keep) j["keep"] = true;
    o.body = j.dump();
  });
  CLI::App* block = admin->add_subcommand("block", "Refuse creates (403) from a client or prefix");
  block->add_option("PREFIX", prefix, "An address or CIDR block: 203.0.113.7, 2001:db8::/48")
      ->required();
  block->add_option("--for", duration, "How long: 30m, 12h, 7d")->capture_default_str();
  block->add_option("--reason", reason, "Told to the blocked client and kept in the audit trail");
  block->callback([&o] {
    o.method = "POST";
    o.path = "/admin/blocks";
    o.body = JsonBody({{"prefix", &prefix}, {"duration", &duration}, {"reason", &reason}});
  });
  CLI::App* block_content = admin->add_subcommand(
      "block-content",
      "Refuse creates of exactly these bytes (451 blocked_content): a file, hashed here, or the "
      "SHA-256 of one");
  block_content
      ->add_option("FILE|HASH", content,
                   "A file whose bytes to block (hashed here; it never leaves this machine), or "
                   "64 hex digits of a SHA-256")
      ->required();
  block_content->add_option("--reason", reason, "Kept with the entry and in the audit trail");
  block_content->callback([&o] {
    o.method = "POST";
    o.path = "/admin/blocked-contents";
    o.content = content;
    o.reason = reason;
  });
  CLI::App* unblock_content =
      admin->add_subcommand("unblock-content", "Let creates of these bytes through again");
  unblock_content->add_option("HASH", content, "64 hex digits of a SHA-256")->required();
  unblock_content->callback([&o] {
    o.method = "DELETE";
    o.path = "/admin/blocked-contents/" + content;
  });
  CLI::App* blocked_contents = admin->add_subcommand(
      "blocked-contents", "One page of the content blocklist, in digest order");
  blocked_contents->add_option("--limit", most, "At most this many entries (1 to 1000)")
      ->capture_default_str();
  blocked_contents->add_option("--after", after, "The 'next' of the page before");
  blocked_contents->callback([&o] {
    o.method = "GET";
    o.path = "/admin/blocked-contents?limit=" + std::to_string(std::clamp<size_t>(most, 1, 1000));
    if (!after.empty()) o.path += "&after=" + PercentEncode(after);
  });
  // Creator tokens (docs/admission.md, "Creator tokens"): the server mints the secret and keeps
  // only its hash; `create` prints it once.
  static std::string label, rate, burst, bytes_rate, expires;
  CLI::App* token = admin->add_subcommand(
      "token", "Creator tokens: creates with their own budgets (Authorization: Bearer)");
  token->require_subcommand(1);
  CLI::App* token_create =
      token->add_subcommand("create", "A new token; its secret is printed once, kept nowhere");
  token_create->add_option("--label", label, "Its name in the metrics and heavy hitters")
      ->required();
  token_create->add_option("--rate", rate, "Creates a second, minute or hour: 10/s, 600/m")
      ->required();
  token_create->add_option("--burst", burst, "Creates at once: 100")->required();
  token_create->add_option("--bytes-rate", bytes_rate,
                           "Create bytes: 1MB/s (default: the per-address byte budget)");
  token_create->add_option("--expires", expires, "Lifetime: 90d, 12h (default: until revoked)");
  token_create->callback([&o] {
    o.method = "POST";
    o.path = "/admin/tokens";
    o.body = JsonBody({{"label", &label},
                       {"rate", &rate},
                       {"burst", &burst},
                       {"bytes_rate", &bytes_rate},
                       {"expires", &expires}});
  });
  token->add_subcommand("list", "Every token, revoked ones too; never a secret")->callback([&o] {
    o.method = "GET";
    o.path = "/admin/tokens";
  });
  CLI::App* token_revoke = token->add_subcommand(
      "revoke", "Refuse the token from now on (every process within creator_tokens_refresh)");
  token_revoke->add_option("ID", id, "The token's id (sluice admin token list)")->required();
  token_revoke->callback([&o] {
    o.method = "DELETE";
    o.path = "/admin/tokens/" + PercentEncode(id);
  });
  return admin;
}

namespace {

// The notice's JSON from its flags and, with --email, the e-mail on standard input; 0, or the
// usage exit code (2) after saying why. Links are sent as they are: the server reads them
// (service::ParseNoticeJson), so the CLI and the route accept the same ones.
int NoticeBody(AdminCommandOptions& o, std::string_view command) {
  AdminCommandOptions::Notice& n = o.notice;
  if (n.email) {
    std::string message;
    char buffer[64 * 1024];
    size_t got;
    while ((got = std::fread(buffer, 1, sizeof buffer, stdin)) > 0) {
      message.append(buffer, got);
      if (message.size() > notice::kMaxEmailBytes) {
        Tell(command, fmt::format("the e-mail on standard input is over {} bytes; nothing sent",
                                  notice::kMaxEmailBytes));
        return 2;
      }
    }
    Result<notice::EmailNotice> mail = notice::ParseNoticeEmail(message);
    if (!mail.ok()) {
      Tell(command, mail.error().message + "; nothing sent");
      return 2;
    }
    if (n.sender.empty()) n.sender = mail->sender;
    if (n.reference.empty()) n.reference = mail->message_id;
    for (std::string& id : mail->pastes) n.pastes.push_back(std::move(id));
    if (n.reference.empty()) {
      Tell(command, "the e-mail has no Message-ID: give --reference; nothing sent");
      return 2;
    }
  }
  if (n.pastes.empty()) {
    Tell(command, n.email ? "the e-mail names no paste (no link to one in its text); nothing sent"
                          : "name the pastes with --paste ID|URL");
    return 2;
  }
  if (n.sender.empty() || n.reference.empty()) {
    Tell(command, "--sender and --reference are required (or --email)");
    return 2;
  }
  nlohmann::json j = {{"sender", n.sender}, {"reference", n.reference}, {"pastes", n.pastes}};
  if (!n.category.empty()) j["category"] = n.category;
  if (!n.sender_kind.empty()) j["sender_kind"] = n.sender_kind;
  if (!n.deadline.empty()) j["deadline"] = n.deadline;
  o.body = j.dump();
  return 0;
}

bool IsHexDigest(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c));
         });
}

}  // namespace

int RunAdmin(AdminCommandOptions& o) {
  constexpr std::string_view kCommand = "sluice admin";
  if (o.path == "/admin/notices" && o.method == "POST") {
    if (int usage = NoticeBody(o, kCommand); usage != 0) return usage;
  }
  if (o.path == "/admin/blocked-contents" && o.method == "POST") {
    // A file is hashed here and only its digest is sent: the admin listener takes small bodies,
    // and the text need not travel to block it.
    std::string hex = o.content;
    if (!IsHexDigest(hex)) {
      std::ifstream in(o.content, std::ios::binary);
      if (!in) {
        Tell(kCommand, fmt::format("'{}' is neither a readable file nor 64 hex digits of a SHA-256",
                                   o.content));
        return 2;
      }
      const std::string bytes((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
      hex = service::ContentBlocklist::Hex(service::DigestBody(bytes));
    }
    o.body = JsonBody({{"sha256", &hex}, {"reason", &o.reason}});
  }
  if (o.path.starts_with("/admin/blocked-contents/") && !IsHexDigest(o.path.substr(24))) {
    Tell(kCommand, "the hash must be 64 hex digits of a SHA-256");
    return 2;
  }
  if (o.path.starts_with("/admin/pastes/")) {
    const std::string rest = o.path.substr(std::string_view("/admin/pastes/").size());
    const std::string id = rest.substr(0, rest.find('/'));
    if (!store::PasteId::Parse(id)) {
      Tell(kCommand, fmt::format("'{}' is not a paste id: 12 characters of A-Z, a-z and 0-9", id));
      return 2;
    }
  }
  // The same forms admin_listen takes (src/app/settings.cc, CheckAdminListen).
  ServerUrl server;
  if (o.admin.starts_with("unix:")) {
    server.socket_path = o.admin.substr(5);
  } else if (o.admin.starts_with("/")) {
    server.socket_path = o.admin;
  }
  if (!server.socket_path.empty() || o.admin.starts_with("unix:")) {
    if (!server.socket_path.starts_with("/")) {
      Tell(kCommand, "--admin unix:PATH needs an absolute path");
      return 2;
    }
  } else if (!o.admin.starts_with("http://")) {
    Tell(kCommand, "--admin must be http://HOST:PORT or a Unix socket, unix:/PATH");
    return 2;
  } else {
    auto parsed = ParseServerUrl(o.admin);
    const std::string authority = o.admin.substr(7, o.admin.find('/', 7) - 7);
    const size_t colon = authority.rfind(':');
    if (colon == std::string::npos || colon == 0 || authority.back() == ']') {
      Tell(kCommand, "--admin must name a port: http://HOST:PORT");
      return 2;
    }
    if (!parsed.ok()) {
      Tell(kCommand, parsed.error().message);
      return 2;
    }
    server = std::move(*parsed);
  }

  if (o.token_file.empty()) {
    Tell(kCommand, "--token-file (or SLUICE_ADMIN_TOKEN_FILE) is required");
    return 2;
  }
  std::string token;
  {
    std::ifstream in(o.token_file);
    if (!in || !std::getline(in, token)) {
      Tell(kCommand, fmt::format("cannot read the token from {}", o.token_file));
      return 2;
    }
    const size_t first = token.find_first_not_of(" \t\r\n");
    const size_t last = token.find_last_not_of(" \t\r\n");
    token = first == std::string::npos ? "" : token.substr(first, last - first + 1);
    // It goes into a header line: a control character or a space would end or split it.
    if (token.empty() ||
        !std::all_of(token.begin(), token.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
      Tell(kCommand,
           fmt::format("the token in {} must be one word of printable ASCII", o.token_file));
      return 2;
    }
  }

  // One request on a fresh connection, with the limits of every CLI request (cli_exchange.h);
  // an answer can carry a paste's text, so it may be as large as one.
  const auto exchange = [&](const std::string& path) {
    CliRequest req;
    req.method = o.method == "POST" || o.method == "DELETE" || o.method == "PUT" ? o.method : "GET";
    req.target = server.base_path + path;
    req.headers = {{"Authorization", "Bearer " + token}};
    if (o.method == "POST" || o.method == "PUT") {
      req.headers.emplace_back("Content-Type", "application/json");
      req.body = o.body.empty() ? "{}" : o.body;
    }
    req.answer_limit = kCliMaxPasteBytes;
    req.user_agent = "sluice-admin";
    return Exchange(server, req);
  };
  // Says why an answer is not a success; false for a success.
  const auto failed = [&](const Attempt& a) {
    if (a.fate != Attempt::Fate::kAnswered || !a.body_complete) {
      Tell(kCommand, fmt::format("{}: {}", o.admin, a.what));
      return true;
    }
    if (a.status < 400) return false;
    nlohmann::json doc = nlohmann::json::parse(a.body, nullptr, false);
    const std::string message =
        !doc.is_discarded() && doc.contains("error") && doc["error"].is_string()
            ? doc["error"].get<std::string>()
            : a.body;
    Tell(kCommand, fmt::format("{}: {}", a.status, message));
    // A notice refused for its pastes says why for each one.
    if (!doc.is_discarded() && doc.contains("pastes")) {
      std::fprintf(stderr, "%s\n", JsonForTerminal(doc["pastes"].dump(2)).c_str());
    }
    return true;
  };

  try {
    if (o.max_pastes == 0) {
      const Attempt res = exchange(o.path);
      if (failed(res)) return 1;
      if (res.status == 204) return 0;
      nlohmann::json doc = nlohmann::json::parse(res.body, nullptr, false);
      if (!o.key.empty()) {
        // The metadata to stderr, the opened text to stdout, as `sluice get` prints it.
        if (doc.is_discarded() || !doc.contains("content") || !doc["content"].is_string()) {
          Tell(kCommand, "the paste has no stored text to decrypt");
          return 1;
        }
        const std::string envelope = doc["content"].get<std::string>();
        doc["content"] = "(decrypted below)";
        std::fprintf(stderr, "%s\n", JsonForTerminal(doc.dump(2)).c_str());
        return PrintOpened(envelope, o.key, kCommand);
      }
      std::puts(doc.is_discarded() ? ForTerminal(res.body, kCliMaxPasteBytes).c_str()
                                   : JsonForTerminal(doc.dump(2)).c_str());
      return 0;
    }
    // The review queue, a page at a time (each one is bounded by the server), until the queue
    // ends or max_pastes are listed; `next` says where a later call would go on. A page that
    // adds nothing ends the walk too: a server that keeps sending a `next` cannot keep us here.
    nlohmann::json pastes = nlohmann::json::array();
    nlohmann::json next = nullptr;
    nlohmann::json pending = nullptr;
    bool grew = true;
    do {
      const size_t page = std::min<size_t>(1000, o.max_pastes - pastes.size());
      std::string path = o.path + "?limit=" + std::to_string(page);
      if (next.is_string()) path += "&before=" + PercentEncode(next.get<std::string>());
      const Attempt res = exchange(path);
      if (failed(res)) return 1;
      nlohmann::json doc = nlohmann::json::parse(res.body, nullptr, false);
      if (doc.is_discarded() || !doc.contains("pastes") || !doc["pastes"].is_array()) {
        Tell(kCommand, "not a page of the review queue: " + res.body);
        return 1;
      }
      grew = !doc["pastes"].empty();
      for (auto& p : doc["pastes"]) pastes.push_back(std::move(p));
      next = doc.value("next", nlohmann::json());
      pending = doc.value("pending", nlohmann::json());
    } while (grew && next.is_string() && pastes.size() < o.max_pastes);
    std::puts(JsonForTerminal(
                  nlohmann::json{{"pastes", pastes}, {"next", next}, {"pending", pending}}.dump(2))
                  .c_str());
    return 0;
  } catch (const std::exception& e) {
    Tell(kCommand, fmt::format("{}: {}", o.admin, e.what()));
    return 1;
  }
}

}  // namespace sluice::app
