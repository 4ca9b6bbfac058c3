#include "cli_output.h"

#include <cstdio>
#include <limits>

#include "sluice/service/text.h"

namespace sluice::app {

std::string ForTerminal(std::string_view text, size_t max_bytes) {
  return service::QuotedClientText(text, max_bytes);
}

std::string JsonForTerminal(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (size_t start = 0; start <= json.size();) {
    const size_t end = std::min(json.find('\n', start), json.size());
    out += service::QuotedClientText(json.substr(start, end - start),
                                     std::numeric_limits<size_t>::max() - 3);
    if (end == json.size()) break;
    out += '\n';
    start = end + 1;
  }
  return out;
}

void Tell(std::string_view command, std::string_view message) {
  std::string line(command);
  line += ": ";
  line += ForTerminal(message);
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace sluice::app
