"""The scale-out stack, end to end: Varnish -> nginx (least_conn) -> 2 sluice processes on
PostgreSQL, Redis and s3rver, all started by scripts/stack.sh on free loopback ports and stopped
at the end. Each test breaks one dependency and restores it.

Run: cd tests/stack && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_stack
"""

import concurrent.futures
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest

from promtext import metric, parse_metrics
from rawhttp import RawConnection, free_port_range, request
from sluice_harness import sluice_bin, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PROCESSES = 2
# Small tier-wide create budget, so the per-process fallback share (20 / 2 x 1.2 = 12) is
# reachable in a test; per-client limits stay at their defaults (burst 10, 1/s).
# The store timeouts are ten times the production ones: these tests are about the limits, the
# breaker and the edge, and a 50 ms insert on a busy machine turned a create of the Redis-down flood
# into a 503 (the flake hunt, tests/flake_hunt.py); the tests that stop PostgreSQL or freeze s3rver
# still see every create fail, only later. The limiter's Redis calls too: at the production 5 ms a
# loaded machine timed one out, the process fell back to its own share of the global budget (which
# test 3's flood had spent) and a create of test 5 answered 429 global_count (the flake hunt); the
# test that stops Redis stops it, so a longer timeout changes nothing there.
PATIENT_STORE_TIMEOUTS = ["--insert-timeout", "500ms", "--meta-get-timeout", "200ms",
                          "--read-budget", "3s", "--cache-timeout", "100ms"]
STACK_ARGS = ["--global-create-rate", "20", "--global-create-burst", "20",
              "--breaker-open-for", "1s", "--breaker-refusals", "3", "--ip-read-rate", "1000",
              "--ip-read-burst", "1000", *PATIENT_STORE_TIMEOUTS]




class Stack:
    def __init__(self, s3="s3rver", args=()):
        self.s3, self.args = s3, list(args)
        self.dir = tempfile.mkdtemp(prefix="sluice-stack-")
        self.base = free_port_range(20)
        self.edge = self.base
        self.nginx = self.base + 1
        self.apps = [self.base + 10 + i for i in range(PROCESSES)]

    def up(self):
        env = dict(os.environ, SLUICE_BIN=sluice_bin())
        # The variant's flags in place of STACK_ARGS' own (sluice takes a flag once), or added.
        args = list(STACK_ARGS)
        for flag, value in zip(self.args[::2], self.args[1::2]):
            if flag in args:
                args[args.index(flag) + 1] = value
            else:
                args += [flag, value]
        res = subprocess.run([os.path.join(ROOT, "scripts", "stack.sh"), "up", "--processes",
                              str(PROCESSES), "--base-port", str(self.base), "--dir", self.dir,
                              "--s3", self.s3, "--", *args], env=env,
                             capture_output=True, text=True,
                             timeout=180 if self.s3 == "s3rver" else 600)
        if res.returncode != 0:
            raise AssertionError(f"stack did not start:\n{res.stdout}\n{res.stderr}\n{self.logs()}")

    def down(self):
        subprocess.run([os.path.join(ROOT, "scripts", "stack.sh"), "down", "--dir", self.dir],
                       capture_output=True, timeout=120)

    def logs(self):
        out = []
        for i in range(PROCESSES):
            path = os.path.join(self.dir, f"app{i}", "log")
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    out.append(f"--- app{i} ---\n" + "".join(f.readlines()[-40:]))
        return "\n".join(out)

    def s3_pid(self):
        """The pid of the bodies' store: s3rver, or Ceph's gateway (test_stack_ceph.py)."""
        path = "s3/s3rver.pid" if self.s3 == "s3rver" else "ceph/radosgw.pid"
        with open(os.path.join(self.dir, path)) as f:
            return int(f.read().strip())

    def script(self, name, *args):
        subprocess.run([os.path.join(ROOT, "scripts", "testenv", name), *args], check=True,
                       capture_output=True, timeout=120)

    def request(self, port, method, path, body=None, headers=None, timeout=10):
        return request(port, method, path, body=body, headers=headers, timeout=timeout)

    def create(self, body, client="10.0.0.1", port=None, headers=None):
        """Through nginx (which believes a loopback hop's X-Forwarded-For), as client `client`."""
        h = {"X-Forwarded-For": client, "Content-Type": "text/plain"}
        h.update(headers or {})
        return self.request(port or self.nginx, "POST", "/api/v1/pastes", body=body, headers=h)

    def metrics(self, app):
        status, _, body = self.request(self.apps[app], "GET", "/metrics")
        assert status == 200, status
        return parse_metrics(body.decode())

    def metric_sum(self, name, **labels):
        return sum(metric(self.metrics(i), name, **labels) for i in range(PROCESSES))

    def fail_open_decisions(self):
        return self.metric_sum("sluice_shared_limit_decisions_total", outcome="fail_open")


class StackTest(unittest.TestCase):
    S3 = "s3rver"
    ARGS = []  # the variant's own flags and values, over STACK_ARGS

    @classmethod
    def setUpClass(cls):
        cls.stack = Stack(cls.S3, cls.ARGS)
        try:
            cls.stack.up()
        except Exception:
            cls.stack.down()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.stack.down()

    def run(self, result=None):
        result = result if result is not None else self.defaultTestResult()
        before = len(result.failures) + len(result.errors)
        super().run(result)
        if len(result.failures) + len(result.errors) > before:
            print(self.stack.logs())
        return result

    def new_paste(self, text, client):
        status, _, body = self.stack.create(text.encode(), client=client)
        self.assertEqual(status, 201, body)
        return json.loads(body)

    # ---- the API contract through the edge -------------------------------------------------
    def test_1_api_contract_through_the_edge(self):
        s = self.stack
        created = self.new_paste("hello from the stack\n", "10.1.0.1")
        paste_id = created["id"]
        self.assertTrue(created["url"].startswith(f"http://127.0.0.1:{s.edge}/"), created)
        status, headers, body = s.request(s.edge, "GET", f"/raw/{paste_id}")
        self.assertEqual((status, body), (200, b"hello from the stack\n"))
        self.assertEqual(headers.get("X-Content-Type-Options"), "nosniff")
        etag = headers["ETag"]
        status, headers, _ = s.request(s.edge, "GET", f"/raw/{paste_id}")
        self.assertEqual((status, headers.get("X-Cache")), (200, "HIT"))
        self.assertEqual(s.request(s.edge, "GET", f"/raw/{paste_id}",
                                   headers={"If-None-Match": etag})[0], 304)
        status, headers, body = s.request(s.edge, "GET", f"/{paste_id}",
                                          headers={"Accept": "text/html"})
        self.assertEqual(status, 200)
        self.assertIn("text/html", headers["Content-Type"])
        self.assertEqual(s.request(s.edge, "GET", "/raw/nosuchpaste1")[0], 404)
        self.assertEqual(s.request(s.edge, "GET", "/raw/nosuchpaste1")[1].get("X-Cache"), "MISS")
        # Refusals from the headers alone, through both proxies.
        # Headers first, as curl does with Expect: the answer comes before any of the body. (A
        # client that pushes the whole body regardless may see the balancer's 502 instead: the app
        # closes rather than read a body it refused.)
        raw = RawConnection("127.0.0.1", s.nginx)
        try:
            raw.send_headers("POST", "/api/v1/pastes", {"X-Forwarded-For": "10.1.0.2",
                                                        "Content-Length": "1000001"})
            status, headers = raw.read_head()
        finally:
            raw.close()
        self.assertEqual(status, 413, headers)
        self.assertEqual(s.request(s.nginx, "DELETE", f"/api/v1/pastes/{paste_id}",
                                   headers={"Authorization": "Bearer " + "A" * 22})[0], 404)
        self.assertEqual(s.request(s.edge, "DELETE", f"/api/v1/pastes/{paste_id}", headers={
            "Authorization": "Bearer " + created["delete_token"]})[0], 204)
        # Both processes see the same data: every paste read through each process directly.
        other = self.new_paste("shared rows and bodies\n", "10.1.0.3")
        for port in s.apps:
            self.assertEqual(s.request(port, "GET", f"/raw/{other['id']}")[2],
                             b"shared rows and bodies\n")

    # ---- one budget across processes -------------------------------------------------------
    def test_2_one_client_key_gets_one_budget_across_processes(self):
        s = self.stack
        missed_before = s.fail_open_decisions()
        started = time.monotonic()
        statuses = [s.create(f"budget {i}".encode(), client="10.2.0.1")[0] for i in range(20)]
        took = time.monotonic() - started
        missed = s.fail_open_decisions() - missed_before
        served_by = [s.metric_sum("sluice_http_requests_total", route="create_api", status="201")]
        # Burst 10, not 10 per process. The shared bucket refills 1 token a second while the 20
        # creates run (each goes through PostgreSQL and S3, so a slow run takes seconds), and a
        # decision that misses the 5 ms Redis deadline is admitted uncharged (fail-open, as the
        # contract says): each may add one 201, and nothing else may. Per-process budgets would
        # let all 20 through.
        allowed = 10 + int(took) + missed
        # A run so slow (or so many misses) that 20 would pass could not tell one budget from two.
        self.assertLess(allowed, 20, ("cannot tell one budget from two", took, missed))
        self.assertGreaterEqual(statuses.count(201), 10, statuses)
        self.assertLessEqual(statuses.count(201), allowed, (took, missed, statuses))
        self.assertTrue(all(code in (201, 429) for code in statuses), statuses)
        # Both processes took part (least_conn with idle processes alternates).
        per_process = [metric(s.metrics(i), "sluice_shared_limit_decisions_total", outcome="allowed")
                       for i in range(PROCESSES)]
        self.assertTrue(all(n > 0 for n in per_process), (per_process, served_by))

    # ---- Redis down: fail open ------------------------------------------------------------
    def test_3_redis_down_creates_continue_per_client_opens_global_holds_per_process(self):
        s = self.stack
        redis_dir = os.path.join(s.dir, "redis")
        redis_port = s.base + 3
        s.script("redis.sh", "stop", redis_dir)
        try:
            wait_until(lambda: s.metric_sum("sluice_redis_connected") == 0, timeout=20,
                       message="both processes notice Redis is gone")
            started = time.monotonic()
            # Eight at a time (under the per-client share of 10 slots), so that the flood
            # outruns the buckets' refill even on a busy machine.
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                statuses = list(pool.map(
                    lambda i: s.create(f"flood {i}".encode(), client="10.3.0.1")[0], range(40)))
            took = time.monotonic() - started
            # Per-client limit open: one key gets far past its burst of 10; the tier's global
            # budget of 20/s (burst 20) falls back to 12 per process (burst 12, refilled at 12/s),
            # so about 24 succeed, then 429, plus what the buckets refilled while the flood ran.
            created = statuses.count(201)
            bound = PROCESSES * (12 + 12 * took) + 2
            self.assertGreater(created, 10, statuses)
            self.assertLessEqual(created, bound, (took, statuses))
            if bound < len(statuses):  # a flood slower than the refill may honestly get no 429
                self.assertIn(429, statuses, (took, statuses))
            self.assertTrue(all(code in (201, 429) for code in statuses), statuses)
            for i in range(PROCESSES):
                self.assertEqual(metric(s.metrics(i), "sluice_limiter_fail_open"), 1)
        finally:
            s.script("redis.sh", "start", redis_dir, str(redis_port))
        def restored(i):
            # The fail-open gauge follows decisions: ask each process for one.
            s.create(b"probe", client=f"10.3.9.{i}", port=s.apps[i])
            m = s.metrics(i)
            return (metric(m, "sluice_limiter_fail_open") == 0 and
                    metric(m, "sluice_redis_connected") == 1)
        wait_until(lambda: all(restored(i) for i in range(PROCESSES)), timeout=30, interval=0.5,
                   message="shared limits restored after Redis returns")
        time.sleep(1.5)  # the global budget refills
        missed_before = s.fail_open_decisions()
        started = time.monotonic()
        statuses = [s.create(f"again {i}".encode(), client="10.3.0.2")[0] for i in range(14)]
        took = time.monotonic() - started
        # A Redis just restarted, on a busy machine, may miss the 5 ms limiter budget now and
        # then: that create is decided fail-open (admitted, uncharged), as the contract says.
        # Each such miss, and each second of refill, may add one 201 beyond the key's burst of
        # 10, and no more.
        missed = s.fail_open_decisions() - missed_before
        self.assertGreaterEqual(statuses.count(201), 10, statuses)
        self.assertLessEqual(statuses.count(201), 10 + int(took) + missed, (took, missed, statuses))

    # ---- PostgreSQL down -------------------------------------------------------------------
    def test_4_postgres_down_cached_reads_continue_creates_503_and_recover(self):
        s = self.stack
        paste = self.new_paste("read me while the primary is down\n", "10.4.0.1")
        for port in s.apps:  # in each process's cache
            self.assertEqual(s.request(port, "GET", f"/raw/{paste['id']}")[0], 200)
        pg_dir = os.path.join(s.dir, "postgres")
        s.script("postgres.sh", "pause", pg_dir)
        try:
            started = time.monotonic()
            # Enough creates that each process, after its pooled connections break, meets more
            # consecutive refusals than breaker_refusals (3), and fewer than the tier's global
            # budget of 20 (an admitted create spends its token even when the primary fails it).
            time.sleep(1.0)
            missed_before = s.fail_open_decisions()
            statuses = [s.create(f"no primary {i}".encode(), client=f"10.4.1.{i}")[0]
                        for i in range(18)]
            elapsed = time.monotonic() - started
            # A create whose Redis call misses the 5 ms limiter budget on a busy machine is decided
            # on the process's local share, which an answered create leaves empty (src/service/
            # admission_control_create.cc): it may honestly get 429. Each such miss excuses one 429, and
            # no create may be admitted past a paused primary.
            missed = s.fail_open_decisions() - missed_before
            self.assertEqual(set(statuses) - {429}, {503}, statuses)
            self.assertLessEqual(statuses.count(429), missed, (missed, statuses))
            self.assertLess(elapsed / len(statuses), 1.0,
                            "creates must fail fast, not wait out the 2 s budget")
            for port in s.apps:
                self.assertEqual(s.request(port, "GET", f"/raw/{paste['id']}")[0], 200)
            self.assertGreater(s.metric_sum("sluice_breaker_transitions_total", dependency="meta",
                                            to="open"), 0)
        finally:
            s.script("postgres.sh", "resume", pg_dir)
        # Every process recovers (its breaker lets a probe through, then closes).
        for i, port in enumerate(s.apps):
            wait_until(lambda: s.create(b"primary back", client=f"10.4.2.{i}", port=port)[0] == 201,
                       timeout=30, interval=0.5,
                       message=f"creates succeed on process {i} after PostgreSQL returns")

    # ---- the bucket slows down -------------------------------------------------------------
    def test_5_slow_bucket_sheds_creates_and_the_edge_keeps_serving(self):
        s = self.stack
        paste = self.new_paste("served by the edge\n", "10.5.0.1")
        # Until the edge holds it: a first read that met a busy moment (503) is not cached.
        wait_until(lambda: s.request(s.edge, "GET", f"/raw/{paste['id']}")[1].get("X-Cache")
                   == "HIT", timeout=20, interval=0.2, message="the paste cached at the edge")
        s3_pid = s.s3_pid()
        os.kill(s3_pid, signal.SIGSTOP)
        try:
            statuses = [s.create(f"slow {i}".encode(), client=f"10.5.1.{i}")[0] for i in range(6)]
            self.assertEqual(set(statuses), {503}, statuses)
            status, headers, body = s.request(s.edge, "GET", f"/raw/{paste['id']}")
            self.assertEqual((status, headers.get("X-Cache"), body),
                             (200, "HIT", b"served by the edge\n"))
        finally:
            os.kill(s3_pid, signal.SIGCONT)
        for i, port in enumerate(s.apps):
            wait_until(lambda: s.create(b"bucket back", client=f"10.5.2.{i}", port=port)[0] == 201,
                       timeout=30, interval=0.5,
                       message=f"creates succeed on process {i} after the bucket recovers")

    # ---- delete purges the edge ------------------------------------------------------------
    def test_6_a_deleted_paste_is_gone_at_the_edge_within_the_purge_window(self):
        s = self.stack
        paste = self.new_paste("delete me everywhere\n", "10.6.0.1")
        for path in (f"/raw/{paste['id']}", f"/{paste['id']}"):
            # A view shed to plain text under load is not cacheable (no-cache): ask again until a
            # full-quality rendering is cached at the edge.
            wait_until(lambda: s.request(s.edge, "GET", path)[1].get("X-Cache") == "HIT",
                       timeout=20, interval=0.3, message=f"{path} cached at the edge")
        # A delete is idempotent: a 503 (a primary still catching up after the earlier tests'
        # faults) is asked again, as the status table tells a client to.
        for _ in range(10):
            status = s.request(s.edge, "DELETE", f"/api/v1/pastes/{paste['id']}", headers={
                "Authorization": "Bearer " + paste["delete_token"]})[0]
            if status != 503:
                break
            time.sleep(0.5)
        self.assertEqual(status, 204)
        deleted_at = time.monotonic()
        for path in (f"/raw/{paste['id']}", f"/{paste['id']}"):
            wait_until(lambda: s.request(s.edge, "GET", path)[0] == 404, timeout=15,
                       interval=0.2, message=f"{path} gone at the edge")
        print(f"\nedge purge: gone at the edge {time.monotonic() - deleted_at:.1f} s after the 204",
              flush=True)
        self.assertGreater(s.metric_sum("sluice_edge_purges_total", result="ok"), 0)

    # ---- reports withhold a paste at the edge; the admin's dismissal serves it again --------
    def test_7_reported_by_three_keys_is_451_at_the_edge_until_the_admin_dismisses(self):
        s = self.stack
        paste = self.new_paste("reported by three people\n", "10.7.0.1")
        path = f"/raw/{paste['id']}"
        wait_until(lambda: s.request(s.edge, "GET", path)[1].get("X-Cache") == "HIT",
                   timeout=20, interval=0.3, message=f"{path} cached at the edge")
        report = json.dumps({"reason": "spam", "note": "ads"}).encode()
        for i in range(3):  # report_hide_threshold's default, each from a network of its own
            # A 503 (a primary still catching up after the earlier tests' faults) is asked again.
            for _ in range(10):
                status, _, body = s.request(
                    s.nginx, "POST", f"/api/v1/pastes/{paste['id']}/report", body=report,
                    headers={"X-Forwarded-For": f"10.7.{i + 1}.1",
                             "Content-Type": "application/json"})
                if status != 503:
                    break
                time.sleep(0.5)
            self.assertEqual(status, 202, body)
        reported_at = time.monotonic()
        wait_until(lambda: s.request(s.edge, "GET", path)[0] == 451, timeout=15, interval=0.1,
                   message=f"{path} withheld (451) at the edge")
        withheld_after = time.monotonic() - reported_at
        # The dismissal, on the other process's admin listener: the rows are shared.
        with open(os.path.join(s.dir, "admin.token"), encoding="ascii") as f:
            token = f.read().strip()
        status, _, body = s.request(s.apps[1] + 1000, "POST",
                                    f"/admin/pastes/{paste['id']}/dismiss",
                                    body=b'{"note": "fine"}',
                                    headers={"Authorization": f"Bearer {token}",
                                             "Content-Type": "application/json"})
        self.assertEqual(status, 200, body)
        dismissed_at = time.monotonic()
        wait_until(lambda: s.request(s.edge, "GET", path)[:3:2] == (200, b"reported by three "
                                                                    b"people\n"),
                   timeout=15, interval=0.1, message=f"{path} served again at the edge")
        print(f"\nreports: 451 at the edge {withheld_after:.2f} s after the third report, served "
              f"again {time.monotonic() - dismissed_at:.2f} s after the dismissal", flush=True)


if __name__ == "__main__":
    unittest.main()
