#!/usr/bin/env python3
"""Claim latency of burn-after-reading pastes under contention (docs/usage.md, "Burn after reading").

    SLUICE_BIN=build/dev/sluice bench/burn_claim_latency.py [ROUNDS] [CLAIMERS] [--embedded]

Starts PostgreSQL (scripts/testenv/postgres.sh, in a temporary folder) and two sluice processes on
it sharing one body folder, or one embedded (SQLite) process with --embedded. Each round creates a
burn paste, then CLAIMERS threads (default 50) POST its claim at once, alternating between the
processes, each on its own keep-alive connection opened before the round starts. Prints the
latency of the winner's 200 and of the losers' 404s (milliseconds: p50, p90, p99, max) and checks
that every round had exactly one winner.
"""
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from sluice_harness import SluiceServer  # noqa: E402


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def summary(name, values):
    if not values:
        return f"{name}: none"
    return (f"{name}: n={len(values)} p50={pct(values, 50):.1f} p90={pct(values, 90):.1f} "
            f"p99={pct(values, 99):.1f} max={max(values):.1f} ms")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    rounds = int(args[0]) if args else 20
    claimers = int(args[1]) if len(args) > 1 else 50
    embedded = "--embedded" in sys.argv
    patient = ["--delete-budget", "20s", "--meta-get-timeout", "5s", "--read-budget", "5s",
               "--blob-get-timeout", "5s", "--insert-timeout", "2s"]
    pg = None
    blobs = tempfile.mkdtemp(prefix="sluice-bench-burn-")
    servers = []
    try:
        if embedded:
            servers = [SluiceServer(patient, data_dir=blobs).start()]
        else:
            from test_postgres import PostgresServer
            pg = PostgresServer()
            servers = [SluiceServer(["--meta", pg.url, *patient], data_dir=blobs).start()
                       for _ in range(2)]
        won, lost, bad = [], [], 0
        for r in range(rounds):
            created = servers[0].request("POST", "/api/v1/pastes?burn=1", body=b"bench %d" % r)
            assert created.status == 201, created
            paste_id = created.json()["id"]
            conns = [servers[i % len(servers)].connection(timeout=60) for i in range(claimers)]
            for c in conns:
                c.connect()
            start = threading.Barrier(claimers)
            out = [None] * claimers

            def claim(i):
                start.wait()
                t0 = time.perf_counter()
                res = servers[i % len(servers)].request(
                    "POST", f"/api/v1/pastes/{paste_id}/claim", body=b"", conn=conns[i])
                out[i] = (res.status, (time.perf_counter() - t0) * 1000)

            threads = [threading.Thread(target=claim, args=(i,)) for i in range(claimers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for c in conns:
                c.close()
            statuses = [s for s, _ in out]
            if statuses.count(200) != 1 or statuses.count(404) != claimers - 1:
                bad += 1
                print(f"round {r}: statuses {sorted(statuses)}", file=sys.stderr)
            won += [ms for s, ms in out if s == 200]
            lost += [ms for s, ms in out if s == 404]
        backend = "SQLite, one process" if embedded else "PostgreSQL, two processes"
        print(f"{rounds} rounds x {claimers} concurrent claims ({backend})")
        print(summary("winner 200", won))
        print(summary("losers 404", lost))
        print(f"rounds without exactly one winner: {bad}")
        return 1 if bad else 0
    finally:
        for s in servers:
            s.stop()
            s.cleanup()
        if pg:
            pg.stop()
        shutil.rmtree(blobs, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
