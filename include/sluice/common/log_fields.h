// Fields of one structured log line (the access log), shared by the code that writes the line
// (src/http/access_log.cc) and the JSON formatter that prints it (src/app/log_format.cc).
#pragma once

#include <atomic>
#include <span>
#include <string>
#include <string_view>

namespace sluice {

struct LogField {
  std::string_view key;
  std::string value;
  /// Printed bare in JSON (a number); otherwise a string.
  bool number = false;
};

/// log_format = "json": set once at start, before any loop runs.
inline std::atomic<bool> g_json_logs{false};

/// The fields of the line being logged on this thread. spdlog's default logger is synchronous, so
/// its formatter runs inside the call that set them, on the same thread.
inline thread_local std::span<const LogField> t_log_fields;

}  // namespace sluice
