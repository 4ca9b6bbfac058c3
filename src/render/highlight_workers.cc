#include "sluice/render/highlight_workers.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <stdexcept>

#include "sluice/common/spawn_attributes.h"
#include "sluice/common/thread_name.h"
#include "sluice/render/diff.h"
#include "sluice/render/highlighter.h"
#include "sluice/render/markdown.h"

extern char** environ;

namespace sluice::render {
namespace {

// The worker's end of the socketpair is always this descriptor.
constexpr int kWorkerFd = 3;

// Request: u32 language length, u32 text length, language, text.
// Answer: u8 status (kOk: the fragment follows; kRefused: the library's message follows), u32
// length, payload. Lengths are little-endian as the machine writes them: both ends are one binary.
constexpr uint8_t kOk = 0;
constexpr uint8_t kRefused = 1;
// A paste is far below this; a length above it is a broken peer, not a big paste.
constexpr uint32_t kMaxFrame = uint32_t{1} << 30;

using SteadyTime = std::chrono::steady_clock::time_point;

void PutU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }

uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

int MillisLeft(SteadyTime deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  // Rounded up, so a poll never returns a hair before the deadline and spins.
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30));
}

enum class IoEnd { kDone, kDeadline, kClosed };

// The parent's descriptor is non-blocking: every wait is a poll bounded by the render's deadline.
IoEnd WriteAll(int fd, std::string_view data, SteadyTime deadline) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return IoEnd::kClosed;
    pollfd p{fd, POLLOUT, 0};
    int wait = MillisLeft(deadline);
    if (wait == 0) return IoEnd::kDeadline;
    if (::poll(&p, 1, wait) == 0) return IoEnd::kDeadline;
  }
  return IoEnd::kDone;
}

IoEnd ReadExactly(int fd, char* out, size_t size, SteadyTime deadline) {
  while (size > 0) {
    ssize_t n = ::recv(fd, out, size, 0);
    if (n > 0) {
      out += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return IoEnd::kClosed;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return IoEnd::kClosed;
    pollfd p{fd, POLLIN, 0};
    int wait = MillisLeft(deadline);
    if (wait == 0) return IoEnd::kDeadline;
    if (::poll(&p, 1, wait) == 0) return IoEnd::kDeadline;
  }
  return IoEnd::kDone;
}

// The worker's descriptor blocks: it has nothing else to do.
bool BlockingRead(int fd, char* out, size_t size) {
  while (size > 0) {
    ssize_t n = ::read(fd, out, size);
    if (n > 0) {
      out += n;
      size -= static_cast<size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      return false;
    }
  }
  return true;
}

bool BlockingWrite(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno != EINTR) {
      return false;
    }
  }
  return true;
}

std::string DescribeEnd(int status) {
  // sigabbrev_np, unlike strsignal, uses no shared buffer.
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return std::string("killed by SIG") + (name != nullptr ? name : "?");
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended";
}

// What a worker does with one request: highlight in a language, or one of the other renders
// that share its bounds (kMarkdownJob, kDiffJob: highlight_workers.h).
Result<std::string> RunJob(const std::string& text, const std::string& job) {
  if (job == kMarkdownJob) return RenderMarkdown(text);
  if (job == kDiffJob) {
    std::string_view parent, child, parent_name, child_name;
    if (!DecodeDiffJob(text, parent, child, parent_name, child_name)) {
      return MakeError(ErrorCode::kInternal, "malformed diff job", "render_failed");
    }
    const std::string diff = UnifiedDiff(parent, child, parent_name, child_name);
    if (diff.empty()) return std::string();
    return Highlight(diff, "diff");
  }
  return Highlight(text, job);
}

Error RenderFailed(std::string message) {
  return MakeError(ErrorCode::kInternal, std::move(message), "render_failed");
}

}  // namespace

HighlightWorkers::HighlightWorkers(HighlightWorkersOptions options, MetricsRegistry& metrics)
    : options_(std::move(options)),
      started_(metrics.GetCounter("sluice_highlight_workers_started_total",
                                  "Highlighter worker processes started")),
      ended_at_deadline_(metrics.GetCounter("sluice_highlight_worker_ends_total",
                                            "Highlighter workers ended while rendering, by cause",
                                            {{"cause", "deadline"}})),
      ended_failed_(metrics.GetCounter("sluice_highlight_worker_ends_total",
                                       "Highlighter workers ended while rendering, by cause",
                                       {{"cause", "failed"}})),
      workers_(static_cast<size_t>(std::max(1, options_.workers))) {
  if (options_.command.empty()) throw std::invalid_argument("highlight worker command is empty");
  spawner_ = std::thread([this] {
    NameThisThread("hl-spawner");
    SpawnerLoop();
  });
}

HighlightWorkers::~HighlightWorkers() {
  Shutdown();
  {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [this] {
      for (const Worker& w : workers_) {
        if (w.busy) return false;
      }
      return true;
    });
  }
  {
    std::lock_guard lock(spawn_mu_);
    spawner_stop_ = true;
  }
  spawn_cv_.notify_all();
  spawner_.join();
}

void HighlightWorkers::SpawnerLoop() {
  std::unique_lock lock(spawn_mu_);
  while (true) {
    spawn_cv_.wait(lock, [this] { return spawner_stop_ || !spawn_queue_.empty(); });
    if (spawn_queue_.empty()) return;
    auto job = std::move(spawn_queue_.front());
    spawn_queue_.erase(spawn_queue_.begin());
    lock.unlock();
    job();
    lock.lock();
  }
}

HighlightWorkers::Worker* HighlightWorkers::Take() {
  std::unique_lock lock(mu_);
  while (true) {
    if (shutting_down_) return nullptr;
    for (Worker& w : workers_) {
      if (!w.busy) {
        w.busy = true;
        return &w;
      }
    }
    idle_.wait(lock);
  }
}

void HighlightWorkers::Give(Worker* worker) {
  bool stopping;
  {
    std::lock_guard lock(mu_);
    stopping = shutting_down_;
  }
  // Shutdown() left busy workers to their callers: this one is ended before it counts as idle,
  // so the destructor, which waits for idle, never frees a worker that is still being ended.
  if (stopping) End(*worker);
  {
    std::lock_guard lock(mu_);
    worker->busy = false;
  }
  idle_.notify_all();
}

Result<void> HighlightWorkers::Spawn(Worker& worker) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return RenderFailed(std::string("socketpair: ") + std::strerror(errno));
  }
  // dup2 onto the same number would leave close-on-exec set, so the child end must not be 3.
  if (sv[1] == kWorkerFd) {
    int moved = ::fcntl(sv[1], F_DUPFD_CLOEXEC, kWorkerFd + 1);
    ::close(sv[1]);
    sv[1] = moved;
  }
  std::vector<std::string> args = options_.command;
  args.push_back("--parent=" + std::to_string(::getpid()));
  args.push_back("--memory-limit=" + std::to_string(options_.memory_limit_bytes));
  args.push_back("--cpu-limit=" + std::to_string(options_.cpu_limit_seconds));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  auto start = [&]() -> std::pair<int, pid_t> {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, sv[1], kWorkerFd);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    // Asio opens sockets without close-on-exec: a worker holding a copy of a client connection
    // would keep it open after the server closed it, so nothing past the worker's own is passed.
    posix_spawn_file_actions_addclosefrom_np(&actions, kWorkerFd + 1);
    const CleanSpawnAttributes attributes;
    pid_t pid = -1;
    int rc = ::posix_spawn(&pid, argv[0], &actions, attributes.get(), argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    return {rc, pid};
  };
  std::packaged_task<std::pair<int, pid_t>()> task(start);
  auto started = task.get_future();
  {
    std::lock_guard lock(spawn_mu_);
    spawn_queue_.push_back([&task] { task(); });
  }
  spawn_cv_.notify_one();
  auto [rc, pid] = started.get();
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    ended_failed_.Inc();
    return RenderFailed(std::string("cannot start a highlight worker: ") + std::strerror(rc));
  }
  ::fcntl(sv[0], F_SETFL, ::fcntl(sv[0], F_GETFL) | O_NONBLOCK);
  started_.Inc();
  std::lock_guard lock(mu_);
  worker.pid = pid;
  worker.fd = sv[0];
  if (shutting_down_) ::kill(pid, SIGKILL);
  return {};
}

int HighlightWorkers::End(Worker& worker) {
  pid_t pid;
  int fd;
  {
    std::lock_guard lock(mu_);
    pid = worker.pid;
    fd = worker.fd;
    worker.pid = -1;
    worker.fd = -1;
  }
  int status = 0;
  if (pid > 0) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (fd >= 0) ::close(fd);
  return status;
}

Result<std::string> HighlightWorkers::Highlight(std::string_view text, std::string_view language,
                                                SteadyTime deadline) {
  if (!IsLanguage(language) && language != kMarkdownJob && language != kDiffJob) {
    return MakeError(ErrorCode::kInvalidArgument, "unknown language", "unknown_language");
  }
  if (text.size() >= kMaxFrame) return RenderFailed("paste too large to highlight");
  Worker* worker = Take();
  if (worker == nullptr) {
    return MakeError(ErrorCode::kUnavailable, "the highlighter is shutting down", "shutting_down");
  }
  struct GiveBack {
    HighlightWorkers* self;
    Worker* worker;
    ~GiveBack() { self->Give(worker); }
  } give_back{this, worker};

  if (worker->pid <= 0) {
    if (auto spawned = Spawn(*worker); !spawned.ok()) return spawned.error();
  }
  std::string request;
  request.reserve(8 + language.size() + text.size());
  PutU32(request, static_cast<uint32_t>(language.size()));
  PutU32(request, static_cast<uint32_t>(text.size()));
  request += language;
  request += text;

  IoEnd io = WriteAll(worker->fd, request, deadline);
  char head[5];
  if (io == IoEnd::kDone) io = ReadExactly(worker->fd, head, sizeof head, deadline);
  std::string payload;
  if (io == IoEnd::kDone) {
    const uint32_t length = GetU32(head + 1);
    if (length > kMaxFrame) {
      End(*worker);
      ended_failed_.Inc();
      return RenderFailed("highlight worker sent a malformed answer");
    }
    payload.resize(length);
    io = ReadExactly(worker->fd, payload.data(), length, deadline);
  }
  if (io == IoEnd::kDeadline) {
    End(*worker);
    ended_at_deadline_.Inc();
    return MakeError(ErrorCode::kDeadlineExceeded, "render timed out", "render_timeout");
  }
  if (io == IoEnd::kClosed) {
    const int status = End(*worker);
    ended_failed_.Inc();
    return RenderFailed("highlight worker " + DescribeEnd(status));
  }
  if (static_cast<uint8_t>(head[0]) != kOk) return RenderFailed("highlighter: " + payload);
  return payload;
}

void HighlightWorkers::Shutdown() {
  std::vector<std::pair<pid_t, int>> idle;
  {
    std::lock_guard lock(mu_);
    shutting_down_ = true;
    for (Worker& w : workers_) {
      if (w.pid <= 0) continue;
      // A busy worker's caller sees its socket close and reaps it; an idle one is reaped here.
      ::kill(w.pid, SIGKILL);
      if (!w.busy) {
        idle.emplace_back(w.pid, w.fd);
        w.pid = -1;
        w.fd = -1;
      }
    }
  }
  for (auto [pid, fd] : idle) {
    int status;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    ::close(fd);
  }
  idle_.notify_all();
}

std::vector<pid_t> HighlightWorkers::Pids() const {
  std::lock_guard lock(mu_);
  std::vector<pid_t> pids;
  for (const Worker& w : workers_) {
    if (w.pid > 0) pids.push_back(w.pid);
  }
  return pids;
}

int RunHighlightWorker(int fd) {
  while (true) {
    char head[8];
    if (!BlockingRead(fd, head, sizeof head)) return 0;  // the server closed: we are done
    const uint32_t language_size = GetU32(head);
    const uint32_t text_size = GetU32(head + 4);
    if (language_size > 64 || text_size >= kMaxFrame) return 2;
    std::string language(language_size, '\0');
    std::string text(text_size, '\0');
    if (!BlockingRead(fd, language.data(), language_size) ||
        !BlockingRead(fd, text.data(), text_size)) {
      return 0;
    }
    Result<std::string> html = RunJob(text, language);
    std::string answer;
    const std::string& payload = html.ok() ? *html : html.error().message;
    answer.reserve(5 + payload.size());
    answer.push_back(static_cast<char>(html.ok() ? kOk : kRefused));
    PutU32(answer, static_cast<uint32_t>(payload.size()));
    answer += payload;
    if (!BlockingWrite(fd, answer)) return 0;
  }
}

int HighlightWorkerMain(int argc, char** argv) {
  pid_t parent = 0;
  uint64_t memory_limit = 0;
  unsigned long cpu_limit = 0;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&](std::string_view name) -> const char* {
      return arg.starts_with(name) ? argv[i] + name.size() : nullptr;
    };
    if (const char* v = value("--parent="))
      parent = static_cast<pid_t>(std::strtol(v, nullptr, 10));
    if (const char* v = value("--memory-limit=")) memory_limit = std::strtoull(v, nullptr, 10);
    if (const char* v = value("--cpu-limit=")) cpu_limit = std::strtoul(v, nullptr, 10);
  }
  // Ends with the server's thread that started it, even when the server is killed outright; the
  // check after it closes the race with a server that ended before the request was made.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent != 0 && ::getppid() != parent) return 0;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  memory_limit = 0;  // the sanitizers reserve terabytes of address space for their shadow
#endif
  if (memory_limit > 0) {
    rlimit limit{memory_limit, memory_limit};
    ::setrlimit(RLIMIT_AS, &limit);
  }
  if (cpu_limit > 0) {
    rlimit limit{cpu_limit, cpu_limit};
    ::setrlimit(RLIMIT_CPU, &limit);
  }
  ::signal(SIGPIPE, SIG_IGN);
  return RunHighlightWorker(kWorkerFd);
}

}  // namespace sluice::render
