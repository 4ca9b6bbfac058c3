// Settings of `sluice serve`: every key is declared once, in kServeSettings (src/app/settings.cc),
// with its type and what it allows, and from that one line becomes a TOML key, a --flag and a
// SLUICE_* environment variable, listed with its default by `sluice serve --help`. Precedence:
// flag, then environment, then the TOML file, then the default. Every value is checked when the
// settings are resolved, so a bad one stops the start instead of surfacing (or truncating) later.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/clock.h"

namespace sluice::app {

/// What a setting holds, which decides how its value is checked at start and shown in errors.
enum class SettingType {
  kText,      // free text, or whatever `check` accepts
  kList,      // comma-separated entries, each accepted by `check` when there is one
  kChoice,    // one of `choices` ("a|b|c")
  kBoolean,   // true/false (also 1/0, yes/no)
  kInteger,   // a whole number in [min, max]
  kNumber,    // a decimal number in [min, max], or (min, max] when min_exclusive
  kDuration,  // a number and a unit (ns, us, ms, s, m, h) in [min, max]
};

/// One declaration per setting: everything a start-up needs to refuse a bad value lives here.
struct SettingSpec {
  const char* key;  // TOML key; the flag is --key-with-dashes, the env SLUICE_KEY
  SettingType type;
  const char* default_value;  // as a user would write it
  const char* help;
  const char* min = nullptr;  // kInteger, kNumber, kDuration: the bounds, as a user writes them
  const char* max = nullptr;
  bool min_exclusive = false;     // kNumber: "above min" rather than "at least min"
  const char* choices = nullptr;  // kChoice: "static|aimd"
  /// kText, kList (per entry): nothing when the value is fine, else what is allowed.
  std::optional<std::string> (*check)(std::string_view value) = nullptr;
};

/// Every setting of `sluice serve`, in the order `--help` lists them.
std::span<const SettingSpec> ServeSettings();

/// Nothing when `value` is allowed for `spec`, else what is allowed ("must be between 1ms and 1h").
std::optional<std::string> CheckValue(const SettingSpec& spec, std::string_view value);

/// A setting's value is refused at start: the message names the key, the value and what is allowed.
class SettingsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The resolved values of every setting, each already checked against its declaration; the typed
/// reads still throw std::invalid_argument with the key's name when a value does not parse as
/// asked.
class Settings {
 public:
  std::string String(std::string_view key) const;
  int64_t Integer(std::string_view key) const;
  double Number(std::string_view key) const;
  bool Boolean(std::string_view key) const;
  /// To the nanosecond: "500us" stays 500 us, "1.5s" is 1500 ms.
  ::sluice::Duration Duration(std::string_view key) const;
  /// Where the value of `key` came from: "flag/env", "config file" or "default".
  std::string Source(std::string_view key) const;
  /// Where each value came from ("flag/env", "config file", "default"), for the startup log.
  std::string Describe() const;
  /// The keys whose values differ from `other`'s, in declaration-map order (a reload's changes).
  std::vector<std::string> ChangedFrom(const Settings& other) const;

 private:
  friend class SettingsLoader;
  std::map<std::string, std::pair<std::string, std::string>, std::less<>> values_;  // value, source
};

/// Registers the flags on a CLI11 (sub)command and resolves them after parsing.
class SettingsLoader {
 public:
  explicit SettingsLoader(CLI::App& command);
  /// Call after CLI parsing. Throws std::runtime_error for an unreadable or invalid TOML file or an
  /// unknown key in it (a typo must not silently fall back to a default), and SettingsError for a
  /// value its declaration refuses, whatever its source.
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
