#include "log_format.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>

#include "sluice/common/log_fields.h"

namespace sluice::app {

namespace {

void AppendJsonString(std::string_view text, spdlog::memory_buf_t& out) {
  out.push_back('"');
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out.append(std::string_view("\\\""));
        break;
      case '\\':
        out.append(std::string_view("\\\\"));
        break;
      case '\n':
        out.append(std::string_view("\\n"));
        break;
      case '\r':
        out.append(std::string_view("\\r"));
        break;
      case '\t':
        out.append(std::string_view("\\t"));
        break;
      default:
        // Control bytes escaped; other bytes as they are (messages are ours, and a client's
        // bytes reach them only through fields that are checked, such as the request id).
        if (u < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", u);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto since_epoch = msg.time.time_since_epoch();
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
    const auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(since_epoch - seconds).count();
    const std::time_t t = seconds.count();
    std::tm utc{};
    gmtime_r(&t, &utc);  // gmtime is not thread-safe; gmtime_r is
    fmt::format_to(std::back_inserter(dest), R"({{"time":"{:%Y-%m-%dT%H:%M:%S}.{:06}Z","level":)",
                   utc, micros);
    const auto level = spdlog::level::to_string_view(msg.level);
    AppendJsonString(std::string_view(level.data(), level.size()), dest);
    dest.append(std::string_view(R"(,"message":)"));
    AppendJsonString(std::string_view(msg.payload.data(), msg.payload.size()), dest);
    for (const LogField& field : t_log_fields) {
      dest.push_back(',');
      AppendJsonString(field.key, dest);
      dest.push_back(':');
      if (field.number) {
        dest.append(field.value);
      } else {
        AppendJsonString(field.value, dest);
      }
    }
    dest.append(std::string_view("}\n"));
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

void SetLogFormat(std::string_view format) {
  if (format != "json") return;
  g_json_logs.store(true);
  spdlog::set_formatter(std::make_unique<JsonFormatter>());
}

}  // namespace sluice::app
