// ViewRenderer: the rendered view's degradation ladder in motion. The pure decision lives in
// admission::DegradationLadder; this thin Asio layer adds what must wait or block: the highlighter
// pool (one thread and one worker process per slot, so an admitted render never queues), the
// render timeout, the cache of renderings, and the metrics. A slot is taken at admission by
// try-acquire; a view that finds none goes to the plain rung at once. The highlighting itself runs
// in worker processes (highlight_workers.h), killed at the render timeout, so a slot is never held
// much past it and a crash of the library costs one view its highlighting, not the server.
#pragma once

#include <array>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "sluice/admission/degradation_ladder.h"
#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/common/swappable.h"
#include "sluice/render/highlight_workers.h"
#include "sluice/render/render_cache.h"
#include "sluice/render/view_bounds.h"

namespace sluice::render {

struct ViewRendererOptions {
  /// Highlighter slots (and threads) per process. Precondition: > 0. Default: 4.
  int slots = 4;
  /// Memory for highlighted renderings, in bytes (0: off). Default: 32 MiB.
  size_t cache_bytes = size_t{32} << 20;
  /// A render still running after this is abandoned for the plain rung (`render_timeout`); its
  /// slot stays held until the work really ends. Default: 2 s.
  std::chrono::milliseconds render_timeout{2000};
  /// Pastes at least this large are shed before the visitor slice. Default: 256 KiB.
  int64_t large_paste_bytes = int64_t{256} << 10;
  /// Extra time every render takes, to make the highlighter's capacity small in tests. Default: 0.
  std::chrono::milliseconds render_delay{0};
  /// Share of slots / service time the ladder admits before shedding. Default: 0.8.
  double target_utilization = 0.8;
  /// As load falls the shed share drops by at most this many percentage points a second.
  /// Default: 5.
  double release_points_per_second = 5;
  /// Service time assumed before any render is measured. Default: 20 ms.
  std::chrono::milliseconds initial_service_time{20};
  /// How to start a highlighter worker process (see HighlightWorkersOptions::command). Required.
  std::vector<std::string> worker_command;
  /// RLIMIT_AS of each worker (0: none). Default: 1 GiB.
  uint64_t worker_memory_limit_bytes = uint64_t{1} << 30;
  /// How much of a paste one view shows (`view_max_bytes`, `view_max_lines`).
  ViewBounds bounds;
};

/// The most page bytes the plain rung renders on the event loop when no rendering of the paste is
/// cached: the plain rung is what a view gets when the highlighter is busy, so it must stay as
/// cheap as the request around it. The page says how much it shows and links to the rest.
inline constexpr size_t kPlainRungBytes = size_t{256} << 10;

/// One view's body fragment and how it was made.
struct RenderedView {
  /// Lines as produced by Highlight or PlainLines: the fragment of a cached, shared Rendering.
  std::shared_ptr<const std::string> html;
  /// Lines shown, and whether they are only the head of the paste (the rest: /raw/ID).
  size_t lines = 0;
  bool cut = false;
  /// The language highlighted, or "" for plain text.
  std::string language;
  admission::Rung rung = admission::Rung::kPlain;
  admission::RungReason reason = admission::RungReason::kNone;
  std::optional<admission::ShedCause> cause;

  /// The X-Sluice-Rung value: "highlighted", "cached", "plain; reason=shed_for_load; cause=large".
  std::string Tag() const;
};

/// Thread-safe. Destroying it kills the workers, so it waits for no render.
class ViewRenderer {
 public:
  /// `clock` (which must outlive it) decides the ladder and times the render timeout; the worker
  /// processes are still killed on the machine's clock, since they run in real time.
  ViewRenderer(ViewRendererOptions options, const Clock& clock, MetricsRegistry& metrics);
  ~ViewRenderer();

  /// Ends every render in progress and joins the render threads; Render must not be called after.
  /// A render thread's last steps touch its view's timer on an event loop, so the owner calls
  /// this while the loops exist (src/app/server_process.cc, ShutdownOrder). Idempotent.
  void Shutdown();

  /// Renders paste `id` for the visitor `client_key`. `language`: a name from Languages(),
  /// "text" for plain text, anything else (or "") to detect it. Never waits for a slot.
  boost::asio::awaitable<RenderedView> Render(std::string id,
                                              std::shared_ptr<const std::string> text,
                                              std::string language, std::string client_key);

  /// Another rendering of paste `id` in the same workers, under the same ladder, slots, render
  /// timeout, cache and memory of timeouts as Render: `job` kMarkdownJob (`input` the paste's
  /// text) or kDiffJob (`input` a render::EncodeDiffJob buffer). On the plain rung (shed, timed
  /// out, failed) the fragment is PlainLines(*plain): the Markdown's source, the fork's own text.
  /// The view's `language` is "markdown" or "diff".
  boost::asio::awaitable<RenderedView> RenderDerived(std::string id,
                                                     std::shared_ptr<const std::string> input,
                                                     std::string_view job,
                                                     std::shared_ptr<const std::string> plain,
                                                     std::string client_key);

  /// Drops a deleted paste's renderings.
  void Forget(std::string_view id);

  admission::LadderSnapshot Snapshot() const { return ladder_.Snapshot(); }
  /// The options now (a reload replaces them); a view holds the ones it started with.
  std::shared_ptr<const ViewRendererOptions> options() const { return options_.Load(); }
  /// New ladder settings for views from now on (docs/operations.md, "Reload"): render_timeout,
  /// render_delay, large_paste_bytes, target_utilization, release_points_per_second and slots,
  /// which is capped at the workers started (the pool's threads and the worker processes are
  /// sized once: more needs a restart). Renders in flight keep their timeout and their slot; the
  /// ladder keeps its measurements (admission::DegradationLadder::SetLimits). The cache size, the
  /// workers' command and memory limit and the view's bounds stay as built.
  void Reconfigure(ViewRendererOptions next);
  /// Highlighter workers (and threads) started: the most slots a reload can give.
  int workers() const { return workers_count_; }
  /// The worker processes alive now (tests kill one from outside).
  std::vector<pid_t> WorkerPids() const { return workers_.Pids(); }

 private:
  boost::asio::awaitable<RenderedView> RenderKeyed(RenderedView view, std::string id,
                                                   std::shared_ptr<const std::string> input,
                                                   std::string job,
                                                   std::shared_ptr<const std::string> plain,
                                                   std::string client_key);
  // The plain rung's rendering of paste `id`: the full plain rendering if one is cached, else the
  // head within kPlainRungBytes, made here and cached for the next plain view.
  std::shared_ptr<const Rendering> PlainOf(const std::string& id, const std::string& text,
                                           const ViewBounds& bounds);
  // Makes the finished rendering of `job` from a worker's output, on the render thread.
  static std::shared_ptr<const Rendering> Finish(std::string_view job, std::string out,
                                                 const ViewHead& head, const std::string& plain,
                                                 const ViewBounds& bounds);
  void Count(const RenderedView& view);
  bool TimedOutBefore(const std::string& key);
  void RememberTimedOut(const std::string& key);

  const int workers_count_;
  Swappable<ViewRendererOptions> options_;
  // Decides the ladder, times the answer's timeout and dates the memory of timed-out renders.
  const Clock& clock_;
  admission::DegradationLadder ladder_;
  RenderCache cache_;
  HighlightWorkers workers_;
  // Renderings that ran out of time once: the same paste in the same language would again, so
  // its later views go plain without spending a slot for the whole timeout. Bounded, oldest out;
  // an entry whose key was erased on lapse may linger in the order until pushed out.
  std::mutex timed_out_mu_;
  std::deque<std::string> timed_out_order_;
  std::unordered_map<std::string, TimePoint> timed_out_;
  boost::asio::thread_pool pool_;
  // By rung, then reason: resolved once, so counting a view takes no registry lock.
  std::array<std::array<Counter*, 5>, 3> rung_counters_{};
  GaugeCallbacks callbacks_;  // last: its callbacks read the members above
};

}  // namespace sluice::render
