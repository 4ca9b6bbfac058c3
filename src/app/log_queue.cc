#include "log_queue.h"

#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <thread>

#include "sluice/common/thread_name.h"

namespace sluice::app {

namespace {
// Read by /metrics and by the ready line's Drain; set and cleared while no other thread runs.
std::atomic<const LogQueue*> g_active{nullptr};
}  // namespace

LogQueue::LogQueue(std::size_t lines) : previous_(spdlog::default_logger()) {
  pool_ = std::make_shared<spdlog::details::thread_pool>(lines, 1,
                                                         [] { NameThisThread("log-writer"); });
  auto logger = std::make_shared<spdlog::async_logger>(
      previous_->name(), previous_->sinks().begin(), previous_->sinks().end(), pool_,
      spdlog::async_overflow_policy::overrun_oldest);
  logger->set_level(previous_->level());
  logger->flush_on(previous_->flush_level());
  spdlog::set_default_logger(std::move(logger));
  g_active.store(this);
}

LogQueue::~LogQueue() {
  if (!closed_.valid()) Close(std::chrono::milliseconds(0));
  closed_.wait();
}

bool LogQueue::Close(std::chrono::milliseconds within) {
  if (!closed_.valid()) {
    g_active.store(nullptr);
    spdlog::set_default_logger(previous_);
    dropped_at_close_ = pool_->overrun_counter();
    // The pool's destructor queues a stop behind every line still waiting and joins its writer,
    // which a stalled sink holds for good: on a thread of its own, so the wait can be bounded.
    closed_ =
        std::async(std::launch::async, [pool = std::move(pool_), previous = previous_]() mutable {
          NameThisThread("log-close");
          pool.reset();
          previous->flush();
        });
  }
  return closed_.wait_for(within) == std::future_status::ready;
}

std::uint64_t LogQueue::Dropped() const {
  return pool_ ? pool_->overrun_counter() : dropped_at_close_;
}

bool LogQueue::Drain(std::chrono::milliseconds within) const {
  const auto deadline = std::chrono::steady_clock::now() + within;
  bool empty = false;
  while (!(empty = pool_->queue_size() == 0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // A sink that stopped would hold this flush too (the writer keeps its lock): give up instead.
  if (!empty) return false;
  // The writer holds a sink's lock while it writes a line it took, so this flush comes after
  // that line unless the writer is between taking it and locking (a few instructions).
  for (const auto& sink : previous_->sinks()) sink->flush();
  return true;
}

std::uint64_t LogLinesDropped() {
  const LogQueue* queue = g_active.load();
  return queue ? queue->Dropped() : 0;
}

void DrainLog(std::chrono::milliseconds within) {
  if (const LogQueue* queue = g_active.load()) {
    queue->Drain(within);
  } else {
    spdlog::default_logger()->flush();
  }
}

}  // namespace sluice::app
