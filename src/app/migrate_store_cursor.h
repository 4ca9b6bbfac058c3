#pragma once
// Where a `sluice admin migrate-store` copy resumes (docs/scale-out.md, "Outgrowing one box").

#include <cstdint>
#include <optional>
#include <string>

#include "sluice/store/paste.h"

namespace sluice::app::migrate {

/// The cursor of a copy, saved after each page: the last source id whose paste is wholly on the
/// target.
struct Cursor {
  std::optional<store::PasteId> after;
  uint64_t moved = 0;
  uint64_t bytes = 0;
  bool done = false;
};

/// The cursor saved at `path` by a copy from `from`; none when there is no file. Throws
/// std::runtime_error naming the file when it is not a state file or is another copy's.
std::optional<Cursor> LoadCursor(const std::string& path, const std::string& from);
/// Written to a temporary file, flushed and renamed, so a kill -9 leaves the old cursor or the
/// new one, never half of one. Throws std::runtime_error when it cannot be written.
void SaveCursor(const std::string& path, const std::string& from, const Cursor& c);

}  // namespace sluice::app::migrate
