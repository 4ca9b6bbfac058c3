#!/usr/bin/env python3
"""Runs the suite, or a chosen part of it, N times in a row, quiet or under load, and reports per test
how often it failed and why: flakes are found here rather than in CI (`make flake-hunt`).

Each run calls the same stages as `make test` (the Makefile's check-* targets) on trees that are
already built, so a run measures the tests and not the compiler. Under --load, stress-ng holds both
cores with a CPU hog and writes to the disk (a writer syncing 64 MiB files) for the whole run, at
the tests' own priority and in their session: what a busy shared machine does to a suite.

Every run leaves DIR/run-N.json (the tests, their outcome and the lines that say why) and the
stages' logs; the report reads every run in DIR, so hunts on different days add up:

    tests/flake_hunt.py --runs 5 --load            # five loaded runs of every stage
    tests/flake_hunt.py --runs 20 --stage dev-parallel --tests 'scenario\\.'
    tests/flake_hunt.py --report                   # the table of every run in DIR so far
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STAGES = ["dev-parallel", "dev-serial", "asan", "tsan"]
DEFAULT_DIR = REPO / "bench" / "work" / "flake-hunt"

# The lines of a failed test's output that say why, in the order they are worth reading: a Python
# assertion, a gtest failure, a sanitizer report, the harness's own complaint, a timeout.
REASON_PATTERNS = [
    re.compile(r"^\s*[A-Za-z_.]*(Error|Exception|Failure): .*"),
    re.compile(r".*: Failure$"),
    re.compile(r"^\s*(Expected|Value of|Which is|Actual): .*"),
    re.compile(r"^(==\d+==)?(ERROR|WARNING): (AddressSanitizer|ThreadSanitizer|LeakSanitizer).*"),
    re.compile(r".*runtime error: .*"),
    re.compile(r".*\b(timed out|did not become ready|TimeoutExpired)\b.*"),
    re.compile(r"^(FAIL|ERROR): \S+.*"),
]


def start_load(work_dir):
    """Two CPU hogs (one per core) and a disk writer, in their own process group but the tests'
    session: the kernel's autogroups share the CPU between sessions first, and a hog in a session
    of its own would take half of it at most, not the cores."""
    temp = work_dir / "stress"
    temp.mkdir(parents=True, exist_ok=True)
    command = ["stress-ng", "--cpu", str(os.cpu_count() or 2), "--cpu-method", "matrixprod",
               "--hdd", "1", "--hdd-bytes", "64m", "--hdd-opts", "sync", "--temp-path", str(temp),
               "--timeout", "0", "--quiet"]
    return subprocess.Popen(command, process_group=0, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def stop_load(load):
    if load is None:
        return
    try:
        os.killpg(load.pid, signal.SIGTERM)
        load.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(load.pid, signal.SIGKILL)
        load.wait()


def reasons_from(output):
    """The few lines of a failed test's output that say why it failed, most telling first."""
    lines = output.splitlines()
    found = []
    for pattern in REASON_PATTERNS:
        for line in lines:
            if pattern.match(line) and line.strip() not in found:
                found.append(line.strip()[:400])
            if len(found) >= 4:
                return found
    return found or [line.strip()[:240] for line in lines[-3:] if line.strip()]


def read_junit(path):
    """{test name: {"status", "seconds", "reasons"}} from ctest's --output-junit file."""
    if not path.exists():
        return {}
    tests = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        status = case.get("status", "run")
        failure = case.find("failure")
        output = case.findtext("system-out") or ""
        outcome = "passed"
        if status == "notrun" or case.find("skipped") is not None:
            outcome = "skipped"
        elif status == "fail" or failure is not None:
            outcome = "failed"
        entry = {"outcome": outcome, "seconds": float(case.get("time", "0") or 0)}
        if outcome == "failed":
            message = failure.get("message", "") if failure is not None else ""
            entry["reasons"] = ([message] if message and message != "Failed" else []) + reasons_from(output)
        tests[case.get("name")] = entry
    return tests


def run_once(number, args, out_dir):
    run_dir = out_dir / f"run-{number}"
    run_dir.mkdir(parents=True, exist_ok=True)
    record = {"run": number, "loaded": args.load, "stages": {}, "tests": {},
              "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "commit": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                       capture_output=True, text=True).stdout.strip()}
    load = start_load(run_dir) if args.load else None
    try:
        for stage in args.stages:
            junit = run_dir / f"{stage}.xml"
            extra = f"--output-junit {junit}"
            if args.tests:
                extra += f" -R '{args.tests}'"
            begin = time.monotonic()
            with open(run_dir / f"{stage}.log", "w") as log:
                result = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), f"check-{stage}",
                                         f"CTEST_EXTRA={extra}"], stdout=log, stderr=subprocess.STDOUT)
            record["stages"][stage] = {"seconds": round(time.monotonic() - begin, 1),
                                       "exit": result.returncode}
            for name, entry in read_junit(junit).items():
                record["tests"][f"{stage}: {name}"] = entry
            # Kept after every stage: a hunt stopped half-way still counts the stages it ran.
            (out_dir / f"run-{number}.json").write_text(json.dumps(record, indent=1))
            failed = [n for n, e in record["tests"].items() if n.startswith(stage) and e["outcome"] == "failed"]
            print(f"run {number} ({'loaded' if args.load else 'quiet'}) {stage}: "
                  f"{record['stages'][stage]['seconds']} s, {len(failed)} failed"
                  + (f": {', '.join(n.split(': ', 1)[1] for n in failed)}" if failed else ""), flush=True)
    finally:
        stop_load(load)
        shutil.rmtree(run_dir / "stress", ignore_errors=True)
    return record


def report(out_dir):
    runs = [json.loads(p.read_text()) for p in sorted(out_dir.glob("run-*.json"),
                                                        key=lambda p: int(p.stem.split("-")[1]))]
    if not runs:
        return "no runs recorded in " + str(out_dir)
    lines = [f"# Flake hunt: {len(runs)} runs ({sum(r['loaded'] for r in runs)} loaded) on "
             f"{platform.node()}, {os.cpu_count()} cores", ""]
    lines.append("| run | load | commit | stages (s) | failed |")
    lines.append("|---|---|---|---|---|")
    for r in runs:
        failed = [n for n, e in r["tests"].items() if e["outcome"] == "failed"]
        stages = ", ".join(f"{s} {v['seconds']:.0f}" for s, v in r["stages"].items())
        lines.append(f"| {r['run']} | {'loaded' if r['loaded'] else 'quiet'} | {r['commit']} | {stages} | "
                     f"{len(failed)} |")
    per_test = {}
    for r in runs:
        for name, entry in r["tests"].items():
            slot = per_test.setdefault(name, {"runs": 0, "quiet": 0, "loaded": 0, "reasons": {}, "seconds": []})
            if entry["outcome"] == "skipped":
                continue
            slot["runs"] += 1
            slot["seconds"].append(entry["seconds"])
            if entry["outcome"] == "failed":
                slot["loaded" if r["loaded"] else "quiet"] += 1
                for reason in entry.get("reasons", [])[:2]:
                    slot["reasons"][reason] = slot["reasons"].get(reason, 0) + 1
    flaky = {n: s for n, s in per_test.items() if s["quiet"] + s["loaded"]}
    lines += ["", f"{len(per_test)} tests, {len(flaky)} failed at least once.", ""]
    if flaky:
        lines.append("| test | runs | failed quiet | failed loaded | why (times seen) |")
        lines.append("|---|---|---|---|---|")
        for name, s in sorted(flaky.items(), key=lambda kv: -(kv[1]["quiet"] + kv[1]["loaded"])):
            why = "; ".join(f"{reason} ({count})" for reason, count in
                            sorted(s["reasons"].items(), key=lambda kv: -kv[1])[:3])
            lines.append(f"| {name} | {s['runs']} | {s['quiet']} | {s['loaded']} | {why.replace('|', '/')} |")
    slowest = sorted(per_test.items(), key=lambda kv: -max(kv[1]["seconds"] or [0]))[:10]
    lines += ["", "Slowest tests (worst run, s): " +
              ", ".join(f"{n} {max(s['seconds']):.0f}" for n, s in slowest if s["seconds"])]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--load", action="store_true", help="stress-ng on every core and the disk")
    parser.add_argument("--stage", action="append", choices=STAGES, dest="stages",
                        help="a make test stage (repeatable); every stage by default")
    parser.add_argument("--tests", help="only the ctest names matching this regular expression")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="where runs are kept and read")
    parser.add_argument("--report", action="store_true", help="only print the table of the runs in --dir")
    args = parser.parse_args()
    args.stages = args.stages or STAGES
    args.dir.mkdir(parents=True, exist_ok=True)
    if not args.report:
        if args.load and shutil.which("stress-ng") is None:
            sys.exit("stress-ng is missing: scripts/install-deps.sh hunt")
        first = 1 + max((int(p.stem.split("-")[1]) for p in args.dir.glob("run-*.json")), default=0)
        for number in range(first, first + args.runs):
            run_once(number, args, args.dir)
    text = report(args.dir)
    (args.dir / "report.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
