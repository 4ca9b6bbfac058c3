"""Scenario 6: deletes while the bucket is slow (docs/overload.md, "Delete" and the pools of "Retries, breakers, timeouts").

Every object-store call takes longer than the worker's cleanup timeout (fault `blob.*:latency`), and
pastes are deleted open-loop meanwhile. A delete commits a tombstone and an outbox entry and answers
204 without touching the bucket, so deletes stay prompt; the deleted pastes are 404 at once; the
bodies stay on disk while the bucket is slow, the outbox age on /metrics grows, and when the bucket
recovers the outbox worker catches up: every body is removed and the outbox age returns to zero.

Run: cd tests/scenario && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_delete_slow_bucket
"""

import time
import unittest

import loadgen as lg
from loadgen import Request, Stream, client_ip, pick, xff
from promtext import counter_delta, metric
from sluice_harness import wait_until

PASTES = pick(20, 200)
DELETE_RATE = pick(5.0, 10.0)
SLOW = "6s"                   # over the 5 s cleanup timeout: the worker's calls time out
SLOW_FOR = pick(8.0, 30.0)    # the bucket stays slow this long after the first delete
PROMPT_P99 = 0.200            # a delete is a row commit: p99 well under the create budget
CATCH_UP = pick(20.0, 40.0)   # bodies all gone within this long of the bucket's recovery


class DeleteSlowBucketTest(lg.ScenarioTestCase):

    def test_deletes_stay_prompt_and_removal_catches_up_after_recovery(self):
        s = self.start_server()
        pastes = [s.create_ok(f"to delete {i}\n" * 20, headers=xff(client_ip(i, 60)))
                  for i in range(PASTES)]
        stored = s.stored_body_ids()
        for doc in pastes:
            self.assertIn(doc["id"], stored)
        before = self.scrape(s)
        self.faults(s, f"blob.*:latency={SLOW}")
        duration = PASTES / DELETE_RATE
        run, sampler = self.load(s, [Stream("delete", DELETE_RATE, duration, lambda i: Request(
            "DELETE", f"/api/v1/pastes/{pastes[i]['id']}",
            dict(xff(client_ip(i, 61)), Authorization=f"Bearer {pastes[i]['delete_token']}")))],
            sample_every=0.25)
        deletes = run.records("delete")
        # Deleted pastes are gone for readers at once, although their bodies are still on disk.
        # (each from its own key: one key's origin GETs are limited to 50/s)
        reads = [s.get(f"/raw/{doc['id']}", headers=xff(client_ip(i, 62))).status
                 for i, doc in enumerate(pastes)]
        run.sleep_until(SLOW_FOR)
        stored = s.stored_body_ids()
        on_disk = sum(doc["id"] in stored for doc in pastes)
        age_slow = metric(self.scrape(s), "sluice_outbox_age_seconds")
        # How old the oldest pending delete really is: the first 204 committed its outbox entry.
        oldest = time.monotonic() - min(r.end for r in deletes)
        age_series_max = max([age_slow] + [v for _, v in sampler.series("sluice_outbox_age_seconds")])
        recovered = time.monotonic()
        self.faults(s, "")

        def all_gone():
            stored = s.stored_body_ids()
            return not any(doc["id"] in stored for doc in pastes)

        gone = True
        try:
            wait_until(all_gone, timeout=CATCH_UP, interval=0.1, message="all bodies removed")
        except AssertionError:
            gone = False
        caught_up = time.monotonic() - recovered
        wait_until(lambda: metric(self.scrape(s), "sluice_outbox_age_seconds") == 0,
                   timeout=10, interval=0.2, message="outbox age back to 0")
        after = self.scrape(s)
        done = counter_delta(before, after, "sluice_outbox_done_total")
        stored = s.stored_body_ids()
        left = sum(doc["id"] in stored for doc in pastes)
        lg.report("delete_slow_bucket", {
            "deletes": lg.describe(deletes),
            "delete_p50_ms": round(1000 * lg.percentile(lg.latencies(deletes), 50), 1),
            "delete_p99_ms": round(1000 * lg.percentile(lg.latencies(deletes), 99), 1),
            "reads_after_delete": {st: reads.count(st) for st in set(reads)},
            "bodies_on_disk_while_slow": on_disk, "outbox_age_while_slow_s": age_slow,
            "oldest_pending_delete_s": round(oldest, 1),
            "outbox_age_max_s": age_series_max,
            "catch_up_s": round(caught_up, 1) if gone else f"> {CATCH_UP}",
            "outbox_done": done, "bodies_left": left,
            "outbox_retries": counter_delta(before, after, "sluice_outbox_retries_total"),
        }, predicted={"delete_p99_ms": f"< {int(PROMPT_P99 * 1000)}",
                      "outbox_age_while_slow_s": f"~{oldest:.0f} (the oldest pending delete)",
                      "catch_up_s": f"<= {CATCH_UP:.0f}", "bodies_left": 0})

        self.assertStatuses(deletes, {204}, "deletes while the bucket is slow")
        self.assertLess(lg.percentile(lg.latencies(deletes), 99), PROMPT_P99)
        self.assertEqual(reads, [404] * len(pastes))
        self.assertGreater(on_disk, 0, "bodies vanished while the bucket was slow: nothing was tested")
        # The gauge is in whole seconds and refreshed by a worker that polls every second.
        self.assertGreaterEqual(age_slow, oldest - 2.5,
                                f"the outbox age on /metrics ({age_slow} s) does not show the "
                                f"backlog: the oldest pending delete is {oldest:.1f} s old")
        self.assertTrue(gone, f"{left} bodies still on disk {CATCH_UP} s after the bucket recovered")
        self.assertGreaterEqual(done, len(pastes))


if __name__ == "__main__":
    unittest.main()
