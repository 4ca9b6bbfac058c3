#include "sluice/common/metrics.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace sluice {
namespace {

// A count kept elsewhere (the view ladder's shed counts, src/render/view_renderer.cc) is exposed
// as a counter: Prometheus's rate() and promtool's lint both go by the TYPE line.
TEST(MetricsRegistry, CounterCallbackIsTypedCounterAndReadAtRenderTime) {
  MetricsRegistry metrics;
  double shed = 2;
  metrics.AddCounterCallback("demo_shed_total", "Views shed", {{"cause", "large"}},
                             [&shed] { return shed; });
  shed = 5;
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("# HELP demo_shed_total Views shed\n# TYPE demo_shed_total counter\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("demo_shed_total{cause=\"large\"} 5\n"), std::string::npos) << text;
}

TEST(MetricsRegistry, GaugeCallbackStaysTypedGauge) {
  MetricsRegistry metrics;
  metrics.AddGaugeCallback("demo_in_use", "Units in use", {}, [] { return 3.0; });
  EXPECT_NE(metrics.Render().find("# TYPE demo_in_use gauge\ndemo_in_use 3\n"), std::string::npos);
}

TEST(MetricsRegistry, OneNameCannotBeBothCounterAndGauge) {
  MetricsRegistry metrics;
  metrics.AddCounterCallback("demo_total", "Demo", {}, [] { return 1.0; });
  EXPECT_THROW(metrics.AddGaugeCallback("demo_total", "Demo", {{"a", "b"}}, [] { return 1.0; }),
               std::logic_error);
}

// The renderer's shed counts read `this`: once their owner's GaugeCallbacks goes, they are gone
// from /metrics and never called again.
TEST(MetricsRegistry, CounterCallbackGoesWithItsOwner) {
  MetricsRegistry metrics;
  int calls = 0;
  {
    GaugeCallbacks owned(metrics);
    owned.AddCounter("demo_shed_total", "Views shed", {}, [&calls] {
      ++calls;
      return 1.0;
    });
    EXPECT_NE(metrics.Render().find("demo_shed_total 1\n"), std::string::npos);
  }
  EXPECT_EQ(metrics.Render().find("demo_shed_total 1"), std::string::npos);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace sluice
