#include "sluice/render/view_renderer.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <thread>
#include <vector>

namespace sluice::render {
namespace {

namespace asio = boost::asio;

// `io` must outlive the renderer: an abandoned render posts back to it when it really ends.
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

TEST(ViewRendererTest, AViewFindingEverySlotBusyIsShownPlainAtOnce) {
  asio::io_context io;
  MetricsRegistry metrics;
  ViewRendererOptions options;
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

TEST(ViewRendererTest, ARenderPastItsTimeoutIsPlainAndTaggedApartFromAShed) {
  asio::io_context io;
  MetricsRegistry metrics;
  ViewRendererOptions options;
  options.slots = 1;
  options.render_delay = std::chrono::milliseconds(300);
  options.render_timeout = std::chrono::milliseconds(50);
  ViewRenderer renderer(options, SystemClock::Instance(), metrics);
  const auto text = std::make_shared<const std::string>("x = 1\n");
  const auto views = RenderAll(io, renderer, 1, "python", text);
  EXPECT_EQ(views[0].rung, admission::Rung::kPlain);
  EXPECT_EQ(views[0].Tag(), "plain; reason=render_timeout");
  // The abandoned render still finishes and fills the cache: the next view is full quality.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const auto again = RenderAll(io, renderer, 1, "python", text);
  EXPECT_EQ(again[0].Tag(), "cached");
  EXPECT_NE(
      metrics.Render().find("sluice_view_rung_total{rung=\"plain\",reason=\"render_timeout\"} 1"),
      std::string::npos);
}

}  // namespace
}  // namespace sluice::render
