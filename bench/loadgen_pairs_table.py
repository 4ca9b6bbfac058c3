#!/usr/bin/env python3
"""The markdown table of bench/loadgen_pairs.sh's JSON lines: one row per test run, in the order
they ran (so each pair is two neighbouring rows), with the test's result.

usage: bench/loadgen_pairs_table.py /tmp/loadgen-pairs.jsonl"""

import json
import sys


def main(path):
    rows, lags = [], []
    for line in open(path):
        d = json.loads(line)
        if "begin" in d:
            lags = []
        elif "rc" in d:
            for k, lag in enumerate(lags):
                rows.append((d["test"], d["load"], d["engine"], "ok" if d["rc"] == 0 else "FAIL",
                             lag, k))
        else:
            lags.append(d)
    print("| # | test | load | engine | result | lag p50 / p99 / max (ms) | late > 50 ms | "
          "sender on CPU / in run queue (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for n, (test, load, engine, result, lag, _k) in enumerate(rows, 1):
        print(f"| {n} | {test} | {load} | {engine} ({lag['threads']} thr) | {result} | "
              f"{lag['p50_ms']} / {lag['p99_ms']} / {lag['max_ms']} | {lag['late']} of "
              f"{lag['arrivals']} | {lag.get('sender_cpu_s', '-')} / {lag.get('sender_runq_s', '-')} |")


if __name__ == "__main__":
    main(sys.argv[1])
