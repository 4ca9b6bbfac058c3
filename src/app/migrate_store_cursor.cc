#include "migrate_store_cursor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace sluice::app::migrate {

std::optional<Cursor> LoadCursor(const std::string& path, const std::string& from) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw std::runtime_error(path + ": not a migrate-store state file; remove it to start over");
  if (j.value("from", "") != from) {
    throw std::runtime_error(
        fmt::format("{}: the state of a copy from {}, not {}; remove it to "
                    "start over",
                    path, j.value("from", "?"), from));
  }
  Cursor c;
  if (auto after = j.value("after", ""); !after.empty()) {
    c.after = store::PasteId::Parse(after);
    if (!c.after) throw std::runtime_error(path + ": its cursor is not a paste id");
  }
  c.moved = j.value("moved", uint64_t{0});
  c.bytes = j.value("bytes", uint64_t{0});
  c.done = j.value("done", false);
  return c;
}

void SaveCursor(const std::string& path, const std::string& from, const Cursor& c) {
  const nlohmann::json j = {{"from", from},
                            {"after", c.after ? c.after->str() : ""},
                            {"moved", c.moved},
                            {"bytes", c.bytes},
                            {"done", c.done}};
  const std::string text = j.dump() + "\n";
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(temp + ": cannot write the state file");
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  ::close(fd);
  if (!written || std::rename(temp.c_str(), path.c_str()) != 0)
    throw std::runtime_error(path + ": cannot write the state file");
}

}  // namespace sluice::app::migrate
