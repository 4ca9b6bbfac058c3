// The server's asynchronous log (src/app/log_queue.h): a thread that logs never waits for the
// sink, a full queue drops its oldest lines and counts them, and nothing queued is lost at the
// end. Run under ASan and ThreadSanitizer too (Makefile, check-asan and check-tsan), since the
// queue and its writer thread are spdlog's.
#include "log_queue.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sluice::app {
namespace {

// Holds every line it is given until opened: a disk or a journald that has stopped reading.
class GatedSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void Open() {
    std::lock_guard lock(gate_mutex_);
    open_ = true;
    opened_.notify_all();
  }
  std::vector<std::string> Lines() {
    std::lock_guard lock(this->mutex_);
    return lines_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    {
      std::unique_lock lock(gate_mutex_);
      opened_.wait(lock, [this] { return open_; });
    }
    lines_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::mutex gate_mutex_;
  std::condition_variable opened_;
  bool open_ = false;
  std::vector<std::string> lines_;
};

class LogQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = spdlog::default_logger();
    sink_ = std::make_shared<GatedSink>();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink_));
  }
  void TearDown() override { spdlog::set_default_logger(saved_); }

  std::shared_ptr<spdlog::logger> saved_;
  std::shared_ptr<GatedSink> sink_;
};

// The 0.8 s creates of the primary-blip scenario: with the sink shut, a synchronous logger would
// hold this thread for good. The bound only turns that hang into a failure.
TEST_F(LogQueueTest, ALoggerNeverWaitsForAStalledSinkAndCountsWhatItDrops) {
  constexpr int kLines = 1000;
  constexpr std::size_t kQueue = 64;
  std::vector<std::string> written;
  std::uint64_t dropped = 0;
  {
    const LogQueue queue(kQueue);
    auto logged = std::async(std::launch::async, [] {
      for (int i = 0; i < kLines; ++i) spdlog::warn("line {}", i);
    });
    ASSERT_EQ(logged.wait_for(std::chrono::seconds(60)), std::future_status::ready)
        << "a logging thread waited for the sink";
    dropped = queue.Dropped();
    EXPECT_EQ(LogLinesDropped(), dropped);
    sink_->Open();
  }  // the destructor writes what is queued
  written = sink_->Lines();
  // The writer may hold one line it took before the gate, besides the queue's kQueue.
  EXPECT_GE(dropped, static_cast<std::uint64_t>(kLines) - kQueue - 1);
  EXPECT_EQ(written.size() + dropped, static_cast<std::size_t>(kLines));
  // The newest lines are kept: an operator reads the end of an incident.
  ASSERT_FALSE(written.empty());
  EXPECT_EQ(written.back(), "line " + std::to_string(kLines - 1));
}

TEST_F(LogQueueTest, EveryLineOfManyThreadsIsWrittenWhenNoneOverflows) {
  sink_->Open();
  constexpr int kThreads = 8;
  constexpr int kPerThread = 500;
  {
    const LogQueue queue(kThreads * kPerThread);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([t] {
        for (int i = 0; i < kPerThread; ++i) spdlog::info("thread {} line {}", t, i);
      });
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(queue.Dropped(), 0u);
  }
  const auto lines = sink_->Lines();
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(kThreads * kPerThread));
  // Each thread's lines in the order it logged them.
  std::vector<int> next(kThreads, 0);
  for (const auto& line : lines) {
    int t = -1, i = -1;
    ASSERT_EQ(std::sscanf(line.c_str(), "thread %d line %d", &t, &i), 2) << line;
    EXPECT_EQ(i, next[t]++) << line;
  }
}

TEST_F(LogQueueTest, DrainReturnsOnceTheWriterHasTakenEveryLine) {
  sink_->Open();
  const LogQueue queue(8192);
  for (int i = 0; i < 100; ++i) spdlog::info("before ready {}", i);
  spdlog::info("listening");
  ASSERT_TRUE(queue.Drain(std::chrono::seconds(60)));
  // Drain then flushed the sink, which waits for the line the writer may be writing.
  const auto lines = sink_->Lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), "listening");
}

TEST_F(LogQueueTest, DrainGivesUpOnAStalledSink) {
  const LogQueue queue(16);
  for (int i = 0; i < 10; ++i) spdlog::info("stuck {}", i);
  EXPECT_FALSE(queue.Drain(std::chrono::milliseconds(50)));
  sink_->Open();
}

// A stop with stdout unread: the server's last lines wait for a reader that may never come, and
// the stop must not (src/app/main.cc leaves with std::_Exit when Close gives up).
TEST_F(LogQueueTest, CloseGivesUpOnAStalledSinkAndFinishesOnceItOpens) {
  LogQueue queue(16);
  for (int i = 0; i < 10; ++i) spdlog::info("last words {}", i);
  auto closing = std::async(std::launch::async,
                            [&queue] { return queue.Close(std::chrono::milliseconds(50)); });
  ASSERT_EQ(closing.wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << "Close waited for the stalled sink";
  EXPECT_FALSE(closing.get());
  EXPECT_EQ(LogLinesDropped(), 0u) << "the queue is no longer the active one";
  sink_->Open();
  ASSERT_TRUE(queue.Close(std::chrono::seconds(60)));
  const auto lines = sink_->Lines();
  ASSERT_EQ(lines.size(), 10u);
  EXPECT_EQ(lines.back(), "last words 9");
}

TEST_F(LogQueueTest, TheSynchronousLoggerIsBackAfterwards) {
  sink_->Open();
  const auto before = spdlog::default_logger();
  {
    const LogQueue queue(8192);
    EXPECT_NE(spdlog::default_logger(), before);
  }
  EXPECT_EQ(spdlog::default_logger(), before);
  EXPECT_EQ(LogLinesDropped(), 0u);
  spdlog::info("direct");
  EXPECT_EQ(sink_->Lines().back(), "direct");
}

}  // namespace
}  // namespace sluice::app
