"""/metrics as Prometheus reads it: after a little traffic of every kind, `promtool check metrics`
(Debian's `prometheus` package, in scripts/install-deps.sh's test list) has nothing to say about the
live exposition: no parse error, a HELP for every family, counters named *_total, units in names.

promtool missing fails the test rather than skipping it: a skipped check is a passed check to
whoever reads the summary.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_metrics_format
"""

import shutil
import subprocess
import unittest

import test_postgres
from loadgen import set_faults
from promtext import metric, parse_metrics
from sluice_harness import (RedisServer, SluiceTestCase, sluice_bin, wait_until,
                            with_write_pool_warm)


def promtool_check(text):
    """(exit status, what promtool said) for `promtool check metrics` over `text`."""
    promtool = shutil.which("promtool")
    if promtool is None:
        raise AssertionError("promtool not found: scripts/install-deps.sh test installs Debian's "
                             "prometheus package, which has it")
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=60)
    return done.returncode, (done.stdout + done.stderr).strip()


class PromtoolItselfTest(unittest.TestCase):
    """The checker complains about the mistakes this suite relies on it to catch; without this a
    promtool that accepted anything would pass the test below."""

    def test_a_rising_count_typed_gauge_and_a_counter_without_total_are_reported(self):
        status, said = promtool_check(
            "# HELP demo_shed_total Views shed\n# TYPE demo_shed_total gauge\n"
            "demo_shed_total 3\n"
            "# HELP demo_requests Requests\n# TYPE demo_requests counter\ndemo_requests 1\n")
        self.assertNotEqual(status, 0, said)
        self.assertIn("demo_shed_total", said)
        self.assertIn("demo_requests", said)

    def test_a_clean_exposition_passes(self):
        status, said = promtool_check(
            "# HELP demo_requests_total Requests\n# TYPE demo_requests_total counter\n"
            "demo_requests_total 1\n")
        self.assertEqual((status, said), (0, ""))


class MetricsFormatTest(SluiceTestCase):

    def drive_traffic(self, s, refusal_certain=True):
        """One of each kind of answer, so every family that appears only once used is there."""
        created = s.create_ok("metrics format\n")
        self.assertEqual(s.get(f"/raw/{created['id']}").status, 200)
        self.assertEqual(s.get(f"/{created['id']}", headers={"Accept": "text/html"}).status, 200)
        self.assertEqual(s.head(f"/raw/{created['id']}").status, 200)
        self.assertEqual(s.get("/raw/nosuchpaste1").status, 404)
        self.assertEqual(s.get("/nosuchpaste1", headers={"Accept": "text/html"}).status, 404)
        self.assertEqual(s.create(b"").status, 400)
        self.assertEqual(s.request("PATCH", "/api/v1/pastes").status, 405)
        self.assertEqual(s.delete(created["id"], token=created["delete_token"]).status, 204)
        self.assertEqual(s.get("/healthz").status, 200)
        # Burst 2 and a refill far slower than this test, one create spent above: whatever the
        # machine's speed, these go over the client's budget.
        statuses = [s.create(f"burst {i}\n").status for i in range(3)]
        if refusal_certain:
            self.assertIn(429, statuses)
        else:  # a limiter store that does not answer in time opens per-client limits (fail open)
            self.assertLessEqual(set(statuses), {201, 429}, statuses)

    def check_live_metrics(self, s):
        res = s.get("/metrics")
        self.assertStatus(res, 200)
        self.assertTrue((res.header("Content-Type") or "").startswith("text/plain"), res)
        status, said = promtool_check(res.text)
        self.assertEqual(said, "", f"promtool check metrics complained:\n{said}")
        self.assertEqual(status, 0)
        return parse_metrics(res.text)

    def test_live_metrics_pass_promtool_check_metrics(self):
        s = self.server(["--ip-create-rate", "0.001", "--ip-create-burst", "2"])
        self.drive_traffic(s)
        # The traffic is in it, so the check runs over a populated exposition. A response is
        # counted once its write completes, which the client may see first (test_api, counted).
        wait_until(lambda: metric(s.metrics(), "sluice_http_requests_total", route="create_api",
                                  status="429") > 0, message="the refusals counted")
        self.check_live_metrics(s)

    def test_each_committer_reports_its_batches(self):
        # src/store/sqlite/sqlite_meta_store.cc's committer took every create and the delete,
        # one observation per batch; a large body went to the files' committer instead.
        s = self.server()
        before = s.metrics()
        small = [s.create_ok(f"small {i}\n") for i in range(5)]
        s.create_ok("x" * (70 * 1024))  # over inline_body_bytes: a file of its own
        self.assertEqual(s.delete(small[0]["id"], token=small[0]["delete_token"]).status, 204)
        m = self.check_live_metrics(s)
        grew = {name: metric(m, name, store="meta") - metric(before, name, store="meta")
                for name in ("sluice_store_commit_operations_total",
                             "sluice_store_commit_batches_total", "sluice_store_commit_seconds_count")}
        self.assertGreaterEqual(grew["sluice_store_commit_operations_total"], 7)  # 6 rows, 1 delete
        self.assertGreaterEqual(grew["sluice_store_commit_batches_total"], 1)
        self.assertLessEqual(grew["sluice_store_commit_batches_total"],
                             grew["sluice_store_commit_operations_total"])
        self.assertEqual(grew["sluice_store_commit_seconds_count"],
                         grew["sluice_store_commit_batches_total"])
        self.assertGreater(metric(m, "sluice_store_commit_seconds_sum", store="meta"), 0)
        self.assertGreaterEqual(metric(m, "sluice_store_commit_operations_total", store="files"), 1)

    def test_the_build_names_its_commit_and_allocator_and_the_heap_is_counted(self):
        # src/common/allocator.cc: the malloc `sluice --version` found serving the binary is the
        # one build_info names, and its counts are a heap's, within the process's resident set.
        said = subprocess.run([sluice_bin(), "--version"], capture_output=True, text=True,
                              timeout=30, check=True).stdout
        allocator = next(line.split()[1] for line in said.splitlines()
                         if line.startswith("allocator: "))
        # The commit too (tools/build_commit.cmake), so a fleet shows which build each runs.
        commit = next(line.split()[1] for line in said.splitlines() if line.startswith("commit: "))
        self.assertRegex(commit, r"^([0-9a-f]{12}(-dirty)?|unknown)$")
        s = self.server()
        for i in range(20):
            s.create_ok(f"heap {i}\n" * 1000)
        m = self.check_live_metrics(s)
        self.assertEqual(metric(m, "sluice_build_info", version=said.split()[1], commit=commit,
                                allocator=allocator), 1, said)
        allocated = metric(m, "sluice_allocator_bytes", state="allocated")
        held = metric(m, "sluice_allocator_bytes", state="held")
        self.assertGreater(allocated, 1 << 20)  # the caches, the loops, SQLite's page caches
        self.assertGreaterEqual(held, allocated)
        self.assertLessEqual(held, metric(m, "process_resident_memory_bytes"))

    def test_the_families_of_postgresql_redis_and_fault_injection_pass_too(self):
        # Families registered only with these parts: the meta pools (src/app/main.cc), the shared
        # limiter (src/service/admission_control.cc), Redis (src/store/redis/), the fault rules
        # (src/store/fault_injection.cc).
        redis = RedisServer().start()
        self.addCleanup(redis.stop)
        pg = test_postgres.PostgresServer()
        self.addCleanup(pg.stop)
        s = self.server(["--meta", pg.url, *test_postgres.PostgresMetaTest.RELAXED,
                         "--cache-timeout", "5s", "--fault-injection", "true",
                         "--ip-create-rate", "0.001", "--ip-create-burst", "2"], cache=redis)
        with_write_pool_warm(s)
        set_faults("127.0.0.1", s.admin_port, "meta.get:latency=1ms", s.admin_token)
        self.addCleanup(lambda: s.running() and set_faults("127.0.0.1", s.admin_port, "",
                                                           s.admin_token))
        self.drive_traffic(s, refusal_certain=False)
        m = self.check_live_metrics(s)
        for family in ("sluice_meta_pool_connections", "sluice_limiter_fail_open",
                       "sluice_redis_connected", "sluice_fault_rules",
                       "sluice_faults_injected_total"):
            self.assertTrue(any(name == family for name, _ in m), f"{family} not on /metrics")

if __name__ == "__main__":
    unittest.main()
