#include "thread_slice.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace sluice::app {

namespace {

// The kernel's struct sched_attr (include/uapi/linux/sched/types.h, SCHED_ATTR_SIZE_VER0): glibc
// 2.36 has no sched_setattr wrapper, and the kernel's header redefines glibc's sched_param.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;  // a fair-class thread's requested slice, in ns
  uint64_t sched_deadline;
  uint64_t sched_period;
};
static_assert(sizeof(SchedAttr) == 48);

constexpr uint32_t kSchedOther = 0;
constexpr uint32_t kSchedBatch = 3;

}  // namespace

std::string RequestThreadSlice(std::chrono::nanoseconds slice) {
  if (slice.count() <= 0) return "the kernel's default (loop_slice = 0s)";
  // The call sets the policy and nice value too: keep the thread's, which an operator may have
  // chosen (CPUSchedulingPolicy=batch, Nice=).
  SchedAttr attr{};
  if (::syscall(SYS_sched_getattr, 0, &attr, sizeof(attr), 0) != 0) {
    return std::string("the kernel's default (sched_getattr: ") + std::strerror(errno) + ")";
  }
  if (attr.sched_policy != kSchedOther && attr.sched_policy != kSchedBatch) {
    return "the kernel's default (the thread's policy is not the fair scheduler's)";
  }
  attr.size = sizeof(attr);
  attr.sched_runtime = static_cast<uint64_t>(slice.count());
  if (::syscall(SYS_sched_setattr, 0, &attr, 0) != 0) {
    return std::string("the kernel's default (sched_setattr: ") + std::strerror(errno) + ")";
  }
  SchedAttr now{};
  if (::syscall(SYS_sched_getattr, 0, &now, sizeof(now), 0) != 0 || now.sched_runtime == 0) {
    return "the kernel's default (this kernel ignores a requested slice; Linux 6.12 honours it)";
  }
  // What the kernel took, which it holds between 100 µs and 100 ms.
  return std::to_string(now.sched_runtime / 1000) + "us";
}

}  // namespace sluice::app
