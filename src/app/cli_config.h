// The command line's own configuration: $XDG_CONFIG_HOME/sluice/cli.toml (else
// ~/.config/sluice/cli.toml), which names the server `sluice paste` talks to when neither
// --server nor SLUICE_SERVER does, and the creator token it sends there when neither --token nor
// SLUICE_TOKEN gives one (docs/admission.md, "Creator tokens"):
//
//     server = "https://paste.example"
//     token = "slt_..."
//
// The file's token goes only to the file's server: a --server naming another one gets no token
// from here, so a link or a flag cannot make the CLI hand it elsewhere.
#pragma once

#include <optional>
#include <string>

#include "sluice/common/result.h"

namespace sluice::app {

/// The file's path (whether or not it exists).
std::string CliConfigPath();

struct CliConfig {
  std::optional<std::string> server;
  std::optional<std::string> token;
};

/// Its keys, each nothing when there is no file or no such key; InvalidArgument for a file that
/// does not parse or whose `server` or `token` is not a string.
Result<CliConfig> ReadCliConfig();

}  // namespace sluice::app
