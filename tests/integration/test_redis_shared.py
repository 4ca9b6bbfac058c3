"""Two sluice processes sharing one Redis (`--cache redis://...`): one client key has one create
budget across the tier; a killed Redis fails open (per-client limits open, the global cap enforced per
process as its local share) and says so on /metrics; a restarted Redis brings the shared limits
back; a delete on one process is not served by the other.

Each test starts its own redis-server (scripts/testenv/redis.sh) on a free port and fails, rather
than skips, when redis-server is missing. No timing is asserted: waits poll with generous limits.
"""

import time
import unittest

from promtext import metric
from sluice_harness import RedisServer, SluiceTestCase, wait_until
# The module, not its classes: a TestCase imported by name would run here too.
import test_postgres

# Refills so slowly (one token in about 15 minutes) that nothing comes back during a test.
SLOW = "0.001"


def forwarded(client):
    return {"X-Forwarded-For": client}


class RedisSharedStateTest(SluiceTestCase):
    def setUp(self):
        super().setUp()
        self.redis = RedisServer().start()
        self.addCleanup(self.redis.stop)

    def tier(self, extra=(), **kw):
        # A budget no busy test machine overruns: these tests are about what is shared, and a
        # call past the production 5 ms would (rightly) fail open and admit one create more.
        args = ["--trusted-proxy", "127.0.0.1", "--processes", "2", "--cache-timeout", "5s",
                *extra]
        return self.server(args, cache=self.redis, **kw), self.server(args, cache=self.redis, **kw)

    def creates(self, servers, n, client, body=b"hello"):
        """n creates from one client key spread round-robin over `servers`: their statuses."""
        out = []
        for i in range(n):
            res = servers[i % len(servers)].create(body, headers=forwarded(client))
            out.append(res.status)
            if res.status == 429:
                self.assertIn(res.json()["reason"], ("ip_create_count", "global_count"))
        return out

    def wait_for_shared_answers(self, server, client):
        """Until the process's calls to Redis get answers again (it reconnects in the background)."""
        def answered():
            server.create(b"probe", headers=forwarded(client))
            return metric(server.metrics(), "sluice_limiter_fail_open") == 0
        wait_until(answered, timeout=30, message="limiter store answering")

    def test_one_client_key_gets_one_budget_across_processes(self):
        a, b = self.tier(["--ip-create-burst", "10", "--ip-create-rate", SLOW])
        self.wait_for_shared_answers(a, "10.9.0.1")
        self.wait_for_shared_answers(b, "10.9.0.2")
        statuses = self.creates([a, b], 30, "10.2.0.1")
        self.assertEqual(statuses.count(201), 10, statuses)
        self.assertEqual(statuses.count(429), 20, statuses)
        refused = a.create(b"again", headers=forwarded("10.2.0.1"))
        doc = self.assertJsonError(refused, 429, "ip_create_count")
        self.assertGreaterEqual(doc["retry_after"], 1)
        self.assertEqual(a.create(b"other", headers=forwarded("10.2.0.2")).status, 201)

    def test_limits_show_the_shared_budget_on_every_process(self):
        a, b = self.tier(["--ip-create-burst", "10", "--ip-create-rate", SLOW])
        self.wait_for_shared_answers(a, "10.9.0.1")
        self.wait_for_shared_answers(b, "10.9.0.2")
        self.assertEqual(self.creates([a], 4, "10.4.0.1").count(201), 4)
        # b never saw this client create, yet it shows the tier's budget: 10 - 4.
        doc = b.get("/api/v1/limits", headers=forwarded("10.4.0.1")).json()
        self.assertEqual(doc["buckets_from"], "shared_store")
        self.assertEqual(doc["buckets"]["ip_create_count"]["available"], 6, doc)
        self.assertEqual(doc["buckets"]["ip_create_count"]["burst"], 10, doc)
        self.redis.kill()
        doc = b.get("/api/v1/limits", headers=forwarded("10.4.0.1")).json()
        self.assertEqual(doc["buckets_from"], "this_process_while_shared_store_silent")
        self.assertEqual(doc["buckets"]["ip_create_count"]["available"], 10, doc)

    def test_redis_killed_fails_open_and_restarted_restores_shared_limits(self):
        # Global 20/s, burst 20, over 2 processes with the 1.2 slack: 12/s, burst 12, per process
        # while Redis is gone. A local share holds only what it refilled since Redis last decided
        # one of its process's creates (docs/overload.md, "Shared state"), so it is full 1 s into
        # the outage and then admits at its rate.
        a, b = self.tier(["--ip-create-burst", "3", "--ip-create-rate", SLOW,
                          "--global-create-burst", "20", "--global-create-rate", "20"])
        self.wait_for_shared_answers(a, "10.9.0.1")
        self.wait_for_shared_answers(b, "10.9.0.2")
        self.assertEqual(metric(a.metrics(), "sluice_limiter_fail_open"), 0)
        self.assertEqual(self.creates([a, b], 6, "10.3.0.1").count(201), 3)

        self.redis.kill()
        time.sleep(1.5)  # the local shares refill to their burst
        started = time.monotonic()
        statuses = self.creates([a], 30, "10.3.0.1")
        took = time.monotonic() - started
        # Per-client limit open (the key had spent its 3), global cap held by this process alone:
        # its burst of 12 and what its 12/s refilled meanwhile, and no more.
        created = statuses.count(201)
        self.assertGreaterEqual(created, 12, statuses)
        self.assertLessEqual(created, 12 + 12 * took + 1, (took, statuses))
        if 12 + 12 * took + 1 < len(statuses):  # a run slow enough to refill 30 cannot tell
            self.assertIn(429, statuses)
        m = a.metrics()
        self.assertEqual(metric(m, "sluice_limiter_fail_open"), 1)
        self.assertGreaterEqual(metric(m, "sluice_shared_limit_decisions_total", outcome="fail_open"), 30)
        self.assertIn("limiter store did not answer", a.log())
        # The other process has its own local share, untouched by a's creates.
        self.assertEqual(self.creates([b], 5, "10.3.0.2").count(201), 5)

        self.redis.start()  # same port, empty: budgets start full
        self.wait_for_shared_answers(a, "10.9.1.1")
        self.wait_for_shared_answers(b, "10.9.1.2")
        statuses = self.creates([a, b], 8, "10.3.1.1")
        self.assertEqual(statuses.count(201), 3, statuses)
        self.assertIn("limiter store answers again", a.log())

    def test_delete_on_one_process_is_not_served_by_the_other(self):
        # One primary (PostgreSQL: an embedded data dir serves one process only) and one bucket
        # (a shared folder of bodies) for both; local entries trusted for an hour, so only the
        # invalidation message (not the age bound) can make b stop serving the paste.
        pg = test_postgres.PostgresServer()
        self.addCleanup(pg.stop)
        args = ["--local-cache-ttl", "1h", "--cache-timeout", "5s", "--meta", pg.url,
                *test_postgres.PostgresMetaTest.RELAXED]
        a = self.server(args, cache=self.redis)
        b = self.server(args, cache=self.redis, data_dir=a.data_dir)
        doc = a.create_ok(b"soon gone")
        paste_id = doc["id"]
        self.assertEqual(b.get(f"/raw/{paste_id}").status, 200)
        self.assertEqual(b.get(f"/raw/{paste_id}").status, 200)  # from b's own memory now
        self.assertStatus(a.delete(paste_id, doc["delete_token"]), 204)
        wait_until(lambda: b.get(f"/raw/{paste_id}").status == 404, timeout=10,
                   message="deleted paste gone from the other process")

    def test_redis_absent_at_start_is_no_create_dependency(self):
        self.redis.kill()
        a = self.server(["--trusted-proxy", "127.0.0.1"], cache=self.redis)
        self.assertEqual(a.create(b"hello", headers=forwarded("10.4.0.1")).status, 201)
        doc = a.create_ok(b"readable")
        self.assertEqual(a.get(f"/raw/{doc['id']}").status, 200)
        self.assertEqual(metric(a.metrics(), "sluice_limiter_fail_open"), 1)


if __name__ == "__main__":
    unittest.main()
