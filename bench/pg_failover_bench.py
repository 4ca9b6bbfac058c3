#!/usr/bin/env python3
"""What a standby costs and what an asynchronous one loses, in one run (issue 36, "Figures").

(a) Create latency beside a synchronous standby, an asynchronous one and none: three PostgreSQL
    setups (scripts/testenv/postgres.sh start / start-standby sync|async), one sluice process on
    each, CREATORS closed-loop creators for SECONDS, the three interleaved for ROUNDS rounds; p50,
    p99 and creates/s, each as a ratio to "none".
(b) Forced asynchronous loss: with creates running, the standby's walreceiver is stopped
    (SIGSTOP, its pid from pg_stat_wal_receiver) for STALL seconds, so it receives nothing more;
    then the primary's postmaster is killed -9, the walreceiver too (the standby restarts from what
    it had flushed: the WAL in flight on the dead link is gone, as on a lost machine), and the
    standby is promoted. Counted: pastes answered 201 that are missing on the new primary. The
    same with a synchronous standby, whose creates cannot commit while it is stopped: what they
    answer meanwhile is part of the figure.

The servers, the load (test_postgres_failover.Load) and the settings
(PostgresFailoverTest.SETTINGS) are the failover test's.

Run: PYTHONPATH=tests/lib:tests/integration SLUICE_BIN=build/dev/sluice \\
     python3 bench/pg_failover_bench.py [--rounds 3] [--seconds 5] [--creators 4] [--stall 3]
Prints markdown tables (bench/results/pg-failover.md keeps them).
"""

import argparse
import collections
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from sluice_harness import SluiceServer, wait_until  # noqa: E402
from promtext import metric  # noqa: E402
import test_postgres_failover as fo  # noqa: E402


def psql(url, sql):
    return subprocess.run(["psql", url, "-tAc", sql], check=True, capture_output=True, text=True,
                          timeout=30).stdout.strip()


class Setup:
    """A primary alone (mode "none") or with a standby (sync/async), in a folder of its own."""

    def __init__(self, mode):
        self.mode = mode
        self.root = tempfile.mkdtemp(prefix=f"sluice-pgbench-{mode}-")
        os.chmod(self.root, 0o755)  # the servers run as the postgres user (postgres.sh)
        self.primary = os.path.join(self.root, "primary")
        self.standby = os.path.join(self.root, "standby")
        self.url = fo.script("start", self.primary, "0")
        self.primary_url = self.url
        self.standby_url = None
        if mode != "none":
            self.url = fo.script("start-standby", self.standby, self.primary, "0", mode)
            with open(os.path.join(self.standby, "standby-url")) as f:
                self.standby_url = f.read().strip()

    def sluice(self):
        args = [a for k, v in fo.PostgresFailoverTest.SETTINGS.items() for a in (f"--{k}", v)]
        s = SluiceServer(["--meta", self.url, *args])
        s.start()
        wait_until(lambda: metric(s.metrics(), "sluice_meta_pool_connections", pool="write") >= 1,
                   message="write pool warm")
        return s

    def stop(self):
        for d in (self.standby, self.primary):
            subprocess.run([fo.SCRIPT, "stop", d], capture_output=True, timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def closed_loop(server, creators, seconds):
    """(latencies of the 201s, other statuses) for `creators` threads creating for `seconds`."""
    lat, other, lock = [], collections.Counter(), threading.Lock()
    end = time.monotonic() + seconds

    def work(w):
        n = 0
        while time.monotonic() < end:
            n += 1
            body = f"bench {w}/{n}\n".encode() * (n % 5 + 1)
            t = time.monotonic()
            res = server.create(body, timeout=15)
            dt = time.monotonic() - t
            with lock:
                if res.status == 201:
                    lat.append(dt)
                else:
                    other[res.status] += 1
    threads = [threading.Thread(target=work, args=(w,)) for w in range(creators)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, other


def latency_part(args):
    modes = ("none", "async", "sync")
    setups, servers = {}, {}
    try:
        for m in modes:
            setups[m] = Setup(m)
            servers[m] = setups[m].sluice()
        for m in modes:  # warm: plans cached, pools full
            closed_loop(servers[m], args.creators, 1.0)
        lat = {m: [] for m in modes}
        other = {m: collections.Counter() for m in modes}
        for r in range(args.rounds):
            for m in (modes if r % 2 == 0 else tuple(reversed(modes))):
                l, o = closed_loop(servers[m], args.creators, args.seconds)
                lat[m] += l
                other[m] += o
        total = args.rounds * args.seconds
        print(f"\n(a) create latency, {args.creators} closed-loop creators, {args.rounds} rounds of "
              f"{args.seconds:g} s interleaved\n")
        print("| standby | creates/s | p50 ms | p99 ms | p50 ÷ none | p99 ÷ none | creates/s ÷ none "
              "| not 201 |")
        print("|---|---:|---:|---:|---:|---:|---:|---|")
        base = lat["none"]
        for m in modes:
            p50, p99, rate = pct(lat[m], 50), pct(lat[m], 99), len(lat[m]) / total
            print(f"| {m} | {rate:.0f} | {1000 * p50:.2f} | {1000 * p99:.2f} | "
                  f"{p50 / pct(base, 50):.2f} | {p99 / pct(base, 99):.2f} | "
                  f"{rate / (len(base) / total):.2f} | {dict(other[m]) or 'none'} |", flush=True)
    finally:
        for s in servers.values():
            s.stop(expect_code=None)
            s.cleanup()
        for st in setups.values():
            st.stop()


def loss_part(mode, args):
    setup = Setup(mode)
    server = None
    try:
        server = setup.sluice()
        load = fo.Load(server, mode, server, creators=2)
        load.start()
        time.sleep(2.0)
        receiver = int(psql(setup.standby_url, "SELECT pid FROM pg_stat_wal_receiver"))
        os.kill(receiver, signal.SIGSTOP)
        stalled = time.monotonic()
        time.sleep(args.stall)
        # What the primary had written and the standby not flushed, just before the kill.
        behind = psql(setup.primary_url, "SELECT pg_current_wal_lsn() - flush_lsn FROM "
                      "pg_stat_replication WHERE application_name = 'standby'")
        with open(os.path.join(setup.primary, "data", "postmaster.pid")) as f:
            postmaster = int(f.readline())
        os.kill(postmaster, signal.SIGKILL)
        killed = time.monotonic()
        os.kill(receiver, signal.SIGKILL)  # its buffered WAL dies with it
        port = open(os.path.join(setup.standby, "port")).read().strip()
        wait_until(lambda: subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1", "-p", port])
                   .returncode == 0, timeout=60, message="standby back after its crash restart")
        fo.script("promote", setup.standby)
        promoted = time.monotonic()
        time.sleep(3.0)
        load.join()
        with load.lock:
            events, created = list(load.events), list(load.created)
        on_new = set(psql(setup.standby_url, "SELECT id FROM pastes").split())
        lost = [pid for pid, _ in created if pid not in on_new]
        acked_in_stall = [e for e in events if e[1] == "create" and e[2] == 201
                          and stalled <= e[0] < killed]
        stall_answers = collections.Counter(
            (e[2], e[3]) for e in events if e[1] == "create" and stalled <= e[0] < killed + 0.5)
        first_after = min((e[0] for e in events if e[1] == "create" and e[2] == 201
                           and e[0] > promoted), default=None)
        return {"mode": mode, "acknowledged": len(created), "lost": len(lost),
                "acked_while_stalled": len(acked_in_stall), "wal_behind_bytes": behind,
                "stall_answers": dict(stall_answers),
                "first_201_after_promotion_s": None if first_after is None
                else round(first_after - promoted, 2)}
    finally:
        if server:
            server.stop(expect_code=None)
            server.cleanup()
        setup.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--creators", type=int, default=4)
    ap.add_argument("--stall", type=float, default=3.0)
    ap.add_argument("--skip-latency", action="store_true")
    args = ap.parse_args()
    if not args.skip_latency:
        latency_part(args)
    rows = [loss_part(m, args) for m in ("async", "sync")]
    print(f"\n(b) the standby's walreceiver stopped {args.stall:g} s, then the primary killed -9 "
          "and the standby promoted; 2 closed-loop creators\n")
    print("| standby | acknowledged (201) | lost after promotion | 201s while the standby was "
          "stopped | WAL the standby lacked at the kill, bytes | creates' answers while stopped "
          "| first 201 after promotion, s |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for r in rows:
        answers = ", ".join(f"{st} {why}".strip() + f": {n}"
                            for (st, why), n in sorted(r["stall_answers"].items(), key=str))
        print(f"| {r['mode']} | {r['acknowledged']} | {r['lost']} | {r['acked_while_stalled']} | "
              f"{r['wal_behind_bytes']} | {answers} | {r['first_201_after_promotion_s']} |",
              flush=True)


if __name__ == "__main__":
    main()
