#include "sluice/render/view_renderer.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>
#include <thread>
#include <vector>

namespace sluice::render {
namespace {

namespace asio = boost::asio;

std::vector<RenderedView> RenderAll(asio::io_context& io, ViewRenderer& renderer, int n,
                                    std::string language, std::shared_ptr<const std::string> text) {
  io.restart();
  std::vector<RenderedView> views(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    asio::co_spawn(
        io,
        [&renderer, &views, i, language, text]() -> asio::awaitable<void> {
          auto rendering = renderer.Render("AAAAAAAAAAAA", text, language, "client");
          views[static_cast<size_t>(i)] = co_await std::move(rendering);
        },
        asio::detached);
  }
  io.run();
  return views;
}

ViewRendererOptions Options() {
  ViewRendererOptions options;
  options.worker_command = {SLUICE_HIGHLIGHT_WORKER};
  return options;
}

RenderedView RenderOne(asio::io_context& io, ViewRenderer& renderer, std::string_view job,
                       std::shared_ptr<const std::string> text, std::string id = "AAAAAAAAAAAA") {
  io.restart();
  RenderedView view;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        if (job == kMarkdownJob) {
          auto rendering = renderer.RenderDerived(id, text, job, text, "client");
          view = co_await std::move(rendering);
        } else {
          auto rendering = renderer.Render(id, text, std::string(job), "client");
          view = co_await std::move(rendering);
        }
      },
      asio::detached);
  io.run();
  return view;
}

// Starts one view of `text` as C on `io`; `view` holds it once answered (the test runs `io`).
void StartCRender(asio::io_context& io, ViewRenderer& renderer,
                  std::shared_ptr<const std::string> text, std::optional<RenderedView>& view) {
  asio::co_spawn(
      io,
      [&renderer, text, &view]() -> asio::awaitable<void> {
        auto rendering = renderer.Render("AAAAAAAAAAAA", text, "c", "client");
        view = co_await std::move(rendering);
      },
      asio::detached);
}

// A view shows the head of a paste within its bounds, whatever rung makes it, and says so.
TEST(ViewRendererTest, AViewPastItsBoundsShowsTheHeadOnEveryRung) {
  asio::io_context io;
  MetricsRegistry metrics;
  ViewRendererOptions options = Options();
  options.bounds = {.max_bytes = 64 << 10, .max_lines = 1000};
  ViewRenderer renderer(options, SystemClock::Instance(), metrics);
  std::string code;
  for (int i = 0; i < 5000; ++i) code += "x = " + std::to_string(i) + "\n";
  const auto text = std::make_shared<const std::string>(code);

  const RenderedView highlighted = RenderOne(io, renderer, "python", text);
  EXPECT_EQ(highlighted.Tag(), "highlighted");
  EXPECT_TRUE(highlighted.cut);
  // Highlighted, a line is some 100 bytes: the byte bound cuts before the line bound.
  EXPECT_GT(highlighted.lines, 100u);
  EXPECT_LT(highlighted.lines, 1000u);
  EXPECT_TRUE(highlighted.html->ends_with("</span>\n"));
  EXPECT_LE(highlighted.html->size(), options.bounds.max_bytes);
  const RenderedView cached = RenderOne(io, renderer, "python", text);
  EXPECT_EQ(cached.Tag(), "cached");
  EXPECT_TRUE(cached.cut);
  EXPECT_EQ(cached.html.get(), highlighted.html.get()) << "a cached page is shared, not copied";

  const RenderedView plain = RenderOne(io, renderer, "text", text);
  EXPECT_TRUE(plain.cut);
  EXPECT_EQ(plain.lines, 1000u);
  EXPECT_LE(plain.html->size(), options.bounds.max_bytes);
}

// Markdown is a document, not lines, so it cannot be cut: one line of nested quotes renders to
// 27 bytes a character. Past the bounds the view is the plain source, tagged so, and remembered
// in the cache so that the next view spends no slot on it.
TEST(ViewRendererTest, MarkdownThatRendersPastTheBoundsIsShownAsItsSourceTaggedTooLarge) {
  asio::io_context io;
  MetricsRegistry metrics;
  ViewRendererOptions options = Options();
  options.bounds = {.max_bytes = 64 << 10, .max_lines = 1000};
  ViewRenderer renderer(options, SystemClock::Instance(), metrics);
  const auto quotes = std::make_shared<const std::string>(std::string(10'000, '>') + " deep\n");
  const RenderedView first = RenderOne(io, renderer, kMarkdownJob, quotes);
  EXPECT_EQ(first.Tag(), "plain; reason=too_large");
  EXPECT_LE(first.html->size(), options.bounds.max_bytes);
  const RenderedView again = RenderOne(io, renderer, kMarkdownJob, quotes);
  EXPECT_EQ(again.Tag(), "plain; reason=too_large");
  EXPECT_EQ(again.html.get(), first.html.get());
  EXPECT_EQ(renderer.Snapshot().in_use, 0);

  const auto small = std::make_shared<const std::string>("> one quote\n");
  EXPECT_EQ(RenderOne(io, renderer, kMarkdownJob, small, "BBBBBBBBBBBB").Tag(), "highlighted");
}

// The plain rung is what a busy highlighter leaves: it renders on the event loop, so at most
// kPlainRungBytes of page, once, then shared from the cache.
TEST(ViewRendererTest, ThePlainRungRendersABoundedHeadOnceAndSharesIt) {
  asio::io_context io;
  MetricsRegistry metrics;
  ViewRendererOptions options = Options();
  options.slots = 1;
  options.render_delay = std::chrono::milliseconds(200);
  // The view that holds the slot must not time out into the plain rung itself, however long a
  // loaded machine under ASan takes to highlight it (it once did, making three plain views).
  options.render_timeout = std::chrono::minutes(5);
  ViewRenderer renderer(options, SystemClock::Instance(), metrics);
  const auto text = std::make_shared<const std::string>(std::string(900'000, '\n'));
  const auto views = RenderAll(io, renderer, 3, "python", text);
  std::vector<const std::string*> plain;
  for (const RenderedView& view : views) {
    if (view.rung != admission::Rung::kPlain) continue;
    EXPECT_TRUE(view.cut);
    EXPECT_LE(view.html->size(), kPlainRungBytes);
    plain.push_back(view.html.get());
  }
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain[0], plain[1]);
}

TEST(ViewRendererTest, AViewFindingEverySlotBusyIsShownPlainAtOnce) {
  asio::io_context io;
  MetricsRegistry metrics;
  ViewRendererOptions options = Options();
  options.slots = 1;
  options.cache_bytes = 0;
  options.render_delay = std::chrono::milliseconds(100);
  ViewRenderer renderer(options, SystemClock::Instance(), metrics);
  const auto views =
      RenderAll(io, renderer, 3, "python", std::make_shared<const std::string>("x = 1\n"));
  int highlighted = 0, full = 0;
  for (const RenderedView& view : views) {
    if (view.rung == admission::Rung::kHighlight) ++highlighted;
    if (view.cause == admission::ShedCause::kSlotsFull) {
      ++full;
      EXPECT_EQ(view.Tag(), "plain; reason=shed_for_load; cause=slots_full");
    }
  }
  EXPECT_EQ(highlighted, 1);
  EXPECT_EQ(full, 2);
}

// A reload (docs/operations.md, "Reload"): the slots up to the workers started, the timeout for the
// next view.
TEST(ViewRendererTest, AReloadCapsTheSlotsAtTheWorkersStartedAndTimesTheNextView) {
  asio::io_context io;
  MetricsRegistry metrics;
  ViewRendererOptions options = Options();
  options.slots = 2;
  options.cache_bytes = 0;
  ViewRenderer renderer(options, SystemClock::Instance(), metrics);
  ASSERT_EQ(renderer.workers(), 2);
  ViewRendererOptions next = options;
  next.slots = 5;
  renderer.Reconfigure(next);
  EXPECT_EQ(renderer.Snapshot().slots, 2);
  EXPECT_EQ(renderer.options()->slots, 2);

  next.slots = 1;
  next.render_delay = std::chrono::milliseconds(100);
  renderer.Reconfigure(next);
  EXPECT_EQ(renderer.Snapshot().slots, 1);
  const auto text = std::make_shared<const std::string>("x = 1\n");
  int highlighted = 0, full = 0;
  for (const RenderedView& view : RenderAll(io, renderer, 2, "python", text)) {
    if (view.rung == admission::Rung::kHighlight) ++highlighted;
    if (view.cause == admission::ShedCause::kSlotsFull) ++full;
  }
  EXPECT_EQ(highlighted, 1);
  EXPECT_EQ(full, 1);

  while (renderer.Snapshot().in_use != 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  next.render_timeout = std::chrono::milliseconds(20);  // below the 100 ms every render takes
  renderer.Reconfigure(next);
  const auto late =
      RenderAll(io, renderer, 1, "python", std::make_shared<const std::string>("y\n"));
  EXPECT_EQ(late[0].Tag(), "plain; reason=render_timeout");
}

// On a ManualClock: the timeout comes when the test moves the clock, so the last view (which must
// be highlighted) cannot time out however long a loaded machine takes to start its worker (on
// the system clock it once did, at a load average of 10).
TEST(ViewRendererTest, ARenderPastItsTimeoutIsPlainTaggedApartFromAShedAndNotTriedAgain) {
  asio::io_context io;
  MetricsRegistry metrics;
  ManualClock clock;
  ViewRendererOptions options = Options();
  options.slots = 1;
  options.render_timeout = std::chrono::milliseconds(300);
  ViewRenderer renderer(options, clock, metrics);
  // Quadratic for the library: minutes of CPU if it were let run.
  const auto text = std::make_shared<const std::string>("x = " + std::string(100000, '('));
  std::optional<RenderedView> view;
  StartCRender(io, renderer, text, view);
  io.poll();
  clock.Advance(options.render_timeout);
  while (!view) io.run_one();
  EXPECT_EQ(view->rung, admission::Rung::kPlain);
  EXPECT_EQ(view->Tag(), "plain; reason=render_timeout");
  // The worker was killed at the deadline, so the slot comes back without the render finishing.
  while (renderer.Snapshot().in_use != 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(renderer.WorkerPids().empty());

  const auto again = RenderAll(io, renderer, 1, "c", text);
  EXPECT_EQ(again[0].Tag(), "plain; reason=render_timeout");
  EXPECT_TRUE(renderer.WorkerPids().empty()) << "the second view took no slot and no worker";
  EXPECT_NE(
      metrics.Render().find("sluice_view_rung_total{rung=\"plain\",reason=\"render_timeout\"} 2"),
      std::string::npos);
  // Remembered by paste and language: the same paste in another language is tried afresh. The
  // renderer's timer counts the timeout's length in real time from the clock's now, so the last
  // view gets a long one: at 300 ms a loaded machine under ASan once timed it out too.
  options.render_timeout = std::chrono::minutes(5);
  renderer.Reconfigure(options);
  const auto other = RenderAll(io, renderer, 1, "python", std::make_shared<const std::string>("x"));
  EXPECT_EQ(other[0].Tag(), "highlighted");
}

// The render timeout on a ManualClock (docs/overload.md, "The view"): the view is answered plain
// when the clock reaches render_timeout, not a moment before, and whatever real time the worker
// takes. No sleep: the quadratic paste keeps the worker busy until the renderer kills it.
TEST(OverloadPathRenderTest, TheRenderTimeoutSendsTheViewToPlainOnTheClock) {
  asio::io_context io;
  MetricsRegistry metrics;
  ManualClock clock;
  ViewRendererOptions options = Options();
  options.slots = 1;
  ViewRenderer renderer(options, clock, metrics);
  const auto text = std::make_shared<const std::string>("x = " + std::string(100000, '('));
  std::optional<RenderedView> view;
  StartCRender(io, renderer, text, view);
  io.poll();
  ASSERT_EQ(clock.NextAlarm(), clock.Now() + options.render_timeout);
  clock.Advance(options.render_timeout - std::chrono::nanoseconds(1));
  io.poll();
  EXPECT_FALSE(view.has_value()) << "answered before the render timeout";
  clock.Advance(std::chrono::nanoseconds(1));
  // The answer is posted to the view's executor; a render that really ended meanwhile would also
  // post, so run until the view is in.
  while (!view) io.run_one();
  EXPECT_EQ(view->Tag(), "plain; reason=render_timeout");
  EXPECT_EQ(clock.PendingAlarms(), 0u);
  // The render still holds its slot (its worker is not dead yet), so the view is answered without
  // waiting on it, and the paste is remembered: the next view is plain at once.
  view.reset();
  StartCRender(io, renderer, text, view);
  io.restart();  // it stopped when it ran out of work
  while (!view) io.run_one();
  EXPECT_EQ(view->Tag(), "plain; reason=render_timeout");
  EXPECT_EQ(clock.PendingAlarms(), 0u) << "a remembered timeout arms no timer";
}

// The loop a view waited on may be gone before a render abandoned at its timeout really ends: a
// request's loop in the fuzzers, the server's at shutdown. The worker must leave the view's
// deadline timer alone then (under ASan this was a use-after-free of the loop's timer service).
TEST(ViewRendererTest, ARenderEndingAfterItsViewsLoopIsGoneTouchesNothingOfThatLoop) {
  MetricsRegistry metrics;
  ViewRendererOptions options = Options();
  options.slots = 1;
  options.cache_bytes = 0;
  options.render_timeout = std::chrono::milliseconds(20);
  // The worker ends long after the view, so a stalled machine cannot end it before the check below.
  options.render_delay = std::chrono::seconds(1);
  ViewRenderer renderer(options, SystemClock::Instance(), metrics);
  {
    asio::io_context io;
    const auto views =
        RenderAll(io, renderer, 1, "python", std::make_shared<const std::string>("x = 1\n"));
    EXPECT_EQ(views[0].Tag(), "plain; reason=render_timeout");
    EXPECT_EQ(renderer.Snapshot().in_use, 1) << "the abandoned render still holds its slot";
  }
  while (renderer.Snapshot().in_use != 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  asio::io_context next;
  const auto text = std::make_shared<const std::string>("y = 2\n");
  options.render_delay = std::chrono::milliseconds(0);
  options.render_timeout = std::chrono::seconds(30);
  renderer.Reconfigure(options);
  // Another language: the timed-out one is remembered for this paste.
  EXPECT_EQ(RenderAll(next, renderer, 1, "c", text)[0].Tag(), "highlighted");
}

TEST(ViewRendererTest, AWorkerKilledFromOutsideCostsOneViewItsHighlighting) {
  asio::io_context io;
  MetricsRegistry metrics;
  ViewRendererOptions options = Options();
  options.slots = 1;
  options.cache_bytes = 0;
  ViewRenderer renderer(options, SystemClock::Instance(), metrics);
  const auto text = std::make_shared<const std::string>("x = 1\n");
  ASSERT_EQ(RenderAll(io, renderer, 1, "python", text)[0].Tag(), "highlighted");
  ASSERT_EQ(renderer.WorkerPids().size(), 1u);
  ::kill(renderer.WorkerPids()[0], SIGKILL);
  EXPECT_EQ(RenderAll(io, renderer, 1, "python", text)[0].Tag(), "plain; reason=render_failed");
  EXPECT_EQ(RenderAll(io, renderer, 1, "python", text)[0].Tag(), "highlighted");
}

}  // namespace
}  // namespace sluice::render
