#include "sluice/admission/littles_law.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sluice::admission {
namespace {

// About three significant digits, trailing zeros dropped: 40, 6.67, 0.571 → "0.57".
std::string FormatNumber(double x) {
  char buf[64];
  if (std::fabs(x - std::round(x)) < 0.005 || std::fabs(x) >= 100) {
    std::snprintf(buf, sizeof(buf), "%.0f", x);
  } else if (std::fabs(x) >= 10) {
    std::snprintf(buf, sizeof(buf), "%.1f", x);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f", x);
  }
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

}  // namespace

Plan PlanCapacity(const PlanInput& input) {
  Plan plan;
  plan.total_slots = input.slots_per_process * input.processes;
  const double latency = ToSeconds(input.latency);
  plan.capacity_rate = static_cast<double>(plan.total_slots) / latency;
  plan.admitted_rate = std::min(input.arrival_rate, plan.capacity_rate);
  plan.shed_fraction = input.arrival_rate > 0 ? 1 - plan.admitted_rate / input.arrival_rate : 0;
  plan.uncapped_in_flight = input.arrival_rate * latency;
  plan.bites_at = Duration(
      static_cast<Duration::rep>(static_cast<double>(plan.total_slots) / input.arrival_rate * 1e9));
  return plan;
}

std::string FormatDuration(Duration d) {
  const double s = ToSeconds(d);
  // Seconds down to 0.1: "0.57 s" reads better than "571 ms" next to "5 s".
  if (s >= 0.1 || s == 0) return FormatNumber(s) + " s";
  if (s >= 1e-3) return FormatNumber(s * 1e3) + " ms";
  return FormatNumber(s * 1e6) + " us";
}

std::string FormatPlan(const PlanInput& input, const Plan& plan) {
  const std::string rate = FormatNumber(input.arrival_rate);
  const std::string latency = FormatDuration(input.latency);
  std::string out;
  out += "slots: " + std::to_string(input.processes) + " processes x " +
         std::to_string(input.slots_per_process) + " = " + std::to_string(plan.total_slots) +
         " in flight\n";
  out += "uncapped: " + rate + "/s x " + latency + " = " + FormatNumber(plan.uncapped_in_flight) +
         " in flight\n";
  out += "capacity: " + std::to_string(plan.total_slots) + " / " + latency + " = " +
         FormatNumber(plan.capacity_rate) + "/s\n";
  const double shed_rate = input.arrival_rate - plan.admitted_rate;
  out += FormatNumber(plan.admitted_rate) + "/s admitted, " + FormatNumber(shed_rate) +
         "/s shed (about " + FormatNumber(std::round(plan.shed_fraction * 100)) + "% shed)\n";
  out += "the cap bites at about " + FormatDuration(plan.bites_at) + " of latency (" +
         std::to_string(plan.total_slots) + " / " + rate + "/s): alert on latency above it\n";
  return out;
}

}  // namespace sluice::admission
