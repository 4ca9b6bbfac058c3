"""Scenario 4: the primary refuses connections (docs/overload.md, "Retries, breakers, timeouts": a breaker for refusal, not for slowness).

Fault `meta.*:refuse` makes every metadata call fail at once as a refused connect would. The breaker
must open after --breaker-refusals refusals, after which calls stop reaching the store except one
probe per --breaker-open-for window; readers get 503 quickly (p99 under 50 ms); when the store
comes back, reads succeed again within one window. Reads use no in-process cache, so each one needs
the primary.

Run: cd tests/scenario && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_refusal
"""

import math
import time
import unittest

import loadgen as lg
from loadgen import Request, Stream, client_ip, pick, xff

WINDOW = pick(2.0, 5.0)          # --breaker-open-for (5 s is the default)
REFUSALS = 5                     # --breaker-refusals (the default)
READ_RATE = pick(30.0, 60.0)
REFUSE_AT = 2.0
REFUSE_FOR = pick(3 * WINDOW, 6 * WINDOW)
AFTER = WINDOW + pick(2.0, 5.0)
DURATION = REFUSE_AT + REFUSE_FOR + AFTER
FAST = 0.050                     # p99 of the 503s while the breaker is open
RESUME_SLACK = 0.5               # on top of one window, for the probe and the sampling


class RefusalTest(lg.ScenarioTestCase):

    def test_breaker_opens_probes_once_per_window_and_resumes_within_one_window(self):
        s = self.start_server(cache_bytes=0, breaker_refusals=REFUSALS,
                              breaker_open_for=f"{int(WINDOW * 1000)}ms")
        ids = [s.create_ok(f"refusal paste {i}\n", headers=xff(client_ip(i, 40)))["id"]
               for i in range(20)]
        marks = {}

        def refuse():
            marks["start"] = time.monotonic()
            self.faults(s, "meta.*:refuse")

        def recover():
            marks["end"] = time.monotonic()
            self.faults(s, "")

        run, sampler = self.load(
            s, [Stream("read", READ_RATE, DURATION, lambda i: Request(
                "GET", f"/raw/{ids[i % len(ids)]}", xff(client_ip(i % 60, 41))))],
            actions=[(REFUSE_AT, refuse), (REFUSE_AT + REFUSE_FOR, recover)], sample_every=0.1)
        reads = run.records("read")

        # When the breaker first opened, from the samples.
        opens = sampler.series("sluice_breaker_transitions_total", dependency="meta", to="open")
        first_open = next((t for t, v in opens if v > opens[0][1]), None)
        self.assertIsNotNone(first_open, "the breaker never opened")
        calls = lambda t: sampler.value_at(t, "sluice_faults_injected_total", target="meta.get",
                                           kind="refuse")
        store = lambda t: sampler.value_at(t, "sluice_store_calls_total", target="meta.get")
        # Attempts that reached the refusing store: before the breaker opened, and after.
        before_open = calls(first_open) - calls(marks["start"] - 0.05)
        after_open = calls(marks["end"]) - calls(first_open)
        open_time = marks["end"] - first_open
        windows = math.ceil(open_time / WINDOW)
        store_during = store(marks["end"]) - store(marks["start"] - 0.05)
        # The mark is taken before the rule is sent: a read that starts in the instant before the
        # server applies it may still be answered from the store, so "during" starts 100 ms later.
        reads_during = [r for r in reads if marks["start"] + 0.1 <= r.start < marks["end"]]
        shed = [r for r in reads if first_open + 0.2 <= r.start < marks["end"]]
        # Recovery: the first 200 that started after the store came back.
        back = [r for r in reads if r.start >= marks["end"] and r.status == 200]
        resumed_after = (min(r.end for r in back) - marks["end"]) if back else None
        settled = [r for r in reads if r.start >= marks["end"] + WINDOW + RESUME_SLACK]
        lg.report("refusal_breaker", {
            "reads_during_refusal": len(reads_during),
            "store_attempts_during_refusal": store_during,
            "refused_before_open": before_open, "probes_after_open": after_open,
            "windows_open": windows,
            "probes_per_window": round(after_open / max(1, windows), 2),
            "amplification_during_refusal": round(store_during / max(1, len(reads_during)), 3),
            "shed": lg.describe(shed), "shed_reasons": lg.by_reason(shed),
            "503_p99_ms": round(1000 * (lg.percentile(lg.latencies(shed), 99) or 0), 1),
            "resumed_after_s": None if resumed_after is None else round(resumed_after, 2),
            "after_recovery": lg.describe(settled),
        }, predicted={"refused_before_open": f"{REFUSALS} (+10% retries)",
                      "probes_per_window": 1, "503_p99_ms": "< 50",
                      "resumed_after_s": f"<= {WINDOW} (one window)"})

        # Opening takes --breaker-refusals refusals (plus at most the 10% retry budget's retries).
        self.assertLessEqual(before_open, REFUSALS * 2)
        # Open: one probe per window reaches the store, no more.
        self.assertLessEqual(after_open, windows + 1,
                             f"{after_open} attempts reached the store in {open_time:.1f} s open")
        # Every read while open is a fast 503, never a 404.
        self.assertStatuses(reads_during, {503}, "reads while the store refuses")
        self.assertIn("breaker_open", lg.by_reason(shed))
        self.assertLess(lg.percentile(lg.latencies(shed), 99), FAST)
        # Back within one window of the store's return, and then every read works.
        self.assertIsNotNone(resumed_after, "reads never resumed")
        self.assertLessEqual(resumed_after, WINDOW + RESUME_SLACK)
        self.assertTrue(settled)
        self.assertStatuses(settled, {200}, "reads one window after recovery")


if __name__ == "__main__":
    unittest.main()
