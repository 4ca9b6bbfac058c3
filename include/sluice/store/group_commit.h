// GroupCommitter: many writers, one fsync. Durable creates at thousands per second cannot afford
// one fsync each (about 1,000 serial fsyncs/s on the reference disk), so writers queue their
// operation and one thread commits whatever has queued as a single batch with a single flush, then
// resumes every writer with its own outcome. While a batch commits, the next one forms: the batch
// size grows with the load by itself, and a lone writer pays one fsync, never a timer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/asio/completion.h"
#include "sluice/common/metrics.h"
#include "sluice/common/result.h"
#include "sluice/common/thread_name.h"

namespace sluice::store {

/// Where a committer reports its batches on /metrics; all null reports nothing. The committer is
/// one thread taking one batch after another, so the share of each second it spends committing
/// (rate of the seconds' sum) says how close a store is to its ceiling: near 1, every writer
/// queues behind it; and the batch time, against the operations per batch, tells a slower disk
/// from more load (docs/operations.md, "The committers").
struct CommitMetrics {
  Histogram* seconds = nullptr;  // each batch, from taking it to its outcome (durable or failed)
  Counter* batches = nullptr;
  Counter* operations = nullptr;

  /// sluice_store_commit_seconds, sluice_store_commit_batches_total and
  /// sluice_store_commit_operations_total of `registry` with the label store=`store`, or nothing
  /// without a registry.
  static CommitMetrics In(MetricsRegistry* registry, const std::string& store) {
    if (registry == nullptr) return {};
    const Labels labels{{"store", store}};
    return {
        &registry->GetHistogram("sluice_store_commit_seconds",
                                "Time a store's committer thread spent on each batch: the "
                                "writes and the flush that makes them durable",
                                labels),
        &registry->GetCounter("sluice_store_commit_batches_total",
                              "Batches a store's committer thread committed (or failed)", labels),
        &registry->GetCounter("sluice_store_commit_operations_total",
                              "Writes in those batches: creates, deletes, moderation and "
                              "outbox steps",
                              labels)};
  }
};

/// Batches operations of type Op onto one committer thread. Thread-safe.
template <typename Op>
class GroupCommitter {
 public:
  /// One queued operation and, after the batch commits, its outcome.
  struct Item {
    Op op;
    Status status;
  };
  /// Commits a whole batch and sets each item's status; runs on the committer thread only.
  using CommitBatch = std::function<void(std::vector<Item>& batch)>;

  /// `thread_name` names the committer thread (sluice/common/thread_name.h).
  GroupCommitter(std::string thread_name, size_t max_batch, CommitBatch commit,
                 CommitMetrics metrics = {})
      : thread_name_(std::move(thread_name)),
        max_batch_(max_batch),
        commit_(std::move(commit)),
        metrics_(metrics),
        thread_([this] { Run(); }) {}

  /// Drains what is queued, then stops the committer thread.
  ~GroupCommitter() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  GroupCommitter(const GroupCommitter&) = delete;
  GroupCommitter& operator=(const GroupCommitter&) = delete;

  /// Queues `op` and resumes the caller when the batch that holds it is durable (or failed).
  boost::asio::awaitable<Status> Submit(Op op) {
    return asio_glue::AwaitCompletion<Status>(
        [this, op = std::move(op)](asio_glue::Completion<Status> done) mutable {
          // Once queued, the committer may complete `done` and another thread resume the caller,
          // freeing this lambda (captures and all) before the notify: read `this` out of it first.
          GroupCommitter* const self = this;
          {
            std::lock_guard lock(self->mu_);
            self->queue_.push_back(Queued{std::move(op), std::move(done)});
          }
          self->cv_.notify_one();
        });
  }

  /// Batches committed so far; with items_committed() it gives the mean batch size.
  size_t batches_committed() const {
    std::lock_guard lock(mu_);
    return batches_;
  }
  size_t items_committed() const {
    std::lock_guard lock(mu_);
    return items_;
  }

 private:
  struct Queued {
    Op op;
    asio_glue::Completion<Status> done;
  };

  void Run() {
    NameThisThread(thread_name_);
    std::vector<Queued> taken;
    std::vector<Item> batch;
    for (;;) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping and drained
        const size_t n = std::min(queue_.size(), max_batch_);
        taken.assign(std::make_move_iterator(queue_.begin()),
                     std::make_move_iterator(queue_.begin() + static_cast<std::ptrdiff_t>(n)));
        queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
      }
      batch.clear();
      batch.reserve(taken.size());
      for (auto& q : taken) batch.push_back(Item{std::move(q.op), Ok()});
      const auto started = std::chrono::steady_clock::now();
      commit_(batch);
      if (metrics_.seconds != nullptr) {
        metrics_.seconds->Observe(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      }
      if (metrics_.batches != nullptr) metrics_.batches->Inc();
      if (metrics_.operations != nullptr) metrics_.operations->Inc(batch.size());
      {
        std::lock_guard lock(mu_);
        ++batches_;
        items_ += batch.size();
      }
      for (size_t i = 0; i < taken.size(); ++i) taken[i].done(std::move(batch[i].status));
      // Drop the ops now, not at the next batch: they may own what their callers are waiting to
      // see released (a create's body and the bytes it holds against the byte cap).
      taken.clear();
      batch.clear();
    }
  }

  const std::string thread_name_;
  const size_t max_batch_;
  const CommitBatch commit_;
  const CommitMetrics metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Queued> queue_;
  bool stopping_ = false;
  size_t batches_ = 0;
  size_t items_ = 0;
  std::thread thread_;  // last: starts after every other member exists
};

}  // namespace sluice::store
