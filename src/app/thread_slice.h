// A shorter time slice for the event loops, asked of Linux's EEVDF scheduler (6.12 and later
// honour a fair-class thread's requested slice; older kernels accept the call and ignore it).
//
// Why: on a machine whose cores are shared (with the load balancer, a sidecar, the benchmark's own
// client), a loop that wakes with ready requests waits for the running thread's slice to end. A
// requested slice shorter than the default gives the loop an earlier deadline, so it runs soon
// after it wakes, and a loop spends most of its time blocked in epoll anyway. In interleaved hot
// reads at 64 connections on 2 cores shared with wrk, 100 µs took the p99 from 5.09 to 4.48 ms
// (nginx 5.03), and creates were unchanged (bench/results/loop-slice.md).
#pragma once

#include <chrono>
#include <string>

namespace sluice::app {

/// Asks for `slice` for the calling thread; zero asks for nothing. Returns what happened, for the
/// start log: the slice the kernel took ("100us"; it holds a request between 100 µs and 100 ms),
/// or why the kernel's default stays.
std::string RequestThreadSlice(std::chrono::nanoseconds slice);

}  // namespace sluice::app
