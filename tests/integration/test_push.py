"""Push (docs/moderation.md, "Push"): each counted report and each withholding reaches the
operator's webhook, signed, and their command; a flood leaves as digests; a receiver that is dead
or answers after ten seconds costs reports and creates nothing, and what it could not take is
counted.

The receivers are Python's http.server on loopback, and the signature is checked with Python's
hmac: a peer that shares no code with the server.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_push
"""

import glob
import hashlib
import hmac
import json
import os
import tempfile
import time
import unittest

from promtext import metric
from sluice_harness import SluiceTestCase, run_sluice
from webhook_receiver import WebhookReceiver, closed_port_url

SECRET = "push-test-secret-0123456789"
CREATOR = "192.0.2.250"


class PushTestCase(SluiceTestCase):
    def create(self, text, client=CREATOR):
        res = self.s.request("POST", "/api/v1/pastes", body=text,
                             headers={"X-Forwarded-For": client})
        self.assertStatus(res, 201)
        return res.json()["id"]

    def report(self, paste_id, client, reason="spam"):
        return self.s.request("POST", f"/api/v1/pastes/{paste_id}/report",
                              body=json.dumps({"reason": reason}),
                              headers={"Content-Type": "application/json",
                                       "X-Forwarded-For": client})

    def push_metric(self, sink, outcome):
        return metric(self.s.metrics(), "sluice_push_events_total", sink=sink, outcome=outcome)

    def await_metric(self, sink, outcome, at_least, timeout=60):
        deadline = time.monotonic() + timeout
        while self.push_metric(sink, outcome) < at_least:
            if time.monotonic() > deadline:
                self.fail(f"sluice_push_events_total{{{sink},{outcome}}} stayed under {at_least}")
            time.sleep(0.05)


REPORTING = ["--trusted-proxy", "127.0.0.1", "--report-hide-threshold", "3",
             "--report-burst", "1000", "--report-rate", "1000", "--report-global-burst", "1000",
             "--report-global-rate", "1000", "--report-withholds-per-hour", "1000"]


class SignedWebhookAndCommandTest(PushTestCase):
    @classmethod
    def setUpClass(cls):
        cls.receiver = WebhookReceiver()
        cls.tmp = tempfile.mkdtemp(prefix="sluice-push-")
        secret_file = os.path.join(cls.tmp, "secret")
        with open(secret_file, "w") as f:
            f.write(SECRET + "\n")
        cls.spool = os.path.join(cls.tmp, "spool")
        os.mkdir(cls.spool)
        cls.s = cls.start_class_server([
            *REPORTING, "--push-webhook", cls.receiver.url,
            "--push-webhook-secret-file", secret_file,
            "--push-command", f'cat > "{cls.spool}/$SLUICE_EVENT.$$.json"',
            "--push-per-minute", "600000", "--push-burst", "100000"])

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.receiver.close()

    def test_reports_and_the_withholding_arrive_signed(self):
        paste_id = self.create("withhold me")
        for client in ("203.0.113.9", "198.51.100.9", "198.18.100.9"):
            self.assertStatus(self.report(paste_id, client), 202)
        self.assertEqual(self.s.get(f"/raw/{paste_id}").status, 451)
        mine = self.receiver.await_events_of(paste_id, 4)
        self.assertEqual(sorted(e["kind"] for e in mine), ["report"] * 3 + ["withhold"])
        withhold = next(e for e in mine if e["kind"] == "withhold")
        self.assertIn("3 networks", withhold["summary"])
        self.assertEqual(sorted(e["fields"]["network"] for e in mine if e["kind"] == "report"),
                         ["198.18.100.0/24", "198.51.100.0/24", "203.0.113.0/24"])
        for headers, body in self.receiver.posts:
            stamp, mac = dict(p.split("=", 1) for p in
                              headers["X-Sluice-Signature"].split(",")).values()
            expected = hmac.new(SECRET.encode(), stamp.encode() + b"." + body,
                                hashlib.sha256).hexdigest()
            self.assertTrue(hmac.compare_digest(mac, expected), headers)
            self.assertLess(abs(int(stamp) - time.time()), 300)
            self.assertEqual(headers["X-Sluice-Event"], json.loads(body)["kind"])

    def test_the_command_gets_each_event_on_its_input(self):
        paste_id = self.create("report me once")
        self.assertStatus(self.report(paste_id, "203.0.113.77"), 202)
        deadline = time.monotonic() + 60
        while True:
            found = []
            # A sink that is behind sends what waited as one digest (digest.PID.json).
            for path in glob.glob(os.path.join(self.spool, "*.json")):
                with open(path) as f:
                    text = f.read()
                try:
                    doc = json.loads(text)
                except ValueError:
                    continue  # still being written

                found.extend(doc["events"] if doc["kind"] == "digest" else [doc])
            if any(e["paste"] == paste_id for e in found):
                break
            self.assertLess(time.monotonic(), deadline, "the command never ran")
            time.sleep(0.05)

    def test_a_repeat_report_is_not_an_event(self):
        paste_id = self.create("said twice")
        self.assertStatus(self.report(paste_id, "203.0.113.200"), 202)
        self.receiver.await_events_of(paste_id, 1)
        self.assertEqual(self.report(paste_id, "203.0.113.201").json()["counted"], False)
        # Another counted report after it: once it has arrived, the repeat would have too.
        self.assertStatus(self.report(paste_id, "198.51.100.200"), 202)
        mine = self.receiver.await_events_of(paste_id, 2)
        self.assertEqual(sorted(e["fields"]["network"] for e in mine),
                         ["198.51.100.0/24", "203.0.113.0/24"])


class FloodBecomesDigestTest(PushTestCase):
    @classmethod
    def setUpClass(cls):
        cls.receiver = WebhookReceiver()
        # One delivery at once, then one every 10 s: a flood of reports is one post, then digests.
        cls.s = cls.start_class_server([*REPORTING, "--push-webhook", cls.receiver.url,
                                        "--push-per-minute", "6", "--push-burst", "1"])

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.receiver.close()

    def test_forty_reports_leave_as_a_few_posts_that_count_them_all(self):
        ids = [self.create(f"flood {n}") for n in range(40)]
        for n, paste_id in enumerate(ids):
            self.assertStatus(self.report(paste_id, f"198.18.{n}.1"), 202)
        posts = self.receiver.await_count(40)
        # 40 reports answered well within a delivery interval (10 s) leave as the first alone and
        # the rest in one digest; a machine so slow that they spanned more intervals adds one
        # digest per interval, never one post per report.
        self.assertLess(len(posts), 10, [json.loads(b)["kind"] for _, b in posts])
        digest = json.loads(posts[-1][1])
        self.assertEqual(digest["kind"], "digest")
        self.assertLessEqual(len(digest["events"]), 20)
        self.assertEqual(digest["unlisted"], max(0, digest["count"] - 20))
        # The receiver keeps a post before it answers; the server counts it once answered.
        self.await_metric("webhook", "delivered", 40)
        self.assertEqual(self.push_metric("webhook", "delivered"), 40)


class DeadOrSlowReceiverTest(PushTestCase):
    """The receiver down, and answering after 10 s: reports and creates go on, the queue's
    overflow is dropped and counted. (What they cost in throughput: bench/push_cost.py.)"""

    def run_flood(self, args):
        self.s = self.server([*REPORTING, "--push-queue", "5", "--push-burst", "1",
                                    "--push-per-minute", "600000", *args])
        ids = [self.create(f"flood {n}") for n in range(30)]
        for n, paste_id in enumerate(ids):
            self.assertStatus(self.report(paste_id, f"198.19.{n}.1"), 202)
        for n in range(30):
            self.create(f"created beside it {n}")

    def test_a_dead_receiver(self):
        self.run_flood(["--push-webhook", closed_port_url(), "--push-timeout", "2s"])
        self.await_metric("webhook", "failed", 1)
        self.assertEqual(self.push_metric("webhook", "delivered"), 0)

    def test_a_receiver_that_answers_after_ten_seconds(self):
        receiver = WebhookReceiver(delay=10)
        self.addCleanup(receiver.close)
        self.run_flood(["--push-webhook", receiver.url, "--push-timeout", "30s"])
        # The sink sits in its first delivery for 10 s; 29 more reports find a queue of 5.
        self.assertGreater(self.push_metric("webhook", "dropped"), 0)
        receiver.await_count(1)


class SettingsTest(SluiceTestCase):
    def test_a_webhook_that_is_not_http_stops_the_start(self):
        with tempfile.TemporaryDirectory() as data:
            res = run_sluice(["serve", "--push-webhook", "file:///etc/passwd", "--listen",
                              "127.0.0.1:0", "--admin-listen", "", "--data-dir", data])
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("push_webhook", res.stdout + res.stderr)

    def test_a_short_secret_stops_the_start(self):
        with tempfile.TemporaryDirectory() as data:
            secret = os.path.join(data, "secret")
            with open(secret, "w") as f:
                f.write("short\n")
            res = run_sluice(["serve", "--push-webhook", "http://127.0.0.1:9/",
                              "--push-webhook-secret-file", secret, "--listen", "127.0.0.1:0",
                              "--admin-listen", "", "--data-dir", os.path.join(data, "d")])
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("push_webhook_secret_file", res.stdout + res.stderr)


if __name__ == "__main__":
    unittest.main()
