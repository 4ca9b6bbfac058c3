"""deploy/prometheus/sluice.rules.yml in a real Prometheus (Debian's package, started by
scripts/testenv/prometheus.sh) that scrapes the two sluice processes of the stack (scripts/stack.sh):
one key flooding fires the 429-share alert and not the saturation one; many keys each under their
budget fire the saturation alert and not the 429-share one. Checked through Prometheus's HTTP API.

The rules are the shipped ones with every duration divided by TIME_SCALE (windows no shorter than
five scrapes), so that minutes of an incident take seconds here; the expressions, the thresholds
and the labels are untouched. `promtool test rules` (ops.prometheus_rules) checks the real
durations on synthetic series; this checks the metric names, labels and arithmetic against what
the processes really export under real load.

Run: cd tests/stack && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_prometheus_live
"""

import json
import os
import re
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from test_stack import ROOT, Stack

RULES = os.path.join(ROOT, "deploy", "prometheus", "sluice.rules.yml")
PROMETHEUS_SCRIPT = os.path.join(ROOT, "scripts", "testenv", "prometheus.sh")
TIME_SCALE = 30
SHORTEST_WINDOW_S = 5  # five scrapes at 1 s: rate() needs two, a window must outlast a late one
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def scaled_rules(text, scale=TIME_SCALE):
    """The rule file with its range windows (`[5m]`) and `for:` durations divided by `scale`."""
    def seconds(amount, unit):
        return int(amount) * SECONDS[unit]

    def window(m):
        return f"[{max(SHORTEST_WINDOW_S, seconds(*m.groups()) // scale)}s]"

    def hold(m):
        return f"for: {max(1, seconds(*m.groups()) // scale)}s"

    text = re.sub(r"\[(\d+)([smhd])\]", window, text)
    return re.sub(r"for: (\d+)([smhd])", hold, text)


class OpenLoop:
    """Creates through nginx at a fixed rate, spread round-robin over client keys (X-Forwarded-For),
    whatever the answers' latency, until stopped; counts the answers by status."""

    def __init__(self, stack, rate, clients):
        self.stack, self.rate, self.clients = stack, rate, clients
        self.statuses = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=32)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._pool.shutdown(wait=True)

    def _one(self, client):
        try:
            status = self.stack.create(b"growth or abuse?", client=client)[0]
        except OSError:
            status = "error"
        with self._lock:
            self.statuses[status] = self.statuses.get(status, 0) + 1

    def _run(self):
        start, n = time.monotonic(), 0
        while not self._stop.is_set():
            due = start + n / self.rate
            delay = due - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                break
            self._pool.submit(self._one, self.clients[n % len(self.clients)])
            n += 1


class PrometheusLiveTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stack = Stack()
        cls.stack.up()
        cls.prom_dir = tempfile.mkdtemp(prefix="sluice-prometheus-")
        try:
            cls.rules = os.path.join(cls.prom_dir, "sluice.rules.scaled.yml")
            with open(RULES, encoding="utf-8") as f, open(cls.rules, "w", encoding="utf-8") as out:
                out.write(scaled_rules(f.read()))
            targets = [f"127.0.0.1:{port}" for port in cls.stack.apps]
            cls.prom = subprocess.run(
                [PROMETHEUS_SCRIPT, "start", os.path.join(cls.prom_dir, "server"), "0", cls.rules,
                 *targets], check=True, capture_output=True, text=True, timeout=120).stdout.strip()
        except BaseException:
            cls.stack.down()
            raise

    @classmethod
    def tearDownClass(cls):
        subprocess.run([PROMETHEUS_SCRIPT, "stop", os.path.join(cls.prom_dir, "server")],
                       capture_output=True, timeout=60)
        cls.stack.down()

    def api(self, path):
        with urllib.request.urlopen(self.prom + path, timeout=10) as res:
            doc = json.load(res)
        self.assertEqual(doc["status"], "success", doc)
        return doc["data"]

    def alerts(self):
        """{(alertname, reason or ''): state} of every pending or firing alert."""
        return {(a["labels"]["alertname"], a["labels"].get("reason", "")): a["state"]
                for a in self.api("/api/v1/alerts")["alerts"]}

    def wait_for_targets_up(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            targets = self.api("/api/v1/targets")["activeTargets"]
            if len(targets) == len(self.stack.apps) and all(t["health"] == "up" for t in targets):
                return
            time.sleep(0.5)
        self.fail(f"Prometheus does not scrape every process: {targets}")

    def run_until_firing(self, load, alertname, never, timeout=90):
        """Polls the alerts while `load` runs until `alertname` fires; fails if any alert named in
        `never` is pending or firing meanwhile. Returns the firing alerts."""
        deadline = time.monotonic() + timeout
        seen = {}
        while time.monotonic() < deadline:
            seen = self.alerts()
            unwanted = {k: v for k, v in seen.items() if k[0] in never}
            self.assertFalse(unwanted, f"{unwanted} while {alertname} was awaited; answers "
                                       f"{load.statuses}")
            firing = {k for k, v in seen.items() if v == "firing"}
            if any(name == alertname for name, _ in firing):
                return firing
            time.sleep(1)
        self.fail(f"{alertname} did not fire in {timeout} s; alerts {seen}; answers "
                  f"{load.statuses}")

    def test_growth_then_abuse_each_fires_its_own_alert(self):
        self.wait_for_targets_up()
        # Growth: 40 keys at 0.625/s each, under their own budget (1/s, burst 10), 25/s in all
        # against the tier's 20/s global cap (test_stack.STACK_ARGS).
        honest = [f"10.20.{i // 250}.{i % 250 + 1}" for i in range(40)]
        with OpenLoop(self.stack, rate=25, clients=honest) as growth:
            firing = self.run_until_firing(growth, "SluiceGlobalCapSaturated",
                                           never={"SluiceCreate429ShareHigh"})
        self.assertIn(("SluiceGlobalCapSaturated", ""), firing)
        self.assertGreater(growth.statuses.get(429, 0), 0, growth.statuses)

        # Abuse: one key at 8/s, far over its 1/s and well under the global 20/s.
        with OpenLoop(self.stack, rate=8, clients=["10.66.6.6"]) as abuse:
            firing = self.run_until_firing(abuse, "SluiceCreate429ShareHigh", never=set())
            self.assertIn(("SluiceCreate429ShareHigh", "ip_create_count"), firing)
            # The growth's saturation has left the global window by now and does not come back.
            deadline = time.monotonic() + 30
            while ("SluiceGlobalCapSaturated", "") in self.alerts():
                self.assertLess(time.monotonic(), deadline, "saturation alert kept by abuse")
                time.sleep(1)
            time.sleep(3)
            self.assertNotIn(("SluiceGlobalCapSaturated", ""), self.alerts())
        self.assertGreater(abuse.statuses.get(429, 0), abuse.statuses.get(201, 0),
                           abuse.statuses)


if __name__ == "__main__":
    unittest.main()
