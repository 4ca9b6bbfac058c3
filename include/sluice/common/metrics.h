// Prometheus metrics: counters, gauges and histograms declared once and rendered in the text
// exposition format. Hot paths keep the reference a Get* call returns; the lookup itself takes a
// mutex and is meant for start-up or for low-cardinality labels.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace sluice {

using Labels = std::vector<std::pair<std::string, std::string>>;

/// A monotonically increasing count. Thread-safe.
class Counter {
 public:
  void Inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

/// A value that goes up and down. Thread-safe.
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double d) {
    double old = value_.load(std::memory_order_relaxed);
    while (!value_.compare_exchange_weak(old, old + d, std::memory_order_relaxed)) {
    }
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

/// Counts observations into fixed buckets (seconds). Thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double seconds);
  const std::vector<double>& upper_bounds() const { return bounds_; }
  /// Cumulative counts per bucket, then +Inf; with the sum and count.
  struct Snapshot {
    std::vector<uint64_t> cumulative;
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Take() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1
  std::atomic<uint64_t> sum_micros_{0};
};

/// Latency buckets from 100 us to 10 s, for request and dependency histograms.
std::vector<double> LatencyBuckets();

/// All metrics of the process. Thread-safe.
class MetricsRegistry {
 public:
  Counter& GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& GetGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& GetHistogram(const std::string& name, const std::string& help,
                          const Labels& labels = {},
                          std::vector<double> buckets = LatencyBuckets());
  /// A gauge read at render time, for values owned elsewhere (pool occupancy, queue age). Its
  /// owner holds the returned id and removes it (RemoveGaugeCallback) before it goes;
  /// GaugeCallbacks below does both.
  uint64_t AddGaugeCallback(const std::string& name, const std::string& help, const Labels& labels,
                            std::function<double()> read);
  /// A counter read at render time, for counts owned elsewhere (the view ladder's shed counts):
  /// `read` must never go down, or rate() over it lies. Removed like a gauge callback, by its id.
  uint64_t AddCounterCallback(const std::string& name, const std::string& help,
                              const Labels& labels, std::function<double()> read);
  /// A histogram read at render time from a distribution owned elsewhere (the keys by share of
  /// their budget): `read` returns cumulative counts for `upper_bounds` then +Inf, with sum and
  /// count. A snapshot, not a running count: its buckets may go down between scrapes, so it is
  /// read as it is (histogram_quantile over the buckets), never through rate(). Removed like a
  /// gauge callback, by its id.
  uint64_t AddHistogramCallback(const std::string& name, const std::string& help,
                                const Labels& labels, std::vector<double> upper_bounds,
                                std::function<Histogram::Snapshot()> read);
  /// Removes a gauge or counter callback. Once this returns, the callback is never called again.
  void RemoveGaugeCallback(uint64_t id);

  /// The text exposition format, version 0.0.4.
  std::string Render() const;

  /// Every series as `name{labels}` and its value, the same numbers Render() prints (histograms as
  /// their _sum and _count only): what the status page charts.
  std::vector<std::pair<std::string, double>> Collect() const;

 private:
  enum class Kind { kCounter, kGauge, kHistogram };
  struct Series {
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
    std::function<double()> callback;
    std::function<Histogram::Snapshot()> histogram_callback;
    std::vector<double> callback_bounds;
    uint64_t callback_id = 0;
  };
  struct Family {
    Kind kind;
    std::string help;
    std::map<std::string, Series> series;  // by rendered label set
  };
  Family& FamilyFor(const std::string& name, const std::string& help, Kind kind);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  uint64_t next_callback_id_ = 1;
};

/// The gauge callbacks of one owner, removed when it goes. Declare it as the owner's last member,
/// so it goes first, while everything its callbacks read still exists.
class GaugeCallbacks {
 public:
  explicit GaugeCallbacks(MetricsRegistry& registry) : registry_(registry) {}
  GaugeCallbacks(const GaugeCallbacks&) = delete;
  GaugeCallbacks& operator=(const GaugeCallbacks&) = delete;
  ~GaugeCallbacks() { Clear(); }
  /// Removes every callback added so far; none runs once this returns.
  void Clear() {
    for (uint64_t id : ids_) registry_.RemoveGaugeCallback(id);
    ids_.clear();
  }
  void Add(const std::string& name, const std::string& help, const Labels& labels,
           std::function<double()> read) {
    ids_.push_back(registry_.AddGaugeCallback(name, help, labels, std::move(read)));
  }
  void AddCounter(const std::string& name, const std::string& help, const Labels& labels,
                  std::function<double()> read) {
    ids_.push_back(registry_.AddCounterCallback(name, help, labels, std::move(read)));
  }
  void AddHistogram(const std::string& name, const std::string& help, const Labels& labels,
                    std::vector<double> upper_bounds, std::function<Histogram::Snapshot()> read) {
    ids_.push_back(registry_.AddHistogramCallback(name, help, labels, std::move(upper_bounds),
                                                  std::move(read)));
  }

 private:
  MetricsRegistry& registry_;
  std::vector<uint64_t> ids_;
};

}  // namespace sluice
