#!/usr/bin/env python3
"""Whether this machine's host takes CPU time away from a guest whose CPUs are all busy.

One process per CPU, each pinned to its CPU, reads the clock in a loop and counts the gaps in
which it did not run (over --gap ms). A process pinned to a CPU of its own and never sleeping can
only miss the clock if its CPU was not running at all: inside the guest nothing else is runnable
there, so a gap is time the host gave to something else. Three cases:

  one       CPU 0 busy, the others idle
  duty      CPU 0 busy, every other CPU busy --duty percent of each 10 ms and asleep the rest
  all       every CPU busy

On the 2-core VMs this project is built on (bench/results/make-test.md, "The host's 100 ms"), `all`
loses whole 100 ms periods and `one` and `duty 90` lose none: why scripts/aside.sh keeps make
test's compilers off the first CPU while the timed tests run.

usage: bench/host_stalls.py [--seconds 15] [--duty 90] [--gap 20]
"""
import argparse
import multiprocessing
import os
import time


def spin(cpu, seconds, duty, gap_s, results):
    os.sched_setaffinity(0, {cpu})
    busy_s = None if duty is None else 0.010 * duty / 100
    gaps = []
    start = last = time.monotonic()
    end = start + seconds
    while last < end:
        now = time.monotonic()
        if now - last > gap_s:
            gaps.append(now - last)
        last = now
        if busy_s is not None and (now - start) % 0.010 >= busy_s:
            time.sleep(0.010 - (now - start) % 0.010)
            last = time.monotonic()  # a sleep is not a gap
    results.put((cpu, gaps))


def run_case(name, cpus, seconds, duty, gap_s):
    results = multiprocessing.Queue()
    procs = []
    for cpu in cpus:
        cpu_duty = None if cpu == cpus[0] or name != "duty" else duty
        procs.append(multiprocessing.Process(target=spin, args=(cpu, seconds, cpu_duty, gap_s,
                                                                results)))
    if name == "one":
        procs = procs[:1]
    for p in procs:
        p.start()
    rows = [results.get() for _ in procs]
    for p in procs:
        p.join()
    for cpu, gaps in sorted(rows):
        longest = max(gaps) * 1000 if gaps else 0.0
        print(f"| {name}{f' {duty}%' if name == 'duty' else ''} | {cpu} | {len(gaps)} | "
              f"{sum(gaps) * 1000:.0f} ms | {longest:.1f} ms |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--duty", type=int, default=90, help="percent busy of the other CPUs (duty)")
    ap.add_argument("--gap", type=float, default=20, help="ms without running that counts")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("needs two CPUs or more")
    print(f"{len(cpus)} CPUs, {args.seconds:.0f} s a case, gaps over {args.gap:.0f} ms")
    print("| case | CPU | gaps | time lost | longest |")
    print("|---|---:|---:|---:|---:|")
    for name in ("one", "duty", "all"):
        run_case(name, cpus, args.seconds, args.duty, args.gap / 1000)


if __name__ == "__main__":
    main()
