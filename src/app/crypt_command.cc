#include "crypt_command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <termios.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "dev"
#endif

namespace sluice::app {

namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = boost::asio::ip::tcp;

constexpr auto kGetTimeout = std::chrono::seconds(30);

// A line from the terminal with echo off; the terminal's mode is restored whatever happens.
std::optional<std::string> AskTerminal(std::string_view prompt) {
  const int fd = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  termios saved{};
  const bool is_tty = tcgetattr(fd, &saved) == 0;
  if (is_tty) {
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    tcsetattr(fd, TCSAFLUSH, &quiet);
  }
  [[maybe_unused]] ssize_t ignored = ::write(fd, prompt.data(), prompt.size());
  std::string line;
  char c = 0;
  while (::read(fd, &c, 1) == 1 && c != '\n') line += c;
  if (is_tty) tcsetattr(fd, TCSAFLUSH, &saved);
  ignored = ::write(fd, "\n", 1);
  ::close(fd);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

struct Link {
  std::string host, port, authority;
  std::string base;  // path before the id, "" or "/prefix"
  std::string id;
  std::optional<std::string> key;
};

Result<Link> ParseLink(std::string_view url) {
  const auto bad = [&](std::string_view why) {
    return MakeError(ErrorCode::kInvalidArgument, fmt::format("'{}': {}", url, why));
  };
  Link out;
  if (const size_t hash = url.find('#'); hash != std::string_view::npos) {
    out.key = std::string(url.substr(hash + 1));
    url = url.substr(0, hash);
  }
  constexpr std::string_view kHttp = "http://";
  if (!url.starts_with(kHttp)) return bad("want a link like http://HOST:PORT/ID#KEY");
  std::string_view rest = url.substr(kHttp.size());
  rest = rest.substr(0, rest.find('?'));
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return bad("no paste id in the link");
  out.authority = std::string(rest.substr(0, slash));
  std::string_view path = rest.substr(slash);
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const size_t last = path.rfind('/');
  std::string_view id = path.substr(last + 1);
  id = id.substr(0, id.find('.'));  // haste-style /ID.py
  path = path.substr(0, last);
  if (path.ends_with("/raw")) path.remove_suffix(4);
  if (id.size() != 12 || id.find_first_not_of("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklm"
                                              "nopqrstuvwxyz") != std::string_view::npos) {
    return bad("the link's last segment is not a paste id (12 letters and digits)");
  }
  out.id = std::string(id);
  out.base = std::string(path);
  const std::string_view authority = out.authority;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in the host");
    out.host = std::string(authority.substr(1, close - 1));
    out.port = close + 2 < authority.size() ? std::string(authority.substr(close + 2)) : "80";
  } else {
    const size_t colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    out.port = colon == std::string_view::npos ? "80" : std::string(authority.substr(colon + 1));
  }
  if (out.host.empty()) return bad("no host");
  return out;
}

bhttp::response<bhttp::string_body> Exchange(const Link& link, bhttp::verb verb,
                                             const std::string& target) {
  boost::asio::io_context io;
  tcp::resolver resolver(io);
  beast::tcp_stream stream(io);
  stream.expires_after(kGetTimeout);
  stream.connect(resolver.resolve(link.host, link.port));
  bhttp::request<bhttp::string_body> req{verb, target, 11};
  req.set(bhttp::field::host, link.authority);
  req.set(bhttp::field::user_agent, "sluice-get/" SLUICE_VERSION);
  req.set(bhttp::field::accept, "application/json");
  req.prepare_payload();
  bhttp::write(stream, req);
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(kCliMaxPlaintextBytes * 2);
  bhttp::read(stream, buffer, parser);
  return parser.release();
}

std::string ErrorOf(const bhttp::response<bhttp::string_body>& res) {
  const auto doc = nlohmann::json::parse(res.body(), nullptr, false);
  if (doc.is_object() && doc.contains("error") && doc["error"].is_string()) {
    return fmt::format("{} ({})", doc["error"].get<std::string>(), res.result_int());
  }
  return fmt::format("HTTP {}", res.result_int());
}

}  // namespace

Result<std::string> ReadPassword(std::string_view prompt, bool confirm) {
  if (const char* env = std::getenv("SLUICE_PASSWORD"); env != nullptr) return std::string(env);
  auto first = AskTerminal(prompt);
  if (!first) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "a password is needed and there is no terminal to ask on; set SLUICE_PASSWORD",
                     "password_required");
  }
  if (confirm) {
    auto again = AskTerminal("Password again: ");
    if (!again || *again != *first) {
      return MakeError(ErrorCode::kInvalidArgument, "the passwords differ", "password_mismatch");
    }
  }
  if (first->empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "an empty password protects nothing",
                     "password_required");
  }
  return *first;
}

Result<SealedPaste> SealForPaste(std::string_view text, bool with_password) {
  std::optional<std::string> password;
  if (with_password) {
    auto read = ReadPassword("Password for the paste: ", true);
    if (!read.ok()) return read.error();
    password = std::move(*read);
  }
  return SealPaste(text, password);
}

int PrintOpened(std::string_view envelope, std::string_view key, std::string_view who) {
  auto opened = OpenEnvelope(envelope, key, std::nullopt, kCliMaxPlaintextBytes);
  if (!opened.ok() && opened.error().reason == "password_required") {
    auto password = ReadPassword("Password: ", false);
    if (!password.ok()) {
      std::fprintf(stderr, "%.*s: this paste has a password: %s\n", static_cast<int>(who.size()),
                   who.data(), password.error().message.c_str());
      return 1;
    }
    opened = OpenEnvelope(envelope, key, *password, kCliMaxPlaintextBytes);
  }
  if (!opened.ok()) {
    std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(who.size()), who.data(),
                 opened.error().message.c_str());
    return 1;
  }
  std::fwrite(opened->data(), 1, opened->size(), stdout);
  std::fflush(stdout);
  return 0;
}

CLI::App* AddGetCommand(CLI::App& app, GetCommandOptions& options) {
  CLI::App* get = app.add_subcommand(
      "get", "Print a paste's text; an encrypted one's link carries its key after '#'");
  get->add_option("URL", options.url, "The paste's link, http://HOST:PORT/ID[#KEY]")->required();
  get->footer(
      "An encrypted paste is fetched as its envelope and decrypted here with the key after '#' "
      "(never sent); its password, if it has one, comes from SLUICE_PASSWORD or is asked on the "
      "terminal. A burn-after-reading paste is claimed, once. Exit status: 0 printed, 1 refused "
      "or cannot decrypt, 2 usage.");
  return get;
}

int RunGet(const GetCommandOptions& options) {
  auto link = ParseLink(options.url);
  if (!link.ok()) {
    std::fprintf(stderr, "sluice get: %s\n", link.error().message.c_str());
    return 2;
  }
  try {
    auto res = Exchange(*link, bhttp::verb::get, link->base + "/raw/" + link->id);
    if (res.result_int() == 409) {
      // Burn after reading: a GET never burns; this is the one reading.
      res = Exchange(*link, bhttp::verb::post,
                     link->base + "/api/v1/pastes/" + link->id + "/claim?format=raw");
    }
    if (res.result_int() != 200) {
      std::fprintf(stderr, "sluice get: %s\n", ErrorOf(res).c_str());
      return 1;
    }
    const auto type = res[bhttp::field::content_type];
    const bool envelope =
        std::string_view(type.data(), type.size()).starts_with("application/json");
    if (!envelope) {
      if (link->key)
        std::fputs("sluice get: this paste is not encrypted; the key is unused\n", stderr);
      std::fwrite(res.body().data(), 1, res.body().size(), stdout);
      return 0;
    }
    if (!link->key || link->key->empty()) {
      std::fputs(
          "sluice get: this paste is encrypted and the link has no key (the part after '#'); "
          "ask for the whole link\n",
          stderr);
      return 1;
    }
    return PrintOpened(res.body(), *link->key, "sluice get");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice get: %s: %s\n", options.url.c_str(), e.what());
    return 1;
  }
}

}  // namespace sluice::app
