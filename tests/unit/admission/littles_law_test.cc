#include "sluice/admission/littles_law.h"

#include <gtest/gtest.h>

namespace sluice::admission {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(LittlesLawTest, SickPutAtPeakAdmitsFortyASecond) {
  const PlanInput input{
      .slots_per_process = 50, .processes = 4, .arrival_rate = 350, .latency = seconds(5)};
  const Plan plan = PlanCapacity(input);
  EXPECT_EQ(plan.total_slots, 200);
  EXPECT_DOUBLE_EQ(plan.capacity_rate, 40);
  EXPECT_DOUBLE_EQ(plan.admitted_rate, 40);
  EXPECT_NEAR(plan.shed_fraction, 310.0 / 350.0, 1e-12);
  EXPECT_DOUBLE_EQ(plan.uncapped_in_flight, 1750);
  EXPECT_NEAR(std::chrono::duration<double>(plan.bites_at).count(), 200.0 / 350.0, 1e-9);
}

TEST(LittlesLawTest, FormatPlanSaysTheNumbersOfSpec000) {
  const PlanInput input{
      .slots_per_process = 50, .processes = 4, .arrival_rate = 350, .latency = seconds(5)};
  const std::string text = FormatPlan(input, PlanCapacity(input));
  EXPECT_NE(text.find("40/s admitted"), std::string::npos) << text;
  EXPECT_NE(text.find("about 89% shed"), std::string::npos) << text;
  EXPECT_NE(text.find("bites at about 0.57 s"), std::string::npos) << text;
  EXPECT_NE(text.find("1750 in flight"), std::string::npos) << text;
}

TEST(LittlesLawTest, HealthyPutShedsNothing) {
  const PlanInput input{
      .slots_per_process = 50, .processes = 4, .arrival_rate = 350, .latency = milliseconds(50)};
  const Plan plan = PlanCapacity(input);
  EXPECT_DOUBLE_EQ(plan.capacity_rate, 4000);
  EXPECT_DOUBLE_EQ(plan.admitted_rate, 350);
  EXPECT_DOUBLE_EQ(plan.shed_fraction, 0);
  EXPECT_NE(FormatPlan(input, plan).find("350/s admitted"), std::string::npos);
  EXPECT_NE(FormatPlan(input, plan).find("about 0% shed"), std::string::npos);
}

TEST(LittlesLawTest, ThirtySecondPutIsEffectivelyOff) {
  const Plan plan = PlanCapacity(
      {.slots_per_process = 50, .processes = 4, .arrival_rate = 350, .latency = seconds(30)});
  EXPECT_NEAR(plan.admitted_rate, 6.67, 0.01);
  EXPECT_GT(plan.shed_fraction, 0.98);
}

TEST(LittlesLawTest, FormatsDurationsForPeople) {
  EXPECT_EQ(FormatDuration(seconds(5)), "5 s");
  EXPECT_EQ(FormatDuration(milliseconds(571)), "0.57 s");
  EXPECT_EQ(FormatDuration(milliseconds(13)), "13 ms");
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1.5 s");
}

}  // namespace
}  // namespace sluice::admission
