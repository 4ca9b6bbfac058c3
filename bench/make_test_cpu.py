#!/usr/bin/env python3
"""Where a `make test` spends the machine: wall and CPU seconds per stage, and the floor they set.

    bench/make_test_cpu.py -- bash .ci/run           # in a fresh clone; the log goes to stdout

Runs the command, passes its output through, and at every stage line `make test` prints
(`== stage: N s`, Makefile's STAGE_CLOCK) reads the machine's CPU counters from /proc/stat. The
counters are the whole machine's, so the figures are only the suite's on an otherwise quiet
machine: they also count what the tests leave running (PostgreSQL, Ceph, podman), which a
per-process count (`/usr/bin/time`) loses once a daemon leaves its parent.

The table's last line is the floor: the busy CPU seconds divided by the cores, the shortest wall
time any scheduling of the same work could reach on this machine. A cold run's compile is CPU the
warm run does not show; bench/results/make-test.md adds the cold compile measured on its own.
"""
import os
import subprocess
import sys
import time

USER_HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds():
    """(busy, idle, iowait) seconds over every core since boot. Steal is the host's, not ours."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq = fields[:7]
    return ((user + nice + system + irq + softirq) / USER_HZ, idle / USER_HZ, iowait / USER_HZ)


def main():
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.exit(__doc__)
    cores = os.cpu_count()
    marks = [("start", time.monotonic(), cpu_seconds())]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace")
    for line in process.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if line.startswith("== ") and line.rstrip().endswith(" s"):
            marks.append((line[3:].split(":")[0], time.monotonic(), cpu_seconds()))
    status = process.wait()
    marks.append(("end", time.monotonic(), cpu_seconds()))

    print(f"\n## CPU per stage ({cores} cores, whole machine, /proc/stat)\n")
    print("| up to | wall s | busy CPU s | share of the cores | iowait s |")
    print("|---|---:|---:|---:|---:|")
    for (_, then, before), (name, now, after) in zip(marks, marks[1:]):
        wall = now - then
        busy = after[0] - before[0]
        share = busy / (wall * cores) if wall > 0 else 0.0
        print(f"| {name} | {wall:.0f} | {busy:.0f} | {share:.0%} | {after[2] - before[2]:.0f} |")
    wall = marks[-1][1] - marks[0][1]
    busy = marks[-1][2][0] - marks[0][2][0]
    print(f"| **all** | **{wall:.0f}** | **{busy:.0f}** | {busy / (wall * cores):.0%} | "
          f"{marks[-1][2][2] - marks[0][2][2]:.0f} |")
    print(f"\nfloor: {busy:.0f} CPU s / {cores} cores = {busy / cores:.0f} s of wall; "
          f"exit status {status}")
    sys.exit(status)


if __name__ == "__main__":
    main()
