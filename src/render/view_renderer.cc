#include "sluice/render/view_renderer.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <mutex>
#include <thread>

#include "sluice/asio/completion.h"
#include "sluice/asio/timer.h"
#include "sluice/common/identity_memo.h"
#include "sluice/render/highlighter.h"

namespace sluice::render {

namespace asio = boost::asio;
using admission::Rung;
using admission::RungReason;

namespace {

constexpr const char* kRungHelp = "Rendered views by ladder rung and reason";

admission::DegradationLadderOptions LadderOptions(const ViewRendererOptions& options) {
  admission::DegradationLadderOptions ladder;
  ladder.slots = options.slots;
  ladder.large_paste_bytes = options.large_paste_bytes;
  ladder.initial_service_time = options.initial_service_time;
  ladder.release_points_per_second = options.release_points_per_second;
  ladder.target_utilization = options.target_utilization;
  return ladder;
}

// The first of the render and its timer to finish answers the view; the other finds it answered.
struct Race {
  std::mutex mu;
  asio_glue::Completion<Result<std::shared_ptr<const Rendering>>> done;
  // Held weakly: the waiting frame owns the timer, and the timer belongs to the waiter's
  // io_context. A worker that outlives the answer (a render past its timeout) may outlive that
  // context too, so it must neither touch the timer nor be its last owner once the race is decided.
  std::weak_ptr<asio_glue::Timer> deadline;

  // The deadline's side: the timer is the one ringing, so there is nothing to cancel.
  void Finish(Result<std::shared_ptr<const Rendering>> value) { Answer(std::move(value), false); }

  // The worker's side. The timer is cancelled under the lock and only while the race is open: the
  // waiter is still suspended then, so its frame, the timer and the timer's loop are all alive.
  void FinishFromWorker(Result<std::shared_ptr<const Rendering>> value) {
    Answer(std::move(value), true);
  }

 private:
  void Answer(Result<std::shared_ptr<const Rendering>> value, bool cancel_deadline) {
    asio_glue::Completion<Result<std::shared_ptr<const Rendering>>> take;
    {
      std::lock_guard lock(mu);
      take = std::move(done);
      if (take && cancel_deadline) {
        if (const std::shared_ptr<asio_glue::Timer> timer = deadline.lock()) timer->Cancel();
      }
    }
    if (take) take(std::move(value));
  }
};

// The cache key of the plain rung's own head (kPlainRungBytes), apart from the full plain
// rendering a plain-text paste or `?lang=text` gets under the language "".
constexpr std::string_view kPlainRungJob = "@plain-rung";

// The view shows `rendering`: its fragment is shared, never copied.
void Show(RenderedView& view, std::shared_ptr<const Rendering> rendering) {
  view.lines = rendering->lines;
  view.cut = rendering->cut;
  view.html = std::shared_ptr<const std::string>(rendering, &rendering->html);
}

}  // namespace

std::string RenderedView::Tag() const {
  std::string tag = admission::RungName(rung);
  if (reason != RungReason::kNone) {
    tag += "; reason=";
    tag += admission::RungReasonName(reason);
  }
  if (cause) {
    tag += "; cause=";
    tag += admission::ShedCauseName(*cause);
  }
  return tag;
}

ViewRenderer::ViewRenderer(ViewRendererOptions options, const Clock& clock,
                           MetricsRegistry& metrics)
    : workers_count_(std::max(1, options.slots)),
      options_(options),
      clock_(clock),
      ladder_(LadderOptions(options), clock),
      cache_(options.cache_bytes),
      workers_({.workers = workers_count_,
                .command = options.worker_command,
                .memory_limit_bytes = options.worker_memory_limit_bytes},
               metrics),
      pool_(static_cast<size_t>(workers_count_)),
      callbacks_(metrics) {
  // Only the pairs that happen: a full-quality rung has no reason, the plain rung always has one.
  const std::pair<Rung, RungReason> series[] = {
      {Rung::kCached, RungReason::kNone},         {Rung::kHighlight, RungReason::kNone},
      {Rung::kPlain, RungReason::kShedForLoad},   {Rung::kPlain, RungReason::kRenderFailed},
      {Rung::kPlain, RungReason::kRenderTimeout}, {Rung::kPlain, RungReason::kTooLarge}};
  for (const auto& [rung, reason] : series) {
    rung_counters_[static_cast<size_t>(rung)][static_cast<size_t>(reason)] = &metrics.GetCounter(
        "sluice_view_rung_total", kRungHelp,
        {{"rung", admission::RungName(rung)}, {"reason", admission::RungReasonName(reason)}});
  }
  for (auto cause : {admission::ShedCause::kPlainText, admission::ShedCause::kLarge,
                     admission::ShedCause::kKeySlice, admission::ShedCause::kSlotsFull}) {
    callbacks_.AddCounter(
        "sluice_view_shed_total", "Views shed to the plain rung, by why they were chosen",
        {{"cause", admission::ShedCauseName(cause)}}, [this, cause] {
          return double(ladder_.Snapshot().counts.shed[static_cast<size_t>(cause)]);
        });
  }
  callbacks_.Add("sluice_pool_in_use", "Units in flight per admission pool",
                 {{"pool", "highlight"}}, [this] { return double(ladder_.Snapshot().in_use); });
  callbacks_.Add("sluice_pool_limit", "Cap of each admission pool (adaptive: current)",
                 {{"pool", "highlight"}}, [this] { return double(ladder_.Snapshot().slots); });
  callbacks_.Add("sluice_view_shed_percent",
                 "Share of views needing a render sent to the plain rung now", {},
                 [this] { return ladder_.Snapshot().shed_percent; });
  callbacks_.Add("sluice_view_arrival_rate",
                 "Views needing a render per second, over the ladder's window", {},
                 [this] { return ladder_.Snapshot().arrival_rate; });
  callbacks_.Add("sluice_view_sustainable_rate",
                 "Renders per second the highlighter sustains: slots / service time", {},
                 [this] { return ladder_.Snapshot().sustainable_rate; });
  callbacks_.Add(
      "sluice_view_service_seconds", "Measured highlighter service time (moving average)", {},
      [this] { return std::chrono::duration<double>(ladder_.Snapshot().service_time).count(); });
  callbacks_.Add("sluice_render_cache_bytes", "Bytes held by the rendering cache", {},
                 [this] { return double(cache_.bytes_used()); });
}

void ViewRenderer::Reconfigure(ViewRendererOptions next) {
  const std::shared_ptr<const ViewRendererOptions> current = options_.Load();
  next.slots = std::clamp(next.slots, 1, workers_count_);
  next.cache_bytes = current->cache_bytes;
  next.initial_service_time = current->initial_service_time;
  next.worker_command = current->worker_command;
  next.worker_memory_limit_bytes = current->worker_memory_limit_bytes;
  next.bounds = current->bounds;
  // The ladder first, the snapshot last, as service::AdmissionControl::Reconfigure does: a view in
  // between is admitted by the new numbers and timed by the old ones.
  ladder_.SetLimits(LadderOptions(next));
  options_.Store(std::move(next));
}

ViewRenderer::~ViewRenderer() { Shutdown(); }

void ViewRenderer::Shutdown() {
  // Killing the workers first ends every render in progress at once, so the join cannot wait on
  // a pathological paste.
  workers_.Shutdown();
  pool_.join();
}

// A timeout can also come from a machine briefly too loaded to render anything in time; the
// memory lapses so that such a paste is highlighted again later.
constexpr std::chrono::minutes kTimedOutMemory{10};
constexpr size_t kTimedOutRemembered = 4096;

bool ViewRenderer::TimedOutBefore(const std::string& key) {
  std::lock_guard lock(timed_out_mu_);
  auto it = timed_out_.find(key);
  if (it == timed_out_.end()) return false;
  if (clock_.Now() - it->second < kTimedOutMemory) return true;
  timed_out_.erase(it);
  return false;
}

void ViewRenderer::RememberTimedOut(const std::string& key) {
  std::lock_guard lock(timed_out_mu_);
  auto [it, inserted] = timed_out_.insert_or_assign(key, clock_.Now());
  if (!inserted) return;
  timed_out_order_.push_back(key);
  while (timed_out_order_.size() > kTimedOutRemembered) {
    timed_out_.erase(timed_out_order_.front());
    timed_out_order_.pop_front();
  }
}

void ViewRenderer::Forget(std::string_view id) {
  cache_.Erase(RenderCache::Key(id, ""));
  for (const Language& language : Languages()) cache_.Erase(RenderCache::Key(id, language.name));
  cache_.Erase(RenderCache::Key(id, kMarkdownJob));
  cache_.Erase(RenderCache::Key(id, kDiffJob));
  cache_.Erase(RenderCache::Key(id, kPlainRungJob));
}

void ViewRenderer::Count(const RenderedView& view) {
  Counter* counter =
      rung_counters_[static_cast<size_t>(view.rung)][static_cast<size_t>(view.reason)];
  if (counter != nullptr) counter->Inc();
}

asio::awaitable<RenderedView> ViewRenderer::Render(std::string id,
                                                   std::shared_ptr<const std::string> text,
                                                   std::string language, std::string client_key) {
  RenderedView view;
  if (language == "text") {
    view.language.clear();
  } else if (IsLanguage(language)) {
    view.language = language;
  } else {
    // Detection reads the paste's head with some thirty searches: per request, it was a quarter
    // of the CPU of a view from the render cache (bench/results/profile/README.md).
    thread_local IdentityMemo<std::string> detected;
    view.language = detected.Get(text, [](const std::string& t) { return DetectLanguage(t); });
  }
  std::string job = view.language;
  co_return co_await RenderKeyed(std::move(view), std::move(id), text, std::move(job), text,
                                 std::move(client_key));
}

asio::awaitable<RenderedView> ViewRenderer::RenderDerived(std::string id,
                                                          std::shared_ptr<const std::string> input,
                                                          std::string_view job,
                                                          std::shared_ptr<const std::string> plain,
                                                          std::string client_key) {
  RenderedView view;
  view.language = job == kMarkdownJob ? "markdown" : "diff";
  co_return co_await RenderKeyed(std::move(view), std::move(id), std::move(input), std::string(job),
                                 std::move(plain), std::move(client_key));
}

std::shared_ptr<const Rendering> ViewRenderer::PlainOf(const std::string& id,
                                                       const std::string& text,
                                                       const ViewBounds& bounds) {
  if (auto full = cache_.Get(RenderCache::Key(id, ""))) return full;
  const std::string key = RenderCache::Key(id, kPlainRungJob);
  if (auto head = cache_.Get(key)) return head;
  auto made = std::make_shared<const Rendering>(PlainRendering(
      text,
      {.max_bytes = std::min(bounds.max_bytes, kPlainRungBytes), .max_lines = bounds.max_lines}));
  cache_.Put(key, made);
  return made;
}

std::shared_ptr<const Rendering> ViewRenderer::Finish(std::string_view job, std::string out,
                                                      const ViewHead& head,
                                                      const std::string& plain,
                                                      const ViewBounds& bounds) {
  if (job == kMarkdownJob) {
    // A document, not lines: it cannot be cut, so past the bounds its source is shown instead.
    if (out.size() <= bounds.max_bytes) {
      return std::make_shared<const Rendering>(
          Rendering{.html = std::move(out), .lines = head.lines, .cut = head.cut});
    }
  } else if (std::optional<Rendering> lines = CutLineFragment(std::move(out), head.cut, bounds)) {
    return std::make_shared<const Rendering>(std::move(*lines));
  }
  Rendering instead = PlainRendering(plain, bounds);
  instead.too_large = true;
  return std::make_shared<const Rendering>(std::move(instead));
}

asio::awaitable<RenderedView> ViewRenderer::RenderKeyed(RenderedView view, std::string id,
                                                        std::shared_ptr<const std::string> input,
                                                        std::string job,
                                                        std::shared_ptr<const std::string> plain,
                                                        std::string client_key) {
  const std::shared_ptr<const ViewRendererOptions> options = options_.Load();
  const std::string key = RenderCache::Key(id, job);
  const auto plain_rung = [&](RungReason reason) {
    Show(view, PlainOf(id, *plain, options->bounds));
    view.rung = Rung::kPlain;
    view.reason = reason;
  };
  if (auto cached = cache_.Get(key)) {
    ladder_.Decide({.client_key = client_key, .is_cached = true});
    Show(view, cached);
    view.rung = cached->too_large ? Rung::kPlain : Rung::kCached;
    if (cached->too_large) view.reason = RungReason::kTooLarge;
    Count(view);
    co_return view;
  }
  if (TimedOutBefore(key)) {
    plain_rung(RungReason::kRenderTimeout);
    Count(view);
    co_return view;
  }
  // What is rendered is the head the view shows: a diff's job is two pastes, cut after rendering.
  const ViewHead head = job == kDiffJob ? ViewHead{.text = *input, .lines = 0, .cut = false}
                                        : HeadForView(*input, options->bounds);
  // The ladder weighs a view by the page it makes: some 40 bytes a line besides the text.
  constexpr int64_t kLineBytes = 40;
  auto decision = ladder_.Decide({.client_key = client_key,
                                  .is_plain_text = view.language.empty(),
                                  .size_bytes = static_cast<int64_t>(head.text.size()) +
                                                kLineBytes * static_cast<int64_t>(head.lines)});
  if (!decision.slot) {
    plain_rung(decision.reason);
    view.cause = decision.cause;
    Count(view);
    co_return view;
  }

  // The slot travels with the work: a render abandoned at its timeout still holds it until the
  // thread is free again, so the ladder never counts a busy thread as a free slot.
  auto race = std::make_shared<Race>();
  auto executor = co_await asio::this_coro::executor;
  auto timer = std::make_shared<asio_glue::Timer>(clock_, executor);
  auto slot = std::make_shared<admission::DegradationLadder::RenderSlot>(std::move(*decision.slot));
  // The worker is killed at this deadline, so the slot is back soon after the view is answered.
  // It is on the machine's clock, not clock_: the worker is a process that runs in real time.
  const auto deadline = std::chrono::steady_clock::now() + options->render_timeout;
  const TimePoint answer_by = clock_.Now() + options->render_timeout;
  auto start = [this, race, timer, slot, input, plain, head, key, lang = std::move(job), options,
                deadline, answer_by](
                   asio_glue::Completion<Result<std::shared_ptr<const Rendering>>> done) mutable {
    race->done = std::move(done);
    race->deadline = timer;
    timer->AsyncWaitUntil(answer_by, [race](bool reached) {
      if (reached) {
        race->Finish(MakeError(ErrorCode::kDeadlineExceeded, "render timed out", "render_timeout"));
      }
    });
    // `input` and `plain` ride along: `head` views the text they keep alive.
    asio::post(pool_, [this, race, slot, input, plain, head, key, lang, options, deadline] {
      if (options->render_delay.count() > 0) std::this_thread::sleep_for(options->render_delay);
      Result<std::shared_ptr<const Rendering>> out = MakeError(ErrorCode::kInternal, "", "");
      if (lang.empty()) {
        out = std::make_shared<const Rendering>(PlainRendering(*input, options->bounds));
      } else if (Result<std::string> made = workers_.Highlight(head.text, lang, deadline);
                 made.ok()) {
        out = Finish(lang, std::move(*made), head, *plain, options->bounds);
      } else {
        out = made.error();
      }
      bool late = false;
      {
        std::lock_guard lock(race->mu);
        late = !race->done;
      }
      if (!out.ok()) {
        const bool timed_out = out.error().code == ErrorCode::kDeadlineExceeded;
        if (timed_out) RememberTimedOut(key);
        slot->Failed(timed_out ? RungReason::kRenderTimeout : RungReason::kRenderFailed);
      } else {
        cache_.Put(key, *out);
        if (late) {
          slot->Failed(RungReason::kRenderTimeout);
        } else {
          slot->Done();
        }
      }
      race->FinishFromWorker(std::move(out));
    });
  };
  auto awaiting =
      asio_glue::AwaitCompletion<Result<std::shared_ptr<const Rendering>>>(std::move(start));
  Result<std::shared_ptr<const Rendering>> rendered = co_await std::move(awaiting);
  if (rendered.ok()) {
    Show(view, *rendered);
    view.rung = (*rendered)->too_large ? Rung::kPlain : Rung::kHighlight;
    if ((*rendered)->too_large) view.reason = RungReason::kTooLarge;
  } else {
    const bool timed_out = rendered.error().code == ErrorCode::kDeadlineExceeded;
    plain_rung(timed_out ? RungReason::kRenderTimeout : RungReason::kRenderFailed);
    // Remembered when the view is answered, not only when the worker is killed: the kill is on
    // the machine's clock and may come later than the answer on clock_ (a ManualClock in tests).
    if (timed_out) RememberTimedOut(key);
  }
  Count(view);
  co_return view;
}

}  // namespace sluice::render
