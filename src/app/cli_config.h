// The command line's own configuration: $XDG_CONFIG_HOME/sluice/cli.toml (else
// ~/.config/sluice/cli.toml), which names the server `sluice paste` talks to when neither
// --server nor SLUICE_SERVER does:
//
//     server = "https://paste.example"
#pragma once

#include <optional>
#include <string>

#include "sluice/common/result.h"

namespace sluice::app {

/// The file's path (whether or not it exists).
std::string CliConfigPath();

/// Its `server`, or nothing when there is no file or no such key; InvalidArgument for a file
/// that does not parse or whose `server` is not a string.
Result<std::optional<std::string>> ConfiguredServer();

}  // namespace sluice::app
