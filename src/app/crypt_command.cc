#include "crypt_command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cli_output.h"

namespace sluice::app {

namespace {

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
  auto opened = OpenEnvelope(envelope, key, std::nullopt, kCliMaxPasteBytes);
  if (!opened.ok() && opened.error().reason == "password_required") {
    auto password = ReadPassword("Password: ", false);
    if (!password.ok()) {
      Tell(who, "this paste has a password: " + password.error().message);
      return 1;
    }
    opened = OpenEnvelope(envelope, key, *password, kCliMaxPasteBytes);
  }
  if (!opened.ok()) {
    // The reason may quote the envelope, which the server chose.
    Tell(who, opened.error().message);
    return 1;
  }
  std::fwrite(opened->data(), 1, opened->size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace sluice::app
