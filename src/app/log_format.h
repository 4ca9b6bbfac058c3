// log_format: spdlog's text lines, or one JSON object per line for a log shipper.
#pragma once

#include <string_view>

namespace sluice::app {

/// "text" keeps spdlog's pattern; "json" prints {"time","level","message", fields...} per line.
void SetLogFormat(std::string_view format);

}  // namespace sluice::app
