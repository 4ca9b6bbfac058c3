#!/usr/bin/env python3
"""What a report costs, and what a report flood costs everyone else (docs/moderation.md, "Cost";
bench/results/moderation.md).

    bench/report_flood.py --before /work/main/build/dev/sluice --after build/dev/sluice

For each binary, on the embedded store, with open reports seeded into meta.db while the server is
stopped (tests/lib/report_seed.py, which knows both schemas):

  cost   the latency of 20 reports, one after another, each from a network of its own, at 0,
         10,000 and 100,000 open reports (--sizes to change them);
  queue  the latency of the operator's first page of the review queue (GET /admin/reports,
         100 pastes), five times, at the same sizes;
  reads  the share of an unrelated client's reads (no cache: each one reaches the store, with the
         default budgets) answered 503 while 10 addresses each report once a second for 30 s, on
         10,000 open reports, and in the 15 s after;
  wal    the largest meta.db-wal seen while 16 reporters flood reports from fresh networks and a
         writer creates 1 KB pastes 30 times a second, for 30 s, on 10,000 open reports.

A binary from before the review queue is stopped with SIGKILL: its abandoned queue queries would
hold the read pool's threads (and its shutdown) for hours.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from report_seed import seed_open_reports  # noqa: E402
from sluice_harness import SluiceServer  # noqa: E402


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else 0


def ms(seconds):
    return f"{seconds * 1000:.1f}"


class Run:
    """One server of one binary, seeded with `open_reports` before it serves."""

    def __init__(self, binary, open_reports, extra=()):
        self.binary = binary
        os.environ["SLUICE_BIN"] = binary
        self.s = SluiceServer(["--trusted-proxy", "127.0.0.1", "--report-burst", "100000",
                               "--report-rate", "100000", *extra])
        self.s.start()
        self.targets = [self.s.create_ok(b"target %d\n" % n)["id"] for n in range(40)]
        self.unrelated = self.s.create_ok(b"an unrelated paste\n")["id"]
        self.s.stop()
        self.seeded = seed_open_reports(self.s.db_path, open_reports) if open_reports else []
        self.s.start()

    def report(self, paste_id, key):
        started = time.monotonic()
        res = self.s.request("POST", f"/api/v1/pastes/{paste_id}/report",
                             body=json.dumps({"reason": "spam", "note": "n" * 200}),
                             headers={"Content-Type": "application/json", "X-Forwarded-For": key},
                             timeout=60)
        return res.status, time.monotonic() - started

    def close(self):
        self.s.kill()
        self.s.cleanup()


def new_args(binary):
    """What only the binary with the review queue knows: the global report rate lifted, so the
    measurements measure the store, not the bucket, and the open-report cap above the largest
    size, so every report is stored as it would be below the cap."""
    out = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True).stdout
    if "report-global-rate" not in out:
        return []
    return ["--report-global-rate", "100000", "--report-global-burst", "100000",
            "--max-open-reports", "10000000"]


def cost(binary, sizes):
    rows = []
    for size in sizes:
        run = Run(binary, size, new_args(binary))
        try:
            times, statuses = [], {}
            for n in range(20):
                status, took = run.report(run.targets[n], f"10.200.{n}.1")
                times.append(took)
                statuses[status] = statuses.get(status, 0) + 1
            rows.append((size, pct(times, 50), pct(times, 90), max(times), statuses))
        finally:
            run.close()
    return rows


def queue(binary, sizes):
    rows = []
    for size in sizes:
        run = Run(binary, size, new_args(binary))
        try:
            times, statuses = [], {}
            for _ in range(5):
                started = time.monotonic()
                res = run.s.admin_request("GET", "/admin/reports?limit=100", timeout=60)
                times.append(time.monotonic() - started)
                statuses[res.status] = statuses.get(res.status, 0) + 1
            rows.append((size, pct(times, 50), max(times), statuses))
        finally:
            run.close()
    return rows


def reads(binary, size=10_000, seconds=30.0, after=15.0):
    run = Run(binary, size, ["--cache-bytes", "0", *new_args(binary)])
    try:
        phase = {"name": "flood"}
        records = []
        stop = threading.Event()
        flood_over = threading.Event()

        def reader():
            while not stop.is_set():
                res = run.s.get(f"/raw/{run.unrelated}")
                records.append((phase["name"], res.status))

        def reporter(n):
            i = 0
            while not flood_over.is_set():
                i += 1
                paste_id = (run.targets + run.seeded)[(n * 7919 + i) % (len(run.targets) + size)]
                run.report(paste_id, f"10.{100 + n}.{i % 256}.1")
                flood_over.wait(1.0)

        threads = [threading.Thread(target=reader)]
        threads += [threading.Thread(target=reporter, args=(n,)) for n in range(10)]
        for t in threads:
            t.start()
        time.sleep(seconds)
        flood_over.set()
        phase["name"] = "after"
        time.sleep(after)
        stop.set()
        for t in threads:
            t.join(timeout=120)
        out = {}
        for name in ("flood", "after"):
            mine = [s for p, s in records if p == name]
            out[name] = (len(mine), sum(1 for s in mine if s == 503) / max(1, len(mine)))
        return out
    finally:
        run.close()


def wal(binary, size=10_000, seconds=30.0):
    run = Run(binary, size, new_args(binary))
    try:
        stop = threading.Event()
        samples, reports, creates = [], [], []
        path = run.s.db_path + "-wal"

        def reporter(n):
            i = 0
            while not stop.is_set():
                i += 1
                paste_id = (run.targets + run.seeded)[(n * 7919 + i) % (len(run.targets) + size)]
                reports.append(run.report(paste_id, f"172.{16 + n}.{i % 256}.{i // 256 % 256}")[0])

        def creator():
            n = 0
            while not stop.is_set():
                n += 1
                res = run.s.request("POST", "/api/v1/pastes", body=b"c" * 1024 + b"%d\n" % n)
                creates.append(res.status)
                time.sleep(1 / 30)

        def sampler():
            while not stop.is_set():
                try:
                    samples.append(os.path.getsize(path))
                except OSError:
                    pass
                time.sleep(0.1)

        threads = [threading.Thread(target=creator), threading.Thread(target=sampler)]
        threads += [threading.Thread(target=reporter, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join(timeout=120)
        return (max(samples or [0]), samples[-1] if samples else 0, len(reports),
                sum(1 for s in reports if s in (200, 202)), len(creates),
                sum(1 for s in creates if s == 201))
    finally:
        run.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, help="the binary from before")
    parser.add_argument("--after", required=True, help="the binary with the review queue")
    parser.add_argument("--sizes", default="0,10000,100000")
    parser.add_argument("--only", default="cost,queue,reads,wal")
    parser.add_argument("--which", default="before,after", help="the binaries to measure")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    only = set(args.only.split(","))
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    print(f"# {platform.node()}: {os.cpu_count()} cores, {cpu}, {platform.platform()}")
    print(f"# {' '.join(sys.argv)}")
    for label, binary in (("before", args.before), ("after", args.after)):
        if label not in args.which.split(","):
            continue
        if "cost" in only:
            for size, p50, p90, top, statuses in cost(binary, sizes):
                print(f"cost {label} open={size}: p50 {ms(p50)} ms, p90 {ms(p90)} ms, "
                      f"max {ms(top)} ms, {statuses}", flush=True)
        if "queue" in only:
            for size, p50, top, statuses in queue(binary, sizes):
                print(f"queue {label} open={size}: first page p50 {ms(p50)} ms, max {ms(top)} ms, "
                      f"{statuses}", flush=True)
        if "reads" in only:
            r = reads(binary)
            print(f"reads {label}: 503 share during the trickle {r['flood'][1]:.1%} of "
                  f"{r['flood'][0]}, in the 15 s after {r['after'][1]:.1%} of {r['after'][0]}",
                  flush=True)
        if "wal" in only:
            top, end, n, ok, c, c_ok = wal(binary)
            print(f"wal {label}: max {top / 1e6:.1f} MB, at the end {end / 1e6:.1f} MB; "
                  f"reports {ok}/{n} answered 200/202, creates {c_ok}/{c} 201", flush=True)


if __name__ == "__main__":
    main()
