"""The transparency report (docs/moderation.md, "Transparency"): a scenario performs withholdings,
takedowns, restores, dismissals, refused re-uploads and blocks, and /transparency says exactly
those numbers, as a page and as JSON; the same after a restart (the counters are durable, and the
refusals counted in memory since the last flush are stored at shutdown); and, on PostgreSQL, the
same on two processes sharing the store, whichever process acted.

The numbers are summed over the months of the report, so a run that crosses midnight at the end
of a month (UTC) counts the same.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v \
  test_transparency
"""

import json
import shutil
import tempfile
import time
import unittest

from promtext import metric_sum
from sluice_harness import SluiceTestCase, wait_until, with_write_pool_warm
from test_postgres import PostgresServer

ROOMY = ["--ip-create-rate", "1000", "--ip-create-burst", "1000", "--trusted-proxy", "127.0.0.1"]
# ModerationOptions::blocks_refresh (a refused re-upload reaches the store within it) plus
# ModerationService::kTransparencyFreshness (the report is read again within it), and room for a
# busy machine.
REPORT_BOUND_S = 60


def totals(doc):
    """The report's numbers summed over its months."""
    out = {"withheld_votes": 0, "withheld_notice": 0, "takedowns": 0, "restores": 0,
           "dismissals": 0, "timed_actions": 0, "reuploads_blocked": 0, "blocks_network": 0,
           "blocks_content": 0, "notices": 0}
    for m in doc["months"]:
        out["withheld_votes"] += m["withholds"]["votes"]
        out["withheld_notice"] += m["withholds"]["notice"]
        out["takedowns"] += m["takedowns"]
        out["restores"] += m["restores"]
        out["dismissals"] += m["dismissals"]
        out["timed_actions"] += m["time_to_action"]["actions"]
        out["reuploads_blocked"] += m["reuploads_blocked"]
        out["blocks_network"] += m["blocks"]["network"]
        out["blocks_content"] += m["blocks"]["content"]
        out["notices"] += m["notices"]["total"]
    return out


class Scenario:
    """The actions, through `act(i)` (the server the i-th action goes to), and what the report
    must then say."""

    def __init__(self, case, act):
        self.case = case
        self.act = act
        self.network = 10

    def report(self, s, paste_id):
        self.network += 1
        res = s.request("POST", f"/api/v1/pastes/{paste_id}/report",
                        body=json.dumps({"reason": "spam", "note": ""}),
                        headers={"Content-Type": "application/json",
                                 "X-Forwarded-For": f"198.51.{self.network}.7"})
        self.case.assertStatus(res, 202)
        return res.json()

    def withhold(self, s, paste_id):
        for _ in range(3):  # report_hide_threshold's default
            last = self.report(s, paste_id)
        self.case.assertTrue(last["under_review"], last)

    def admin(self, s, method, path, doc=None):
        res = s.admin_request(method, path, body=None if doc is None else json.dumps(doc),
                              headers={"Content-Type": "application/json"})
        self.case.assertIn(res.status, (200, 201, 204), res.text)
        return res

    def run(self):
        """Performs the scenario; returns the numbers the report must show."""
        a, b = self.act(0), self.act(1)
        restored = a.create_ok("withheld, then served again\n")["id"]
        taken = a.create_ok("withheld, then taken down\n")["id"]
        plain_takedown = b.create_ok("taken down without a report\n")["id"]
        dismissed = a.create_ok("reported once, dismissed\n")["id"]
        self.withhold(a, restored)
        self.withhold(b, taken)
        self.report(a, dismissed)
        self.admin(b, "POST", f"/admin/pastes/{restored}/dismiss", {"note": "fine"})
        self.admin(a, "POST", f"/admin/pastes/{taken}/takedown", {"reason": "illegal"})
        self.admin(b, "POST", f"/admin/pastes/{plain_takedown}/takedown", {"reason": "illegal"})
        self.admin(a, "POST", f"/admin/pastes/{dismissed}/dismiss", {"note": "fine"})
        self.admin(b, "POST", "/admin/blocks",
                   {"prefix": "203.0.113.0/24", "duration": "1h", "reason": "spam run"})
        self.admin(a, "POST", "/admin/blocked-contents",
                   {"sha256": "ab" * 32, "reason": "known bad"})
        # Refused re-uploads, on the process that took the text down (it refuses it at once).
        for _ in range(3):
            self.case.assertJsonError(a.create("withheld, then taken down\n"), 451,
                                      "blocked_content")
        for _ in range(2):
            self.case.assertJsonError(b.create("taken down without a report\n"), 451,
                                      "blocked_content")
        return {"withheld_votes": 2, "withheld_notice": 0, "takedowns": 2, "restores": 1,
                "dismissals": 1,
                # The restore, the takedown of the withheld paste and the dismissal closed queue
                # entries; the unreported takedown had none.
                "timed_actions": 3,
                "reuploads_blocked": 5, "blocks_network": 1,
                # The two takedowns' texts and the operator's digest.
                "blocks_content": 3, "notices": 0}


def report_of(case, s):
    res = s.get("/transparency?format=json")
    case.assertStatus(res, 200)
    return res.json()


def wait_for(case, s, want):
    """The report of `s` once its numbers are `want` (the refusals reach the store and the
    report is read again within REPORT_BOUND_S)."""
    last = {}

    def equal():
        last["doc"] = report_of(case, s)
        return totals(last["doc"]) == want

    wait_until(equal, timeout=REPORT_BOUND_S, interval=0.5, message=f"the report says {want}")
    return last["doc"]


class TransparencyTest(SluiceTestCase):

    def test_the_report_equals_the_scenario_and_survives_a_restart(self):
        s = self.server(ROOMY)
        empty = report_of(self, s)
        self.assertEqual(len(empty["months"]), 12)
        self.assertEqual(totals(empty), {k: 0 for k in totals(empty)})
        want = Scenario(self, lambda i: s).run()
        doc = wait_for(self, s, want)
        self.assertIn("Encrypted pastes cannot be matched", doc["encrypted_pastes"])
        timed = [m["time_to_action"] for m in doc["months"] if m["time_to_action"]["actions"]]
        for t in timed:
            self.assertIn(t["median"]["at_most_seconds"], doc["time_to_action_bounds_seconds"])
            self.assertGreaterEqual(t["p95"]["at_most_seconds"], t["median"]["at_most_seconds"])

        # Refusals counted since the last flush are stored at shutdown: none is lost.
        for _ in range(4):
            self.assertJsonError(s.create("taken down without a report\n"), 451,
                                 "blocked_content")
        want["reuploads_blocked"] += 4
        s.restart()
        self.assertEqual(totals(report_of(self, s)), want, "the same after a restart")

        # The page for browsers, from the same numbers; /abuse links it.
        page = s.get("/transparency", headers={"Accept": "text/html"})
        self.assertStatus(page, 200)
        self.assertIn("text/html", page.header("Content-Type"))
        self.assertIn("Transparency report", page.text)
        self.assertIn("Encrypted pastes cannot be matched", page.text)
        self.assertIn('href="/transparency"', s.get("/abuse").text)
        # JSON for an API client's Accept, and the page for a browser's.
        self.assertIn("application/json",
                      s.get("/transparency", headers={"Accept": "application/json"})
                      .header("Content-Type"))
        # A format it does not make is told, not answered as JSON.
        self.assertJsonError(s.get("/transparency?format=csv"), 400, "bad_format")

    def test_a_flood_of_requests_reads_the_store_once_per_few_seconds(self):
        s = self.server(ROOMY)
        calls = lambda: metric_sum(s.metrics(), "sluice_dependency_duration_seconds_count",  # noqa: E731
                                   op="transparency")
        before = calls()
        started = time.monotonic()
        for _ in range(200):
            self.assertStatus(s.get("/transparency?format=json"), 200)
        elapsed = time.monotonic() - started
        # One store read per kTransparencyFreshness (5 s) however many requests: the bound follows
        # from the time the requests took, so a slow machine changes it, never the verdict.
        self.assertGreaterEqual(calls() - before, 1)
        self.assertLessEqual(calls() - before, 2 + elapsed // 5)


class TransparencyOnPostgresTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = PostgresServer.for_class(cls)

    RELAXED = ["--insert-timeout", "2s", "--meta-get-timeout", "2s", "--read-budget", "5s",
               "--moderation-timeout", "5s"]

    def pg_server(self, data_dir):
        s = self.server(["--meta", self.pg.url, *self.RELAXED, *ROOMY], data_dir=data_dir)
        return with_write_pool_warm(s)

    def test_two_processes_report_the_same_numbers_whichever_acted(self):
        shared_blobs = tempfile.mkdtemp(prefix="sluice-shared-")
        self.addCleanup(shutil.rmtree, shared_blobs, ignore_errors=True)
        a = self.pg_server(shared_blobs)
        b = self.pg_server(shared_blobs)
        want = Scenario(self, lambda i: (a, b)[i]).run()
        doc_a = wait_for(self, a, want)
        doc_b = wait_for(self, b, want)
        self.assertEqual(doc_a["months"], doc_b["months"])
        b.restart()
        self.assertEqual(totals(report_of(self, b)), want)


if __name__ == "__main__":
    unittest.main()
