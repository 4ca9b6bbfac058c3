"""slowhttptest (Debian's package) against the real binary: slow headers, slow body (creates) and
slow read, each from 127.0.0.1, while a probe from 127.0.0.2 creates and reads a paste every 100 ms.
Every probe must be answered, none with a 503.

SLUICE_SLOWHTTP_SCALE=short (the default, in make test): 200 connections at 100/s for a few seconds
per attack, latency recorded only. long (make chaos): 1,000 connections at 200/s for 30 s per attack,
and the probe's p99 held under a generous bound. Figures go to stdout and, when
SLUICE_SLOWHTTP_RESULTS names a file, as JSON lines to it (bench/results/edge-abuse.md quotes them).
"""

import http.client
import json
import os
import resource
import shutil
import subprocess
import threading
import time
import unittest

from promtext import metric, parse_metrics
from sluice_harness import SluiceTestCase

SCALE = os.environ.get("SLUICE_SLOWHTTP_SCALE", "short")
LONG = SCALE == "long"
CONNECTIONS, RATE, SECONDS = (1000, 200, 30) if LONG else (200, 100, 4)
PROBE_INTERVAL = 0.1
# Only in the long run, and generous: the machine is shared, and the short run must not flake.
P99_BOUND_SECONDS = 0.5

# Production limits per client (the harness relaxes the per-client caps, since every test client
# is 127.0.0.1), short expiries so the attacks are cut within the run.
SERVER_ARGS = ["--max-connections-per-client", "256", "--create-slots-per-client", "10",
               "--first-byte-timeout", "5s", "--header-timeout", "3s", "--body-timeout", "10s",
               "--min-body-rate", "1024", "--min-body-rate-grace", "2s"]


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Probe:
    """Creates a paste and reads it back every PROBE_INTERVAL from 127.0.0.2, on new connections
    (a client arriving during the attack), recording each request's status and latency."""

    def __init__(self, port):
        self.port = port
        self.results = []  # (what, status or an exception's text, seconds)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def call(self, what, method, path, body=None):
        started = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10,
                                          source_address=("127.0.0.2", 0))
        try:
            conn.request(method, path, body=body)
            res = conn.getresponse()
            data = res.read()
            self.results.append((what, res.status, time.monotonic() - started))
            return res.status, data
        except (OSError, http.client.HTTPException) as e:
            self.results.append((what, f"{type(e).__name__}: {e}", time.monotonic() - started))
            return None, b""
        finally:
            conn.close()

    def run(self):
        n = 0
        while not self.stop.is_set():
            tick = time.monotonic()
            status, data = self.call("create", "POST", "/api/v1/pastes", f"probe {n}".encode())
            if status == 201:
                self.call("read", "GET", "/raw/" + json.loads(data)["id"])
            n += 1
            self.stop.wait(max(0.0, PROBE_INTERVAL - (time.monotonic() - tick)))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


@unittest.skipUnless(shutil.which("slowhttptest"), "slowhttptest is not installed "
                     "(scripts/install-deps.sh test)")
class SlowHttpTest(SluiceTestCase):
    def attack(self, name, mode_args, url_path="/"):
        s = self.server(SERVER_ARGS)
        large = None
        if name == "slow_read":
            # A response far larger than the socket buffers, so the reader's window holds it.
            large = s.create_ok("x" * 500_000)["id"]
            url_path = f"/raw/{large}"
        cmd = ["slowhttptest", *mode_args, "-c", str(CONNECTIONS), "-r", str(RATE),
               "-l", str(SECONDS), "-u", f"http://127.0.0.1:{s.port}{url_path}", "-p", "3"]
        with Probe(s.port) as probe:
            attacker = subprocess.run(cmd, capture_output=True, text=True,
                                      timeout=SECONDS + 120, preexec_fn=raise_fd_limit)
            time.sleep(0.5)  # a few probes after the attack too
        output = attacker.stdout + attacker.stderr
        self.assertIn("slowhttptest", output)
        m = parse_metrics(s.get("/metrics").text)
        self.report(name, probe.results, m, cmd)
        failures = [r for r in probe.results if not isinstance(r[1], int)]
        self.assertEqual(failures, [], f"probes not answered during {name}")
        statuses = {r[1] for r in probe.results}
        self.assertNotIn(503, statuses, f"a probe was shed during {name}")
        self.assertLessEqual(statuses, {200, 201}, f"probe statuses during {name}")
        # slowhttptest ends early once the server has closed every connection it opened.
        self.assertGreater(len(probe.results), 20, "the probe ran through the attack")
        if LONG:
            p99 = percentile([r[2] for r in probe.results], 99)
            self.assertLess(p99, P99_BOUND_SECONDS, f"probe p99 during {name}")
        return m

    def report(self, name, results, m, cmd):
        latencies = [r[2] for r in results]
        figure = {
            "attack": name, "scale": SCALE, "connections": CONNECTIONS, "rate": RATE,
            "seconds": SECONDS, "probes": len(results),
            "p50_ms": round(percentile(latencies, 50) * 1000, 1),
            "p99_ms": round(percentile(latencies, 99) * 1000, 1),
            "max_ms": round(max(latencies) * 1000, 1),
            "refused_per_client": metric(m, "sluice_admission_rejections_total",
                                         reason="connections_per_client"),
            "refused_create_share": metric(m, "sluice_admission_rejections_total",
                                           reason="create_slots_per_client"),
            "timeouts": {phase: metric(m, "sluice_http_timeouts_total", phase=phase)
                         for phase in ("first_byte", "headers", "body", "body_rate")},
            "command": " ".join(cmd),
        }
        print(json.dumps(figure), flush=True)
        path = os.environ.get("SLUICE_SLOWHTTP_RESULTS")
        if path:
            with open(path, "a") as f:
                f.write(json.dumps(figure) + "\n")

    def test_slow_headers(self):
        m = self.attack("slow_headers", ["-H", "-i", "1", "-x", "24"])
        if LONG:
            self.assertGreater(metric(m, "sluice_http_timeouts_total", phase="headers"), 0)

    def test_slow_body(self):
        m = self.attack("slow_body", ["-B", "-i", "1", "-x", "10", "-s", "1000"],
                        url_path="/api/v1/pastes")
        self.assertGreater(
            metric(m, "sluice_admission_rejections_total", reason="create_slots_per_client") +
            metric(m, "sluice_http_timeouts_total", phase="body_rate"), 0)

    def test_slow_read(self):
        self.attack("slow_read", ["-X", "-k", "3", "-n", "1", "-w", "32", "-y", "64", "-z", "32"])


if __name__ == "__main__":
    unittest.main()
