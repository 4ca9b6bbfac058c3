"""Scenario 3: the primary blips, then the primary is slow (docs/overload.md, "Retries, breakers, timeouts", timeouts and retry storms).

Blip: every metadata call hangs for a few seconds (fault `meta.*:hang`), then the primary recovers.
Reads (with the in-process cache off, so every read is an origin read) and creates arrive open-loop
throughout. The server must not retry a timeout: attempts reaching the store divided by requests stays
at or below 1.1 (sluice_store_calls_total counts every attempt that reached the store), the store sees
no wave of retries after the blip, creates fail fast with 500/503 during it, and no create ever makes
two pastes. Slow primary: metadata reads take 10-50 ms against a 20 ms timeout; the breaker must not
open (slowness is the caps' business) and amplification stays at or below 1.1.

Run: cd tests/scenario && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_primary_blip
"""

import collections
import os
import re
import time
import unittest

import loadgen as lg
from loadgen import Request, Stream, client_ip, pick, xff
from promtext import counter_delta

AMPLIFICATION = 1.1
READ_RATE = pick(40.0, 80.0)
CREATE_RATE = pick(4.0, 8.0)
BLIP_AT = pick(3.0, 10.0)
BLIP_FOR = pick(4.0, 20.0)
AFTER = pick(5.0, 20.0)
DURATION = BLIP_AT + BLIP_FOR + AFTER
SLOW_DURATION = pick(6.0, 30.0)
CREATE_FAIL_FAST = 0.5   # p99 of a failed create during the blip (insert timeout 50 ms + PUT)
CREATE_BUDGET = 2.0
READ_BUDGET = 0.3
META_GET_TIMEOUT_MS = 100  # the blip test's; under READ_BUDGET
PASTES = 40
MARKER = re.compile(rb"^blip-create-(\d+)\n")


class PrimaryBlipTest(lg.ScenarioTestCase):

    def make_pastes(self, s):
        return [s.create_ok(f"existing paste {i}\n", headers=xff(client_ip(i, 30)))["id"]
                for i in range(PASTES)]

    def read(self, ids):
        return lambda i: Request("GET", f"/raw/{ids[(i * 7) % len(ids)]}", xff(client_ip(i % 50, 31)))

    def test_blip_is_not_amplified_and_creates_fail_fast_without_duplicates(self):
        # A hang times a read out whatever its timeout; 100 ms instead of the default 20 ms keeps
        # a shared CI machine's hiccup out of "reads outside the blip" (2 of 268 once answered 503
        # in 33-38 ms there). The slow-primary test below keeps the default: there it is the point.
        s = self.start_server(cache_bytes=0, meta_get_timeout=f"{META_GET_TIMEOUT_MS}ms")
        ids = self.make_pastes(s)
        before = self.scrape(s)
        streams = [
            Stream("read", READ_RATE, DURATION, self.read(ids)),
            Stream("create", CREATE_RATE, DURATION, lambda i: Request(
                "POST", "/api/v1/pastes", xff(client_ip(i, 32)), f"blip-create-{i}\n" + "z" * 500,
                tag=i)),
        ]
        marks = {}

        def blip_starts():
            marks["start"] = time.monotonic()
            self.faults(s, "meta.*:hang")

        def blip_ends():
            marks["end"] = time.monotonic()
            self.faults(s, "")

        run, sampler = self.load(s, streams, actions=[(BLIP_AT, blip_starts),
                                                      (BLIP_AT + BLIP_FOR, blip_ends)],
                                 sample_every=0.25)
        time.sleep(1.0)  # calls released at the end of the blip finish
        after = self.scrape(s)
        reads, creates = run.records("read"), run.records("create")

        d = lambda name, **lb: counter_delta(before, after, name, **lb)
        meta_get_calls = d("sluice_store_calls_total", target="meta.get")
        insert_calls = d("sluice_store_calls_total", target="meta.insert")
        put_calls = d("sluice_store_calls_total", target="blob.put")
        retries = d("sluice_dependency_retries_total")
        read_amp = meta_get_calls / len(reads)
        insert_amp = insert_calls / len(creates)
        put_amp = put_calls / len(creates)

        # Store attempts per second after the blip, against the read arrivals: no wave.
        # (over 1 s windows: shorter ones measure the scrapes' timing jitter, not the server)
        wave = [v for _, v in sampler.rates("sluice_store_calls_total", window=1.0,
                                            since=marks["end"], target="meta.get")]
        peak_after = max(wave, default=0.0)

        in_blip = lambda r: marks["start"] + 0.1 <= r.start and r.end <= marks["end"]
        blip_creates = [r for r in creates if in_blip(r)]
        blip_reads = [r for r in reads if in_blip(r)]
        healthy = lambda r: r.start < marks["start"] - 0.3 or r.start > marks["end"] + 1.0
        healthy_creates = [r for r in creates if healthy(r)]
        healthy_reads = [r for r in reads if healthy(r)]

        rows, dup, late = self.paste_census(s, creates)
        lg.report("primary_blip", {
            "reads": len(reads), "creates": len(creates),
            "read_amplification": round(read_amp, 3), "insert_amplification": round(insert_amp, 3),
            "put_amplification": round(put_amp, 3), "retries": retries,
            "store_get_rate_after_blip_peak_per_s": round(peak_after, 1),
            "blip_reads": lg.describe(blip_reads),
            "blip_read_p99_ms": round(1000 * (lg.percentile(lg.latencies(blip_reads), 99) or 0), 1),
            "blip_creates": lg.describe(blip_creates),
            "blip_create_reasons": lg.by_reason(blip_creates),
            "blip_create_p99_ms": round(1000 * (lg.percentile(lg.latencies(blip_creates), 99) or 0), 1),
            "healthy_creates": lg.describe(healthy_creates),
            "rows_from_this_run": rows, "duplicate_pastes": dup,
            "rows_for_failed_creates": late,
        }, predicted={"read_amplification": "<= 1.1", "insert_amplification": "<= 1.0",
                      "store_get_rate_after_blip_peak_per_s": f"<= {AMPLIFICATION * READ_RATE:.0f}",
                      "duplicate_pastes": 0})

        self.assertLessEqual(read_amp, AMPLIFICATION)
        self.assertLessEqual(insert_amp, 1.0, "a create was retried")
        self.assertLessEqual(put_amp, 1.0, "a create's PUT was retried")
        self.assertLessEqual(retries, 0.1 * (len(reads) + len(creates)))
        self.assertTrue(wave, "no metrics samples after the blip")
        self.assertLessEqual(peak_after, AMPLIFICATION * READ_RATE + 4,
                             f"wave of store calls after the blip: {[round(w) for w in wave]}")
        # During the blip: creates fail fast with 500/503, reads are 503 (never 404) within budget.
        self.assertTrue(blip_creates and blip_reads)
        self.assertStatuses(blip_creates, {500, 503}, "creates during the blip")
        self.assertLess(lg.percentile(lg.latencies(blip_creates), 99), CREATE_FAIL_FAST)
        self.assertLessEqual(max(lg.latencies(blip_creates)), CREATE_BUDGET + 0.2)
        self.assertStatuses(blip_reads, {503}, "reads during the blip")
        self.assertLessEqual(lg.percentile(lg.latencies(blip_reads), 99), READ_BUDGET + 0.05)
        # Outside it, everything works.
        self.assertStatuses(healthy_creates, {201}, "creates outside the blip")
        self.assertStatuses(healthy_reads, {200}, "reads outside the blip")
        # Never two pastes for one create.
        self.assertEqual(dup, 0)
        for r in creates:  # each from its own key: one key's origin GETs are limited to 50/s
            if r.status == 201:
                res = s.get(f"/raw/{r.json()['id']}", headers=xff(client_ip(r.index, 33)))
                self.assertEqual(res.status, 200, (r, res))

    def paste_census(self, s, creates):
        """(rows made by this run's creates, creates with more than one row, rows of creates that
        were answered 500/503) from meta.db and the bodies on disk."""
        by_marker = collections.defaultdict(list)
        for (pid,) in s.query("SELECT id FROM pastes"):
            body = s.stored_body(pid)  # a bodies table or a file (docs/architecture.md, "Durability")
            if body is None:
                continue
            m = MARKER.match(body[:64])
            if m:
                by_marker[int(m.group(1))].append(pid)
        status = {r.tag: r.status for r in creates}
        rows = sum(len(v) for v in by_marker.values())
        dup = sum(1 for v in by_marker.values() if len(v) > 1)
        late = sum(1 for k in by_marker if status.get(k) != 201)
        return rows, dup, late

    def test_slow_primary_times_out_without_retries_and_without_opening_the_breaker(self):
        s = self.start_server(cache_bytes=0)
        ids = self.make_pastes(s)
        before = self.scrape(s)
        self.faults(s, "meta.get:latency=10ms..50ms")
        run, sampler = self.load(s, [Stream("read", READ_RATE, SLOW_DURATION, self.read(ids))],
                                 sample_every=0.25)
        self.faults(s, "")
        after = self.scrape(s)
        reads = run.records("read")
        d = lambda name, **lb: counter_delta(before, after, name, **lb)
        calls = d("sluice_store_calls_total", target="meta.get")
        timeouts = d("sluice_dependency_timeouts_total", dependency="meta")
        opened = d("sluice_breaker_transitions_total", dependency="meta", to="open")
        state_max = sampler.max("sluice_breaker_state", dependency="meta")
        amp = calls / len(reads)
        lg.report("slow_primary", {
            "reads": lg.describe(reads), "read_reasons": lg.by_reason(reads, 503),
            "amplification": round(amp, 3), "meta_timeouts": timeouts,
            "retries": d("sluice_dependency_retries_total"),
            "breaker_opened": opened, "breaker_state_max": state_max,
            "503_p99_ms": round(1000 * (lg.percentile(lg.latencies(reads, 503), 99) or 0), 1),
        }, predicted={"amplification": "<= 1.1", "breaker_opened": 0,
                      "200_share": "~25% (latency uniform 10-50 ms, timeout 20 ms)"})
        self.assertStatuses(reads, {200, 503}, "reads of a slow primary (never 404)")
        self.assertGreater(timeouts, 0, "the primary was not slow enough to time out")
        self.assertLessEqual(amp, AMPLIFICATION)
        self.assertEqual(opened, 0, "the breaker opened on slowness")
        self.assertEqual(state_max, 0)
        self.assertLessEqual(lg.percentile(lg.latencies(reads), 99), READ_BUDGET + 0.05)


if __name__ == "__main__":
    unittest.main()
