#include "sluice/admission/degradation_ladder.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace sluice::admission {
namespace {

// A render measured at zero (a fake clock, a trivial paste) must not make the sustainable rate
// infinite and switch shedding off.
constexpr double kMinServiceSeconds = 1e-6;

}  // namespace

const char* RungName(Rung rung) {
  switch (rung) {
    case Rung::kCached:
      return "cached";
    case Rung::kHighlight:
      return "highlighted";
    case Rung::kPlain:
      return "plain";
  }
  return "plain";
}

const char* RungReasonName(RungReason reason) {
  switch (reason) {
    case RungReason::kNone:
      return "";
    case RungReason::kShedForLoad:
      return "shed_for_load";
    case RungReason::kRenderFailed:
      return "render_failed";
    case RungReason::kRenderTimeout:
      return "render_timeout";
    case RungReason::kTooLarge:
      return "too_large";
  }
  return "";
}

const char* ShedCauseName(ShedCause cause) {
  switch (cause) {
    case ShedCause::kPlainText:
      return "plain_text";
    case ShedCause::kLarge:
      return "large";
    case ShedCause::kKeySlice:
      return "key_slice";
    case ShedCause::kSlotsFull:
      return "slots_full";
  }
  return "slots_full";
}

DegradationLadder::RenderSlot::RenderSlot(RenderSlot&& other) noexcept
    : ladder_(std::exchange(other.ladder_, nullptr)), started_(other.started_) {}

DegradationLadder::RenderSlot& DegradationLadder::RenderSlot::operator=(
    RenderSlot&& other) noexcept {
  if (this != &other) {
    Finish(std::nullopt);
    ladder_ = std::exchange(other.ladder_, nullptr);
    started_ = other.started_;
  }
  return *this;
}

DegradationLadder::RenderSlot::~RenderSlot() { Finish(std::nullopt); }

void DegradationLadder::RenderSlot::Done() { Finish(std::nullopt); }

void DegradationLadder::RenderSlot::Failed(RungReason reason) { Finish(reason); }

void DegradationLadder::RenderSlot::Finish(std::optional<RungReason> failure) {
  if (ladder_ == nullptr) return;
  std::exchange(ladder_, nullptr)->Release(started_, failure);
}

DegradationLadder::DegradationLadder(DegradationLadderOptions options, const Clock& clock)
    : clock_(clock),
      origin_(clock.Now()),
      bucket_width_(
          std::max<Duration>(Duration(1), options.rate_window / std::max(1, options.rate_buckets))),
      options_(options),
      windows_(static_cast<size_t>(std::max(1, options.rate_buckets))),
      service_seconds_(std::max(kMinServiceSeconds, ToSeconds(options.initial_service_time))),
      last_update_(origin_) {}

void DegradationLadder::SetLimits(const DegradationLadderOptions& next) {
  std::lock_guard lock(mu_);
  options_.slots = next.slots;
  options_.large_paste_bytes = next.large_paste_bytes;
  options_.target_utilization = next.target_utilization;
  options_.release_margin = next.release_margin;
  options_.release_points_per_second = next.release_points_per_second;
}

int DegradationLadder::KeyBucket(std::string_view client_key) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : client_key) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return static_cast<int>(hash % 100);
}

int64_t DegradationLadder::IndexAt(TimePoint now) const {
  const Duration since = now - origin_;
  return since < Duration::zero() ? 0 : since / bucket_width_;
}

void DegradationLadder::RecordArrivalLocked(int64_t index, bool plain, bool large) {
  Window& window = windows_[static_cast<size_t>(index % static_cast<int64_t>(windows_.size()))];
  if (window.index != index) window = Window{index, 0, 0, 0};
  ++window.total;
  if (plain) {
    ++window.plain;
  } else if (large) {
    ++window.large;
  }
}

std::array<int64_t, 3> DegradationLadder::SumLocked(int64_t index) const {
  const auto n = static_cast<int64_t>(windows_.size());
  std::array<int64_t, 3> sum{};
  for (const Window& window : windows_) {
    if (window.index > index - n && window.index <= index) {
      sum[0] += window.total;
      sum[1] += window.plain;
      sum[2] += window.large;
    }
  }
  return sum;
}

double DegradationLadder::SustainableLocked() const {
  return static_cast<double>(options_.slots) / service_seconds_;
}

double DegradationLadder::WindowSecondsLocked(TimePoint now, int64_t index) const {
  // The newest bucket is only partly filled: count the time it has really covered, or the rate
  // reads up to one bucket low. In the first window after start this under-reads instead, which
  // errs towards not shedding: two views in the first millisecond are not 2,000 a second.
  const Duration covered = Duration(bucket_width_ * (static_cast<int64_t>(windows_.size()) - 1)) +
                           (now - (origin_ + bucket_width_ * index));
  return std::max(1e-3, ToSeconds(covered));
}

void DegradationLadder::UpdateShedLocked(TimePoint now, int64_t index) {
  const double arrivals =
      static_cast<double>(SumLocked(index)[0]) / WindowSecondsLocked(now, index);
  const double sustainable = SustainableLocked() * options_.target_utilization;
  // Little's law: the highlighter clears `sustainable` per second; the rest must go elsewhere.
  const double needed = arrivals > sustainable ? 100.0 * (1 - sustainable / arrivals) : 0.0;
  const double release_to =
      arrivals > sustainable * (1 - options_.release_margin)
          ? 100.0 * (1 - sustainable * (1 - options_.release_margin) / arrivals)
          : 0.0;
  const double elapsed = now > last_update_ ? ToSeconds(now - last_update_) : 0.0;
  last_update_ = std::max(last_update_, now);
  if (needed > shed_percent_) {
    // Raise at once: every moment under-shed is a queue forming in front of the slots.
    shed_percent_ = needed;
  } else if (release_to < shed_percent_) {
    // Release slowly, and only below the margin: the slots may not have drained yet.
    shed_percent_ =
        std::max(release_to, shed_percent_ - options_.release_points_per_second * elapsed);
  }
}

DegradationLadder::Decision DegradationLadder::Decide(const ViewFacts& view) {
  const TimePoint now = clock_.Now();
  Decision decision;
  std::lock_guard lock(mu_);
  if (view.is_cached) {
    ++counts_.cached;
    decision.rung = Rung::kCached;
    return decision;
  }
  const bool large = view.size_bytes >= options_.large_paste_bytes;
  const int64_t index = IndexAt(now);
  RecordArrivalLocked(index, view.is_plain_text, large);
  UpdateShedLocked(now, index);

  std::optional<ShedCause> cause;
  if (shed_percent_ > 0) {
    const std::array<int64_t, 3> sum = SumLocked(index);
    const double total = static_cast<double>(std::max<int64_t>(1, sum[0]));
    const double plain_share = static_cast<double>(sum[1]) / total;
    const double large_share = static_cast<double>(sum[2]) / total;
    const double shed = shed_percent_ / 100.0;
    // Fill the shed fraction in order of least quality lost: plain text, large, then visitors.
    if (view.is_plain_text) {
      cause = ShedCause::kPlainText;
    } else if (large && shed > plain_share) {
      cause = ShedCause::kLarge;
    } else if (shed > plain_share + large_share) {
      const double rest = 1 - plain_share - large_share;
      const double slice = rest <= 0 ? 100.0 : 100.0 * (shed - plain_share - large_share) / rest;
      if (KeyBucket(view.client_key) < slice) cause = ShedCause::kKeySlice;
    }
  }
  // No waiting: a view that finds every slot busy is shed now rather than queued.
  if (!cause && in_use_ >= options_.slots) cause = ShedCause::kSlotsFull;

  if (cause) {
    ++counts_.shed[static_cast<size_t>(*cause)];
    decision.rung = Rung::kPlain;
    decision.reason = RungReason::kShedForLoad;
    decision.cause = cause;
    return decision;
  }
  ++in_use_;
  ++counts_.highlighted;
  decision.rung = Rung::kHighlight;
  decision.slot = RenderSlot(this, now);
  return decision;
}

void DegradationLadder::Release(TimePoint started, std::optional<RungReason> failure) {
  const TimePoint now = clock_.Now();
  std::lock_guard lock(mu_);
  --in_use_;
  // Little's law wants how long a slot was held, whatever the outcome: a render that timed out
  // held its slot the whole time.
  const double sample = std::max(kMinServiceSeconds, ToSeconds(now - started));
  service_seconds_ += options_.service_time_alpha * (sample - service_seconds_);
  if (failure) {
    ++(*failure == RungReason::kRenderTimeout ? counts_.render_timeout : counts_.render_failed);
  }
}

LadderSnapshot DegradationLadder::Snapshot() const {
  const TimePoint now = clock_.Now();
  std::lock_guard lock(mu_);
  const int64_t index = IndexAt(now);
  LadderSnapshot snapshot;
  snapshot.shed_percent = shed_percent_;
  snapshot.arrival_rate =
      static_cast<double>(SumLocked(index)[0]) / WindowSecondsLocked(now, index);
  snapshot.sustainable_rate = SustainableLocked();
  snapshot.service_time = Duration(static_cast<Duration::rep>(service_seconds_ * 1e9));
  snapshot.in_use = in_use_;
  snapshot.slots = options_.slots;
  snapshot.counts = counts_;
  return snapshot;
}

}  // namespace sluice::admission
