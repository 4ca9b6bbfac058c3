// Retry-After of a rate-limit refusal stays within retry_after_max, whatever the wait computed or
// the shared store answered (src/service/admission_control.cc).
#include <gtest/gtest.h>

#include "../../support/run_sync.h"
#include "sluice/service/admission_control.h"

namespace sluice::service {
namespace {

using testing::RunSync;

AdmissionOptions Options() {
  AdmissionOptions o;
  o.ip_create_count = {0.001, 1};  // one create, then a wait of 1000 s
  o.ip_create_bytes = {1e9, 1e9};
  o.global_create_count = o.global_create_bytes = {1e9, 1e9};
  o.retry_after_min = 5;
  o.retry_after_max = 15;
  return o;
}

// A shared store that refuses every take with the wait it is given: what a Redis answering
// "1e308" (or a value that converts to a negative duration) looks like to admission control.
class RefusingSharedState final : public store::SharedState {
 public:
  explicit RefusingSharedState(Duration wait) : wait_(wait) {}
  boost::asio::awaitable<Result<store::SharedTakeDecision>> TakeAll(std::vector<store::BucketTake>,
                                                                    admission::Deadline) override {
    co_return store::SharedTakeDecision{false, 0, 0, wait_, false};
  }
  boost::asio::awaitable<Status> Refund(std::vector<store::BucketTake>,
                                        admission::Deadline) override {
    co_return Ok();
  }
  boost::asio::awaitable<Result<std::optional<store::PasteMeta>>> GetMeta(
      store::PasteId, admission::Deadline) override {
    co_return std::optional<store::PasteMeta>();
  }
  boost::asio::awaitable<Status> PutMeta(store::PasteMeta, std::chrono::seconds,
                                         admission::Deadline) override {
    co_return Ok();
  }
  boost::asio::awaitable<Status> Invalidate(store::PasteMeta, std::chrono::seconds,
                                            admission::Deadline) override {
    co_return Ok();
  }
  void SubscribeInvalidations(std::function<void(const store::PasteId&)>) override {}

 private:
  const Duration wait_;
};

TEST(RetryAfterClamp, ALongLocalWaitIsClampedToTheMax) {
  ManualClock clock;
  MetricsRegistry metrics;
  AdmissionControl a(Options(), clock, metrics);
  std::vector<CreateAdmission> held;
  auto first = RunSync(a.AdmitCreate("10.0.0.1", 10));
  ASSERT_TRUE(first.ok());
  held.push_back(std::move(*first));
  auto refused = RunSync(a.AdmitCreate("10.0.0.1", 10));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(refused.error().retry_after_seconds, 15);
  ASSERT_TRUE(refused.error().limit.has_value());
  EXPECT_EQ(refused.error().limit->reset_seconds, 15);
}

TEST(RetryAfterClamp, AnAbsurdSharedWaitIsClampedToTheMax) {
  for (const Duration wait : {Duration::max(), Duration::min(), Duration(-1), Duration::zero(),
                              std::chrono::duration_cast<Duration>(std::chrono::hours(24 * 365))}) {
    ManualClock clock;
    MetricsRegistry metrics;
    RefusingSharedState shared(wait);
    AdmissionControl a(Options(), clock, metrics, &shared);
    auto refused = RunSync(a.AdmitCreate("10.0.0.1", 10));
    ASSERT_FALSE(refused.ok());
    ASSERT_TRUE(refused.error().retry_after_seconds.has_value());
    const int expected = wait == Duration::zero() ? 1 : 15;
    EXPECT_EQ(*refused.error().retry_after_seconds, expected) << wait.count();
  }
}

}  // namespace
}  // namespace sluice::service
