#!/usr/bin/env python3
"""Proof of work as a rung (docs/overload.md, "Proof of work"), measured in one run:

1. The distributed flood: BOTS addresses (loopback, named through X-Forwarded-For from a trusted
   proxy), each under its own per-address limit, together send more creates than the global budget
   refills; HONEST addresses create one paste every HONEST_INTERVAL seconds. Run twice on the same
   server build: proof_of_work off, then on. Reported: the share of honest creates that got a 201,
   and the bots' share, in each.
2. Solve time per difficulty (maxnumber) of a native solver (Python's hashlib, one core): what a
   client pays per create, against which the browser's figure is to be read.
3. What a redeem costs the server: creates/s with a fresh solution each (the solvers' share set
   wide open) against creates/s without, interleaved rounds in one run.

    SLUICE_BIN=build/dev/sluice bench/pow_flood.py [--seconds 20]

Prints a Markdown report (bench/results/proof-of-work.md is one).
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
HONEST = [f"203.0.113.{n + 1}" for n in range(8)]
HONEST_INTERVAL = 2.0
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


def flood(port, seconds, solve_when_asked):
    stop = time.monotonic() + seconds
    bots = {"sent": 0, "created": 0}
    honest = {"sent": 0, "created": 0, "solve_s": []}
    lock = threading.Lock()

    def bot_loop(offset):
        i = offset
        while time.monotonic() < stop:
            status, _ = post(port, BOTS[i % len(BOTS)])
            with lock:
                bots["sent"] += 1
                bots["created"] += status == 201
            i += 6
            time.sleep(0.1)  # 6 threads: about 60 creates/s, each address far under 1/s

    def honest_loop(client):
        next_at = time.monotonic()
        while time.monotonic() < stop:
            time.sleep(max(0.0, next_at - time.monotonic()))
            next_at += HONEST_INTERVAL
            status, body = post(port, client)
            if status == 429 and solve_when_asked:
                doc = json.loads(body)
                if "challenge" in doc:
                    started = time.monotonic()
                    number = solve(doc["challenge"])
                    with lock:
                        honest["solve_s"].append(time.monotonic() - started)
                    status, _ = post(port, client, payload(doc["challenge"], number))
            with lock:
                honest["sent"] += 1
                honest["created"] += status == 201

    threads = [threading.Thread(target=bot_loop, args=(k,)) for k in range(6)]
    threads += [threading.Thread(target=honest_loop, args=(c,)) for c in HONEST]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return bots, honest


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
    a = ap.parse_args()
    print("# Proof of work: the flood, the solve, the redeem\n")
    print(f"    SLUICE_BIN={os.environ.get('SLUICE_BIN', '')} bench/pow_flood.py --seconds {a.seconds:g}\n")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"Machine: {os.cpu_count()} cores, {platform.platform()}; commit {commit}; load before "
          f"{open('/proc/loadavg').read().split()[0]}.\n")
    print("## 1. Honest creates during a distributed flood\n")
    print(f"{len(BOTS)} bot addresses send about 60 creates/s together (each address one every "
          f"~7 s, under its limit of 1/s); {len(HONEST)} honest addresses one every "
          f"{HONEST_INTERVAL:g} s each; the global budget is 20/s, burst 20.\n")
    print("| rung | honest sent | honest 201 | honest share | bots sent | bots 201 | median solve |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for rung in (False, True):
        args = list(BUDGET)
        if rung:
            args += ["--proof-of-work", "true"]
        s = SluiceServer(args=args, production_limits=True)
        s.start()
        try:
            bots, honest = flood(s.port, a.seconds, rung)
        finally:
            s.stop()
        solve_s = f"{statistics.median(honest['solve_s']) * 1000:.0f} ms" if honest["solve_s"] else "-"
        print(f"| {'on' if rung else 'off'} | {honest['sent']} | {honest['created']} | "
              f"{honest['created'] / max(1, honest['sent']):.2f} | {bots['sent']} | "
              f"{bots['created']} | {solve_s} |")
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
