"""A report flood on a store already holding 10,000 open reports (docs/moderation.md, "Cost"):
reads of other pastes keep answering, every report is answered within its budget, the operator's
first page of the review queue comes back at once, and the WAL stays small. Before the review
queue had a row per paste, each counted report re-ran an O(pastes x reports) query on the read
pool: at this many open reports every read thread was soon busy with one, and reads answered 503.

The 10,000 reports are written into meta.db while the server is stopped (tests/lib/report_seed.py:
through the API the report buckets would make that take minutes). The flood comes from fresh
IPv4 /24s and IPv6 /48s behind the trusted loopback balancer, above the global report rate, while
a reader reads an unrelated paste (no cache: every read reaches the store), a writer creates
pastes, the operator lists the queue, and the WAL's size is sampled.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v \
    test_report_flood
"""

import json
import os
import threading
import time
import unittest

from report_seed import seed_open_reports
from sluice_harness import SluiceTestCase, _embedded_only

SEEDED = 10_000
FLOOD_SECONDS = 12.0
REPORTERS = 16
# moderation_timeout's default is 1 s; a report's budget is twice it. Slack for a busy machine.
REPORT_BUDGET = 2.0 + 0.5
# The operator's first page, asserted loosely (the figure itself is printed).
FIRST_PAGE = 1.0
# The WAL is checkpointed from 16 MB (src/store/sqlite/sqlite_db.h, kCheckpointFrames); a flood
# of small writes that starved no checkpoint stays well under twice that.
WAL_BOUND = 32 * 1024 * 1024


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else 0


class ReportFloodTest(SluiceTestCase):
    def test_a_flood_on_10000_open_reports_leaves_reads_alone(self):
        _embedded_only()
        s = self.server(["--trusted-proxy", "127.0.0.1", "--cache-bytes", "0",
                         "--report-global-rate", "20", "--report-global-burst", "50",
                         "--report-burst", "1000", "--report-rate", "1000"])
        unrelated = s.create_ok(b"read me while they report\n")["id"]
        targets = [s.create_ok(b"flood target %d\n" % n)["id"] for n in range(20)]
        s.stop()
        seeded = seed_open_reports(s.db_path, SEEDED)
        s.start()
        page = s.admin_request("GET", "/admin/reports?limit=100")
        self.assertStatus(page, 200)
        self.assertGreaterEqual(page.json()["pending"], SEEDED)

        stop = threading.Event()
        lock = threading.Lock()
        reads, reports, creates, pages, wal = [], [], [], [], []

        def reader():
            while not stop.is_set():
                started = time.monotonic()
                res = s.get(f"/raw/{unrelated}")
                with lock:
                    reads.append((res.status, time.monotonic() - started))

        def reporter(n):
            i = 0
            while not stop.is_set():
                i += 1
                # A fresh network each time, so each admitted report is counted and stored.
                key = (f"172.{16 + n}.{i % 256}.{i // 256 % 256}" if n % 2
                       else f"2001:db8:{n:x}{i % 4096:03x}::1")
                pool = targets if i % 2 else seeded
                paste_id = pool[(n * 7919 + i) % len(pool)]
                started = time.monotonic()
                res = s.request("POST", f"/api/v1/pastes/{paste_id}/report",
                                body=json.dumps({"reason": "spam", "note": "x" * 500}),
                                headers={"Content-Type": "application/json",
                                         "X-Forwarded-For": key})
                with lock:
                    reports.append((res.status, time.monotonic() - started))
                time.sleep(0.02)

        def creator():
            n = 0
            while not stop.is_set():
                n += 1
                res = s.request("POST", "/api/v1/pastes", body=b"c" * 1024 + b"%d\n" % n)
                with lock:
                    creates.append(res.status)
                time.sleep(0.03)

        def operator():
            while not stop.is_set():
                started = time.monotonic()
                res = s.admin_request("GET", "/admin/reports?limit=100")
                with lock:
                    pages.append((res.status, time.monotonic() - started))
                time.sleep(0.5)

        def sampler():
            path = s.db_path + "-wal"
            while not stop.is_set():
                try:
                    wal.append(os.path.getsize(path))
                except OSError:
                    pass
                time.sleep(0.1)

        threads = [threading.Thread(target=reader), threading.Thread(target=creator),
                   threading.Thread(target=operator), threading.Thread(target=sampler)]
        threads += [threading.Thread(target=reporter, args=(n,)) for n in range(REPORTERS)]
        for t in threads:
            t.start()
        time.sleep(FLOOD_SECONDS)
        stop.set()
        for t in threads:
            t.join(timeout=30)

        statuses = {}
        for status, _ in reports:
            statuses[status] = statuses.get(status, 0) + 1
        report_times = [t for _, t in reports]
        read_bad = [r for r in reads if r[0] != 200]
        page_times = [t for _, t in pages]
        print(f"\nreport flood on {SEEDED} open reports, {FLOOD_SECONDS:.0f} s: "
              f"reports {len(reports)} {dict(sorted(statuses.items()))} p50 "
              f"{pct(report_times, 50) * 1000:.1f} ms p99 {pct(report_times, 99) * 1000:.1f} ms "
              f"max {max(report_times) * 1000:.1f} ms; reads {len(reads)}, not 200: "
              f"{len(read_bad)}, p99 {pct([t for _, t in reads], 99) * 1000:.1f} ms; "
              f"queue first page p50 {pct(page_times, 50) * 1000:.1f} ms max "
              f"{max(page_times) * 1000:.1f} ms ({len(pages)}); creates {len(creates)}; "
              f"WAL max {max(wal or [0]) / 1e6:.1f} MB", flush=True)

        self.assertGreater(len(reads), 100, "the reader hardly ran")
        self.assertEqual(read_bad[:5], [], f"{len(read_bad)} of {len(reads)} reads failed")
        self.assertTrue(set(statuses) <= {200, 202, 429}, statuses)
        self.assertGreater(statuses.get(202, 0), 50, "the flood hardly reached the store")
        self.assertGreater(statuses.get(429, 0), 0, "the flood never reached the global rate")
        self.assertLess(max(report_times), REPORT_BUDGET)
        self.assertTrue(pages and all(status == 200 for status, _ in pages), pages)
        self.assertLess(max(page_times), FIRST_PAGE)
        self.assertGreaterEqual(sum(1 for c in creates if c == 201), 0.99 * len(creates))
        self.assertLess(max(wal or [0]), WAL_BOUND)
        counts = s.admin_request("GET", "/admin/reports?limit=1").json()
        self.assertGreaterEqual(counts["pending"], SEEDED + len(targets) - 1)


if __name__ == "__main__":
    unittest.main()
