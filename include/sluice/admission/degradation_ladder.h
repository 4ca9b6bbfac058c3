// The degradation ladder of the rendered view (docs/overload.md, "The view"): a cached
// rendering, syntax highlighting now, or escaped plain text. Shedding is decided at admission, not
// after a deadline: the highlighter's sustainable rate is slots / service time (Little's law), and
// when arrivals exceed it the excess goes to the plain rung at once instead of queueing and then
// missing its deadline anyway.
//
// Which views go first is a quality choice: plain-text pastes (highlighting adds nothing), then
// very large pastes (the highest cost per view), then a stable slice of visitors chosen by a hash
// of the client key, so one visitor stays on one rung across reloads while the slice grows and
// shrinks around them. Shed views are tagged `shed_for_load`; failures the caller reports later are
// tagged `render_failed` or `render_timeout`, so a capacity problem and a broken renderer never
// look alike on /metrics. The shed is raised at once and released gradually, with hysteresis, so it
// does not oscillate between shedding and queueing as load falls.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "sluice/common/clock.h"

namespace sluice::admission {

enum class Rung { kCached, kHighlight, kPlain };
/// kTooLarge: the full-quality rendering outgrew the view's bounds, so its plain head is shown; not
/// a failure of the highlighter, whose slot finished its work.
enum class RungReason { kNone, kShedForLoad, kRenderFailed, kRenderTimeout, kTooLarge };
/// Why a view was shed, for per-cause counters. All are tagged `shed_for_load` to the client.
enum class ShedCause { kPlainText, kLarge, kKeySlice, kSlotsFull };

/// "cached", "highlighted", "plain": the X-Sluice-Rung value.
const char* RungName(Rung rung);
/// "", "shed_for_load", "render_failed", "render_timeout", "too_large": the X-Sluice-Rung reason.
const char* RungReasonName(RungReason reason);
/// "plain_text", "large", "key_slice", "slots_full".
const char* ShedCauseName(ShedCause cause);

/// What the ladder needs to know about one view.
struct ViewFacts {
  /// The visitor's client key (client_key.h); its hash picks the stable shed slice.
  std::string_view client_key;
  /// A cached rendering exists: served at full quality, no slot, never shed.
  bool is_cached = false;
  /// The paste has no language: highlighting would add nothing.
  bool is_plain_text = false;
  int64_t size_bytes = 0;
};

struct DegradationLadderOptions {
  /// Highlighter slots per process: renders running at once. Precondition: > 0. Default: 4.
  int slots = 4;
  /// Service time assumed before any render is measured. Default: 20 ms.
  Duration initial_service_time = std::chrono::milliseconds(20);
  /// Weight of each new render time in the service-time average. Precondition: in (0, 1].
  /// Default: 0.1.
  double service_time_alpha = 0.1;
  /// Arrivals are counted over this sliding window. Default: 1 s.
  Duration rate_window = std::chrono::seconds(1);
  /// Steps the window moves in. Precondition: > 0. Default: 10.
  int rate_buckets = 10;
  /// Pastes at least this large are shed before the visitor slice. Default: 256 KiB.
  int64_t large_paste_bytes = int64_t{256} << 10;
  /// Share of the sustainable rate the shed aims to admit. Below 1 leaves the slots some idle
  /// time, so the planned shed (plain text, large, the key slice) does the work and a view rarely
  /// finds every slot busy (`slots_full`, which picks visitors by chance, not by hash).
  /// Precondition: in (0, 1]. Default: 1 (Little's law exactly).
  double target_utilization = 1.0;
  /// Release only below sustainable x (1 - margin): the hysteresis band. Default: 0.1.
  double release_margin = 0.1;
  /// The shed falls by at most this many percentage points per second. Default: 5.
  double release_points_per_second = 5;
};

/// Counters for /metrics.
struct LadderCounts {
  uint64_t cached = 0;
  uint64_t highlighted = 0;
  /// Indexed by ShedCause.
  std::array<uint64_t, 4> shed{};
  uint64_t render_failed = 0;
  uint64_t render_timeout = 0;
};

/// Gauges and counters at one instant.
struct LadderSnapshot {
  double shed_percent = 0;
  double arrival_rate = 0;      // views needing a render, per second, over the window
  double sustainable_rate = 0;  // slots / service time
  Duration service_time{};
  int in_use = 0;
  int slots = 0;  // the cap now
  LadderCounts counts;
};

/// Chooses the rung of each rendered view. Thread-safe: one mutex, held for a few arithmetic steps
/// per view.
class DegradationLadder {
 public:
  /// One highlighter slot, held while rendering. Move-only. Releasing it (Done, Failed or the
  /// destructor) records the time it was held as a service-time sample.
  /// Precondition: the ladder outlives its slots.
  class RenderSlot {
   public:
    RenderSlot(RenderSlot&& other) noexcept;
    RenderSlot& operator=(RenderSlot&& other) noexcept;
    ~RenderSlot();

    /// The render finished.
    void Done();
    /// The render failed (`kRenderFailed`) or ran out of time (`kRenderTimeout`); the caller
    /// serves the plain rung with that reason. Other reasons count as failed.
    void Failed(RungReason reason);

   private:
    friend class DegradationLadder;
    RenderSlot(DegradationLadder* ladder, TimePoint started) : ladder_(ladder), started_(started) {}
    void Finish(std::optional<RungReason> failure);
    DegradationLadder* ladder_ = nullptr;
    TimePoint started_{};
  };

  struct Decision {
    Rung rung = Rung::kPlain;
    RungReason reason = RungReason::kNone;
    /// Set when shed.
    std::optional<ShedCause> cause;
    /// Set exactly when rung is kHighlight.
    std::optional<RenderSlot> slot;
  };

  /// `clock` must outlive the ladder.
  DegradationLadder(DegradationLadderOptions options, const Clock& clock);

  DegradationLadder(const DegradationLadder&) = delete;
  DegradationLadder& operator=(const DegradationLadder&) = delete;

  /// Decides one view's rung now; never waits.
  Decision Decide(const ViewFacts& view);

  LadderSnapshot Snapshot() const;

  /// New limits for views from now on (docs/operations.md, "Reload"): slots, large_paste_bytes,
  /// target_utilization, release_margin and release_points_per_second. The ladder keeps what it
  /// has learnt and holds: the measured service time, the arrivals of the window, the shed (which
  /// then moves towards the new numbers at the usual pace: up at once, down gradually) and the
  /// slots in flight; slots lowered below those in flight send new views to the plain rung
  /// (slots_full) until under the new cap. The window's shape and the service time's weighting
  /// stay as built. Preconditions as for the options.
  void SetLimits(const DegradationLadderOptions& next);

  /// The stable 0..99 bucket of a client key (FNV-1a, the same in every process and build).
  static int KeyBucket(std::string_view client_key);

 private:
  struct Window {
    int64_t index = -1;
    int64_t total = 0;
    int64_t plain = 0;
    int64_t large = 0;  // large and not plain
  };
  void Release(TimePoint started, std::optional<RungReason> failure);
  // All *Locked members need mu_.
  void RecordArrivalLocked(int64_t index, bool plain, bool large);
  void UpdateShedLocked(TimePoint now, int64_t index);
  std::array<int64_t, 3> SumLocked(int64_t index) const;
  double SustainableLocked() const;
  double WindowSecondsLocked(TimePoint now, int64_t index) const;
  int64_t IndexAt(TimePoint now) const;

  const Clock& clock_;
  const TimePoint origin_;
  const Duration bucket_width_;

  mutable std::mutex mu_;
  DegradationLadderOptions options_;  // SetLimits changes its limits under mu_
  std::vector<Window> windows_;
  double service_seconds_;
  double shed_percent_ = 0;
  TimePoint last_update_{};
  int in_use_ = 0;
  LadderCounts counts_;
};

}  // namespace sluice::admission
