"""The takedown clock (docs/moderation.md): a reported paste's arrival is stored, survives a restart,
and is what sluice_moderation_oldest_open_age_seconds is computed from; the operator's action is
timed from it (sluice_moderation_time_to_action_seconds); and the shipped alert rule
SluiceTakedownDeadline, in a real Prometheus (Debian's package, scripts/testenv/prometheus.sh)
scraping the server, stays quiet at 70% of takedown_deadline, fires past 75%, and resolves once the
paste is taken down.

The arrival is moved back by editing meta.db while the server is stopped, so that an hour of waiting
takes no time here: what is tested is that the server computes the age from the stored arrival (not
from its own start), and what the rule makes of it.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_takedown_clock
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

from promtext import metric
from sluice_harness import SluiceTestCase, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
RULES = os.path.join(ROOT, "deploy", "prometheus", "sluice.rules.yml")
PROMETHEUS_SCRIPT = os.path.join(ROOT, "scripts", "testenv", "prometheus.sh")
AGE = "sluice_moderation_oldest_open_age_seconds"
DEADLINE_S = 3600  # takedown_deadline's default


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def report(s, paste_id, client):
    body = json.dumps({"reason": "illegal", "note": "a notice by mail"})
    res = s.request("POST", f"/api/v1/pastes/{paste_id}/report", body=body,
                    headers={"Content-Type": "application/json", "X-Forwarded-For": client})
    assert res.status == 202, res


def move_arrival_back(s, paste_id, seconds):
    """Dates the paste's queue entry `seconds` earlier, with the server stopped, and starts it
    again (on the same port)."""
    s.stop()
    assert s.execute("UPDATE report_queue SET first_at = first_at - ? WHERE paste_id = ?",
                     (seconds, paste_id)) == 1
    s.start()


class TakedownClockTest(SluiceTestCase):
    def test_the_age_comes_from_the_stored_arrival_and_the_action_is_timed(self):
        s = self.server(["--trusted-proxy", "127.0.0.1"])
        metrics = s.metrics()
        self.assertEqual(metric(metrics, "sluice_moderation_takedown_deadline_seconds"), DEADLINE_S)
        self.assertEqual(metric(metrics, AGE, kind="report"), 0)
        paste_id = s.create_ok("an address book")["id"]
        report(s, paste_id, "198.51.100.7")
        queue = s.admin_request("GET", "/admin/reports").json()["pastes"]
        self.assertEqual([p["id"] for p in queue], [paste_id])
        arrived = queue[0]["arrived_at"]
        self.assertLessEqual(abs(arrived - time.time()), 60)
        self.assertLess(metric(s.metrics(), AGE, kind="report"), 60)

        move_arrival_back(s, paste_id, 3000)
        age = metric(s.metrics(), AGE, kind="report")
        self.assertGreaterEqual(age, 3000, "the age is the stored arrival's, across a restart")
        self.assertLess(age, 3000 + 60)
        queue = s.admin_request("GET", "/admin/reports").json()["pastes"]
        self.assertEqual(queue[0]["arrived_at"], arrived - 3000)
        self.assertGreaterEqual(queue[0]["waiting_seconds"], 3000)

        res = s.admin_request("POST", f"/admin/pastes/{paste_id}/takedown",
                              body=json.dumps({"reason": "illegal"}),
                              headers={"Content-Type": "application/json"})
        self.assertEqual(res.status, 200, res)
        metrics = s.metrics()
        self.assertEqual(metric(metrics, AGE, kind="report"), 0, "nothing waits any more")
        timed = dict(action="takedown", kind="report")
        self.assertEqual(metric(metrics, "sluice_moderation_time_to_action_seconds_count", **timed),
                         1)
        self.assertGreaterEqual(
            metric(metrics, "sluice_moderation_time_to_action_seconds_sum", **timed), 3000)
        self.assertEqual(metric(metrics, "sluice_moderation_time_to_action_seconds_bucket",
                                le="2700", **timed), 0)
        self.assertEqual(metric(metrics, "sluice_moderation_time_to_action_seconds_bucket",
                                le="3600", **timed), 1)


class TakedownAlertLiveTest(SluiceTestCase):
    """SluiceTakedownDeadline as shipped, in a live Prometheus scraping the server every second."""

    def setUp(self):
        super().setUp()
        if shutil.which("prometheus") is None:
            self.skipTest("prometheus is not installed: scripts/install-deps.sh test")
        self.prom_dir = tempfile.mkdtemp(prefix="sluice-prometheus-")
        self.addCleanup(shutil.rmtree, self.prom_dir, True)

    def start_prometheus(self, target):
        server_dir = os.path.join(self.prom_dir, "server")
        url = subprocess.run([PROMETHEUS_SCRIPT, "start", server_dir, "0", RULES, target],
                             check=True, capture_output=True, text=True, timeout=120).stdout.strip()
        self.addCleanup(subprocess.run, [PROMETHEUS_SCRIPT, "stop", server_dir],
                        capture_output=True, timeout=60)
        return url

    def api(self, prom, path, **query):
        q = ("?" + urllib.parse.urlencode(query)) if query else ""
        with urllib.request.urlopen(prom + path + q, timeout=10) as res:
            doc = json.load(res)
        self.assertEqual(doc["status"], "success", doc)
        return doc["data"]

    def deadline_alerts(self, prom):
        """{kind: state} of the SluiceTakedownDeadline alerts pending or firing."""
        alerts = self.api(prom, "/api/v1/alerts")["alerts"]
        return {a["labels"].get("kind"): a["state"] for a in alerts
                if a["labels"]["alertname"] == "SluiceTakedownDeadline"}

    def scraped_age(self, prom):
        """The age in Prometheus's latest sample; None until a scrape found the series."""
        result = self.api(prom, "/api/v1/query", query=f'{AGE}{{kind="report"}}')["result"]
        return float(result[0]["value"][1]) if result else None

    def test_quiet_at_70_percent_firing_past_75_resolved_by_the_takedown(self):
        port = free_port()
        s = self.server(["--trusted-proxy", "127.0.0.1"], port=port)
        prom = self.start_prometheus(f"127.0.0.1:{port}")
        paste_id = s.create_ok("a leaked key")["id"]
        report(s, paste_id, "198.51.100.7")

        # 70%: Prometheus sees the age there (it grows a second a second) and never alerts on it.
        move_arrival_back(s, paste_id, int(0.70 * DEADLINE_S))
        wait_until(lambda: (self.scraped_age(prom) or 0) >= 0.70 * DEADLINE_S, timeout=60,
                   message="Prometheus scraped the age at 70%")
        # Rules are evaluated every second: a few evaluations over the 70% sample.
        for _ in range(5):
            self.assertEqual(self.deadline_alerts(prom), {})
            time.sleep(1)

        # Past 75%: it fires, for the report kind.
        move_arrival_back(s, paste_id, int(0.10 * DEADLINE_S))
        wait_until(lambda: self.deadline_alerts(prom).get("report") == "firing", timeout=60,
                   message="SluiceTakedownDeadline firing")

        res = s.admin_request("POST", f"/admin/pastes/{paste_id}/takedown",
                              body=json.dumps({"reason": "leaked credentials"}),
                              headers={"Content-Type": "application/json"})
        self.assertEqual(res.status, 200, res)
        wait_until(lambda: self.deadline_alerts(prom) == {}, timeout=60,
                   message="the alert resolved after the takedown")


if __name__ == "__main__":
    unittest.main()
