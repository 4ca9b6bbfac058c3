// The command sink: `/bin/sh -c COMMAND` with a delivery's JSON on standard input, for operators
// who pipe events into sendmail or a script of their own. The command runs in a process of its
// own, so nothing it does can take the server down; it is killed at the timeout or a stop.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "sluice/common/spawn_attributes.h"
#include "sluice/notify/push.h"

extern char** environ;

namespace sluice::notify {
namespace {

Status CommandFailed(std::string why) {
  return MakeError(ErrorCode::kUnavailable, "push_command: " + std::move(why), "push_command");
}

// Closes a descriptor when the delivery ends, however it ends.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  void Close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

class Command final : public Transport {
 public:
  Command(std::string command, Duration timeout)
      : command_(std::move(command)), timeout_(timeout) {}

  std::string_view name() const override { return "command"; }

  Status Deliver(const std::string& body, std::string_view kind,
                 const std::atomic<bool>& stop) override {
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return CommandFailed(std::strerror(errno));
    Fd read_end{pipe_fds[0]}, write_end{pipe_fds[1]};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, read_end.fd, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    // Asio opens sockets without close-on-exec (src/render/highlight_workers.cc says the same):
    // a command must not hold a copy of a client connection or a listening socket.
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    // A group of its own: a shell that started children (a pipeline, a sendmail that forks) is
    // killed with them at the timeout. Killing the shell alone left a child holding the server's
    // stderr open, and alive, for as long as it liked.
    CleanSpawnAttributes attributes;
    attributes.InNewProcessGroup();
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string_view(*e).starts_with("SLUICE_EVENT=")) continue;
      env.emplace_back(*e);
    }
    env.push_back(fmt::format("SLUICE_EVENT={}", kind));
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string shell = "/bin/sh", dash_c = "-c", command = command_;
    char* argv[] = {shell.data(), dash_c.data(), command.data(), nullptr};
    pid_t pid = -1;
    const int spawned =
        ::posix_spawn(&pid, "/bin/sh", &actions, attributes.get(), argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) return CommandFailed(fmt::format("cannot start: {}", std::strerror(spawned)));
    read_end.Close();
    // glibc 2.36 declares pidfd_open outside extern "C" (Debian 12): the system call itself.
    Fd process{static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))};
    if (process.fd < 0) {
      const int error = errno;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return CommandFailed(fmt::format("pidfd_open: {}", std::strerror(error)));
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    Status result = Feed(write_end.fd, body, deadline, stop);
    write_end.Close();
    if (result.ok()) result = AwaitExit(process.fd, deadline, stop);
    if (!result.ok()) ::kill(-pid, SIGKILL);
    int wstatus = 0;
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    if (!result.ok()) return result;
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
      return CommandFailed(WIFEXITED(wstatus)
                               ? fmt::format("exited with {}", WEXITSTATUS(wstatus))
                               : fmt::format("killed by signal {}", WTERMSIG(wstatus)));
    }
    return Ok();
  }

 private:
  using Deadline = std::chrono::steady_clock::time_point;

  // Waits in slices of at most 100 ms, so a stop is seen soon.
  static int SliceMs(Deadline deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 100));
  }

  static Status Feed(int fd, const std::string& body, Deadline deadline,
                     const std::atomic<bool>& stop) {
    // A command that exits without reading would raise SIGPIPE on this thread, and the signal's
    // default ends the whole server: blocked here, the write fails with EPIPE instead.
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    size_t written = 0;
    while (written < body.size()) {
      if (stop.load()) return CommandFailed("stopped");
      if (std::chrono::steady_clock::now() >= deadline) return CommandFailed("timed out");
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, SliceMs(deadline)) <= 0) continue;
      const ssize_t n = ::write(fd, body.data() + written, body.size() - written);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      // A command that does not read its input (EPIPE) still gets to run; its exit decides.
      if (n < 0 && errno == EPIPE) {
        const timespec now{0, 0};
        ::sigtimedwait(&pipe_signal, nullptr, &now);  // the pending SIGPIPE, consumed
        return Ok();
      }
      if (n < 0) return CommandFailed(std::strerror(errno));
      written += static_cast<size_t>(n);
    }
    return Ok();
  }

  static Status AwaitExit(int pidfd, Deadline deadline, const std::atomic<bool>& stop) {
    while (true) {
      if (stop.load()) return CommandFailed("stopped");
      if (std::chrono::steady_clock::now() >= deadline) return CommandFailed("timed out");
      pollfd p{pidfd, POLLIN, 0};
      if (::poll(&p, 1, SliceMs(deadline)) > 0) return Ok();
    }
  }

  const std::string command_;
  const Duration timeout_;
};

}  // namespace

std::unique_ptr<Transport> MakeCommand(std::string command, Duration timeout) {
  return std::make_unique<Command>(std::move(command), timeout);
}

}  // namespace sluice::notify
