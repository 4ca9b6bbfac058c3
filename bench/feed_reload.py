#!/usr/bin/env python3
"""A reputation feed of a million prefixes under load (issue 46, item 4; docs/admission.md,
"Reputation feeds"): the server starts with the feed, an open-loop load of creates and reads runs
for two equal halves, the first without reloads and the second with a SIGHUP every
`--every` seconds, each of which reads the file again and builds a new set beside the one in use.

Reported: failed requests (anything but 200 and 201, or no answer: must be 0), the latency p50 and
p99 of each half and of the requests that started while a feed load was running, as ratios to the
first half's (one run, so the machine's load is the same for both), each load's time (the server's
log line "feeds loaded in N ms"), the set's ranges and memory (its log line), and the process's
resident memory with and without the feed.

The load comes from addresses no feed lists (X-Forwarded-For from a trusted 127.0.0.1), except one
create in ten from a listed one, which must be refused (403) or classed: that is not a failure.

Usage: bench/feed_reload.py [--prefixes 1000000] [--seconds 20] [--every 2] [--rate 100]
           [--via feeds|create_networks_file] [--out FILE.json]
`--via create_networks_file` loads the same file as create_access's allow-list instead, which a
reload parses on the first event loop: the same load and reloads, for comparison.
SLUICE_BIN names the binary (default build/dev/sluice). The function `measure` is what the short
test in `make test` calls (tests/integration/test_feed_reload.py).
"""

import argparse
import json
import os
import random
import re
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from loadgen import Request, Stream, percentile, rss_bytes, run_streams  # noqa: E402
from promtext import metric  # noqa: E402
from sluice_harness import SluiceServer  # noqa: E402

LISTED = "192.0.2.77"  # every generated feed lists 192.0.2.0/24


def write_netset(path, prefixes, seed=1):
    """A netset of `prefixes` lines, nine in ten IPv4 (/16 to /32, most /24, as FireHOL's and
    Spamhaus's lists are) and one in ten IPv6 (/32 to /64), in both files' comment styles; the
    same distribution as bench/admission/prefix_set_bench.cc. Never lists 10.0.0.0/8 or
    2001:db8::/32, the load's own addresses."""
    rnd = random.Random(seed)
    v6 = prefixes // 10
    v4 = prefixes - v6 - 1
    lines = ["# a generated feed (FireHOL style)", "; and Spamhaus DROP style",
             "192.0.2.0/24 ; SBL1"]
    addresses, lengths = rnd.randbytes(4 * v4), rnd.randbytes(v4)
    for i in range(v4):
        a = addresses[4 * i:4 * i + 4]
        if a[0] == 10:
            a = b"\x0b" + a[1:]
        b = lengths[i]
        lines.append(f"{socket.inet_ntoa(a)}/{16 + b % 17 if b & 3 == 0 else 24}")
    words = rnd.randbytes(8 * v6)
    for i in range(v6):
        w = words[8 * i:8 * i + 8]
        lines.append(f"3{w[0] & 15:x}{w[1]:02x}:{w[2]:x}{w[3]:02x}:{w[4]:x}{w[5]:02x}"
                     f"::/{32 + w[6] % 33}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def measure(prefixes=1_000_000, seconds=20.0, every=2.0, rate=100.0, action="refuse",
            progress=None, via="feeds"):
    """Runs the experiment once; returns a dict of the figures (see the module's docstring).
    `via`: "feeds" (the feed, loaded off the event loops), or "create_networks_file" (the same
    file as create_access's allow-list, with create_access = anyone, which a reload parses on the
    first event loop: the comparison)."""
    server = SluiceServer(["--trusted-proxy", "127.0.0.1/32"], keep_root=False)
    path = os.path.join(server.root, "big.netset")
    t = time.monotonic()
    write_netset(path, prefixes)
    generated = time.monotonic() - t
    if via == "feeds":
        server.args += ["--feeds", f"big={action}:{path}"]
    else:
        server.args += ["--create-networks-file", path]
    server.start()
    try:
        rss_with_feed = rss_bytes(server.proc.pid)[0]
        paste = server.create_ok(b"read me under load\n",
                                 headers={"X-Forwarded-For": "10.0.0.1"})["id"]

        def create(i):
            listed = i % 10 == 9
            addr = LISTED if listed else f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
            return Request("POST", "/api/v1/pastes", {"X-Forwarded-For": addr},
                           f"paste {i}\n", tag="listed" if listed else "create")

        def read(i):
            return Request("GET", f"/raw/{paste}",
                           {"X-Forwarded-For": f"10.1.{(i >> 8) & 255}.{i & 255}"}, tag="read")

        half = seconds / 2
        hups = []

        def hup():
            hups.append(time.monotonic())
            server.proc.send_signal(signal.SIGHUP)

        actions = []
        at = half + every / 2
        while at < seconds - every / 2:
            actions.append((at, hup))
            at += every
        streams = [Stream("create", rate, seconds, create), Stream("read", 2 * rate, seconds, read)]
        run = run_streams("127.0.0.1", server.port, streams, actions=actions, progress=progress)

        deadline = time.monotonic() + 60
        counter, labels = (("sluice_feed_loads_total", {"result": "ok"}) if via == "feeds" else
                           ("sluice_config_reloads_total", {"result": "ok"}))
        while (metric(server.metrics(), counter, **labels) or 0) < len(hups):
            if time.monotonic() > deadline:
                raise AssertionError(f"only some of {len(hups)} feed loads finished")
            time.sleep(0.1)
        log = server.log()
        loads_ms = [float(m) for m in re.findall(r"feeds loaded in (\d+) ms", log)]
        built = re.search(r"feed big: (\d+) networks \((\d+) ranges, ([\d.]+) MiB\).*in (\d+) ms",
                          log)
        windows = [(h, h + ms / 1000) for h, ms in zip(hups, loads_ms)]
        t0 = run.t0
        records = run.records()
        failed = [r for r in records if r.tag != "listed" and r.status not in (200, 201)]
        listed_wrong = [r for r in records if r.tag == "listed" and r.status not in (403, 201, 429)]

        def lat(pred):
            return [r.latency for r in records
                    if r.tag != "listed" and r.latency is not None and pred(r)]

        first = lat(lambda r: r.start - t0 < half)
        second = lat(lambda r: r.start - t0 >= half)
        during = lat(lambda r: any(a <= r.start <= b for a, b in windows))

        def summary(values):
            return {"n": len(values), "p50_ms": round(1e3 * percentile(values, 50), 2),
                    "p99_ms": round(1e3 * percentile(values, 99), 2),
                    "max_ms": round(1e3 * max(values), 2)} if values else {"n": 0}

        out = {
            "via": via,
            "load_before": open("/proc/loadavg").read().split()[:3],
            "prefixes": prefixes,
            "netset_bytes": os.path.getsize(path),
            "generate_s": round(generated, 2),
            "start_load_ms": int(built.group(4)) if built else None,
            "ranges": int(built.group(2)) if built else None,
            "set_mib": float(built.group(3)) if built else None,
            "rss_with_feed_mib": round(rss_with_feed / 2**20, 1),
            "reloads": len(hups),
            "reload_ms": loads_ms,
            "requests": len(records),
            "failed": len(failed),
            "failed_examples": [repr(r) for r in failed[:5]],
            "listed_wrong": len(listed_wrong),
            "without_reloads": summary(first),
            "with_reloads": summary(second),
            "during_loads": summary(during),
            "schedule": run.schedule_problem(on_time=False) or run.schedule_summary(),
        }
        base = out["without_reloads"]
        for name in ("with_reloads", "during_loads"):
            if out[name].get("n") and base.get("n"):
                for q in ("p50", "p99", "max"):
                    out[name][f"{q}_ratio"] = round(out[name][f"{q}_ms"] / base[f"{q}_ms"], 2)
        return out
    finally:
        server.stop()
        server.cleanup()


def rss_without_feed():
    server = SluiceServer([])
    server.start()
    try:
        return round(rss_bytes(server.proc.pid)[0] / 2**20, 1)
    finally:
        server.stop()
        server.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prefixes", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--every", type=float, default=2)
    ap.add_argument("--rate", type=float, default=100, help="creates a second (reads: twice)")
    ap.add_argument("--action", default="refuse")
    ap.add_argument("--via", choices=("feeds", "create_networks_file"), default="feeds",
                    help="create_networks_file: the same file through create_access's allow-list, "
                         "parsed on an event loop at a reload (the comparison)")
    ap.add_argument("--out")
    args = ap.parse_args()
    result = measure(args.prefixes, args.seconds, args.every, args.rate, args.action, progress=5,
                     via=args.via)
    result["rss_without_feed_mib"] = rss_without_feed()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0 if result["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
