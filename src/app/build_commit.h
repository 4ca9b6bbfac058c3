#pragma once

namespace sluice::app {

/// The commit this binary was built from (`git describe --always --dirty`, tags left out), or
/// "unknown" for a tree without git; written at each build by tools/build_commit.cmake. `sluice
/// --version` and sluice_build_info show it, so an operator can tell which build each process of a
/// fleet runs.
extern const char* const kBuildCommit;

}  // namespace sluice::app
