// The reference an installed sluice ships, generated from the declarations `--help` prints, so the
// two cannot drift: the man page sluice.1 (`sluice man`) and the commented configuration file
// /etc/sluice/sluice.toml (`sluice config --example`). CMakeLists.txt runs both at build time;
// debian/ and `make install` install what they print.
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

}  // namespace sluice::app
