#include "sluice/render/highlight_workers.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <thread>

#include "sluice/render/highlighter.h"

namespace sluice::render {
namespace {

using std::chrono::steady_clock;

// Long enough never to be reached on a loaded machine by an ordinary paste: the tests that want a
// deadline to pass use a paste that cannot finish in any reasonable time.
constexpr std::chrono::seconds kGenerous{120};

HighlightWorkersOptions Options(int workers) {
  HighlightWorkersOptions options;
  options.workers = workers;
  options.command = {SLUICE_HIGHLIGHT_WORKER};
  return options;
}

uint64_t CounterValue(MetricsRegistry& metrics, const std::string& series) {
  for (const auto& [name, value] : metrics.Collect()) {
    if (name == series) return static_cast<uint64_t>(value);
  }
  return 0;
}

// Quadratic for the library's regex engine: measured at about 1.4 s for 16,000 parentheses.
std::string Pathological() { return "x = " + std::string(100000, '('); }

const char* kSample =
    "#include <stdio.h>\n// comment \"quoted\" <b>\nint main(void) { return 0; }\n"
    "def f(x): return x  # python\nfn main() { let mut v = vec![1, 2]; }\n"
    "SELECT * FROM t WHERE a = 'b';\n<html><body>&amp;</body></html>\n";

TEST(HighlightWorkersTest, EveryLanguageColdAndWarmManyAtOnceMatchesTheLibraryAlone) {
  // What one thread of this process makes of each language is the reference.
  std::map<std::string, std::string> expected;
  for (const Language& language : Languages()) {
    auto html = Highlight(kSample, language.name);
    ASSERT_TRUE(html.ok()) << language.name;
    expected[language.name] = *html;
  }
  MetricsRegistry metrics;
  HighlightWorkers workers(Options(4), metrics);
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<Language> order = Languages();
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int round = 0; round < 2; ++round) {  // the first round finds most languages cold
        std::shuffle(order.begin(), order.end(), rng);
        for (const Language& language : order) {
          auto html = workers.Highlight(kSample, language.name, steady_clock::now() + kGenerous);
          if (!html.ok()) {
            failures[t] += language.name + ": " + html.error().message + "\n";
          } else if (*html != expected[language.name]) {
            failures[t] += language.name + ": differs from the library alone\n";
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const std::string& failure : failures) EXPECT_EQ(failure, "");
  EXPECT_LE(CounterValue(metrics, "sluice_highlight_workers_started_total"), 4u);
}

TEST(HighlightWorkersTest, APathologicalPasteIsKilledAtItsDeadlineAndTheWorkerReplaced) {
  MetricsRegistry metrics;
  HighlightWorkers workers(Options(1), metrics);
  ASSERT_TRUE(workers.Highlight("int x;", "c", steady_clock::now() + kGenerous).ok());
  const std::vector<pid_t> before = workers.Pids();
  ASSERT_EQ(before.size(), 1u);

  auto slow =
      workers.Highlight(Pathological(), "c", steady_clock::now() + std::chrono::milliseconds(300));
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.error().code, ErrorCode::kDeadlineExceeded);
  EXPECT_EQ(slow.error().reason, "render_timeout");
  EXPECT_TRUE(workers.Pids().empty()) << "the worker was killed, not left running";
  EXPECT_EQ(CounterValue(metrics, "sluice_highlight_worker_ends_total{cause=\"deadline\"}"), 1u);
  EXPECT_EQ(::kill(before[0], 0), -1) << "and reaped";

  auto next = workers.Highlight("int x;", "c", steady_clock::now() + kGenerous);
  ASSERT_TRUE(next.ok()) << next.error().message;
  EXPECT_NE(next->find("hl-type"), std::string::npos);
  ASSERT_EQ(workers.Pids().size(), 1u);
  EXPECT_NE(workers.Pids()[0], before[0]);
}

TEST(HighlightWorkersTest, AWorkerThatCrashesCostsOneRenderAndIsReplaced) {
  MetricsRegistry metrics;
  HighlightWorkers workers(Options(1), metrics);
  ASSERT_TRUE(workers.Highlight("x = 1", "python", steady_clock::now() + kGenerous).ok());
  ASSERT_EQ(workers.Pids().size(), 1u);
  ASSERT_EQ(::kill(workers.Pids()[0], SIGSEGV), 0);

  auto crashed = workers.Highlight("x = 1", "python", steady_clock::now() + kGenerous);
  ASSERT_FALSE(crashed.ok());
  EXPECT_EQ(crashed.error().reason, "render_failed");
  // Under the sanitizers their handler catches the SIGSEGV and exits with a status instead.
  const std::string& said = crashed.error().message;
  EXPECT_TRUE(said.find("SIGSEGV") != std::string::npos ||
              said.find("exited with status") != std::string::npos)
      << said;
  EXPECT_EQ(CounterValue(metrics, "sluice_highlight_worker_ends_total{cause=\"failed\"}"), 1u);
  EXPECT_TRUE(workers.Highlight("x = 1", "python", steady_clock::now() + kGenerous).ok());
}

TEST(HighlightWorkersTest, ShutdownEndsARenderInProgressAtOnce) {
  MetricsRegistry metrics;
  HighlightWorkers workers(Options(2), metrics);
  Result<std::string> result = std::string();
  std::thread render(
      [&] { result = workers.Highlight(Pathological(), "c", steady_clock::now() + kGenerous); });
  while (workers.Pids().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  workers.Shutdown();
  render.join();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().reason, "render_failed") << "ended by the kill, not by its deadline";
  auto after = workers.Highlight("x", "c", steady_clock::now() + kGenerous);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.error().reason, "shutting_down");
  EXPECT_TRUE(workers.Pids().empty());
}

TEST(HighlightWorkersTest, AWorkerThatCannotStartOrAnswerIsARenderFailure) {
  MetricsRegistry metrics;
  HighlightWorkersOptions missing = Options(1);
  missing.command = {"/nonexistent/sluice-worker"};
  HighlightWorkers nowhere(missing, metrics);
  auto failed = nowhere.Highlight("x", "c", steady_clock::now() + kGenerous);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().reason, "render_failed");

  HighlightWorkersOptions silent = Options(1);
  silent.command = {"/bin/true"};  // starts, reads nothing, exits
  HighlightWorkers quitter(silent, metrics);
  for (int i = 0; i < 3; ++i) {
    auto quit = quitter.Highlight("x", "c", steady_clock::now() + kGenerous);
    ASSERT_FALSE(quit.ok());
    EXPECT_EQ(quit.error().reason, "render_failed");
  }
}

TEST(HighlightWorkersTest, AWorkerInheritsNoDescriptorButItsOwn) {
  // As Asio's sockets are: no close-on-exec. A worker holding a client connection would keep it
  // open after the server closed it.
  int leaky[2];
  ASSERT_EQ(::pipe(leaky), 0);
  MetricsRegistry metrics;
  HighlightWorkers workers(Options(1), metrics);
  ASSERT_TRUE(workers.Highlight("x", "c", steady_clock::now() + kGenerous).ok());
  ASSERT_EQ(workers.Pids().size(), 1u);
  const auto fds = std::filesystem::path("/proc") / std::to_string(workers.Pids()[0]) / "fd";
  std::vector<int> open;
  for (const auto& entry : std::filesystem::directory_iterator(fds)) {
    open.push_back(std::stoi(entry.path().filename().string()));
  }
  std::sort(open.begin(), open.end());
  EXPECT_EQ(open, (std::vector<int>{0, 1, 2, 3}));
  ::close(leaky[0]);
  ::close(leaky[1]);
}

TEST(HighlightWorkersTest, AnUnknownLanguageIsRefusedWithoutAWorker) {
  MetricsRegistry metrics;
  HighlightWorkers workers(Options(1), metrics);
  auto refused = workers.Highlight("x", "brainfuck", steady_clock::now() + kGenerous);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(workers.Pids().empty());
}

}  // namespace
}  // namespace sluice::render
