#!/usr/bin/python3
"""Bytes the expiry sweep writes per expired paste on the embedded store, for two binaries in one
run (the figure of bench/results/sweep-writes.md). Each binary gets a store of its own, filled
through the API (bench/wrk/growth_create.lua, the growth bench's sizes), then stopped; BACKLOG of
its pastes are given an expiry a few seconds away, and it is started again with nothing else to
do. The figure is the server's write_bytes (/proc/PID/io: what reached the block layer, WAL and
checkpoints included) from its start to the end of the sweep, divided by the pastes swept; the
sweep's rate beside it. Bytes written do not depend on how busy the machine is; the rate does.

    bench/sweep_writes.py --runs 2 OLD_SLUICE NEW_SLUICE
"""
import argparse
import os
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from growth import REPO, Server, wrk, write_corpus  # noqa: E402


def write_bytes(pid):
    with open(f"/proc/{pid}/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("write_bytes:"))


def one(binary, work, seconds, backlog, port):
    subprocess.run(["rm", "-rf", work], check=True)
    os.makedirs(work)
    corpus = os.path.join(work, "corpus.txt")
    write_corpus(corpus)
    data = os.path.join(work, "data")
    server = Server(binary, data, os.path.join(work, "sluice.log"), port, port + 1)
    server.start()
    wrk(server.url + "/api/v1/pastes", seconds, script="growth_create.lua", env={"CORPUS": corpus})
    server.stop()
    db = sqlite3.connect(os.path.join(data, "meta.db"))
    with db:
        doomed = db.execute(
            "UPDATE pastes SET expires_at = ? WHERE id IN (SELECT id FROM pastes WHERE deleted = 0 "
            "LIMIT ?)", (int(time.time()) + 3, backlog)).rowcount
    db.close()
    server.start()
    began, before = time.monotonic(), write_bytes(server.proc.pid)
    while server.metric("sluice_expired_purged_total") < doomed:
        if time.monotonic() - began > 600:
            sys.exit(f"{binary}: the sweep did not finish in 10 minutes")
        time.sleep(0.1)
    took = time.monotonic() - began
    written = write_bytes(server.proc.pid) - before
    server.stop()
    subprocess.run(["rm", "-rf", data], check=True)
    return {"swept": doomed, "bytes_per_paste": written / doomed, "per_s": doomed / took}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--runs", type=int, default=2, help="rounds, each binary once a round")
    parser.add_argument("--fill-seconds", type=int, default=20)
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--port", type=int, default=19560)
    args = parser.parse_args()
    print("| round | binary | pastes swept | bytes written per paste | swept/s (from the start) |")
    print("|---:|---|---:|---:|---:|")
    for round_ in range(1, args.runs + 1):
        for binary in args.binaries:
            r = one(binary, os.path.join(REPO, "bench/work/sweep-writes"), args.fill_seconds,
                    args.backlog, args.port)
            print(f"| {round_} | `{binary}` | {r['swept']:,} | {r['bytes_per_paste']:,.0f} |"
                  f" {r['per_s']:,.0f} |", flush=True)


# The sweep from the start, as the runs before background_start_delay (60 s) had it: what these
# runs measure is the sweep beside creates, not a restart. By the environment, which a binary
# older than the setting ignores.
os.environ["SLUICE_BACKGROUND_START_DELAY"] = "0s"

if __name__ == "__main__":
    main()
