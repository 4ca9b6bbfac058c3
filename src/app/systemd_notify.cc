#include "systemd_notify.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

namespace sluice::app::systemd {
namespace {

// sd_notify reads NOTIFY_SOCKET with getenv and is not documented as thread-safe; the calls are
// rare (start, reload, stop) and may come from any event-loop thread, so they take turns.
std::mutex notify_mu;

void Send(std::string message, std::string_view status) {
  if (!status.empty()) {
    // One line: a newline would start another assignment that systemd would act on.
    std::string line(status);
    for (char& c : line) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    if (!message.empty()) message += '\n';
    message += "STATUS=" + line;
  }
  int rc = 0;
  {
    std::lock_guard lock(notify_mu);
    // 0 = keep NOTIFY_SOCKET in the environment: the reload and the stop notify later too.
    rc = sd_notify(0, message.c_str());
  }
  // 0 is "NOTIFY_SOCKET is unset": not under systemd, nothing to tell.
  if (rc < 0) {
    spdlog::warn("sd_notify({}): {}", message.substr(0, message.find('\n')), std::strerror(-rc));
  }
}

}  // namespace

void NotifyReady(std::string_view status) { Send("READY=1", status); }

void NotifyStopping(std::string_view status) { Send("STOPPING=1", status); }

void NotifyReloading(std::string_view status) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const long long usec = static_cast<long long>(now.tv_sec) * 1000000LL + now.tv_nsec / 1000;
  Send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec), status);
}

void NotifyReloaded(std::string_view status) { Send("READY=1", status); }

void NotifyStatus(std::string_view status) {
  if (status.empty()) return;
  Send("", status);
}

}  // namespace sluice::app::systemd
