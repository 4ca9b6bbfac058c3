// What a configuration reload (SIGHUP, docs/operations.md, "Reload") may change in a running
// server, and what it needs a restart for. The split is by key, from the settings' declarations
// (src/app/settings.cc): a key is live when every part that reads it takes its value per request
// from a snapshot a reload replaces (docs/architecture.md, "Reload").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "settings.h"

namespace sluice::app {

/// True when a reload applies `key` to new requests; false when it takes a restart.
bool IsLiveSetting(std::string_view key);

/// The keys a reload would change, split by whether they apply now.
struct ReloadChanges {
  std::vector<std::string> live;
  std::vector<std::string> restart;
};
/// `running`: what the server was built with (the restart-only keys keep these values);
/// `applied`: what the last reload applied (the live keys); `next`: the file read again.
ReloadChanges CompareForReload(const Settings& running, const Settings& applied,
                               const Settings& next);

}  // namespace sluice::app
