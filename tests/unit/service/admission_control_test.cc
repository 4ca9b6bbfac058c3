#include "sluice/service/admission_control.h"

#include <gtest/gtest.h>

#include "../../support/run_sync.h"

namespace sluice::service {
namespace {

using testing::RunSync;

class AdmissionControlTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  MetricsRegistry metrics_;

  static AdmissionOptions Small() {
    AdmissionOptions o;
    o.ip_create_count = {1, 3};
    o.ip_create_bytes = {1000, 5000};
    o.global_create_count = {100, 100};
    o.global_create_bytes = {1e6, 1e6};
    o.create_slots = 2;
    o.create_slot_bytes = 10'000;
    o.read_slots = 2;
    o.ip_read = {1, 2};
    o.fill_cap = 4;
    o.fill_cap_per_client = 2;
    return o;
  }
  uint64_t Rejections(const std::string& reason) {
    return metrics_.GetCounter("sluice_admission_rejections_total", "", {{"reason", reason}})
        .value();
  }
};

TEST_F(AdmissionControlTest, ClientCountBucketRefusesAfterItsBurstWithTheLimitNamed) {
  AdmissionControl a(Small(), clock_, metrics_);
  for (int i = 0; i < 3; ++i) {
    auto p = RunSync(a.AdmitCreate("10.0.0.1", 10));
    ASSERT_TRUE(p.ok());
  }
  auto refused = RunSync(a.AdmitCreate("10.0.0.1", 10));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(refused.error().reason, "ip_create_count");
  EXPECT_EQ(refused.error().retry_after_seconds, 1);
  ASSERT_TRUE(refused.error().limit.has_value());
  EXPECT_EQ(refused.error().limit->quota, 3);
  EXPECT_EQ(refused.error().limit->window_seconds, 3);
  EXPECT_EQ(refused.error().limit->remaining, 0);
  EXPECT_EQ(Rejections("ip_create_count"), 1u);
  EXPECT_TRUE(RunSync(a.AdmitCreate("10.0.0.2", 10)).ok());  // another client is not affected
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_TRUE(RunSync(a.AdmitCreate("10.0.0.1", 10)).ok());
}

TEST_F(AdmissionControlTest, ByteRefusalDoesNotBurnACountToken) {
  AdmissionControl a(Small(), clock_, metrics_);
  auto refused = RunSync(a.AdmitCreate("10.0.0.1", 6000));  // over the 5000-byte burst
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().reason, "ip_create_bytes");
  EXPECT_NEAR(a.Budgets("10.0.0.1").buckets[0].available, 3, 1e-9);
}

TEST_F(AdmissionControlTest, GlobalRefusalGivesTheClientItsTokensBack) {
  AdmissionOptions o = Small();
  o.global_create_count = {1, 1};
  AdmissionControl a(o, clock_, metrics_);
  ASSERT_TRUE(RunSync(a.AdmitCreate("10.0.0.1", 10)).ok());
  auto refused = RunSync(a.AdmitCreate("10.0.0.2", 10));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().reason, "global_count");
  EXPECT_NEAR(a.Budgets("10.0.0.2").buckets[0].available, 3, 1e-9);
}

TEST_F(AdmissionControlTest, CreateSlotsShedWithJitteredRetryAfterAndRefund) {
  AdmissionControl a(Small(), clock_, metrics_);
  auto first = RunSync(a.AdmitCreate("10.0.0.1", 10));
  auto second = RunSync(a.AdmitCreate("10.0.0.2", 10));
  ASSERT_TRUE(first.ok() && second.ok());
  for (int i = 0; i < 50; ++i) {
    auto shed = RunSync(a.AdmitCreate("10.0.0." + std::to_string(3 + i % 2), 10));
    ASSERT_FALSE(shed.ok());
    EXPECT_EQ(shed.error().code, ErrorCode::kUnavailable);
    EXPECT_EQ(shed.error().reason, "create_slots");
    ASSERT_TRUE(shed.error().retry_after_seconds.has_value());
    EXPECT_GE(*shed.error().retry_after_seconds, 5);
    EXPECT_LE(*shed.error().retry_after_seconds, 15);
  }
  // Shed is not a limit: the shed clients kept their tokens.
  EXPECT_NEAR(a.Budgets("10.0.0.3").buckets[0].available, 3, 1e-9);
  first->slot.Done(admission::Outcome::kSuccess);
  EXPECT_TRUE(RunSync(a.AdmitCreate("10.0.0.3", 10)).ok());
}

TEST_F(AdmissionControlTest, CreateSlotsHoldEachClientToItsShare) {
  AdmissionOptions o = Small();
  o.ip_create_count = {100, 100};
  o.create_slots = 10;
  o.create_slots_per_client = 3;
  AdmissionControl a(o, clock_, metrics_);
  std::vector<CreateAdmission> held;
  for (int i = 0; i < 3; ++i) {
    auto p = RunSync(a.AdmitCreate("10.0.0.1", 10));
    ASSERT_TRUE(p.ok());
    held.push_back(std::move(*p));
  }
  auto refused = RunSync(a.AdmitCreate("10.0.0.1", 10));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(refused.error().reason, "create_slots_per_client");
  EXPECT_TRUE(refused.error().retry_after_seconds.has_value());
  EXPECT_EQ(Rejections("create_slots_per_client"), 1u);
  // Shed, not limited: the refused create kept its tokens.
  EXPECT_NEAR(a.Budgets("10.0.0.1").buckets[0].available, 97, 1e-9);
  EXPECT_EQ(a.Budgets("10.0.0.1").create_slots.in_use, 3);
  EXPECT_TRUE(RunSync(a.AdmitCreate("10.0.0.2", 10)).ok());  // another client has its own share
  held.pop_back();  // one create ends: its unit of the share comes back with its slot
  EXPECT_EQ(a.Budgets("10.0.0.1").create_slots.in_use, 2);
  EXPECT_TRUE(RunSync(a.AdmitCreate("10.0.0.1", 10)).ok());
}

TEST_F(AdmissionControlTest, CreateSlotsHoldEachNetworkToItsShare) {
  AdmissionOptions o = Small();
  o.ip_create_count = {100, 100};
  o.create_slots = 10;
  o.create_slots_per_client = 1;
  o.create_slots_per_network = 3;
  AdmissionControl a(o, clock_, metrics_);
  std::vector<CreateAdmission> held;
  // Three /64s of one /48: one slot each, three for the /48 in all.
  for (const char* key : {"2001:db8:1:1::/64", "2001:db8:1:2::/64", "2001:db8:1:3::/64"}) {
    auto p = RunSync(a.AdmitCreate(key, 10));
    ASSERT_TRUE(p.ok()) << key;
    held.push_back(std::move(*p));
  }
  auto refused = RunSync(a.AdmitCreate("2001:db8:1:4::/64", 10));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().reason, "create_slots_per_network");
  EXPECT_EQ(Rejections("create_slots_per_network"), 1u);
  // The refused create gave back its client's share and its tokens.
  EXPECT_NEAR(a.Budgets("2001:db8:1:4::/64").buckets[0].available, 100, 1e-9);
  // Another /48, and an IPv4 /24, have their own.
  EXPECT_TRUE(RunSync(a.AdmitCreate("2001:db8:2:1::/64", 10)).ok());
  EXPECT_TRUE(RunSync(a.AdmitCreate("203.0.113.7", 10)).ok());
  held.pop_back();
  EXPECT_TRUE(RunSync(a.AdmitCreate("2001:db8:1:4::/64", 10)).ok());
}

TEST_F(AdmissionControlTest, AUnitOfANetworksSharePromisedToOneCreateIsKeptFromTheNetworksOthers) {
  AdmissionOptions o = Small();
  o.ip_create_count = {100, 100};
  o.create_slots = 10;
  o.create_slots_per_client = 1;
  o.create_slots_per_network = 2;
  AdmissionControl a(o, clock_, metrics_);
  std::vector<CreateAdmission> held;
  for (const char* key : {"198.51.100.1", "198.51.100.2"}) {
    auto p = RunSync(a.AdmitCreate(key, 10));
    ASSERT_TRUE(p.ok()) << key;
    held.push_back(std::move(*p));
  }
  // 198.51.100.9 is refused by its /24's share, cuts one of its bodies, and the unit freed is
  // promised to it: 198.51.100.3 of the same /24 does not take it; another /24 is untouched.
  CreateSlotPromise promise = a.PromiseNetworkSlot("198.51.100.9");
  held.pop_back();
  auto other = RunSync(a.AdmitCreate("198.51.100.3", 10));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().reason, "create_slots_per_network");
  EXPECT_TRUE(RunSync(a.AdmitCreate("203.0.113.7", 10)).ok());
  auto mine = RunSync(a.AdmitCreate("198.51.100.9", 10, &promise));
  ASSERT_TRUE(mine.ok());
  EXPECT_FALSE(promise.held());  // spent
  // Spent, it holds nothing back: when a unit frees, anyone of the /24 may take it.
  held.pop_back();
  EXPECT_TRUE(RunSync(a.AdmitCreate("198.51.100.3", 10)).ok());
}

TEST_F(AdmissionControlTest, AnUnspentNetworkPromiseGivesItsUnitBack) {
  AdmissionOptions o = Small();
  o.ip_create_count = {100, 100};
  o.create_slots = 10;
  o.create_slots_per_client = 1;
  o.create_slots_per_network = 1;
  AdmissionControl a(o, clock_, metrics_);
  { CreateSlotPromise dropped = a.PromiseNetworkSlot("198.51.100.9"); }
  EXPECT_TRUE(RunSync(a.AdmitCreate("198.51.100.3", 10)).ok());
}

TEST_F(AdmissionControlTest, FullCreateCapGivesBackTheClientsShare) {
  AdmissionOptions o = Small();
  o.create_slots_per_client = 1;
  AdmissionControl a(o, clock_, metrics_);
  auto first = RunSync(a.AdmitCreate("10.0.0.1", 10));
  auto second = RunSync(a.AdmitCreate("10.0.0.2", 10));
  ASSERT_TRUE(first.ok() && second.ok());
  auto shed = RunSync(a.AdmitCreate("10.0.0.3", 10));
  ASSERT_FALSE(shed.ok());
  EXPECT_EQ(shed.error().reason, "create_slots");
  { CreateAdmission ended = std::move(*first); }  // 10.0.0.1's create ends
  // 10.0.0.3's refused attempt left nothing of its share behind.
  EXPECT_TRUE(RunSync(a.AdmitCreate("10.0.0.3", 10)).ok());
}

TEST_F(AdmissionControlTest, CreateByteCapShedsLargeBodiesFirst) {
  AdmissionOptions o = Small();
  o.ip_create_bytes = {1e9, 1e9};
  AdmissionControl a(o, clock_, metrics_);
  auto big = RunSync(a.AdmitCreate("10.0.0.1", 9000));
  ASSERT_TRUE(big.ok());
  auto refused = RunSync(a.AdmitCreate("10.0.0.2", 2000));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().reason, "create_bytes");
  EXPECT_TRUE(RunSync(a.AdmitCreate("10.0.0.2", 500)).ok());
}

TEST_F(AdmissionControlTest, OriginReadsAreLimitedPerClientAndPooled) {
  AdmissionControl a(Small(), clock_, metrics_);
  auto r1 = RunSync(a.AdmitOriginRead("10.0.0.1"));
  auto r2 = RunSync(a.AdmitOriginRead("10.0.0.1"));
  ASSERT_TRUE(r1.ok() && r2.ok());
  auto limited = RunSync(a.AdmitOriginRead("10.0.0.1"));
  ASSERT_FALSE(limited.ok());
  EXPECT_EQ(limited.error().reason, "origin_get_ip");
  auto pooled = RunSync(a.AdmitOriginRead("10.0.0.2"));  // the two read slots are taken
  ASSERT_FALSE(pooled.ok());
  EXPECT_EQ(pooled.error().reason, "read_slots");
  EXPECT_EQ(pooled.error().code, ErrorCode::kUnavailable);
}

TEST_F(AdmissionControlTest, FillCapHoldsEachClientToItsShare) {
  AdmissionControl a(Small(), clock_, metrics_);
  auto f1 = a.AdmitFill("10.0.0.1");
  auto f2 = a.AdmitFill("10.0.0.1");
  ASSERT_TRUE(f1.ok() && f2.ok());
  auto over_share = a.AdmitFill("10.0.0.1");
  ASSERT_FALSE(over_share.ok());
  EXPECT_EQ(over_share.error().reason, "fill_cap");
  auto f3 = a.AdmitFill("10.0.0.2");
  auto f4 = a.AdmitFill("10.0.0.3");
  ASSERT_TRUE(f3.ok() && f4.ok());
  auto over_cap = a.AdmitFill("10.0.0.4");  // the cap of 4 is full
  ASSERT_FALSE(over_cap.ok());
  EXPECT_EQ(Rejections("fill_cap"), 2u);
}

}  // namespace
}  // namespace sluice::service
