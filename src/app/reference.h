// The reference an installed sluice ships, generated from the declarations `--help` prints, so the
// two cannot drift: the man page sluice.1 (`sluice man`), the commented configuration file
// /etc/sluice/sluice.toml (`sluice config --example`) and docs/configuration.md (`sluice config
// --markdown`). CMakeLists.txt runs the first two at build time; debian/ and `make install` install
// what they print; tests/docs/test_configuration_doc.py fails when docs/configuration.md is stale.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

namespace sluice::app {

/// sluice.1 in roff (man(7)): every command of `app` with its options as CLI11 declares them, and
/// every setting of `sluice serve` (src/app/settings.cc) with its flag, variable, TOML key,
/// default and allowed values. No date: the same binary prints the same page.
std::string ManPage(const CLI::App& app, std::string_view version);

/// Shell completion for `shell` ("bash" or "zsh"; anything else: empty) of every command of `app`
/// and its flags, from the same declarations as ManPage; a zsh gets the bash function through
/// bashcompinit, so the two shells complete alike.
std::string Completions(const CLI::App& app, std::string_view shell);

/// A TOML file with every setting of `sluice serve` commented out at its default, each under its
/// help, its allowed values, its flag and its variable. Removing a `#` before a key sets it.
std::string ExampleConfig(std::string_view version);

/// docs/configuration.md: how settings are given and checked, then every setting of `sluice serve`
/// with its help, default, allowed values, flag, variable and whether a reload applies it. No
/// version or date in it, so the committed file changes only when a declaration does.
std::string ConfigurationMarkdown();

}  // namespace sluice::app
