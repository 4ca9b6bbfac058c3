#include "sluice/common/metrics.h"

#include <fmt/format.h>

#include <stdexcept>

namespace sluice {

namespace {

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string RenderLabels(const Labels& labels, const std::string& extra = {}) {
  if (labels.empty() && extra.empty()) return {};
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ',';
    out += labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
  }
  if (!extra.empty()) {
    if (!labels.empty()) out += ',';
    out += extra;
  }
  return out + "}";
}

// Series are keyed by their label text; the le label of histograms is appended at render time,
// so the key is the label set without braces.
std::string InnerLabels(const std::string& rendered) {
  return rendered.empty() ? rendered : rendered.substr(1, rendered.size() - 2);
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      counts_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {}

void Histogram::Observe(double seconds) {
  size_t i = 0;
  while (i < bounds_.size() && seconds > bounds_[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_micros_.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Take() const {
  Snapshot s;
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = static_cast<double>(sum_micros_.load(std::memory_order_relaxed)) / 1e6;
  return s;
}

std::vector<double> LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
}

MetricsRegistry::Family& MetricsRegistry::FamilyFor(const std::string& name,
                                                    const std::string& help, Kind kind) {
  auto [it, inserted] = families_.try_emplace(name, Family{kind, help, {}});
  if (!inserted && it->second.kind != kind) {
    throw std::logic_error("metric " + name + " declared twice with different types");
  }
  return it->second;
}

Counter& MetricsRegistry::GetCounter(const std::string& name, const std::string& help,
                                     const Labels& labels) {
  std::lock_guard lock(mu_);
  Series& s = FamilyFor(name, help, Kind::kCounter).series[RenderLabels(labels)];
  if (!s.counter) s.counter = std::make_unique<Counter>();
  return *s.counter;
}

Gauge& MetricsRegistry::GetGauge(const std::string& name, const std::string& help,
                                 const Labels& labels) {
  std::lock_guard lock(mu_);
  Series& s = FamilyFor(name, help, Kind::kGauge).series[RenderLabels(labels)];
  if (!s.gauge) s.gauge = std::make_unique<Gauge>();
  return *s.gauge;
}

Histogram& MetricsRegistry::GetHistogram(const std::string& name, const std::string& help,
                                         const Labels& labels, std::vector<double> buckets) {
  std::lock_guard lock(mu_);
  Series& s = FamilyFor(name, help, Kind::kHistogram).series[RenderLabels(labels)];
  if (!s.histogram) s.histogram = std::make_unique<Histogram>(std::move(buckets));
  return *s.histogram;
}

uint64_t MetricsRegistry::AddGaugeCallback(const std::string& name, const std::string& help,
                                           const Labels& labels, std::function<double()> read) {
  std::lock_guard lock(mu_);
  Series& series = FamilyFor(name, help, Kind::kGauge).series[RenderLabels(labels)];
  series.callback = std::move(read);
  series.callback_id = next_callback_id_++;
  return series.callback_id;
}

void MetricsRegistry::RemoveGaugeCallback(uint64_t id) {
  // Render and Collect call callbacks under the same lock, so none runs once this returns.
  std::lock_guard lock(mu_);
  for (auto& [name, family] : families_) {
    for (auto it = family.series.begin(); it != family.series.end(); ++it) {
      if (it->second.callback_id != id) continue;
      family.series.erase(it);
      return;
    }
  }
}

uint64_t MetricsRegistry::AddCounterCallback(const std::string& name, const std::string& help,
                                             const Labels& labels, std::function<double()> read) {
  std::lock_guard lock(mu_);
  Series& series = FamilyFor(name, help, Kind::kCounter).series[RenderLabels(labels)];
  series.callback = std::move(read);
  series.callback_id = next_callback_id_++;
  return series.callback_id;
}

uint64_t MetricsRegistry::AddHistogramCallback(const std::string& name, const std::string& help,
                                               const Labels& labels,
                                               std::vector<double> upper_bounds,
                                               std::function<Histogram::Snapshot()> read) {
  std::lock_guard lock(mu_);
  Series& series = FamilyFor(name, help, Kind::kHistogram).series[RenderLabels(labels)];
  series.histogram_callback = std::move(read);
  series.callback_bounds = std::move(upper_bounds);
  series.callback_id = next_callback_id_++;
  return series.callback_id;
}

std::string MetricsRegistry::Render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, family] : families_) {
    const char* type = family.kind == Kind::kCounter ? "counter"
                       : family.kind == Kind::kGauge ? "gauge"
                                                     : "histogram";
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, family.help, name, type);
    for (const auto& [labels, series] : family.series) {
      if (series.counter) out += fmt::format("{}{} {}\n", name, labels, series.counter->value());
      if (series.gauge) out += fmt::format("{}{} {}\n", name, labels, series.gauge->value());
      if (series.callback) out += fmt::format("{}{} {}\n", name, labels, series.callback());
      if (series.histogram || series.histogram_callback) {
        const auto snap = series.histogram ? series.histogram->Take() : series.histogram_callback();
        const auto& bounds =
            series.histogram ? series.histogram->upper_bounds() : series.callback_bounds;
        const std::string inner = InnerLabels(labels);
        const std::string sep = inner.empty() ? "" : ",";
        for (size_t i = 0; i < bounds.size() && i < snap.cumulative.size(); ++i) {
          out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, inner, sep, bounds[i],
                             snap.cumulative[i]);
        }
        out += fmt::format("{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, inner, sep, snap.count);
        out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, labels, snap.sum, name, labels,
                           snap.count);
      }
    }
  }
  return out;
}

std::vector<std::pair<std::string, double>> MetricsRegistry::Collect() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [name, family] : families_) {
    for (const auto& [labels, series] : family.series) {
      if (series.counter) out.emplace_back(name + labels, double(series.counter->value()));
      if (series.gauge) out.emplace_back(name + labels, series.gauge->value());
      if (series.callback) out.emplace_back(name + labels, series.callback());
      if (series.histogram || series.histogram_callback) {
        const auto snap = series.histogram ? series.histogram->Take() : series.histogram_callback();
        out.emplace_back(name + "_sum" + labels, snap.sum);
        out.emplace_back(name + "_count" + labels, double(snap.count));
      }
    }
  }
  return out;
}

}  // namespace sluice
