// HighlightWorkers: syntax highlighting in child processes, so that nothing a paste or the library
// does can take the server with it.
//
// Why processes and not threads: GNU source-highlight parses its language definition files with
// flex scanners built without `%option reentrant`; their state is process-global (the library
// exports `langdef_in`, `langdef_text`, `langdef_lineno`, `outlangdef_*`, `stylesc_*` and keeps the
// buffer stack in file statics), so two threads loading a definition at once corrupt each other
// and the process dies ("fatal flex scanner internal error", a heap-use-after-free under ASan).
// A lock around loading would answer that, but not the second problem: highlighting cost grows
// with the square of some shapes of input (100,000 nested parentheses in C take minutes), a regex
// match cannot be interrupted, and a thread that cannot be stopped holds its slot and blocks
// shutdown. A process can be killed. Each worker is single-threaded, so it never shares a parsed
// language definition with another thread, and nothing in the library is asked to be thread-safe.
//
// The protocol over the socketpair is private to this file's implementation: one request, one
// answer, in order; see src/render/highlight_workers.cc.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sluice/common/metrics.h"
#include "sluice/common/result.h"

namespace sluice::render {

/// The `language` of HighlightWorkers::Highlight that asks for another render of the same bounds:
/// Markdown's rendered view (render::RenderMarkdown of the text), and a fork's diff against its
/// parent (render::UnifiedDiff of a render::EncodeDiffJob buffer, highlighted as a diff; "" when
/// the two are equal). Neither is a language a paste can be viewed in.
inline constexpr std::string_view kMarkdownJob = "@markdown";
inline constexpr std::string_view kDiffJob = "@diff";

struct HighlightWorkersOptions {
  /// Worker processes: one per highlighter slot, so an admitted render never waits for one.
  /// Precondition: > 0.
  int workers = 4;
  /// The command that starts a worker: argv[0] is the program, executed directly. The server runs
  /// itself (`/proc/self/exe highlight-worker`); tests run the small sluice_highlight_worker.
  std::vector<std::string> command;
  /// Memory a worker may map, as RLIMIT_AS (0: no limit; the sanitizer builds need none). A paste
  /// whose rendering would pass it ends that worker, not the server. Default: 1 GiB.
  uint64_t memory_limit_bytes = uint64_t{1} << 30;
  /// CPU seconds a worker may use in its whole life (RLIMIT_CPU): a backstop in case the parent
  /// never kills it. The parent's deadline is what bounds one render. Default: 600.
  unsigned cpu_limit_seconds = 600;
};

/// Thread-safe: up to `workers` callers at once may render; a further caller waits for a worker
/// (the view's ladder never lets that happen: it admits at most one render per slot).
class HighlightWorkers {
 public:
  /// Counts worker starts and ends in `metrics` (sluice_highlight_workers_started_total,
  /// sluice_highlight_worker_ends_total{cause}); starts no worker until the first render.
  HighlightWorkers(HighlightWorkersOptions options, MetricsRegistry& metrics);
  /// Kills every worker, busy or not, and reaps it.
  ~HighlightWorkers();

  HighlightWorkers(const HighlightWorkers&) = delete;
  HighlightWorkers& operator=(const HighlightWorkers&) = delete;

  /// Highlights `text` as `language` (a name from Languages()) in a worker, waiting at most until
  /// `deadline`. Errors: DeadlineExceeded (`render_timeout`) when the deadline passed, and the
  /// worker was killed and will be replaced; Internal (`render_failed`) when the worker died, could
  /// not start, or the library refused the text; InvalidArgument for an unknown language;
  /// Unavailable (`shutting_down`) after Shutdown().
  Result<std::string> Highlight(std::string_view text, std::string_view language,
                                std::chrono::steady_clock::time_point deadline);

  /// Kills every worker now; renders in progress end with an error at once, later ones are
  /// refused. Lets a server stop within its drain timeout whatever a worker is doing.
  void Shutdown();

  /// The process ids of the workers alive now (for tests that kill one from outside).
  std::vector<pid_t> Pids() const;

 private:
  struct Worker {
    pid_t pid = -1;
    int fd = -1;
    bool busy = false;
  };
  Worker* Take();
  void Give(Worker* worker);
  Result<void> Spawn(Worker& worker);
  /// Kills (if still running) and reaps `worker`'s process; returns its wait status.
  int End(Worker& worker);
  void SpawnerLoop();

  const HighlightWorkersOptions options_;
  Counter& started_;
  Counter& ended_at_deadline_;
  Counter& ended_failed_;

  mutable std::mutex mu_;
  std::condition_variable idle_;
  std::vector<Worker> workers_;
  bool shutting_down_ = false;

  // Every worker is started from this one thread, which lives as long as the object: a worker
  // asks the kernel to kill it when the thread that started it ends (PR_SET_PDEATHSIG), so that a
  // server killed with SIGKILL leaves no worker burning CPU, and that must not be a pool thread.
  std::mutex spawn_mu_;
  std::condition_variable spawn_cv_;
  std::vector<std::function<void()>> spawn_queue_;
  bool spawner_stop_ = false;
  std::thread spawner_;
};

/// The worker's side: serves requests on `fd` until it closes, then returns the exit status.
int RunHighlightWorker(int fd);

/// A worker process's main (`sluice highlight-worker`, or sluice_highlight_worker in tests): takes
/// the arguments HighlightWorkers adds to the command (--parent, --memory-limit, --cpu-limit),
/// sets the limits, and serves the server's descriptor.
int HighlightWorkerMain(int argc, char** argv);

}  // namespace sluice::render
