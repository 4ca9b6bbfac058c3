#include "admin_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "crypt_command.h"

namespace sluice::app {

namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = boost::asio::ip::tcp;
using local = boost::asio::local::stream_protocol;

// A paste id or a prefix goes into a path: only what the server itself would accept in one.
bool SafeSegment(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0;
  });
}

std::string JsonBody(std::initializer_list<std::pair<const char*, const std::string*>> fields) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : fields) {
    if (!value->empty()) j[name] = *value;
  }
  return j.dump();
}

// One request on a connected stream (TCP or Unix), its response read whole.
template <typename Stream>
bhttp::response<bhttp::string_body> Exchange(Stream& stream,
                                             const bhttp::request<bhttp::string_body>& req) {
  bhttp::write(stream, req);
  beast::flat_buffer buffer;
  bhttp::response<bhttp::string_body> res;
  bhttp::read(stream, buffer, res);
  return res;
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
  admin->add_option("--token-file", o.token_file, "File holding the admin token")
      ->envname("SLUICE_ADMIN_TOKEN_FILE")
      ->required();
  admin->require_subcommand(1);

  // The subcommands' values live as long as the app (static: one parse per process).
  static std::string id, reason, note, prefix, duration = "1d";
  static size_t most = 1000;
  static bool keep = false;
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
  return admin;
}

int RunAdmin(AdminCommandOptions& o) {
  if (o.path.starts_with("/admin/pastes/")) {
    const std::string rest = o.path.substr(std::string_view("/admin/pastes/").size());
    if (!SafeSegment(rest.substr(0, rest.find('/')))) {
      std::fprintf(stderr, "sluice admin: not a paste id\n");
      return 2;
    }
  }
  // The same forms admin_listen takes (src/app/settings.cc, CheckAdminListen).
  std::string socket_path;
  if (o.admin.starts_with("unix:")) {
    socket_path = o.admin.substr(5);
  } else if (o.admin.starts_with("/")) {
    socket_path = o.admin;
  }
  constexpr std::string_view kHttp = "http://";
  std::string authority = "localhost";
  std::string host, port;
  if (!socket_path.empty() || o.admin.starts_with("unix:")) {
    if (!socket_path.starts_with("/")) {
      std::fprintf(stderr, "sluice admin: --admin unix:PATH needs an absolute path\n");
      return 2;
    }
  } else if (!o.admin.starts_with(kHttp)) {
    std::fprintf(stderr,
                 "sluice admin: --admin must be http://HOST:PORT or a Unix socket, unix:/PATH\n");
    return 2;
  } else {
    authority = o.admin.substr(kHttp.size(), o.admin.find('/', kHttp.size()) - kHttp.size());
    const size_t colon = authority.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      std::fprintf(stderr, "sluice admin: --admin must name a port: http://HOST:PORT\n");
      return 2;
    }
    host = authority.substr(0, colon);
    if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    port = authority.substr(colon + 1);
  }

  std::string token;
  {
    std::ifstream in(o.token_file);
    if (!in || !std::getline(in, token)) {
      std::fprintf(stderr, "sluice admin: cannot read the token from %s\n", o.token_file.c_str());
      return 2;
    }
    const size_t first = token.find_first_not_of(" \t\r\n");
    const size_t last = token.find_last_not_of(" \t\r\n");
    token = first == std::string::npos ? "" : token.substr(first, last - first + 1);
  }

  // One request on a fresh connection; throws on a connection or protocol failure.
  const auto exchange = [&](const std::string& path) {
    boost::asio::io_context io;
    bhttp::request<bhttp::string_body> req{
        o.method == "POST" ? bhttp::verb::post : bhttp::verb::get, path, 11};
    req.set(bhttp::field::host, authority);
    req.set(bhttp::field::authorization, "Bearer " + token);
    req.set(bhttp::field::user_agent, "sluice-admin");
    if (o.method == "POST") {
      req.set(bhttp::field::content_type, "application/json");
      req.body() = o.body.empty() ? "{}" : o.body;
    }
    req.prepare_payload();
    bhttp::response<bhttp::string_body> res;
    if (socket_path.empty()) {
      tcp::resolver resolver(io);
      beast::tcp_stream stream(io);
      stream.expires_after(std::chrono::seconds(10));
      stream.connect(resolver.resolve(host, port));
      res = Exchange(stream, req);
    } else {
      beast::basic_stream<local> stream(io);
      stream.expires_after(std::chrono::seconds(10));
      stream.connect(local::endpoint(socket_path));
      res = Exchange(stream, req);
    }
    return res;
  };
  const auto refused = [](const bhttp::response<bhttp::string_body>& res) {
    const unsigned status = res.result_int();
    if (status < 400) return false;
    nlohmann::json doc = nlohmann::json::parse(res.body(), nullptr, false);
    const std::string message =
        !doc.is_discarded() && doc.contains("error") && doc["error"].is_string()
            ? doc["error"].get<std::string>()
            : res.body();
    std::fprintf(stderr, "sluice admin: %u: %s\n", status, message.c_str());
    return true;
  };

  try {
    if (o.max_pastes == 0) {
      bhttp::response<bhttp::string_body> res = exchange(o.path);
      if (refused(res)) return 1;
      nlohmann::json doc = nlohmann::json::parse(res.body(), nullptr, false);
      if (!o.key.empty()) {
        // The metadata to stderr, the opened text to stdout, as `sluice get` prints it.
        if (doc.is_discarded() || !doc.contains("content") || !doc["content"].is_string()) {
          std::fprintf(stderr, "sluice admin: the paste has no stored text to decrypt\n");
          return 1;
        }
        const std::string envelope = doc["content"].get<std::string>();
        doc["content"] = "(decrypted below)";
        std::fprintf(stderr, "%s\n", doc.dump(2).c_str());
        return PrintOpened(envelope, o.key, "sluice admin");
      }
      std::puts(doc.is_discarded() ? res.body().c_str() : doc.dump(2).c_str());
      return 0;
    }
    // The review queue, a page at a time (each one is bounded by the server), until the queue
    // ends or max_pastes are listed; `next` says where a later call would go on.
    nlohmann::json pastes = nlohmann::json::array();
    nlohmann::json next = nullptr;
    nlohmann::json pending = nullptr;
    do {
      const size_t page = std::min<size_t>(1000, o.max_pastes - pastes.size());
      std::string path = o.path + "?limit=" + std::to_string(page);
      if (next.is_string()) path += "&before=" + next.get<std::string>();
      bhttp::response<bhttp::string_body> res = exchange(path);
      if (refused(res)) return 1;
      nlohmann::json doc = nlohmann::json::parse(res.body(), nullptr, false);
      if (doc.is_discarded() || !doc.contains("pastes") || !doc["pastes"].is_array()) {
        std::fprintf(stderr, "sluice admin: not a page of the review queue: %s\n",
                     res.body().c_str());
        return 1;
      }
      for (auto& p : doc["pastes"]) pastes.push_back(std::move(p));
      next = doc.value("next", nlohmann::json());
      pending = doc.value("pending", nlohmann::json());
    } while (next.is_string() && pastes.size() < o.max_pastes);
    std::puts(
        nlohmann::json{{"pastes", pastes}, {"next", next}, {"pending", pending}}.dump(2).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice admin: %s: %s\n", o.admin.c_str(), e.what());
    return 1;
  }
}

}  // namespace sluice::app
