#!/usr/bin/env python3
"""Time from an abuse notice to 451 on a read (docs/moderation.md, "Notices";
bench/results/notices.md).

    bench/notice_latency.py [--notices 200] [--bin build/dev/sluice] [--meta URL]

One server (the embedded store, or --meta postgres://...). Each paste is created and read once
(its text cached: the worst case, a hot paste), then a notice naming it is POSTed to the admin
listener and the paste is read again and again until a read answers 451; the time is from the
moment the POST is sent to that 451. For comparison, in the same run and on the same server, the
same for the nearest thing before notices existed: the operator's takedown
(POST /admin/pastes/ID/takedown). Pastes alternate between the two, so drift falls on both.

Printed: p50, p99 and max of each, the ratio notice/takedown of the p99s, and how many reads after
the answer still served the text (0: the answer is given only once every cache let go).
"""
import argparse
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from sluice_harness import SluiceServer  # noqa: E402

JSON = {"Content-Type": "application/json"}


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else 0


def time_to_451(s, paste_id, act):
    """Seconds from the action's request to the first 451 read, and reads that served text after
    the action had answered."""
    assert s.get(f"/raw/{paste_id}").status == 200
    start = time.perf_counter()
    res = act()
    assert res.status in (200, 201), res
    stale = 0
    while True:
        read = s.get(f"/raw/{paste_id}")
        if read.status == 451:
            return time.perf_counter() - start, stale
        assert read.status == 200, read
        stale += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--notices", type=int, default=200)
    ap.add_argument("--bin", default=None)
    ap.add_argument("--meta", default=None, help="a postgres:// URL (default: the embedded store)")
    args = ap.parse_args()
    if args.bin:
        os.environ["SLUICE_BIN"] = os.path.abspath(args.bin)
    server_args = ["--meta", args.meta] if args.meta else []
    s = SluiceServer(server_args)
    s.start()
    try:
        times = {"notice": [], "takedown": []}
        stale = {"notice": 0, "takedown": 0}
        for n in range(2 * args.notices):
            paste_id = s.create_ok(b"a paste named by a notice %d\n" % n)["id"]
            if n % 2 == 0:
                body = json.dumps({"sender": "abuse@bench.example", "reference": f"BENCH-{n}",
                                   "category": "phishing", "pastes": [paste_id]})
                act = lambda: s.admin_request("POST", "/admin/notices", body=body, headers=JSON)  # noqa: E731
                kind = "notice"
            else:
                act = lambda: s.admin_request("POST", f"/admin/pastes/{paste_id}/takedown",  # noqa: E731
                                              body="{}", headers=JSON)
                kind = "takedown"
            took, served = time_to_451(s, paste_id, act)
            times[kind].append(took)
            stale[kind] += served
    finally:
        s.stop()
    print(f"# {platform.node()}: {os.cpu_count()} cores, {platform.platform()}; store "
          f"{'postgres' if args.meta else 'embedded'}; {args.notices} of each")
    print("| action | p50 ms | p99 ms | max ms | reads that still served the text |")
    print("|---|---|---|---|---|")
    for kind in ("notice", "takedown"):
        t = times[kind]
        print(f"| {kind} | {pct(t, 50) * 1e3:.2f} | {pct(t, 99) * 1e3:.2f} | "
              f"{max(t) * 1e3:.2f} | {stale[kind]} |")
    print(f"\nnotice/takedown p99 ratio: {pct(times['notice'], 99) / pct(times['takedown'], 99):.2f}")


if __name__ == "__main__":
    main()
