// Reading the settings declared in settings.cc: each value parsed and checked against its
// declaration, the rules between settings, and the one merge of flags, SLUICE_* variables, the
// TOML file and the defaults (SettingsLoader).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/un.h>

#include "settings.h"
// toml++ 3.3.0's parse_key() asserts a precondition its table-header parser does not ensure: a
// config file holding `[=;` aborts a build with assertions on (fuzz/replay_main.cc found it in the
// asan preset), while the same parser without them reports "expected bare key starting character".
// Release builds compile its assertions out already (and g++ has no __builtin_assume to make them
// assumptions), so every build now parses as the shipped one does.
#define TOML_ASSERT(expr) static_assert(true)
#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "sluice/admission/client_key.h"
#include "sluice/common/duration.h"
#include "sluice/service/text.h"

namespace sluice::app {

namespace {

std::string Dashed(std::string_view key) {
  std::string s(key);
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

std::string EnvName(std::string_view key) {
  std::string s = "SLUICE_";
  for (char c : key) s += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

const SettingSpec* FindSpec(std::string_view key) {
  for (const SettingSpec& spec : ServeSettings()) {
    if (key == spec.key) return &spec;
  }
  return nullptr;
}

std::optional<double> ParseNumber(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<int64_t> ParseInteger(std::string_view text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// An empty value is false: an unset boolean in a file or the environment reads as off.
std::optional<bool> ParseBoolean(std::string_view text) {
  if (text == "true" || text == "1" || text == "yes") return true;
  if (text == "false" || text == "0" || text == "no" || text.empty()) return false;
  return std::nullopt;
}

// "a, b ,c" -> {"a", "b", "c"} around `separator`, spaces trimmed, empty entries kept.
std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> entries;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view entry = text.substr(start, end - start);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    entries.push_back(entry);
    start = end + 1;
  }
  return entries;
}

// "between 1ms and 1h", "above 0 and at most 1", "one of static, aimd": what a spec allows.
std::string Allowed(const SettingSpec& spec) {
  switch (spec.type) {
    case SettingType::kInteger:
    case SettingType::kNumber:
    case SettingType::kDuration:
      if (spec.min_exclusive) return fmt::format("above {} and at most {}", spec.min, spec.max);
      return fmt::format("between {} and {}", spec.min, spec.max);
    case SettingType::kChoice:
      return fmt::format("one of {}", fmt::join(Split(spec.choices, '|'), ", "));
    case SettingType::kBoolean:
      return "true or false";
    case SettingType::kText:
    case SettingType::kList:
      return "text";
  }
  return "text";
}

// A rule between settings, checked once every value has passed its own declaration.
struct SettingRule {
  std::optional<std::string> (*check)(const Settings& s);
};

std::string Quoted(const Settings& s, const char* key) {
  return fmt::format("{} = '{}'", key, s.String(key));
}

constexpr SettingRule kServeRules[] = {
    {[](const Settings& s) -> std::optional<std::string> {
      if (service::ParseTtl(s.String("default_ttl")) <= service::ParseTtl(s.String("max_ttl"))) {
        return std::nullopt;
      }
      return fmt::format("{} is longer than {}", Quoted(s, "default_ttl"), Quoted(s, "max_ttl"));
    }},
    {[](const Settings& s) -> std::optional<std::string> {
      if (s.Integer("retry_after_min") <= s.Integer("retry_after_max")) return std::nullopt;
      return fmt::format("{} is above {}", Quoted(s, "retry_after_min"),
                         Quoted(s, "retry_after_max"));
    }},
    // Pressure is linear from pressure_start to pressure_full (docs/overload.md, "Pressure").
    {[](const Settings& s) -> std::optional<std::string> {
      if (s.Number("pressure_start") <= s.Number("pressure_full")) return std::nullopt;
      return fmt::format("{} is above {}", Quoted(s, "pressure_start"), Quoted(s, "pressure_full"));
    }},
    // The delay shrinks the highlighter on purpose; only a test server may do that.
    {[](const Settings& s) -> std::optional<std::string> {
      if (s.Duration("render_delay") == ::sluice::Duration::zero() ||
          s.Boolean("fault_injection")) {
        return std::nullopt;
      }
      return fmt::format("{} needs fault_injection = 'true'", Quoted(s, "render_delay"));
    }},
    {[](const Settings& s) -> std::optional<std::string> {
      if (s.String("faults").empty() || s.Boolean("fault_injection")) return std::nullopt;
      return fmt::format("{} needs fault_injection = 'true'", Quoted(s, "faults"));
    }},
    {[](const Settings& s) -> std::optional<std::string> {
      if (s.String("s3_endpoint").empty() || s.String("blob").starts_with("s3://")) {
        return std::nullopt;
      }
      return fmt::format("{} is set but {} is not s3://BUCKET", Quoted(s, "s3_endpoint"),
                         Quoted(s, "blob"));
    }},
};

// Every value against its declaration, then the rules between them; the first refusal stops the
// start, naming the key, the value, what is allowed and where the value came from.
void CheckSettings(const Settings& settings) {
  for (const SettingSpec& spec : ServeSettings()) {
    const std::string value = settings.String(spec.key);
    if (auto refused = CheckValue(spec, value)) {
      throw SettingsError(fmt::format("{} = '{}': {} (from {})", spec.key, value, *refused,
                                      settings.Source(spec.key)));
    }
  }
  for (const SettingRule& rule : kServeRules) {
    if (auto refused = rule.check(settings)) throw SettingsError(*refused);
  }
}

}  // namespace

std::string AllowedValues(const SettingSpec& spec) { return Allowed(spec); }
std::string FlagName(const SettingSpec& spec) { return "--" + Dashed(spec.key); }
std::string EnvName(const SettingSpec& spec) { return EnvName(std::string_view(spec.key)); }

std::optional<std::string> CheckValue(const SettingSpec& spec, std::string_view value) {
  switch (spec.type) {
    case SettingType::kText:
      if (spec.check) return spec.check(value);
      return std::nullopt;
    case SettingType::kList:
      for (std::string_view entry : Split(value, ',')) {
        if (!entry.empty() && spec.check) {
          if (auto refused = spec.check(entry)) return *refused;
        }
      }
      return std::nullopt;
    case SettingType::kChoice: {
      const auto choices = Split(spec.choices, '|');
      if (std::find(choices.begin(), choices.end(), value) != choices.end()) return std::nullopt;
      return "must be " + Allowed(spec);
    }
    case SettingType::kBoolean:
      if (ParseBoolean(value)) return std::nullopt;
      return "must be " + Allowed(spec);
    case SettingType::kInteger: {
      const auto n = ParseInteger(value);
      if (n && *n >= *ParseInteger(spec.min) && *n <= *ParseInteger(spec.max)) return std::nullopt;
      return fmt::format("must be a whole number {}", Allowed(spec));
    }
    case SettingType::kNumber: {
      const auto x = ParseNumber(value);
      const double min = *ParseNumber(spec.min);
      // Written so that NaN, which from_chars accepts, fails every comparison and is refused.
      if (x && (spec.min_exclusive ? *x > min : *x >= min) && *x <= *ParseNumber(spec.max)) {
        return std::nullopt;
      }
      return fmt::format("must be a number {}", Allowed(spec));
    }
    case SettingType::kDuration: {
      const auto d = ParseDuration(value);
      if (!d.ok()) {
        return fmt::format("must be a number and a unit (ns, us, ms, s, m, h) {}", Allowed(spec));
      }
      if (*d >= *ParseDuration(spec.min) && *d <= *ParseDuration(spec.max)) return std::nullopt;
      return fmt::format("must be {}", Allowed(spec));
    }
  }
  return "has an undeclared type";
}

std::string Settings::String(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw std::logic_error(fmt::format("setting {} is not declared", key));
  return it->second.first;
}

int64_t Settings::Integer(std::string_view key) const {
  const std::string text = String(key);
  const auto value = ParseInteger(text);
  if (!value || *value < 0) {
    throw std::invalid_argument(fmt::format("{}: '{}' is not a non-negative integer", key, text));
  }
  return *value;
}

double Settings::Number(std::string_view key) const {
  const std::string text = String(key);
  const auto value = ParseNumber(text);
  if (!value || !(*value >= 0)) {
    throw std::invalid_argument(fmt::format("{}: '{}' is not a non-negative number", key, text));
  }
  return *value;
}

bool Settings::Boolean(std::string_view key) const {
  const std::string text = String(key);
  const auto value = ParseBoolean(text);
  if (!value) throw std::invalid_argument(fmt::format("{}: '{}' is not true or false", key, text));
  return *value;
}

::sluice::Duration Settings::Duration(std::string_view key) const {
  const std::string text = String(key);
  auto d = ParseDuration(text);
  if (!d.ok()) {
    throw std::invalid_argument(
        fmt::format("{}: '{}' is not a duration like 500us, 250ms, 1.5s, 1h", key, text));
  }
  return *d;
}

std::string Settings::Source(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw std::logic_error(fmt::format("setting {} is not declared", key));
  return it->second.second;
}

// "scheme://user:password@host" as "scheme://user:***@host": a password in a URL setting (the
// cache's rediss://, a database's) must not reach the log.
static std::string WithoutPassword(const std::string& value) {
  const size_t scheme = value.find("://");
  if (scheme == std::string::npos) return value;
  const size_t at = value.rfind('@');
  if (at == std::string::npos || at < scheme) return value;
  const size_t colon = value.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return value;
  return value.substr(0, colon + 1) + "***" + value.substr(at);
}

std::string Settings::Describe() const {
  std::string out;
  for (const auto& [key, value] : values_) {
    if (value.second != "default")
      out += fmt::format(" {}={} ({})", key, WithoutPassword(value.first), value.second);
  }
  return out.empty() ? " all defaults" : out;
}

std::vector<std::string> Settings::ChangedFrom(const Settings& other) const {
  std::vector<std::string> changed;
  for (const auto& [key, value] : values_) {
    auto it = other.values_.find(key);
    if (it == other.values_.end() || it->second.first != value.first) changed.push_back(key);
  }
  return changed;
}

SettingsLoader::SettingsLoader(CLI::App& command) {
  config_option_ =
      command.add_option("--config", config_path_, "TOML file with any of the keys below")
          ->envname("SLUICE_CONFIG");
  for (const SettingSpec& spec : ServeSettings()) {
    auto slot = std::make_unique<std::string>();
    // Numeric settings show their range; the help of the others already says what they take.
    const bool ranged = spec.type == SettingType::kInteger || spec.type == SettingType::kNumber ||
                        spec.type == SettingType::kDuration;
    const std::string help =
        ranged ? fmt::format("{} ({})", spec.help, Allowed(spec)) : std::string(spec.help);
    CLI::Option* opt = command.add_option("--" + Dashed(spec.key), *slot, help)
                           ->envname(EnvName(spec.key))
                           ->default_str(spec.default_value)
                           ->group("Settings (flag, SLUICE_* variable or TOML key)");
    options_[spec.key] = opt;
    flag_values_[spec.key] = std::move(slot);
  }
}

namespace {

toml::table ParseConfig(std::string_view text, std::string_view origin) {
  // toml++ 3.3.0 (Debian 12) reaches __builtin_unreachable on many non-ASCII characters where it
  // looks for whitespace (found by config_fuzz: "crecre\u0280t "), which is undefined behaviour in
  // a release build. No setting needs more than ASCII, so such a file is refused instead.
  for (size_t i = 0; i < text.size(); ++i) {
    if (static_cast<unsigned char>(text[i]) >= 0x80) {
      const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + i, '\n'));
      throw std::runtime_error(fmt::format(
          "config file {}: line {}: only ASCII is accepted in a config file", origin, line));
    }
  }
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    throw std::runtime_error(fmt::format("config file {}: {}", origin, e.description()));
  }
}

// The one merge of every source: a flag or SLUICE_* variable (when `flag` has one), else the TOML
// table, else the default. `origin` names the file in errors.
void MergeSettings(
    const toml::table& file, std::string_view origin,
    const std::function<std::optional<std::string>(const SettingSpec&)>& flag,
    std::map<std::string, std::pair<std::string, std::string>, std::less<>>& values) {
  for (const auto& [key, node] : file) {
    if (!FindSpec(key.str())) {
      throw std::runtime_error(fmt::format("config file {}: unknown key '{}'", origin, key.str()));
    }
  }
  for (const SettingSpec& spec : ServeSettings()) {
    std::pair<std::string, std::string> resolved{spec.default_value, "default"};
    if (auto from_flag = flag(spec)) {
      resolved = {*from_flag, "flag/env"};
    } else if (const toml::node* node = file.get(spec.key)) {
      // A boolean first: toml++'s value<int64_t>() also converts one, to 1 or 0.
      if (const auto* b = node->as_boolean())
        resolved = {b->get() ? "true" : "false", "config file"};
      else if (auto s = node->value<std::string>())
        resolved = {*s, "config file"};
      else if (auto i = node->value<int64_t>())
        resolved = {std::to_string(*i), "config file"};
      else if (auto d = node->value<double>())
        resolved = {fmt::format("{}", *d), "config file"};
      else
        throw std::runtime_error(
            fmt::format("config file {}: '{}' must be a string or a number", origin, spec.key));
    }
    values[spec.key] = std::move(resolved);
  }
}

}  // namespace

Settings SettingsLoader::Resolve() const {
  toml::table file;
  if (!config_path_.empty()) {
    std::ifstream in(config_path_, std::ios::binary);
    if (!in) throw std::runtime_error(fmt::format("config file {}: cannot read it", config_path_));
    std::ostringstream text;
    text << in.rdbuf();
    file = ParseConfig(text.str(), config_path_);
  }
  Settings settings;
  MergeSettings(
      file, config_path_,
      [this](const SettingSpec& spec) -> std::optional<std::string> {
        if (options_.at(spec.key)->count() == 0) return std::nullopt;
        return *flag_values_.at(spec.key);
      },
      settings.values_);
  CheckSettings(settings);
  return settings;
}

std::vector<std::string> SettingsLoader::Keys() {
  std::vector<std::string> keys;
  for (const SettingSpec& spec : ServeSettings()) keys.emplace_back(spec.key);
  return keys;
}

Settings SettingsLoader::FromToml(std::string_view toml_text) {
  const toml::table file = ParseConfig(toml_text, "config");
  Settings settings;
  MergeSettings(
      file, "config", [](const SettingSpec&) { return std::optional<std::string>(); },
      settings.values_);
  CheckSettings(settings);
  return settings;
}

}  // namespace sluice::app
