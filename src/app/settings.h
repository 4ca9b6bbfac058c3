// Settings of `sluice serve`: every key is declared once, in kServeSettings, and from that one line
// becomes a TOML key, a --flag and a SLUICE_* environment variable, listed with its default by
// `sluice serve --help`. Precedence: flag, then environment, then the TOML file, then the default.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::app {

struct SettingSpec {
  const char* key;            // TOML key; the flag is --key-with-dashes, the env SLUICE_KEY
  const char* default_value;  // as a user would write it
  const char* help;
};

/// The resolved values of every setting; throws std::invalid_argument with the key's name when a
/// value does not parse.
class Settings {
 public:
  std::string String(std::string_view key) const;
  int64_t Integer(std::string_view key) const;
  double Number(std::string_view key) const;
  bool Boolean(std::string_view key) const;
  std::chrono::milliseconds Duration(std::string_view key) const;
  /// Where each value came from ("flag/env", "config file", "default"), for the startup log.
  std::string Describe() const;

 private:
  friend class SettingsLoader;
  std::map<std::string, std::pair<std::string, std::string>, std::less<>> values_;  // value, source
};

/// Registers the flags on a CLI11 (sub)command and resolves them after parsing.
class SettingsLoader {
 public:
  explicit SettingsLoader(CLI::App& command);
  /// Call after CLI parsing. Throws std::runtime_error for an unreadable or invalid TOML file or an
  /// unknown key in it (a typo must not silently fall back to a default).
  Settings Resolve() const;
  /// The settings a TOML document alone gives (defaults for the rest), with the same checks as a
  /// config file; for tests and the config fuzzer.
  static Settings FromToml(std::string_view toml_text);
  /// Every declared key, for the same.
  static std::vector<std::string> Keys();

 private:
  std::map<std::string, std::unique_ptr<std::string>> flag_values_;
  std::map<std::string, CLI::Option*> options_;
  std::string config_path_;
  CLI::Option* config_option_ = nullptr;
};

}  // namespace sluice::app
