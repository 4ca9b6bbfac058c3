#!/usr/bin/python3
"""What the expiry sweep costs creates on the embedded store, at a steady state and with a
backlog, for each background_share in one run (the figures of bench/results/sweep-steady.md).

Per share: a store of its own is filled through the API (bench/wrk/growth_create.lua, the growth
bench's sizes) and stopped; rows of the fill are given expiries through SQL; the server starts
again with `--background-share S`, and creates run closed-loop (wrk, 64 connections) in 2 s
rounds through alternating windows of WINDOW seconds:
  - quiet: nothing expires;
  - steady: RATE pastes expire every second (the sweep's steady work; its default, 350/s, is the
    spec's global create cap: a site at its cap, in a steady state, expires what it creates).
The sweep wakes every sweep_interval (10 s), so a steady window's expiries are placed half an
interval early; the purges each window saw are counted from sluice_expired_purged_total and shown.
The steady cost is 1 - (creates/s in steady windows) / (creates/s in quiet windows). Then BACKLOG
pastes expire at once and creates go on while the sweep drains them: the drain's rate, and the
creates' rate beside it against the quiet windows'.

    bench/sweep_steady.py [--binary build/dev/sluice] [--shares 0.25,1]

As root or not; about 6 minutes a share. Client and server share the machine's cores, so only
ratios within a share's run are compared.
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from growth import REPO, Server, fmt, log, machine, ok_rate, wrk, write_corpus  # noqa: E402

SWEEP_INTERVAL_S = 10  # the server's default, which this bench keeps
ROUND_S = 2


def schedule_expiries(db_path, windows, rate, backlog_at, backlog):
    """Gives fill rows their expiries: `rate` a second through each steady window (placed half a
    sweep interval early), then `backlog` at once at `backlog_at`. Every other row lives 30 days,
    so nothing else expires during the run (the fill's ttl=10m pastes included)."""
    db = sqlite3.connect(db_path)
    far = int(time.time()) + 30 * 86400
    with db:
        db.execute("UPDATE pastes SET expires_at = ? WHERE deleted = 0", (far,))
        planned = 0
        for kind, start, end in windows:
            if kind != "steady":
                continue
            for second in range(int(start) - SWEEP_INTERVAL_S // 2, int(end) - SWEEP_INTERVAL_S // 2):
                planned += db.execute(
                    "UPDATE pastes SET expires_at = ? WHERE id IN (SELECT id FROM pastes WHERE"
                    " deleted = 0 AND expires_at = ? LIMIT ?)", (second, far, rate)).rowcount
        doomed = db.execute(
            "UPDATE pastes SET expires_at = ? WHERE id IN (SELECT id FROM pastes WHERE deleted = 0"
            " AND expires_at = ? LIMIT ?)", (backlog_at, far, backlog)).rowcount
    db.close()
    return planned, doomed


def one_share(args, share, port):
    work = os.path.join(REPO, "bench/work/sweep-steady", f"share-{share}")
    subprocess.run(["rm", "-rf", work], check=True)
    os.makedirs(work)
    corpus = os.path.join(work, "corpus.txt")
    write_corpus(corpus)
    env = {"CORPUS": corpus}
    creates = "/api/v1/pastes"
    server = Server(args.binary, os.path.join(work, "data"), os.path.join(work, "sluice.log"),
                    port, port + 1, extra=["--background-share", str(share)])
    server.start()
    fill = wrk(server.url + creates, args.fill_seconds, script="growth_create.lua", env=env)
    server.stop()
    log(f"share {share}: filled {fill['statuses'].get('201', 0)} pastes")

    lead = 10
    t0 = int(time.time()) + lead
    windows = []
    for i in range(2 * args.pairs):
        start = t0 + i * args.window
        windows.append(("quiet" if i % 2 == 0 else "steady", start, start + args.window))
    backlog_at = windows[-1][2] + 2
    planned, doomed = schedule_expiries(os.path.join(work, "data", "meta.db"), windows, args.rate,
                                        backlog_at, args.backlog)
    if doomed < args.backlog or planned < args.rate * args.window * args.pairs * 0.95:
        sys.exit(f"the fill made too few pastes ({fill['statuses']}): raise --fill-seconds")
    server.start()

    samples, done = [], threading.Event()

    def watch():
        while not done.is_set():
            samples.append((time.time(), server.metric("sluice_expired_purged_total")))
            time.sleep(0.25)

    watcher = threading.Thread(target=watch)
    watcher.start()
    while time.time() < t0:
        time.sleep(0.05)
    rounds = []
    deadline = backlog_at + args.backlog_seconds
    while time.time() < deadline:
        began = time.time()
        run = wrk(server.url + creates, ROUND_S, script="growth_create.lua", env=env)
        rounds.append((began, time.time(), ok_rate(run, 201)))
        if began > backlog_at + 4 and samples and samples[-1][1] >= planned + doomed:
            break
    done.set()
    watcher.join()
    server.stop()

    def purged_at(t):
        before = [n for (when, n) in samples if when <= t]
        return before[-1] if before else 0.0

    def rate_in(start, end):
        inside = [r for (b, e, r) in rounds if b >= start and e <= end]
        return sum(inside) / len(inside) if inside else None

    result = {"share": share, "fill": fill["statuses"].get("201", 0), "windows": []}
    for kind, start, end in windows:
        result["windows"].append({
            "kind": kind, "creates_per_s": rate_in(start, end),
            "purged_per_s": (purged_at(end) - purged_at(start)) / (end - start)})
    quiet = [w["creates_per_s"] for w in result["windows"] if w["kind"] == "quiet"]
    steady = [w["creates_per_s"] for w in result["windows"] if w["kind"] == "steady"]
    result["quiet_creates_per_s"] = sum(quiet) / len(quiet)
    result["steady_creates_per_s"] = sum(steady) / len(steady)
    result["steady_cost"] = 1 - result["steady_creates_per_s"] / result["quiet_creates_per_s"]
    result["steady_purged_per_s"] = sum(
        w["purged_per_s"] for w in result["windows"] if w["kind"] == "steady") / args.pairs

    # The backlog: from the first purge past the steady windows' to the last.
    moving = [(t, n) for (t, n), (_, m) in zip(samples[1:], samples) if n > m and n > planned]
    backlog = {"pastes": doomed}
    if moving and samples[-1][1] >= planned + doomed:
        first, last = moving[0][0] - 0.25, moving[-1][0]
        backlog["seconds"] = last - first
        backlog["purged_per_s"] = doomed / max(last - first, 0.25)
        overlapped = [r for (b, e, r) in rounds if e > first and b < last]
        backlog["creates_per_s"] = sum(overlapped) / len(overlapped)
        backlog["create_ratio"] = backlog["creates_per_s"] / result["quiet_creates_per_s"]
    else:
        backlog["unfinished"] = samples[-1][1] - planned if samples else 0
    result["backlog"] = backlog
    log(f"share {share}: {json.dumps(result)}")
    subprocess.run(["rm", "-rf", os.path.join(work, "data")], check=True)
    return result


def report(out, results, args, command):
    lines = [
        "# The expiry sweep's cost to creates, at a steady state and with a backlog",
        "",
        f"Machine: {machine()}. Binary: `{args.binary}`.",
        f"Command: `{command}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).",
        "",
        "How: bench/sweep_steady.py's docstring. A store of its own per share, filled for "
        f"{args.fill_seconds} s; {args.pairs} pairs of {args.window} s windows, quiet then steady "
        f"({args.rate} expiries/s), creates closed-loop at 64 connections in 2 s rounds; then a "
        f"backlog of {args.backlog:,} expiring at once.",
        "",
        "| background_share | creates/s quiet | creates/s steady | purged/s steady | steady cost |"
        " backlog drained/s | creates beside it (x quiet) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        b = r["backlog"]
        lines.append(
            f"| {r['share']} | {fmt(r['quiet_creates_per_s'])} | {fmt(r['steady_creates_per_s'])}"
            f" | {fmt(r['steady_purged_per_s'])} | {100 * r['steady_cost']:.1f}% |"
            f" {fmt(b.get('purged_per_s'))} | {fmt(b.get('create_ratio'), 2)} |")
    lines += ["", "Windows, in order (creates/s; purged/s):", ""]
    for r in results:
        lines.append(f"- share {r['share']}: " + ", ".join(
            f"{w['kind']} {fmt(w['creates_per_s'])}; {fmt(w['purged_per_s'])}"
            for w in r["windows"]))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=os.path.join(REPO, "build/dev/sluice"))
    parser.add_argument("--shares", default="0.25,1",
                        help="background_share values, each with a store of its own")
    parser.add_argument("--rate", type=int, default=350, help="expiries a second when steady")
    parser.add_argument("--window", type=int, default=40, help="seconds a window")
    parser.add_argument("--pairs", type=int, default=3, help="quiet and steady windows, each")
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--backlog-seconds", type=int, default=180,
                        help="the most the backlog's drain is watched")
    parser.add_argument("--fill-seconds", type=int, default=60)
    parser.add_argument("--port", type=int, default=18610)
    parser.add_argument("--out", default=os.path.join(REPO, "bench/results/sweep-steady.md"))
    args = parser.parse_args()
    command = "bench/sweep_steady.py " + " ".join(sys.argv[1:])
    results = [one_share(args, float(s), args.port + 2 * i)
               for i, s in enumerate(args.shares.split(","))]
    with open(os.path.join(REPO, "bench/work/sweep-steady/results.json"), "w") as f:
        json.dump(results, f, indent=1)
    report(args.out, results, args, command.strip())
    print(open(args.out).read())


# The sweep from the start, as the runs before background_start_delay (60 s) had it: what these
# runs measure is the sweep beside creates, not a restart. By the environment, which a binary
# older than the setting ignores.
os.environ["SLUICE_BACKGROUND_START_DELAY"] = "0s"

if __name__ == "__main__":
    main()
