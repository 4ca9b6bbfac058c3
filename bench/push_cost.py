#!/usr/bin/env python3
"""What the operator's push sinks cost creates and reports (docs/moderation.md, "Push";
bench/results/push.md).

    bench/push_cost.py [--seconds 15] [--bin build/dev/sluice]

Three servers of one binary, started together and loaded in turn, round after round, each round
starting with the next (--rounds; the machine's drift falls on all three alike), each time under
the same closed-loop load for --seconds: 4 threads creating 1 KB pastes and 2 threads reporting
pastes from fresh networks (each report counted, so each one is an event for the sinks):

  none   no sink;
  dead   push_webhook at a port nothing listens on;
  slow   push_webhook at a receiver that answers each post after 10 s.

Printed per server: the median over the rounds of creates/s and reports/s, each as a ratio against
`none` in the same run, the p99 of each over all rounds, and the sink's delivered/failed/dropped
counters at the end.
"""
import argparse
import json
import os
import platform
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from promtext import metric  # noqa: E402
from sluice_harness import SluiceServer  # noqa: E402
from webhook_receiver import WebhookReceiver, closed_port_url  # noqa: E402

REPORTING = ["--trusted-proxy", "127.0.0.1", "--report-hide-threshold", "0",
             "--report-burst", "1000000", "--report-rate", "1000000",
             "--report-global-burst", "1000000", "--report-global-rate", "1000000"]


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else 0


class Target:
    def __init__(self, name, sink_args):
        self.name = name
        self.s = SluiceServer([*REPORTING, *sink_args])
        self.s.start()
        self.targets = [self.s.create_ok(b"report target %d\n" % n)["id"] for n in range(200)]
        self.rates = {"creates": [], "reports": []}
        self.latency = {"creates": [], "reports": []}
        self.serial = 0

    def round(self, seconds):
        s = self.s
        stop = time.monotonic() + seconds
        done = {"creates": [], "reports": []}
        lock = threading.Lock()
        self.serial += 1
        serial = self.serial

        def creator(t):
            n = 0
            while time.monotonic() < stop:
                began = time.monotonic()
                res = s.request("POST", "/api/v1/pastes",
                                body=b"x" * 1000 + b"%d %d %d" % (serial, t, n))
                n += 1
                if res.status == 201:
                    with lock:
                        done["creates"].append(time.monotonic() - began)

        def reporter(t):
            n = 0
            while time.monotonic() < stop:
                # A fresh /24 for every report: each is counted, so each is an event.
                network = f"{100 + 10 * t + serial % 10}.{(n >> 8) & 255}.{n & 255}.1"
                began = time.monotonic()
                res = s.request("POST",
                                f"/api/v1/pastes/{self.targets[n % len(self.targets)]}/report",
                                body=json.dumps({"reason": "spam"}),
                                headers={"Content-Type": "application/json",
                                         "X-Forwarded-For": network})
                n += 1
                if res.status == 202:
                    with lock:
                        done["reports"].append(time.monotonic() - began)

        threads = [threading.Thread(target=creator, args=(t,)) for t in range(4)]
        threads += [threading.Thread(target=reporter, args=(t,)) for t in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for kind, latencies in done.items():
            self.rates[kind].append(len(latencies) / seconds)
            self.latency[kind].extend(latencies)

    def summary(self):
        m = self.s.metrics()
        push = {o: int(metric(m, "sluice_push_events_total", sink="webhook", outcome=o))
                for o in ("delivered", "failed", "dropped")}
        return {"name": self.name,
                "creates_per_s": pct(self.rates["creates"], 50),
                "reports_per_s": pct(self.rates["reports"], 50),
                "create_p99_ms": pct(self.latency["creates"], 99) * 1000,
                "report_p99_ms": pct(self.latency["reports"], 99) * 1000, "push": push}

    def close(self):
        self.s.stop()
        self.s.cleanup()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bin", default=os.environ.get("SLUICE_BIN", "build/dev/sluice"))
    args = parser.parse_args()
    os.environ["SLUICE_BIN"] = os.path.abspath(args.bin)
    slow = WebhookReceiver(delay=10)
    servers = [Target("none", []), Target("dead", ["--push-webhook", closed_port_url()]),
               Target("slow", ["--push-webhook", slow.url, "--push-timeout", "30s"])]
    try:
        for r in range(args.rounds):
            # Each round starts with another server, so no sink always runs last.
            for server in servers[r % 3:] + servers[:r % 3]:
                server.round(args.seconds)
        results = [server.summary() for server in servers]
    finally:
        for server in servers:
            server.close()
    base = results[0]
    print(f"# {platform.node()}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{args.rounds} rounds of {args.seconds:g} s")
    print("| sinks | creates/s | ratio | create p99 ms | reports/s | ratio | report p99 ms "
          "| delivered | failed | dropped |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['name']} | {r['creates_per_s']:.0f} | "
              f"{r['creates_per_s'] / base['creates_per_s']:.2f}x | {r['create_p99_ms']:.1f} | "
              f"{r['reports_per_s']:.0f} | {r['reports_per_s'] / base['reports_per_s']:.2f}x | "
              f"{r['report_p99_ms']:.1f} | {r['push']['delivered']} | {r['push']['failed']} | "
              f"{r['push']['dropped']} |")


if __name__ == "__main__":
    main()
