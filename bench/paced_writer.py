#!/usr/bin/env python3
"""A co-tenant that writes at a fixed rate: MB megabytes to FILE at MB_PER_S, 1 MiB at a time, no
fsync (a log shipper or a backup next door), then prints its own CPU and wall time.

    bench/paced_writer.py FILE MB MB_PER_S

`dd` writes as fast as the page cache takes it, which varies between runs by a factor of three on
the benchmark machine (bench/results/creates.md: 2.1-8.2 CPU-seconds for the same 3 GB); a fixed
rate makes the co-tenant the same weight in every round (bench/run_create_bench.sh, DD_MB_PER_S).
"""

import os
import resource
import sys
import time

CHUNK = 1 << 20


def main():
    path, total_mb, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    if rate <= 0 or total_mb <= 0:
        sys.exit("MB and MB_PER_S must be positive")
    chunk = os.urandom(CHUNK)  # not zeros: nothing along the way may shortcut them
    started = time.monotonic()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for n in range(total_mb):
            due = started + n / rate
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            os.write(fd, chunk)
    finally:
        os.close(fd)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"dd_cpu_s {usage.ru_utime + usage.ru_stime:.1f}")
    print(f"dd_wall_s {time.monotonic() - started:.1f}")


if __name__ == "__main__":
    main()
