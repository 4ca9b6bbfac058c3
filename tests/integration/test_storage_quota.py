"""The storage quota holds under concurrency (docs/overload.md, "Create", step 4a): an admitted
create reserves its declared bytes before its body is read, so of 20 creates admitted at once
against a quota that fits 5, exactly 5 are stored and 15 answered 507 `storage_quota` with a
Retry-After: on the embedded store, and on PostgreSQL with two processes sharing it.

The 20 send their heads first and their bodies only once every one of them has been admitted or
refused (the servers' own counters say so), so all 20 are in flight together whatever the
machine's speed: deciding the quota from the live bytes alone admitted all 20.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_storage_quota
"""

import select
import shutil
import tempfile
import unittest

from promtext import metric
from rawhttp import RawConnection
from sluice_harness import SluiceTestCase, wait_until
from test_postgres import PostgresServer

SIZE = 90_000
CREATES = 20
FITS = 5
# Five bodies fit, a sixth does not, whatever the framing: the quota is not a multiple of SIZE.
QUOTA = FITS * SIZE + SIZE // 2


class ConcurrentCreatesAgainstTheQuota:
    """The test, for any set of servers sharing one metadata store (a mixin)."""

    def decided(self, servers):
        """Creates admitted (holding a create slot) plus creates refused for the quota and already
        answered (a response is counted once written)."""
        total = 0
        for s in servers:
            m = s.metrics()
            refused = metric(m, "sluice_storage_quota_refusals_total")
            answered = metric(m, "sluice_http_requests_total", route="create_api", status="507")
            if answered != refused:
                return None
            total += metric(m, "sluice_pool_in_use", pool="create") + refused
        return total

    def run_creates(self, servers):
        conns = []
        for i in range(CREATES):
            c = RawConnection("127.0.0.1", servers[i % len(servers)].port, timeout=60)
            c.send_headers("POST", "/api/v1/pastes", {"Content-Length": str(SIZE)})
            conns.append(c)
        # Each head is admitted (its bytes reserved, its body awaited) or refused 507 at once.
        wait_until(lambda: self.decided(servers) == CREATES, timeout=30,
                   message="every create admitted or refused before any body is sent")
        # The refused are answered already; only the admitted get their bodies (a body sent to a
        # refused create could reset the connection before its answer is read).
        answered = set(select.select([c.sock for c in conns], [], [], 0)[0])
        statuses, refusals = [], []
        for c in conns:
            if c.sock not in answered:
                c.send(b"q" * SIZE)
            res = c.read_response()
            statuses.append(res.status)
            if res.status == 507:
                refusals.append(res)
            c.close()
        self.assertEqual(statuses.count(201), FITS, statuses)
        self.assertEqual(statuses.count(507), CREATES - FITS, statuses)
        for res in refusals:
            self.assertEqual(res.json()["reason"], "storage_quota", res)
            self.assertGreater(int(res.header("Retry-After")), 0, res)
        # What was stored is what the quota allows, and the room the refusals never took is free
        # for what still fits.
        self.assertEqual(self.stored_bytes(servers), FITS * SIZE)
        self.assertStatus(servers[-1].create(b"r" * (QUOTA - FITS * SIZE)), 201)
        self.assertJsonError(servers[0].create(b"s"), 507, "storage_quota")


class EmbeddedQuotaTest(ConcurrentCreatesAgainstTheQuota, SluiceTestCase):
    def stored_bytes(self, servers):
        return metric(servers[0].metrics(), "sluice_storage_live_bytes")

    def test_twenty_creates_at_once_against_a_quota_that_fits_five(self):
        s = self.server(["--max-storage-bytes", str(QUOTA)])
        self.run_creates([s])


class PostgresQuotaTest(ConcurrentCreatesAgainstTheQuota, SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = PostgresServer.for_class(cls)

    def stored_bytes(self, servers):
        # The store's count: a process's gauge follows the other's creates at its next re-read.
        return int(self.pg.sql("SELECT sum(live_bytes) FROM storage_usage"))

    RELAXED = ["--insert-timeout", "2s", "--meta-get-timeout", "2s", "--read-budget", "5s"]

    def test_twenty_creates_at_once_through_two_processes_against_a_quota_that_fits_five(self):
        shared_blobs = tempfile.mkdtemp(prefix="sluice-shared-")
        self.addCleanup(shutil.rmtree, shared_blobs, ignore_errors=True)
        args = ["--meta", self.pg.url, "--max-storage-bytes", str(QUOTA), *self.RELAXED]
        a = self.server(args, data_dir=shared_blobs)
        b = self.server(args, data_dir=shared_blobs)
        self.run_creates([a, b])
        # Every reservation ended: by its insert, or never made.
        self.assertEqual(self.pg.sql("SELECT count(*) FROM storage_reservations"), "0")


if __name__ == "__main__":
    unittest.main()
