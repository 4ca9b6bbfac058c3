"""A PostgreSQL primary with a streaming standby (scripts/testenv/postgres.sh start-standby), two
sluice processes on the multi-host URL (target_session_attrs=read-write) taking creates and reads;
the primary is stopped at once (-m immediate) and, once both processes' breakers have opened, the
standby promoted (pg_ctl promote). Nothing
here is mocked: the servers are Debian's PostgreSQL 15.

What must hold (docs/scale-out.md, "PostgreSQL with a standby"):
- with a synchronous standby, every paste answered 201 (before, during and after) reads back
  byte-identical afterwards from both processes: a 201 was on two servers;
- during the failover a create is 201 or 503 with Retry-After and a failover reason, never a 500;
  a read of a paste that exists is 200 or 503, never a 404;
- both processes serve creates on the new primary without a restart, within RECOVERY_LIMIT of the
  promotion, with the default breaker (breaker_open_for 5 s): a refusal that says "not the
  primary" opens it for breaker_open_for_failover (250 ms) only;
- after an asynchronous promotion that lost a paste, its creator's delete stops it being served
  by the process that got the delete at once, and by the others within local_cache_ttl.
The figures (503 window, time to the first 201, acknowledged pastes lost) are printed; with
SLUICE_FAILOVER_REPORT=FILE they are also appended to FILE (bench/results/pg-failover.md says how).

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v \
     test_postgres_failover
"""

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import test_postgres
from promtext import metric
from sluice_harness import SluiceTestCase, wait_until, with_write_pool_warm

SCRIPT = test_postgres.SCRIPT

# The reasons a create or read may give while the primary fails over: the store's own; an insert
# whose answer was lost and whose row the check could not see (it says so, never "saved"); and a
# call whose budget ran out while a connect to the dead host hung (an honest timeout, rare).
FAILOVER_REASONS = {"primary_failover", "outcome_unknown", "deadline_exceeded"}

# Creates are back on the new primary within this of the promotion, for each process. The
# failover's breaker window (breaker_open_for_failover, 250 ms) bounds it: refusals that say "not
# the primary" open the breaker for that long, then one probe finds the new primary. The bar is
# 1 s; measured here 0.2-0.4 s (bench/results/pg-failover.md). The 0.5 s on top is for a 2-core
# machine shared by several builds: a creator thread of this test that the scheduler holds back
# is time counted against the server. Before the failover window, with the default
# breaker_open_for (5 s), it was 4.9-5.1 s, far outside it. The breaker settings are the
# defaults unless SLUICE_FAILOVER_BREAKER_OPEN_FOR names one (for the figures only).
BREAKER_OPEN_FOR = os.environ.get("SLUICE_FAILOVER_BREAKER_OPEN_FOR")
RECOVERY_LIMIT = 1.5


def script(*args):
    return subprocess.run([SCRIPT, *args], check=True, capture_output=True, text=True,
                          timeout=120).stdout.strip()


class Cluster:
    def __init__(self, mode):
        self.root = tempfile.mkdtemp(prefix="sluice-pgha-")
        os.chmod(self.root, 0o755)  # the servers run as the postgres user (postgres.sh)
        self.primary = os.path.join(self.root, "primary")
        self.standby = os.path.join(self.root, "standby")
        script("start", self.primary, "0")
        self.url = script("start-standby", self.standby, self.primary, "0", mode)
        with open(os.path.join(self.standby, "standby-url"), encoding="ascii") as f:
            self.standby_url = f.read().strip()

    def stop(self):
        for d in (self.standby, self.primary):
            subprocess.run([SCRIPT, "stop", d], capture_output=True, timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)

    def ids_on_new_primary(self):
        out = subprocess.run(["psql", self.standby_url, "-tAc", "SELECT id FROM pastes"],
                             check=True, capture_output=True, text=True, timeout=30).stdout
        return set(out.split())


class Load:
    """Creators and readers against one process; records (time, kind, status, reason)."""

    def __init__(self, server, name, reader, creators=2):
        self.server = server
        # Reads go to the other process, whose cache has not seen the paste: they reach PostgreSQL.
        self.reader = reader
        self.name = name
        self.events = []
        self.created = []  # (id, body) answered 201
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.create_loop, args=(i,), daemon=True)
                        for i in range(creators)]
        self.threads.append(threading.Thread(target=self.read_loop, daemon=True))

    def start(self):
        for t in self.threads:
            t.start()

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)

    @staticmethod
    def reason(res):
        try:
            return res.json().get("reason", "")
        except Exception:  # a body that is not JSON is itself a finding: kept as its status
            return "not-json"

    def create_loop(self, worker):
        n = 0
        while not self.stop.is_set():
            n += 1
            body = f"{self.name}/{worker}/{n} failover ✓\n".encode() * (n % 5 + 1)
            try:
                res = self.server.create(body, timeout=15)
            except OSError as e:
                with self.lock:
                    self.events.append((time.monotonic(), "create", 0, repr(e)))
                continue
            now = time.monotonic()
            with self.lock:
                self.events.append((now, "create", res.status,
                                    "" if res.status == 201 else self.reason(res),
                                    res.header("Retry-After")))
                if res.status == 201:
                    self.created.append((res.json()["id"], body))
            if res.status != 201:
                time.sleep(0.02)  # as a client honouring a short Retry-After would, roughly

    def read_loop(self):
        i = 0
        while not self.stop.is_set():
            with self.lock:
                known = list(self.created[-50:])
            if not known:
                time.sleep(0.01)
                continue
            paste_id, body = known[i % len(known)]
            i += 1
            try:
                res = self.reader.get(f"/raw/{paste_id}", timeout=15)
            except OSError as e:
                with self.lock:
                    self.events.append((time.monotonic(), "read", 0, repr(e), None))
                continue
            with self.lock:
                self.events.append((time.monotonic(), "read", res.status,
                                    "" if res.status == 200 else self.reason(res),
                                    res.header("Retry-After"), paste_id))
            if res.status == 200 and res.body != body:
                with self.lock:
                    self.events.append((time.monotonic(), "read", -1, "body differs", None))
            time.sleep(0.005)


class PostgresFailoverTest(SluiceTestCase):
    SETTINGS = {"insert-timeout": "2s", "meta-get-timeout": "2s", "read-budget": "5s",
                "create-budget": "8s", "ip-create-rate": "100000", "ip-create-burst": "100000",
                "meta-read-connections": "4", "meta-write-connections": "4",
                **({"breaker-open-for": BREAKER_OPEN_FOR} if BREAKER_OPEN_FOR else {})}

    def start_fleet(self, cluster):
        shared_blobs = tempfile.mkdtemp(prefix="sluice-shared-")
        self.addCleanup(shutil.rmtree, shared_blobs, ignore_errors=True)
        args = [a for k, v in self.SETTINGS.items() for a in (f"--{k}", v)]
        servers = [self.server(["--meta", cluster.url, *args], data_dir=shared_blobs)
                   for _ in range(2)]
        for s in servers:
            with_write_pool_warm(s)
        return servers

    def fail_over(self, mode):
        cluster = Cluster(mode)
        self.addCleanup(cluster.stop)
        servers = self.start_fleet(cluster)
        loads = [Load(s, f"p{i}", servers[1 - i]) for i, s in enumerate(servers)]
        for load in loads:
            load.start()
        time.sleep(2.0)
        killed_at = time.monotonic()
        script("pause", cluster.primary)
        # The promotion starts once each process has seen the failover and opened its breaker, as
        # it has when a failover manager takes a moment to decide (Patroni: its ttl). That is the
        # case the recovery bar is about: what the breaker adds after the promotion. Promoted at
        # once, a process sometimes met the new primary before its breaker opened at all.
        seen_open = set()

        def breakers_open():
            for i, s in enumerate(servers):
                if metric(s.metrics(), "sluice_breaker_state", dependency="meta") == 1:
                    seen_open.add(i)
            return len(seen_open) == len(servers)
        wait_until(breakers_open, timeout=30, interval=0.02, message="both breakers open")
        script("promote", cluster.standby)
        promoted_at = time.monotonic()
        # Until both processes have answered a create 201 on the new primary, then a little more.
        deadline = promoted_at + 30
        first_201 = [None, None]
        while time.monotonic() < deadline and None in first_201:
            for i, load in enumerate(loads):
                with load.lock:
                    for e in load.events:
                        if e[1] == "create" and e[2] == 201 and e[0] > promoted_at:
                            first_201[i] = e[0]
                            break
            time.sleep(0.05)
        time.sleep(1.0)
        for load in loads:
            load.join()

        events = [e for load in loads for e in load.events]
        created = [c for load in loads for c in load.created]
        refused = [e for e in events if e[1] == "create" and e[2] == 503]
        window = (max(e[0] for e in refused) - min(e[0] for e in refused)) if refused else 0.0
        on_new = cluster.ids_on_new_primary()
        lost = [pid for pid, _ in created if pid not in on_new]
        figures = {
            "mode": mode,
            "acknowledged": len(created),
            "lost": len(lost),
            "create_503s": len(refused),
            "503_window_s": round(window, 2),
            "kill_to_promoted_s": round(promoted_at - killed_at, 2),
            "first_201_after_promotion_s": [None if t is None else round(t - promoted_at, 2)
                                            for t in first_201],
            "breaker_open_for": BREAKER_OPEN_FOR or "default",
            "reasons": {r: sum(1 for e in events if e[2] == 503 and e[3] == r)
                        for r in sorted({e[3] for e in events if e[2] == 503})},
        }
        print(f"\nfailover figures: {figures}", flush=True)
        report = os.environ.get("SLUICE_FAILOVER_REPORT")
        if report:
            with open(report, "a", encoding="utf-8") as f:
                f.write(f"{figures}\n")
        return cluster, servers, loads, events, created, lost, first_201, promoted_at

    def assertFailoverAnswers(self, events, lost=()):
        """`lost`: pastes acknowledged on the old primary that the new one never received (an
        asynchronous standby); a read of one after the promotion is honestly 404."""
        for e in events:
            t, kind, status, reason = e[:4]
            self.assertNotEqual(status, -1, "a read gave another body")
            self.assertNotEqual(status, 0, f"{kind}: connection failed: {reason}")
            if kind == "create":
                self.assertIn(status, (201, 503), e)
            elif status == 404:
                self.assertIn(e[5], lost, f"a read of a paste the new primary has: {e}")
            else:
                self.assertIn(status, (200, 503), e)  # every other paste read exists
            if status == 503:
                self.assertIn(reason, FAILOVER_REASONS, e)
                self.assertTrue(e[4], f"503 without Retry-After: {e}")

    def test_synchronous_standby_loses_no_acknowledged_paste(self):
        cluster, servers, loads, events, created, lost, first_201, promoted_at = \
            self.fail_over("sync")
        self.assertFailoverAnswers(events)
        self.assertGreater(len(created), 20, "too little traffic to say anything")
        self.assertEqual(lost, [], "acknowledged pastes missing on the new primary")
        for i, t in enumerate(first_201):
            self.assertIsNotNone(t, f"process {i} served no create on the new primary")
            if not BREAKER_OPEN_FOR:
                self.assertLess(t - promoted_at, RECOVERY_LIMIT, f"process {i} recovered late")
        self.assertFalse([e for e in events if e[2] == 500], "a 500 during the failover")
        # Read back byte-identical from both processes, without a restart.
        for s in servers:
            for paste_id, body in created:
                res = s.get(f"/raw/{paste_id}")
                self.assertStatus(res, 200)
                self.assertEqual(res.body, body, paste_id)

    def test_asynchronous_standby_answers_honestly_and_reports_what_it_lost(self):
        # With an asynchronous standby a promotion may lose the last commits: the figure is the
        # point (printed); what must hold is the answers' honesty and the recovery.
        cluster, servers, loads, events, created, lost, first_201, promoted_at = \
            self.fail_over("async")
        self.assertFailoverAnswers(events, lost=set(lost))
        for i, t in enumerate(first_201):
            self.assertIsNotNone(t, f"process {i} served no create on the new primary")
            if not BREAKER_OPEN_FOR:
                self.assertLess(t - promoted_at, RECOVERY_LIMIT, f"process {i} recovered late")
        self.assertFalse([e for e in events if e[2] == 500], "a 500 during the failover")
        lost_set = set(lost)
        for paste_id, body in created:
            if paste_id in lost_set:
                continue
            res = servers[0].get(f"/raw/{paste_id}")
            self.assertStatus(res, 200)
            self.assertEqual(res.body, body, paste_id)


class LossyFailoverTest(SluiceTestCase):
    """An asynchronous promotion that loses an acknowledged paste, made to happen: the standby's
    walreceiver is stopped (SIGSTOP) before the paste is created, the primary's postmaster and the
    walreceiver are killed -9, and the standby is promoted without it. The paste's row is gone;
    both processes still hold it in memory, a because it created it, b because it read it. Its
    creator's delete cannot be checked (the token's hash was in the row), so it is 404; what must
    hold is that the paste stops being served (src/service/paste_service_delete.cc, ForgetRowless)."""

    # a trusts its memory for an hour, so only the delete can make it stop serving the paste; b
    # for the default 5 s, after which it asks the new primary, which has no row.
    A_TTL, B_TTL = "1h", "5s"

    def test_the_creators_delete_of_a_paste_the_promotion_lost_takes_it_down_everywhere(self):
        cluster = Cluster("async")
        self.addCleanup(cluster.stop)
        shared_blobs = tempfile.mkdtemp(prefix="sluice-shared-")
        self.addCleanup(shutil.rmtree, shared_blobs, ignore_errors=True)
        settings = [a for k, v in PostgresFailoverTest.SETTINGS.items() for a in (f"--{k}", v)]
        a, b = (self.server(["--meta", cluster.url, *settings, "--local-cache-ttl", ttl],
                            data_dir=shared_blobs) for ttl in (self.A_TTL, self.B_TTL))
        for s in (a, b):
            with_write_pool_warm(s)
        kept = a.create_ok(b"replicated before the stall")
        wait_until(lambda: kept["id"] in cluster.ids_on_new_primary(), message="replicated")

        # The walreceiver may be between connections (it restarts on its own): wait for its pid.
        receiver = int(wait_until(lambda: psql(cluster.standby_url,
                                               "SELECT pid FROM pg_stat_wal_receiver"),
                                  message="a walreceiver running"))
        os.kill(receiver, signal.SIGSTOP)
        lost = a.create_ok(b"acknowledged, then lost by the promotion")
        for _ in range(2):  # the second read is from b's memory
            self.assertStatus(b.get(f"/raw/{lost['id']}"), 200)
        with open(os.path.join(cluster.primary, "data", "postmaster.pid")) as f:
            os.kill(int(f.readline()), signal.SIGKILL)
        # The WAL it had buffered dies with it. SIGKILL ends a stopped process too, and nothing
        # may follow it: the standby's postmaster reaps the pid at once, and a SIGCONT sent after
        # it raised ProcessLookupError whenever this process lost the CPU between the two calls.
        os.kill(receiver, signal.SIGKILL)
        with open(os.path.join(cluster.standby, "port")) as f:
            port = f.read().strip()
        wait_until(lambda: subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1", "-p", port])
                   .returncode == 0, timeout=60, message="standby back after its walreceiver died")
        script("promote", cluster.standby)
        on_new = cluster.ids_on_new_primary()
        self.assertIn(kept["id"], on_new)
        if lost["id"] in on_new:
            self.skipTest("the standby received the paste after all: nothing was lost to test")

        self.assertStatus(a.get(f"/raw/{lost['id']}"), 200)  # from a's memory: the finding
        # A delete waits out the failover's 503s (retrying a delete is harmless), then says 404:
        # the row, and with it the token's hash, is gone.
        res = wait_until(lambda: (r := a.delete(lost["id"], token=lost["delete_token"])).status
                         != 503 and r, timeout=30, message="a delete answered by the new primary")
        self.assertJsonError(res, 404)
        self.assertJsonError(a.get(f"/raw/{lost['id']}"), 404)
        deleted_at = time.monotonic()
        wait_until(lambda: b.get(f"/raw/{lost['id']}").status == 404, timeout=5 + 10,
                   message="b stops serving the lost paste within its local_cache_ttl")
        print(f"\nlost paste served by b {time.monotonic() - deleted_at:.2f} s after the delete "
              f"on a (local_cache_ttl {self.B_TTL})", flush=True)
        for s in (a, b):
            self.assertStatus(s.get(f"/raw/{kept['id']}"), 200)


def psql(url, sql):
    return subprocess.run(["psql", url, "-tAc", sql], check=True, capture_output=True, text=True,
                          timeout=30).stdout.strip()


if __name__ == "__main__":
    unittest.main()
