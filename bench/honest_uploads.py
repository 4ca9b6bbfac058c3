#!/usr/bin/env python3
"""Honest slow uploads under a fill that costs nothing (issue 43, item 2; docs/overload.md,
"Pressure"; bench/results/honest-uploads.md), against the current binary and, if given, a
baseline.

    bench/honest_uploads.py [--binary build/dev/sluice] [--baseline /work/baseline/sluice]

For each binary, on the embedded store with the default settings (production_limits: the harness's
relaxed test limits off; 50 create slots, 10 per address, 20 per /24, a 1,024 B/s floor after a
5 s grace, 64 KiB/s at full pressure): two /24s (127.81.0.0 and 127.82.0.0, ten addresses each, two
connections per address) hold 40 of the 50 slots with creates that declare 1,000 bytes and send
one, reconnecting as soon as one is answered (cut at the grace, by the floor). Once they hold 38
slots, 7 phones, each from an address of its own in a third /24, upload 400 KB at 30 KB/s at
once. Recorded: each phone's answer and how long it took, the required rate the gauge showed
before the phones began, and what the attackers were answered.
"""
import argparse
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from pressure_load import Phone, SlowBodies  # noqa: E402
from promtext import metric, parse_metrics  # noqa: E402
from sluice_harness import SluiceServer, wait_until  # noqa: E402

ATTACKERS = [f"127.{net}.0.{host}" for net in (81, 82) for host in range(1, 11)]
PHONES = [f"127.83.0.{n}" for n in range(1, 8)]


def run(binary):
    os.environ["SLUICE_BIN"] = os.path.abspath(binary)
    server = SluiceServer(production_limits=True, patient=False)
    server.start()
    try:
        def gauges():
            res = server.admin_request("GET", "/metrics", timeout=5)
            return parse_metrics(res.body.decode())

        attack = SlowBodies(server.port, ATTACKERS, 2, rate=10, declared=1000,
                            sends_at_most=1).start()
        try:
            wait_until(lambda: metric(gauges(), "sluice_pool_in_use", pool="create") >= 38,
                       timeout=30, message="the attackers hold 80% of the create slots")
            m = gauges()
            before = {"slots_in_use": metric(m, "sluice_pool_in_use", pool="create"),
                      "required_rate": metric(m, "sluice_http_required_body_rate_bytes")}
            phones = [Phone(server.port, source).start() for source in PHONES]
            for phone in phones:
                phone.join()
        finally:
            attack.stop()
        return {
            "binary": binary,
            "phones_201": sum(1 for p in phones if p.status == 201),
            "phones": len(phones),
            "outcomes": [{"status": p.status, "reason": p.reason, "seconds": round(p.seconds, 1)}
                         for p in phones],
            "before_phones": before,
            "attackers_answered": {str(k): v for k, v in sorted(attack.statuses.items())},
        }
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", default=os.path.join(HERE, "..", "build", "dev", "sluice"))
    parser.add_argument("--baseline")
    args = parser.parse_args()
    print(json.dumps({"machine": f"{platform.node()} {os.cpu_count()} cores",
                      "when": time.strftime("%Y-%m-%d %H:%M:%S")}))
    for binary in ([args.baseline] if args.baseline else []) + [args.binary]:
        print(json.dumps(run(binary)), flush=True)


if __name__ == "__main__":
    main()
