// log_queue: the server's log lines leave the thread that logs them through a bounded queue, and
// one thread of their own writes them.
//
// A log line written on an event loop is a write(2) to stdout or stderr: a pipe to journald or a
// file. When the disk is busy the kernel holds a writer of dirty pages for up to 200 ms per
// write, and a full pipe holds it until the reader catches up. A failing dependency makes every
// request log a warning, so the loops stalled on the log exactly when sluice had to answer fast
// (a failed create during a primary blip took 0.8 s instead of 0.15 s beside a syncing disk
// writer: bench/results/flake-hunt.md). spdlog's asynchronous logger, with a queue that drops its
// oldest line when full rather than block, keeps the loops off the disk; the lines it drops are
// counted (sluice_log_lines_dropped_total), never silent.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>

namespace spdlog {
class logger;
namespace details {
class thread_pool;
}  // namespace details
}  // namespace spdlog

namespace sluice::app {

/// For its lifetime, spdlog's default logger is asynchronous over the same sinks. Create it before
/// any other thread exists and destroy it (or Close it) after they have all stopped: spdlog's
/// default logger may not be swapped while another thread logs. Its destructor writes every queued
/// line, however long that takes.
class LogQueue {
 public:
  /// `lines` (log_queue_lines, 8,192 by default: under 2 MiB at ~200 bytes a line) are held
  /// before the oldest is dropped.
  explicit LogQueue(std::size_t lines);
  ~LogQueue();
  LogQueue(const LogQueue&) = delete;
  LogQueue& operator=(const LogQueue&) = delete;

  /// Lines dropped because the queue was full.
  std::uint64_t Dropped() const;

  /// Waits (at most `within`) until the writer thread has taken every queued line, then flushes
  /// the sinks: for the one line a supervisor waits for before it is told the server is ready.
  /// False, without flushing, when the queue did not empty in time.
  bool Drain(std::chrono::milliseconds within) const;

  /// Puts the synchronous logger back and writes every queued line, waiting at most `within`.
  /// False when the sink still holds the writer then (stdout a pipe nobody reads): the lines are
  /// still being written by a thread of their own, which the destructor waits for. A process
  /// that is about to exit leaves with std::_Exit instead, since exit() flushes stdout too and
  /// would wait for that reader just the same. Closing again waits again.
  bool Close(std::chrono::milliseconds within);

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<spdlog::details::thread_pool> pool_;
  std::uint64_t dropped_at_close_ = 0;
  std::future<void> closed_;
};

/// The active LogQueue's Dropped(), 0 when none is active (sluice's subcommands log directly).
std::uint64_t LogLinesDropped();

/// The active LogQueue's Drain(); without one, flushes the default logger.
void DrainLog(std::chrono::milliseconds within);

}  // namespace sluice::app
