#include "cli_config.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
// As src/app/settings_loader.cc: toml++'s parse_key() assertion is not one a file may trip.
#define TOML_ASSERT(expr) static_assert(true)
#include <toml++/toml.h>

namespace sluice::app {

std::string CliConfigPath() {
  const char* config = std::getenv("XDG_CONFIG_HOME");
  if (config != nullptr && config[0] == '/') return std::string(config) + "/sluice/cli.toml";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.config/sluice/cli.toml";
}

Result<std::optional<std::string>> ConfiguredServer() {
  const std::string path = CliConfigPath();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<std::string>();
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // As src/app/settings_loader.cc's ParseConfig: toml++ 3.3.0 reaches undefined behaviour on some
  // non-ASCII input, and no URL here needs more than ASCII.
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      return MakeError(ErrorCode::kInvalidArgument,
                       fmt::format("{}: only ASCII is accepted in this file", path));
    }
  }
  toml::table parsed;
  try {
    parsed = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    return MakeError(ErrorCode::kInvalidArgument, fmt::format("{}: {}", path, e.description()));
  }
  const toml::node* server = parsed.get("server");
  if (server == nullptr) return std::optional<std::string>();
  if (!server->is_string()) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        fmt::format("{}: 'server' must be a string like \"https://paste.example\"", path));
  }
  return std::optional<std::string>(server->value<std::string>().value_or(""));
}

}  // namespace sluice::app
