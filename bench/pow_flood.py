#!/usr/bin/env python3
"""Proof of work as a rung (docs/overload.md, "Proof of work"), measured in one run:

1. The distributed flood: BOTS addresses (loopback, named through X-Forwarded-For from a trusted
   proxy), each under its own per-address limit, together send more creates than the global budget
   refills. Three kinds of honest creator, each sending one paste every HONEST_INTERVAL seconds:
   non-solvers (a client that ignores the challenge), solvers in Python's hashlib, and `sluice
   paste` itself (the CLI, from 127.0.0.1, which solves without being asked). Run twice on the same
   server build: proof_of_work off, then on. Reported: the share of each kind's creates that got a
   201, and the bots'; with --plot, that share over time, off and on, in one figure.
2. Solve time per difficulty (maxnumber) of a native solver (Python's hashlib, one core): what a
   client pays per create, against which the browser's figure is to be read.
3. What a redeem costs the server: creates/s with a fresh solution each (the solvers' share set
   wide open) against creates/s without, interleaved rounds in one run.

    SLUICE_BIN=build/dev/sluice bench/pow_flood.py [--seconds 20] [--plot FILE.png]

Prints a Markdown report (bench/results/proof-of-work.md is one). `make lab` runs it for 120 s a
rung with the plot; `make test` runs the short flood (tests/integration/test_proof_of_work.py).
"""
import argparse
import base64
import concurrent.futures
import hashlib
import hmac
import http.client
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "lib"))
from sluice_harness import SluiceServer  # noqa: E402

BOTS = [f"198.18.{n // 250}.{n % 250 + 1}" for n in range(400)]
NON_SOLVERS = [f"203.0.113.{n + 1}" for n in range(4)]
SOLVERS = [f"203.0.113.{n + 101}" for n in range(4)]
HONEST_INTERVAL = 2.0
# The honest kinds, in the report's and the plot's order.
KINDS = ("non-solver", "solver (hashlib)", "sluice paste (CLI)")
# Seconds per point of the plot's share over time.
PLOT_BIN = 10.0
# The budget: 20 creates/s for everyone; the bots send about 60/s, each address one every 6.7 s.
BUDGET = ["--trusted-proxy", "127.0.0.1", "--global-create-rate", "20",
          "--global-create-burst", "20", "--ip-create-rate", "1", "--ip-create-burst", "5"]


def solve(challenge):
    salt, target = challenge["salt"], challenge["challenge"]
    for n in range(challenge["maxnumber"] + 1):
        if hashlib.sha256(f"{salt}{n}".encode()).hexdigest() == target:
            return n
    raise RuntimeError("no solution")


def payload(challenge, number):
    fields = {k: challenge[k] for k in ("algorithm", "challenge", "salt", "signature")}
    fields["number"] = number
    return base64.b64encode(json.dumps(fields).encode()).decode()


def post(port, client, proof=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"X-Forwarded-For": client, "Content-Type": "text/plain"}
    if proof:
        headers["Sluice-Proof"] = proof
    conn.request("POST", "/api/v1/pastes", body=f"from {client}", headers=headers)
    res = conn.getresponse()
    body = res.read()
    conn.close()
    return res.status, body


def cli_paste(port, env):
    """One create by `sluice paste` (keyed 127.0.0.1: it cannot name another address), which
    solves a challenge without being asked. --max-wait 1s: it solves only while its wait is under
    --max-wait (0 would never solve), and a Retry-After of a second or more, with its jitter, is
    past it, so a refusal is final, as the other kinds' are. Returns (status, seconds taken): 201
    for its exit 0, else 429."""
    started = time.monotonic()
    command = [os.environ["SLUICE_BIN"], "paste", "--server", f"http://127.0.0.1:{port}",
               "--max-wait", "1s", "--json"]
    done = subprocess.run(command, input=b"from the CLI", env=env, capture_output=True, timeout=60)
    return (201 if done.returncode == 0 else 429), time.monotonic() - started


def flood(port, seconds, solve_when_asked):
    """Returns (bots, honest, events): counts, and every honest create as (seconds since the
    start, kind, created)."""
    started_at = time.monotonic()
    stop = started_at + seconds
    bots = {"sent": 0, "created": 0}
    honest = {kind: {"sent": 0, "created": 0} for kind in KINDS}
    solve_s = []
    events = []
    lock = threading.Lock()
    state = tempfile.mkdtemp(prefix="pow-flood-cli-")
    cli_env = {"PATH": os.environ.get("PATH", ""), "HOME": state, "XDG_STATE_HOME": state,
               "XDG_CONFIG_HOME": state}

    def record(kind, sent_at, status):
        with lock:
            honest[kind]["sent"] += 1
            honest[kind]["created"] += status == 201
            events.append((sent_at - started_at, kind, status == 201))

    def bot_loop(offset):
        i = offset
        while time.monotonic() < stop:
            status, _ = post(port, BOTS[i % len(BOTS)])
            with lock:
                bots["sent"] += 1
                bots["created"] += status == 201
            i += 6
            time.sleep(0.1)  # 6 threads: about 60 creates/s, each address far under 1/s

    def honest_loop(client, kind, offset):
        # Spread over the interval: creators sending in the same instant would meet the budget in
        # the order their threads started, and the first would take every token a refill brings.
        next_at = time.monotonic() + offset
        while time.monotonic() < stop:
            time.sleep(max(0.0, next_at - time.monotonic()))
            next_at += HONEST_INTERVAL
            sent_at = time.monotonic()
            if kind == KINDS[2]:
                status, _ = cli_paste(port, cli_env)
                record(kind, sent_at, status)
                continue
            status, body = post(port, client)
            if status == 429 and solve_when_asked and kind == KINDS[1]:
                doc = json.loads(body)
                if "challenge" in doc:
                    started = time.monotonic()
                    number = solve(doc["challenge"])
                    with lock:
                        solve_s.append(time.monotonic() - started)
                    status, _ = post(port, client, payload(doc["challenge"], number))
            record(kind, sent_at, status)

    threads = [threading.Thread(target=bot_loop, args=(k,)) for k in range(6)]
    honest_clients = ([(c, KINDS[0]) for c in NON_SOLVERS] + [(c, KINDS[1]) for c in SOLVERS]
                      + [("127.0.0.1", KINDS[2])])
    for i, (client, kind) in enumerate(honest_clients):
        offset = HONEST_INTERVAL * i / len(honest_clients)
        threads.append(threading.Thread(target=honest_loop, args=(client, kind, offset)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    subprocess.run(["rm", "-rf", state], check=False)
    return bots, honest, solve_s, events


def plot_flood(runs, seconds, path):
    """The share of each honest kind's creates that got a 201, per PLOT_BIN seconds of sending,
    rung off and on side by side."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing (scripts/install-deps.sh lab): no plot", file=sys.stderr)
        return False
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    bins = int(seconds // PLOT_BIN) or 1
    for ax, (rung, events) in zip(axes, runs):
        for kind, style in zip(KINDS, ("-", "--", ":")):
            xs, ys = [], []
            for b in range(bins):
                mine = [ok for t, k, ok in events
                        if k == kind and b * PLOT_BIN <= t < (b + 1) * PLOT_BIN]
                if mine:
                    xs.append((b + 0.5) * PLOT_BIN)
                    ys.append(sum(mine) / len(mine))
            ax.plot(xs, ys, style, marker="o", markersize=3, label=kind)
        ax.set_title(f"proof of work {rung}")
        ax.set_xlabel("seconds into the flood")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"share of honest creates answered 201 (per {PLOT_BIN:g} s)")
    axes[1].legend(loc="center right")
    fig.suptitle(f"{len(BOTS)} bot addresses, each under its own limit, spend the global create "
                 "budget")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def solve_times(rounds=20):
    """A challenge of each difficulty, made as the server makes them, solved `rounds` times."""
    rows = []
    for maxnumber in (25_000, 100_000, 200_000, 400_000, 800_000):
        times = []
        for _ in range(rounds):
            number = int.from_bytes(os.urandom(8), "big") % (maxnumber + 1)
            salt = os.urandom(12).hex() + f"?expires={int(time.time()) + 300}"
            challenge = {"salt": salt, "maxnumber": maxnumber,
                         "challenge": hashlib.sha256(f"{salt}{number}".encode()).hexdigest()}
            started = time.perf_counter()
            solve(challenge)
            times.append(time.perf_counter() - started)
        rows.append((maxnumber, statistics.median(times), max(times)))
    return rows


def redeem_cost(creates_per_round=1500, rounds=3):
    """creates/s with a fresh solution each against without, on one server, interleaved rounds.

    The bench signs its own challenges with the server's key (proof_of_work_key_file), so the
    timed part holds the server's redeem and nothing of the search."""
    key = "bench-proof-of-work-key-0123456789"
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write(key + "\n")
    s = SluiceServer(args=["--trusted-proxy", "127.0.0.1", "--proof-of-work", "true",
                           "--proof-of-work-key-file", f.name, "--proof-of-work-share", "0.5"])
    s.start()

    def fresh_proof():
        number = int.from_bytes(os.urandom(2), "big") % 1001
        salt = os.urandom(12).hex() + f"?expires={int(time.time()) + 300}"
        challenge = hashlib.sha256(f"{salt}{number}".encode()).hexdigest()
        signature = hmac.new(key.encode(), challenge.encode(), hashlib.sha256).hexdigest()
        return payload({"algorithm": "SHA-256", "challenge": challenge, "salt": salt,
                        "signature": signature}, number)

    results = {"plain": [], "solved": []}
    try:
        for _ in range(rounds):
            for mode in ("plain", "solved"):
                proofs = [fresh_proof() if mode == "solved" else None
                          for _ in range(creates_per_round)]
                with concurrent.futures.ThreadPoolExecutor(8) as pool:
                    started = time.monotonic()
                    statuses = list(pool.map(
                        lambda i: post(s.port, f"10.{i % 200}.{i // 200}.1", proofs[i])[0],
                        range(creates_per_round)))
                    elapsed = time.monotonic() - started
                assert statuses.count(201) == creates_per_round, statuses[:20]
                results[mode].append(creates_per_round / elapsed)
    finally:
        s.stop()
        os.unlink(f.name)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--plot", help="write the share of honest creates over time here (PNG)")
    a = ap.parse_args()
    print("# Proof of work: the flood, the solve, the redeem\n")
    plot = f" --plot {a.plot}" if a.plot else ""
    print(f"    SLUICE_BIN={os.environ.get('SLUICE_BIN', '')} bench/pow_flood.py "
          f"--seconds {a.seconds:g}{plot}\n")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"Machine: {os.cpu_count()} cores, {platform.platform()}; commit {commit}; load before "
          f"{open('/proc/loadavg').read().split()[0]}.\n")
    print("## 1. Honest creates during a distributed flood\n")
    print(f"{len(BOTS)} bot addresses send about 60 creates/s together (each address one every "
          f"~7 s, under its limit of 1/s); honest creators each one every {HONEST_INTERVAL:g} s: "
          f"{len(NON_SOLVERS)} addresses that never solve, {len(SOLVERS)} that solve in hashlib, "
          f"and one `sluice paste` at a time from 127.0.0.1; the global budget is 20/s, burst 20; "
          f"{a.seconds:g} s a rung.\n")
    print("| rung | honest kind | sent | 201 | share | median solve |")
    print("|---|---|---:|---:|---:|---:|")
    runs = []
    bot_rows = []
    for rung in (False, True):
        args = list(BUDGET)
        if rung:
            args += ["--proof-of-work", "true"]
        s = SluiceServer(args=args, production_limits=True)
        s.start()
        try:
            bots, honest, solve_s, events = flood(s.port, a.seconds, rung)
        finally:
            s.stop()
        name = "on" if rung else "off"
        runs.append((name, events))
        bot_rows.append((name, bots))
        for kind in KINDS:
            h = honest[kind]
            solved = (f"{statistics.median(solve_s) * 1000:.0f} ms"
                      if solve_s and kind == KINDS[1] else "-")
            print(f"| {name} | {kind} | {h['sent']} | {h['created']} | "
                  f"{h['created'] / max(1, h['sent']):.2f} | {solved} |")
    print("\n| rung | bots sent | bots 201 | bots' share |")
    print("|---|---:|---:|---:|")
    for name, bots in bot_rows:
        print(f"| {name} | {bots['sent']} | {bots['created']} | "
              f"{bots['created'] / max(1, bots['sent']):.2f} |")
    if a.plot and plot_flood(runs, a.seconds, a.plot):
        print(f"\n![share of honest creates answered 201 over time, off and on]"
              f"({os.path.basename(a.plot)})")
    print("\n## 2. Solve time per difficulty (Python hashlib, one core)\n")
    print("| maxnumber | median | slowest of 20 |")
    print("|---:|---:|---:|")
    for maxnumber, median, worst in solve_times():
        print(f"| {maxnumber:,} | {median * 1000:.0f} ms | {worst * 1000:.0f} ms |")
    print("\n## 3. What a redeem costs a create\n")
    r = redeem_cost()
    plain, solved = statistics.median(r["plain"]), statistics.median(r["solved"])
    print(f"Creates/s, 8 threads, 1,500 creates a round, median of 3 interleaved rounds on one "
          f"server: without a proof "
          f"{plain:.0f}, each with a fresh solution {solved:.0f}: **{solved / plain:.2f}x**.")


if __name__ == "__main__":
    main()
