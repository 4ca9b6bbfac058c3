// Little's law for capacity planning (docs/overload.md, "Planning the caps"): slots divided by
// latency is throughput. Used by `sluice plan` to turn a cap into the numbers an operator alerts
// on: what the caps let through at a given dependency latency, the fraction shed, and the latency
// at which shedding starts.
#pragma once

#include <string>

#include "sluice/common/clock.h"

namespace sluice::admission {

struct PlanInput {
  /// In-flight slots per process (the create cap). Default: 50.
  int slots_per_process = 50;
  /// App processes behind the balancer. Default: 4.
  int processes = 4;
  /// Peak arrivals per second across the tier. Default: 350.
  double arrival_rate = 350;
  /// How long one unit holds its slot (the dependency latency). Default: 5 s (the sick PUT).
  Duration latency = std::chrono::seconds(5);
};

struct Plan {
  /// slots_per_process x processes.
  int total_slots = 0;
  /// total_slots / latency: the most the caps can pass per second.
  double capacity_rate = 0;
  /// min(arrival_rate, capacity_rate).
  double admitted_rate = 0;
  /// 1 - admitted / arrivals, in [0, 1].
  double shed_fraction = 0;
  /// arrival_rate x latency: what would be in flight with no cap.
  double uncapped_in_flight = 0;
  /// total_slots / arrival_rate: the latency at which the cap starts to shed (alert on this).
  Duration bites_at{};
};

/// Pure arithmetic. Precondition: slots_per_process, processes, arrival_rate and latency > 0.
Plan PlanCapacity(const PlanInput& input);

/// The text `sluice plan` prints, e.g. for 50 slots, 4 processes, 350/s and 5 s:
///   "... 40/s admitted ... about 89% shed ... bites at about 0.57 s ...".
std::string FormatPlan(const PlanInput& input, const Plan& plan);

/// "5 s", "250 ms", "0.57 s": a duration for people, about three significant digits.
std::string FormatDuration(Duration d);

}  // namespace sluice::admission
