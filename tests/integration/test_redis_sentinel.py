"""sluice under Redis Sentinel (`--cache redis+sentinel://S1,S2,S3/mymaster`): it finds the master
through the sentinels, and across a failover (`SENTINEL FAILOVER`, then the new master killed) it
never crashes and never answers 5xx: the limiter fails open while no master answers (the rule of
docs/overload.md for a lost Redis) and comes back on the new master by itself.

The servers are started by scripts/testenv/redis-sentinel.sh (a master, two replicas, three
sentinels on loopback); missing redis-server fails the test rather than skips it. Timings are not
asserted tightly: the limiter must be back within RECOVERY_LIMIT seconds of each event (the figures
seen are in bench/results/redis-sentinel.md); SLUICE_SENTINEL_FIGURES=FILE writes them as JSON.
"""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

from promtext import metric
from sluice_harness import SluiceTestCase, free_port, wait_until

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "testenv",
                      "redis-sentinel.sh")
# Sentinel needs down-after-milliseconds (1 s here) to see a dead master, an election and the
# promotion; sluice then its reconnect back-off (at most 2 s). Generous, for a busy machine.
RECOVERY_LIMIT = 30.0
# Refills so slowly (one token in about 15 minutes) that nothing comes back during a test.
SLOW = "0.001"
BURST = 100000


class Sentinels:
    """A master, replicas and three sentinels in a temporary folder."""

    def __init__(self, replicas=2, tls=False):
        self.root = tempfile.mkdtemp(prefix="sluice-sentinel-")
        self.replicas = replicas
        self.tls = tls
        self.cli = []

    def start(self):
        done = subprocess.run(["bash", SCRIPT, "start-tls" if self.tls else "start", self.root,
                               str(self.replicas)],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise AssertionError(f"sentinel setup did not start: {done.stderr}{done.stdout}")
        with open(os.path.join(self.root, "url")) as f:
            self.url = f.read().strip()
        with open(os.path.join(self.root, "cli-options")) as f:
            self.cli = [line for line in f.read().splitlines() if line]
        self.ca_file = os.path.join(self.root, "ca.pem")
        return self

    def stop(self):
        subprocess.run(["bash", SCRIPT, "stop", self.root], capture_output=True, timeout=120)
        shutil.rmtree(self.root, ignore_errors=True)

    def sentinel(self, *args, which=1):
        with open(os.path.join(self.root, f"sentinel{which}", "port")) as f:
            port = f.read().strip()
        return subprocess.run(["redis-cli", *self.cli, "-p", port, *args], capture_output=True,
                              text=True, timeout=10).stdout.split()

    def master_port(self):
        return int(self.sentinel("sentinel", "get-master-addr-by-name", "mymaster")[1])

    def redis(self, port, *args):
        return subprocess.run(["redis-cli", *self.cli, "-p", str(port), *args],
                              capture_output=True, text=True, timeout=10).stdout.strip()

    def replicas_caught_up(self, n):
        """The master has `n` replicas online, each acknowledging within the last second (the
        offsets never match exactly under steady writes)."""
        info = dict(line.split(":", 1) for line in
                    self.redis(self.master_port(), "info", "replication").splitlines()
                    if ":" in line)
        offsets = [dict(kv.split("=") for kv in v.split(",")) for k, v in info.items()
                   if k.startswith("slave") and k[5:].isdigit()]
        return (len(offsets) == n and all(o["state"] == "online" for o in offsets)
                and all(int(o["lag"]) <= 1 for o in offsets))

    def kill_master(self):
        """SIGKILL of the master's redis-server, found by its port among our own pid files."""
        port = self.master_port()
        for name in os.listdir(self.root):
            d = os.path.join(self.root, name)
            try:
                with open(os.path.join(d, "port")) as f:
                    if int(f.read()) != port:
                        continue
                with open(os.path.join(d, "redis.pid")) as f:
                    pid = int(f.read())
            except (OSError, ValueError):
                continue
            os.kill(pid, 9)
            return port
        raise AssertionError(f"no pid file for the master on port {port}")


def forwarded(client):
    return {"X-Forwarded-For": client}


class Load:
    """Steady creates (each from a new client key, so the per-client limits never refuse) and
    reads of what was created, in one thread: every status with its time."""

    def __init__(self, server):
        self.server = server
        self.statuses = []  # (monotonic time, kind, status)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        i = 0
        ids = []
        while not self.stop.is_set():
            i += 1
            res = self.server.create(b"load %d" % i, headers=forwarded(f"10.50.{i // 250}.{i % 250}"))
            self.statuses.append((time.monotonic(), "create", res.status))
            if res.status == 201:
                ids.append(res.json()["id"])
            if ids:
                res = self.server.get(f"/api/v1/pastes/{ids[i % len(ids)]}")
                self.statuses.append((time.monotonic(), "read", res.status))
            time.sleep(0.005)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=30)


class RedisSentinelTest(SluiceTestCase):
    def setUp(self):
        super().setUp()
        self.sentinels = Sentinels().start()
        self.addCleanup(self.sentinels.stop)

    def limiter_answers(self, server, probe):
        """A create's limiter call went to a master (a replica refuses the write: fail-open)."""
        server.create(b"probe", headers=forwarded(probe))
        return metric(server.metrics(), "sluice_limiter_fail_open") == 0

    probes = 0

    def limiter_on_master(self, server):
        """A create from a fresh client key was decided by the master the sentinels name now (its
        bucket is there). Between a promotion and the old master's demotion, the old one still
        takes writes: limiter_answers alone would count those."""
        RedisSentinelTest.probes += 1
        ip = f"10.9.{RedisSentinelTest.probes}.77"
        if not RedisSentinelTest.limiter_answers(self, server, ip):
            return False
        found = self.sentinels.redis(self.sentinels.master_port(), "--scan", "--pattern", f"*{ip}*")
        return ip in found

    def available(self, server, client):
        doc = server.get("/api/v1/limits", headers=forwarded(client)).json()
        self.assertEqual(doc["buckets_from"], "shared_store", doc)
        return doc["buckets"]["ip_create_count"]["available"]

    def spend_until(self, server, client, event):
        """Creates from one client key until `event` is set: how many were answered (any status)
        before it was set, as the server saw them through the shared store."""
        n = 0
        while not event.is_set():
            server.create(b"spend", headers=forwarded(client))
            n += 1
        return n

    def test_finds_the_master_and_follows_failovers(self):
        figures = {}
        # A budget no busy test machine overruns: a call past the production 5 ms would fail open
        # and leave the spent token uncounted, which would read as state lost in the failover.
        server = self.server(["--trusted-proxy", "127.0.0.1", "--ip-create-burst", str(BURST),
                              "--ip-create-rate", SLOW, "--cache-timeout", "1s"],
                             cache=self.sentinels.url)
        wait_until(lambda: self.limiter_answers(server, "10.9.0.1"), timeout=RECOVERY_LIMIT,
                   message="limiter on the master the sentinels named")
        first = self.sentinels.master_port()
        # The limiter's state is on that master.
        self.assertEqual([server.create(b"x", headers=forwarded("10.4.0.1")).status
                          for _ in range(4)], [201] * 4)
        self.assertEqual(self.available(server, "10.4.0.1"), BURST - 4)
        self.assertGreater(int(self.sentinels.redis(first, "dbsize")), 0)

        with Load(server) as load:
            time.sleep(1.0)
            # 1. A failover asked of the sentinels, the old master alive and demoted to a replica.
            self.spend(server, "10.61.0.1", 50)
            time.sleep(0.5)  # replication on loopback: well caught up
            idle_before = self.available(server, "10.61.0.1")
            t0 = time.monotonic()
            self.assertEqual(self.sentinels.sentinel("sentinel", "failover", "mymaster"), ["OK"])
            wait_until(lambda: self.sentinels.master_port() != first, timeout=RECOVERY_LIMIT,
                       message="the sentinels' new master")
            figures["failover_switch_s"] = time.monotonic() - t0
            wait_until(lambda: self.limiter_on_master(server), timeout=RECOVERY_LIMIT,
                       interval=0.02, message="limiter back after SENTINEL FAILOVER")
            figures["failover_limiter_back_s"] = time.monotonic() - t0
            second = self.sentinels.master_port()
            self.assertNotEqual(second, first)
            figures["failover_tokens_lost_idle_key"] = (
                self.available(server, "10.61.0.1") - idle_before)

            # 2. The master killed under steady spending of one key: what it had not yet passed on
            # to a replica is lost. First the replicas settle on the new master: killed while one
            # was still being reconfigured, a master loses more (see docs/scale-out.md).
            t_settle = time.monotonic()
            wait_until(lambda: self.sentinels.replicas_caught_up(2), timeout=RECOVERY_LIMIT,
                       interval=0.1, message="both replicas following the new master")
            figures["failover_replicas_settled_s"] = time.monotonic() - t_settle
            client = "10.62.0.1"
            stop = threading.Event()
            counted = []
            spender = threading.Thread(
                target=lambda: counted.append(self.spend_until(server, client, stop)))
            spender.start()
            time.sleep(1.0)
            stop.set()
            spender.join()
            # What the master holds the instant before it dies; the last writes are milliseconds
            # old, so whatever a replica had not yet received is what a crash loses.
            busy_before = self.available(server, client)
            t1 = time.monotonic()
            self.sentinels.kill_master()
            wait_until(lambda: self.sentinels.master_port() != second, timeout=RECOVERY_LIMIT,
                       message="the sentinels' master after the kill")
            figures["kill_switch_s"] = time.monotonic() - t1
            wait_until(lambda: self.limiter_on_master(server), timeout=RECOVERY_LIMIT,
                       interval=0.02, message="limiter back after the master was killed")
            figures["kill_limiter_back_s"] = time.monotonic() - t1
            figures["kill_tokens_lost_busy_key"] = self.available(server, client) - busy_before
            figures["kill_spent_before"] = counted[0]
            time.sleep(1.0)

        statuses = load.statuses
        fivexx = [(k, s) for _, k, s in statuses if s >= 500]
        figures["requests"] = len(statuses)
        figures["5xx"] = len(fivexx)
        figures["statuses"] = sorted({s for _, _, s in statuses})
        m = server.metrics()
        figures["fail_open_decisions"] = metric(m, "sluice_shared_limit_decisions_total",
                                                outcome="fail_open")
        print("sentinel figures:", json.dumps(figures, indent=1))
        if os.environ.get("SLUICE_SENTINEL_FIGURES"):
            with open(os.environ["SLUICE_SENTINEL_FIGURES"], "w") as f:
                json.dump(figures, f, indent=1)

        self.assertEqual(fivexx, [], "no 5xx across the failovers")
        # Creates from fresh keys are admitted (fail-open) or, only by the global cap, refused.
        self.assertLessEqual({s for _, k, s in statuses if k == "create"}, {201, 429})
        self.assertEqual({s for _, k, s in statuses if k == "read"}, {200})
        self.assertTrue(server.running())
        # Replication is asynchronous: Redis promises no bound, so only the sense of the figures is
        # asserted (tokens handed back, never more than were spent); the figures are recorded.
        self.assertGreaterEqual(figures["failover_tokens_lost_idle_key"], 0)
        self.assertLessEqual(figures["failover_tokens_lost_idle_key"], 50)
        self.assertGreaterEqual(figures["kill_tokens_lost_busy_key"], 0)
        self.assertLessEqual(figures["kill_tokens_lost_busy_key"], figures["kill_spent_before"])

    def spend(self, server, client, n):
        for _ in range(n):
            self.assertEqual(server.create(b"s", headers=forwarded(client)).status, 201)
        return n

    def test_an_unknown_master_name_is_not_a_connection(self):
        url = self.sentinels.url.replace("/mymaster", "/nosuchmaster")
        server = self.server(["--trusted-proxy", "127.0.0.1"], cache=url)
        self.assertEqual(server.create(b"x", headers=forwarded("10.1.0.1")).status, 201)
        wait_until(lambda: "does not know nosuchmaster" in server.log(), timeout=10,
                   message="the log says why")
        self.assertEqual(metric(server.metrics(), "sluice_limiter_fail_open"), 1)


class NoSentinelTest(SluiceTestCase):
    """Sentinel addresses where nothing listens: no sentinels are started for it."""

    def test_no_sentinel_answering_fails_open_and_says_why(self):
        dead = [free_port(), free_port()]
        url = "redis+sentinel://" + ",".join(f"127.0.0.1:{p}" for p in dead) + "/mymaster"
        server = self.server(["--trusted-proxy", "127.0.0.1"], cache=url)
        self.assertEqual(server.create(b"x", headers=forwarded("10.1.0.1")).status, 201)
        self.assertEqual(metric(server.metrics(), "sluice_limiter_fail_open"), 1)
        wait_until(lambda: "no sentinel named a master" in server.log(), timeout=10,
                   message="the log says why")


class RedisSentinelTlsTest(SluiceTestCase):
    """TLS everywhere and an ACL user: sluice authenticates to the sentinels and to the master, checks
    both certificates against --redis-ca-file, and follows an asked failover."""

    def setUp(self):
        super().setUp()
        self.sentinels = Sentinels(replicas=1, tls=True).start()
        self.addCleanup(self.sentinels.stop)

    def test_tls_and_auth_to_sentinels_and_master(self):
        server = self.server(["--trusted-proxy", "127.0.0.1", "--cache-timeout", "1s",
                              "--redis-ca-file", self.sentinels.ca_file], cache=self.sentinels.url)
        # The bucket is looked for on the master the sentinels name at that moment: on a loaded
        # machine a sentinel that missed a second of pings may have failed the master over
        # already, and a dbsize of the master named afterwards read 0 (the flake hunt).
        wait_until(lambda: RedisSentinelTest.limiter_on_master(self, server),
                   timeout=RECOVERY_LIMIT, message="limiter on the master over TLS")
        first = self.sentinels.master_port()
        # sluice's own lines (the harness writes the command line, password and all, first).
        own_lines = server.log().split("\n", 1)[1]
        self.assertNotIn(self.sentinels.url.split(":")[2].split("@")[0], own_lines)
        self.assertEqual(self.sentinels.sentinel("sentinel", "failover", "mymaster"), ["OK"])
        wait_until(lambda: self.sentinels.master_port() != first, timeout=RECOVERY_LIMIT,
                   message="the sentinels' new master")
        wait_until(lambda: RedisSentinelTest.limiter_on_master(self, server),
                   timeout=RECOVERY_LIMIT, message="limiter back on the new master over TLS")

    def test_a_sentinel_with_a_certificate_from_another_ca_is_refused(self):
        other = os.path.join(self.sentinels.root, "other-ca.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=some other CA", "-keyout", other + ".key", "-out", other],
                       check=True, capture_output=True)
        server = self.server(["--trusted-proxy", "127.0.0.1", "--redis-ca-file", other],
                             cache=self.sentinels.url)
        wait_until(lambda: "TLS handshake" in server.log(), timeout=10,
                   message="the sentinel's certificate refused")
        self.assertEqual(server.create(b"x", headers=forwarded("10.1.0.1")).status, 201)
        self.assertEqual(metric(server.metrics(), "sluice_limiter_fail_open"), 1)


if __name__ == "__main__":
    unittest.main()
