#!/usr/bin/env python3
"""Runs the overload scenario tests (tests/scenario) at the long scale and writes their figures, the
spec's prediction beside each measured number, to bench/results/scenarios.md.

    python3 tools/run_chaos.py [--bin build/dev/sluice] [--scale long|short] [--only test_refusal]
                               [--output bench/results/scenarios.md]

The tests print and record their own figures (tests/lib/loadgen.py: report()); this script runs them
with SLUICE_SCENARIO_SCALE and SLUICE_SCENARIO_RESULTS set, then turns the JSON lines into Markdown
with the machine's description. The full unittest output goes to bench/work/raw/scenarios-<scale>.log.
Exit status: that of the test run (the report is written either way).
"""

import argparse
import datetime
import glob
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SCENARIO_DIR = os.path.join(ROOT, "tests", "scenario")

# Order and titles of the scenarios in the report (file name -> title).
TITLES = {
    "test_slow_bucket": "1. Slow bucket: creates shed to slots / L, reads and health untouched, memory bounded",
    "test_abuse": "2. Abuse: per-key, global, NAT, IPv6 /64 and spoofed-hop limits",
    "test_primary_blip": "3. Primary blip and slow primary: no retry amplification, no duplicates",
    "test_refusal": "4. Refusal: the breaker opens, probes once per window, resumes within one",
    "test_neighbour_crawl": "5. Neighbour crawl: fill cap holds, hot id and creates unaffected",
    "test_delete_slow_bucket": "6. Deletes under a slow bucket: prompt 204, outbox catches up",
}
SCENARIO_FILE = {  # report() name prefix -> file
    "slow_bucket": "test_slow_bucket", "abuse": "test_abuse", "primary_blip": "test_primary_blip",
    "slow_primary": "test_primary_blip", "refusal": "test_refusal",
    "neighbour_crawl": "test_neighbour_crawl", "delete_slow_bucket": "test_delete_slow_bucket",
}


def sh(cmd, **kw):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, **kw).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def binary_version(binary):
    """`sluice --version` on one line (it prints the version, then the allocator), for a table cell."""
    return ", ".join(line.strip() for line in sh([binary, "--version"]).splitlines() if line.strip())


def machine():
    model = ""
    for line in sh(["lscpu"]).splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    commit = sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])
    dirty = sh(["git", "-C", ROOT, "status", "--porcelain", "--", "src", "include", "tests"])
    return {
        "cpu": model or platform.processor(),
        "nproc": str(os.cpu_count()),
        "memory": mem,
        "kernel": f"{platform.system()} {platform.release()}",
        "git commit": commit + (" (with uncommitted changes)" if dirty else ""),
    }


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return ""


def cell(value):
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, dict):
        text = ", ".join(f"{k}: {v}" for k, v in value.items())
    elif isinstance(value, list):
        text = ", ".join(str(v) for v in value)
    else:
        text = "" if value is None else str(value)
    return text.replace("|", "\\|")


def test_outcomes(log_text):
    """{module.Class.test: 'ok' | 'FAIL' | 'ERROR'} from unittest -v output (the test's own prints
    may sit between its name and its verdict, so failures are read from the summary blocks)."""
    out = {}
    for m in re.finditer(r"^test_\w+ \(([\w.]+)\)", log_text, re.M):
        out[m.group(1)] = "ok"
    for m in re.finditer(r"^(FAIL|ERROR): test_\w+ \(([\w.]+)\)", log_text, re.M):
        out[m.group(2)] = m.group(1)
    for m in re.finditer(r"^test_\w+ \(([\w.]+)\)[^\n]*\.\.\. skipped", log_text, re.M):
        out[m.group(1)] = "skipped"
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "dev", "sluice"))
    ap.add_argument("--scale", default="long", choices=["short", "long"])
    ap.add_argument("--only", nargs="*", help="scenario files (e.g. test_refusal); default: all")
    ap.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "scenarios.md"))
    args = ap.parse_args()

    suites = args.only or [os.path.basename(p)[:-3] for p in
                           sorted(glob.glob(os.path.join(SCENARIO_DIR, "test_*.py")))]
    suites = sorted(suites, key=lambda n: list(TITLES).index(n) if n in TITLES else 99)
    binary = os.path.abspath(args.bin)
    if not os.path.isfile(binary):
        sys.exit(f"no sluice binary at {binary} (make build)")
    raw_dir = os.path.join(ROOT, "bench", "work", "raw")  # logs only: git keeps the report
    os.makedirs(raw_dir, exist_ok=True)
    log_path = os.path.join(raw_dir, f"scenarios-{args.scale}.log")
    fd, results_path = tempfile.mkstemp(prefix="sluice-scenarios-", suffix=".jsonl")
    os.close(fd)

    env = dict(os.environ)
    env.update({"SLUICE_SCENARIO_SCALE": args.scale, "SLUICE_SCENARIO_RESULTS": results_path,
                "SLUICE_BIN": binary, "PYTHONPATH": os.path.join(ROOT, "tests", "lib")})
    cmd = [sys.executable, "-m", "unittest", "-v", *suites]
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = loadavg()
    t0 = time.monotonic()
    print(f"running {' '.join(suites)} at scale {args.scale}; log: {log_path}", flush=True)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=SCENARIO_DIR, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            log.write(line)
            if line.startswith("[figures]") or line.startswith("[predicted]") or " ... " in line \
                    or line.startswith(("FAIL", "ERROR", "Ran ", "OK")):
                sys.stdout.write(line)
                sys.stdout.flush()
        code = proc.wait()
    elapsed = time.monotonic() - t0
    with open(log_path) as f:
        log_text = f.read()
    with open(results_path) as f:
        results = [json.loads(line) for line in f if line.strip()]
    os.unlink(results_path)

    version = binary_version(binary)
    info = machine()
    lines = ["# sluice overload scenarios", "",
             "Produced by `tools/run_chaos.py` (`make chaos`): the scenario tests of tests/scenario run "
             "against the real binary with injected faults; each row puts the spec's prediction beside "
             "the measured figure. The load generator, the server and the metrics scraper share the "
             "machine.", "",
             "| | |", "|---|---|",
             f"| date | {started.strftime('%Y-%m-%dT%H:%M:%SZ')} |"]
    lines += [f"| {k} | {cell(v)} |" for k, v in info.items()]
    lines += [f"| load average before / after | {load_before} / {loadavg()} |",
              f"| sluice | {cell(version)} |",
              f"| scale | {args.scale} (SLUICE_SCENARIO_SCALE) |",
              f"| command | `{' '.join(['python3', 'tools/run_chaos.py', '--scale', args.scale] + (['--only', *args.only] if args.only else []))}` |",
              f"| run time | {elapsed:.0f} s |",
              f"| result | {'all passed' if code == 0 else f'FAILED (exit status {code}), see bench/work/raw/' + os.path.basename(log_path)} |",
              ""]

    outcomes = test_outcomes(log_text)
    for suite in suites:
        lines += [f"## {TITLES.get(suite, suite)}", ""]
        tests = {k: v for k, v in outcomes.items() if k.startswith(suite + ".")}
        if tests:
            lines += ["Tests: " + "; ".join(f"`{k.split('.')[-1]}` {v}" for k, v in tests.items()), ""]
        for res in results:
            prefix = next((p for p in SCENARIO_FILE if res["scenario"].startswith(p)), None)
            if SCENARIO_FILE.get(prefix) != suite:
                continue
            lines += [f"### {res['scenario']}", "", "| figure | predicted | measured |",
                      "|---|---|---|"]
            predicted = res.get("predicted", {})
            for key, value in res["figures"].items():
                lines.append(f"| {key} | {cell(predicted.get(key, ''))} | {cell(value)} |")
            for key, value in predicted.items():
                if key not in res["figures"]:
                    lines.append(f"| {key} | {cell(value)} | |")
            lines.append("")
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {args.output} ({elapsed:.0f} s, exit status {code})")
    return code


if __name__ == "__main__":
    sys.exit(main())
