#include "cli_config.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>
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

Result<CliConfig> ReadCliConfig() {
  const std::string path = CliConfigPath();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return CliConfig{};
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
  CliConfig config;
  for (auto [key, example, out] :
       {std::tuple<const char*, const char*, std::optional<std::string>*>{
            "server", "\"https://paste.example\"", &config.server},
        {"token", "\"slt_...\" (sluice admin token create)", &config.token}}) {
    const toml::node* node = parsed.get(key);
    if (node == nullptr) continue;
    if (!node->is_string()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       fmt::format("{}: '{}' must be a string like {}", path, key, example));
    }
    *out = node->value<std::string>().value_or("");
  }
  return config;
}

}  // namespace sluice::app
