#!/usr/bin/env python3
"""Render cost of the worst paste shape found, before and after the worker processes.

Before: GNU source-highlight alone (Debian's `source-highlight` command, the same library and
language files the server uses) on `x = ` followed by N opening parentheses in C; its time grows
with the square of N. After: the server's view of the same paste at N = 100,000, answered plain
at `render_timeout` while the worker is killed, with the time until the highlight slot is free.

Usage: bench/render_cost.py SLUICE_BIN OUT.md
"""
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from promtext import metric, parse_metrics  # noqa: E402
from sluice_harness import SluiceServer  # noqa: E402

SIZES = [1000, 2000, 4000, 8000, 16000]


def library_seconds(n):
    with tempfile.NamedTemporaryFile("w", suffix=".c") as f:
        f.write("x = " + "(" * n)
        f.flush()
        # CPU time of the child, not wall time: the figure stays honest on a busy machine.
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(["source-highlight", "--src-lang=c", "--out-format=html", "-i", f.name,
                        "-o", "/dev/null"], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main():
    os.environ["SLUICE_BIN"] = os.path.abspath(sys.argv[1])
    out = sys.argv[2]
    rows = []
    for n in SIZES:
        seconds = library_seconds(n)
        rows.append((n, seconds, seconds / ((n + 4) / 1024)))

    render_timeout = 2.0
    server = SluiceServer(args=["--render-timeout", f"{render_timeout:g}s"])
    server.start()
    try:
        paste = server.create_ok("x = " + "(" * 100_000)["id"]
        start = time.monotonic()
        view = server.get(f"/{paste}?lang=c", headers={"Accept": "text/html"}, timeout=120)
        answered = time.monotonic() - start
        while metric(parse_metrics(server.get("/metrics").text), "sluice_pool_in_use",
                     pool="highlight") > 0:
            time.sleep(0.01)
        freed = time.monotonic() - start
        rung = view.header("X-Sluice-Rung")
    finally:
        server.stop()
        server.cleanup()

    cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"],
                         capture_output=True, text=True).stdout.strip()
    with open(out, "w") as f:
        f.write("# Render cost of the worst paste shape\n\n")
        f.write(f"Command: `bench/render_cost.py {sys.argv[1]} {out}` on {platform.node()}, "
                f"{os.cpu_count()} cores, {cpu}, {time.strftime('%Y-%m-%d')}.\n\n")
        f.write("## Before: the library alone (no bound), `x = ` then N `(` in C\n\n")
        f.write("| N | CPU seconds | CPU seconds per KB |\n|---:|---:|---:|\n")
        for n, seconds, per_kb in rows:
            f.write(f"| {n:,} | {seconds:.2f} | {per_kb:.3f} |\n")
        ratio = rows[-1][1] / rows[-2][1]
        f.write(f"\nDoubling N from {rows[-2][0]:,} to {rows[-1][0]:,} multiplied the time by "
                f"{ratio:.1f} (quadratic: 4). At that rate 100,000 parentheses would take about "
                f"{rows[-1][1] * (100000 / rows[-1][0]) ** 2:.0f} s of one core.\n\n")
        f.write(f"## After: the server, 100,000 `(` viewed with `?lang=c`, render_timeout "
                f"{render_timeout:g} s\n\n")
        f.write(f"- answered in {answered:.2f} s as `{rung}`\n")
        f.write(f"- highlight slot free {freed:.2f} s after the request (the worker killed at the "
                f"deadline and reaped)\n")
        f.write(f"- CPU spent on it: at most render_timeout of one worker, "
                f"{render_timeout / (100004 / 1024):.3f} s per KB for this paste, and the next "
                f"view of it is plain at once (no slot)\n")
    print(open(out).read())


if __name__ == "__main__":
    main()
