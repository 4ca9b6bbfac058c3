#!/usr/bin/env python3
"""Does a co-tenant writer slow the flush a create waits for? Latency of the embedded store's
durable write (a 16 KB append to a file that already has its blocks, then fdatasync: what a batch's
WAL commit does, bench/fsync_probe.py's wal_batch) alone and beside `dd` writing to the same
filesystem without syncing (bench/run_create_bench.sh's co-tenant), interleaved for ROUNDS rounds.

Usage: sync_beside_writer.py DIR [--rounds 3] [--seconds 5] [--dd-mb 3000] [--ionice-rt]
DIR: a directory on the data dir's filesystem. One line per run: syncs per second, p50, p99 and max
latency, and for the co-tenant runs dd's own CPU-seconds and wall time. --ionice-rt runs the
probe in the realtime I/O class (needs root), to see whether the block layer's queue is the wait.

If the flush is as fast beside `dd` as alone, the co-tenant costs creates CPU, not disk time.
Standard library only.
"""
import argparse
import os
import resource
import subprocess
import sys
import time

RECORD = os.urandom(16 * 1024)
FILE_BYTES = 64 * 1024 * 1024  # wraps as SQLite's kept WAL does


def probe(path, seconds):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        # Untimed: the blocks exist first, as in a WAL at its working size.
        chunk = b"\0" * (1024 * 1024)
        for _ in range(FILE_BYTES // len(chunk)):
            os.write(fd, chunk)
        os.fsync(fd)
        latencies, offset = [], 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.monotonic()
            os.pwrite(fd, RECORD, offset)
            os.fdatasync(fd)
            latencies.append(time.monotonic() - started)
            offset = (offset + len(RECORD)) % FILE_BYTES
        return latencies
    finally:
        os.close(fd)
        os.unlink(path)


def describe(latencies, seconds):
    latencies = sorted(latencies)
    at = lambda q: latencies[min(len(latencies) - 1, int(len(latencies) * q))] * 1e3  # noqa: E731
    return (f"{len(latencies) / seconds:.0f} syncs/s, p50 {at(0.5):.3f} ms, p99 {at(0.99):.3f} ms, "
            f"max {latencies[-1] * 1e3:.1f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--dd-mb", type=int, default=3000)
    ap.add_argument("--ionice-rt", action="store_true")
    args = ap.parse_args()
    if args.ionice_rt:
        # IOPRIO_WHO_PROCESS = 1, class RT = 1 << 13, level 4; SYS_ioprio_set is 251 on x86_64.
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(251, 1, 0, (1 << 13) | 4) != 0:
            sys.exit(f"ioprio_set: {os.strerror(ctypes.get_errno())}")
    probe_path = os.path.join(args.dir, f"sync-probe-{os.getpid()}")
    dd_path = os.path.join(args.dir, f"co-tenant-{os.getpid()}.bin")
    for r in range(1, args.rounds + 1):
        print(f"round {r} alone: {describe(probe(probe_path, args.seconds), args.seconds)}", flush=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        dd = subprocess.Popen(["dd", "if=/dev/zero", f"of={dd_path}", "bs=1M",
                               f"count={args.dd_mb}", "status=none"])
        try:
            latencies = probe(probe_path, args.seconds)
        finally:
            dd.wait()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        dd_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(f"round {r} beside dd: {describe(latencies, args.seconds)}; dd {dd_cpu:.1f} CPU-s, "
              f"{time.monotonic() - started:.1f} s wall", flush=True)
        os.unlink(dd_path)
        os.sync()  # untimed: its writeback and discards finish before the next quiet run


if __name__ == "__main__":
    main()
