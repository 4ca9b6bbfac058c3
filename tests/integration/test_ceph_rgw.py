"""sluice on a real S3: Ceph's RADOS Gateway in front of a one-node cluster
(scripts/testenv/ceph-rgw.sh), the bodies in the bucket, the rows in the embedded SQLite.

What must hold when the gateway goes away under creates, killed or stopped, and comes back: every
create answers 201 or 503 (with Retry-After, a JSON body and a reason that says why: the
connection refused or the breaker open for a killed gateway, the connection reset for a PUT it
was reading when it died, the PUT's deadline for a stopped one or for one just back and still
slow), never a 500 or a hang; creates
succeed again once the gateway is back, without a restart of sluice; and every paste that was
acknowledged with a 201 reads back byte for byte. RGW's own throttle (SlowDown) is a 503 that
says so. The expiry sweep removes expired bodies from the bucket (one DeleteObjects request a
batch) and leaves the others.

The cluster is the CTest fixture's (backend.ceph_rgw_start; its folder in
SLUICE_TEST_CEPH_RGW_DIR), or, run by hand, one this suite starts in a temporary folder and stops.
Skipped only where Ceph's packages (or python3-botocore, which signs the suite's own requests to
the bucket) are missing.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_ceph_rgw
"""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import unittest
import urllib.error
import urllib.parse
import urllib.request

from sluice_harness import SluiceTestCase, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.normpath(os.path.join(HERE, "..", "..", "scripts", "testenv", "ceph-rgw.sh"))
PREFIX = "pastes/"

try:
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
except ImportError:
    S3SigV4Auth = None

MISSING = [tool for tool in ("ceph", "ceph-mon", "ceph-osd", "ceph-mgr", "radosgw", "radosgw-admin")
           if shutil.which(tool) is None]


class CephRgw:
    """The cluster of a ceph-rgw.sh folder: its endpoint, keys and bucket, the gateway's pid, and
    signed requests of the suite's own to the bucket."""

    def __init__(self, directory, owned):
        self.dir = directory
        self.owned = owned

        def read(name):
            with open(os.path.join(directory, name), encoding="ascii") as f:
                return f.read().strip()

        self.endpoint = read("endpoint")
        self.bucket = read("bucket")
        self.access_key = read("access_key")
        self.secret_key = read("secret_key")
        self.defaults = {}  # options set_gateway_option changed: their values before

    @classmethod
    def for_class(cls, test_class):
        """The fixture's cluster if there is one, else a new one stopped after the class."""
        fixture = os.environ.get("SLUICE_TEST_CEPH_RGW_DIR")
        if fixture and os.path.exists(os.path.join(fixture, "endpoint")):
            return cls(fixture, owned=False)
        directory = tempfile.mkdtemp(prefix="sluice-ceph-")
        cluster = None
        try:
            subprocess.run([SCRIPT, "start", directory, "0"], check=True, capture_output=True,
                           text=True, timeout=300)
            cluster = cls(directory, owned=True)
        finally:
            if cluster is None:
                subprocess.run([SCRIPT, "stop", directory], timeout=120, check=False)
                shutil.rmtree(directory, ignore_errors=True)
        test_class.addClassCleanup(cluster.stop)
        return cluster

    def stop(self):
        subprocess.run([SCRIPT, "stop", self.dir], timeout=120, check=True)
        if self.owned:
            shutil.rmtree(self.dir, ignore_errors=True)

    def gateway_pid(self):
        with open(os.path.join(self.dir, "radosgw.pid"), encoding="ascii") as f:
            return int(f.read())

    def kill_gateway(self):
        pid = self.gateway_pid()
        os.kill(pid, signal.SIGKILL)
        # Gone when its parent (the shell of ceph-rgw.sh start, long exited; init reaps it) has
        # reaped it, or at least when it is a zombie that holds no socket.
        wait_until(lambda: not _alive(pid), timeout=30, message="the killed gateway gone")

    def start_gateway(self):
        subprocess.run([SCRIPT, "start-gateway", self.dir], check=True, capture_output=True,
                       text=True, timeout=180)

    def gateway_option(self, name):
        """The value the running gateway uses, asked through its admin socket."""
        out = subprocess.run(["ceph", "--admin-daemon",
                              os.path.join(self.dir, "run", "client.rgw.a.asok"), "config", "get",
                              name], check=True, capture_output=True, text=True, timeout=60).stdout
        return json.loads(out)[name]

    def set_gateway_option(self, name, value):
        """Sets a gateway option at run time in the monitor's configuration (None: removes it,
        back to what it was), and waits until the gateway uses it: the monitor sends it on its
        own time."""
        conf = ["ceph", "--conf", os.path.join(self.dir, "ceph.conf")]
        if value is None:
            if name not in self.defaults:
                return  # never set, or put back already
            subprocess.run(conf + ["config", "rm", "client.rgw.a", name], check=True,
                           capture_output=True, text=True, timeout=60)
            value = self.defaults.pop(name)
        else:
            self.defaults.setdefault(name, self.gateway_option(name))
            subprocess.run(conf + ["config", "set", "client.rgw.a", name, str(value)], check=True,
                           capture_output=True, text=True, timeout=60)
        wait_until(lambda: self.gateway_option(name) == str(value), timeout=60,
                   message=f"the gateway using {name} = {value}")

    def request(self, method, path, query=""):
        """A signed request to the bucket; returns (status, body)."""
        url = f"{self.endpoint}/{self.bucket}{path}" + (f"?{query}" if query else "")
        signed = AWSRequest(method=method, url=url, data=b"")
        S3SigV4Auth(Credentials(self.access_key, self.secret_key), "s3",
                    "us-east-1").add_auth(signed)
        prepared = urllib.request.Request(url, method=method, headers=dict(signed.headers.items()))
        try:
            with urllib.request.urlopen(prepared, timeout=30) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def keys(self, prefix=PREFIX):
        """Every key under `prefix`, through ListObjectsV2's continuation tokens."""
        out = []
        token = None
        while True:
            query = {"list-type": "2", "prefix": prefix}
            if token:
                query["continuation-token"] = token
            status, body = self.request("GET", "", urllib.parse.urlencode(
                sorted(query.items()), quote_via=urllib.parse.quote))
            if status != 200:
                raise AssertionError(f"listing the bucket answered {status}: {body!r}")
            text = body.decode()
            out += re.findall(r"<Key>([^<]*)</Key>", text)
            token_match = re.search(r"<NextContinuationToken>([^<]*)</NextContinuationToken>",
                                    text)
            if "<IsTruncated>true</IsTruncated>" not in text or not token_match:
                return out
            token = token_match.group(1)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


@unittest.skipIf(MISSING, f"Ceph is not installed ({', '.join(MISSING)} missing; "
                          "scripts/install-deps.sh test installs it)")
@unittest.skipIf(S3SigV4Auth is None, "python3-botocore is not installed")
class CephRgwTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.rgw = CephRgw.for_class(cls)

    def sluice(self, *extra):
        # No paste cache, so every read goes to the bucket. The breaker opens after 5 refused
        # connections and stays open 1 s (not 5): a test waits for the gateway's return, not for
        # the breaker's window.
        args = ["--blob", f"s3://{self.rgw.bucket}", "--s3-endpoint", self.rgw.endpoint,
                "--cache-bytes", "0", "--breaker-open-for", "1s", *extra]
        env = {"AWS_ACCESS_KEY_ID": self.rgw.access_key,
               "AWS_SECRET_ACCESS_KEY": self.rgw.secret_key, "AWS_REGION": "us-east-1"}
        return self.server(args=args, env=env)

    def tearDown(self):
        # A test that failed half-way must not leave the next one a stopped or dead gateway.
        try:
            os.kill(self.rgw.gateway_pid(), signal.SIGCONT)
        except (OSError, ValueError):
            pass
        if not _alive(self.rgw.gateway_pid()):
            self.rgw.start_gateway()
        super().tearDown()

    def assertRefusedFor(self, res, reasons):
        doc = self.assertJsonError(res, 503)
        self.assertIn(doc["reason"], reasons, doc)
        self.assertIsNotNone(res.header("Retry-After"), res)
        self.assertGreaterEqual(int(res.header("Retry-After")), 1, res)

    def assertInBucket(self, ids):
        missing = {PREFIX + i for i in ids} - set(self.rgw.keys())
        self.assertEqual(missing, set(), "bodies not in the bucket under pastes/<id>")

    def assertAllRead(self, s, acknowledged):
        for paste_id, body in acknowledged.items():
            res = s.get(f"/raw/{paste_id}")
            self.assertStatus(res, 200)
            self.assertEqual(hashlib.sha256(res.body).hexdigest(),
                             hashlib.sha256(body.encode()).hexdigest(),
                             f"/raw/{paste_id} is not the body that was acknowledged")

    # ---- the contract on a real S3 ---------------------------------------------------------
    def test_pastes_of_every_size_read_back_and_land_under_the_prefix(self):
        s = self.sluice()
        bodies = {"one byte": "x", "a line": "hello, Ceph\n",
                  "utf-8": "ünïcødé ✓ " * 100, "most of a megabyte": "0123456789abcdef" * 60000}
        ids = {}
        for name, body in bodies.items():
            with self.subTest(body=name):
                ids[s.create_ok(body)["id"]] = body
        self.assertAllRead(s, ids)
        self.assertInBucket(ids)

    # ---- the gateway goes away under creates, and comes back --------------------------------
    def run_creates_while(self, s, outage, refused_reasons):
        """Creates from 4 clients, one after another each, from before `outage()` until after
        it: returns {id: body} of every 201 and the reasons of the 503s, and fails on any answer
        but 201 or a 503 with one of `refused_reasons`."""
        acknowledged = {}
        refused = []
        wrong = []
        stop = threading.Event()
        lock = threading.Lock()

        def client(n):
            i = 0
            while not stop.is_set():
                body = f"client {n} paste {i} " + "b" * (i % 7) * 100
                i += 1
                res = s.create(body, timeout=60)
                with lock:
                    if res.status == 201:
                        acknowledged[res.json()["id"]] = body
                    elif res.status == 503:
                        refused.append(res)
                    else:
                        wrong.append(res)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        try:
            wait_until(lambda: len(acknowledged) >= 20, timeout=60,
                       message="creates acknowledged before the outage")
            outage(lambda: len(refused), lambda: len(acknowledged))
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=120)
        self.assertEqual(wrong, [], "every create answers 201 or 503")
        self.assertGreater(len(refused), 0, "no create was refused while the gateway was away")
        for res in refused:
            self.assertRefusedFor(res, refused_reasons)
        return acknowledged, {res.json()["reason"] for res in refused}

    def test_a_killed_gateway_makes_creates_503_and_none_acknowledged_is_lost(self):
        s = self.sluice()

        def outage(refused, acknowledged):
            self.rgw.kill_gateway()
            wait_until(lambda: refused() >= 10, timeout=60,
                       message="creates refused while the gateway is dead")
            self.rgw.start_gateway()
            after = acknowledged()
            wait_until(lambda: acknowledged() >= after + 20, timeout=60,
                       message="creates acknowledged again once the gateway is back")

        # A PUT in flight when the gateway dies has its connection reset: storage_unavailable
        # (its body may or may not have landed; no row is written, and the reaper removes it).
        # The creates after it find nothing listening: connection_refused, then breaker_open.
        # A gateway just started answers its first requests slowly (6.7 s for a PUT here, on a
        # busy machine): past the PUT's timeout that is deadline_exceeded.
        acknowledged, reasons = self.run_creates_while(
            s, outage,
            {"connection_refused", "breaker_open", "storage_unavailable", "deadline_exceeded"})
        self.assertTrue(reasons & {"connection_refused", "breaker_open"}, reasons)
        self.assertAllRead(s, acknowledged)
        self.assertInBucket(acknowledged)

    def test_a_stopped_gateway_makes_creates_503_at_their_deadline_and_none_is_lost(self):
        # The PUT's own timeout, 1 s (the design's), rather than the harness's patient 5 s.
        s = self.sluice("--put-timeout", "1s")
        pid = self.rgw.gateway_pid()

        def outage(refused, acknowledged):
            os.kill(pid, signal.SIGSTOP)
            try:
                wait_until(lambda: refused() >= 4, timeout=60,
                           message="creates refused while the gateway is stopped")
            finally:
                os.kill(pid, signal.SIGCONT)
            after = acknowledged()
            wait_until(lambda: acknowledged() >= after + 20, timeout=60,
                       message="creates acknowledged again once the gateway runs")

        acknowledged, _ = self.run_creates_while(s, outage, {"deadline_exceeded"})
        self.assertAllRead(s, acknowledged)

    # ---- RGW's own throttle ----------------------------------------------------------------
    def test_the_gateway_throttling_makes_creates_503_slow_down_and_the_rest_read_back(self):
        # Past rgw_max_concurrent_requests RGW answers 503 SlowDown (what AWS answers a client
        # that exceeds a prefix's request rate): a dependency's refusal, never a 500, and named.
        s = self.sluice()
        self.rgw.set_gateway_option("rgw_max_concurrent_requests", 1)
        self.addCleanup(self.rgw.set_gateway_option, "rgw_max_concurrent_requests", None)
        answers = []
        lock = threading.Lock()

        def client(n):
            for i in range(10):
                body = f"client {n} paste {i} " + "t" * 100000
                res = s.create(body, timeout=60)
                with lock:
                    answers.append((res, body))

        threads = [threading.Thread(target=client, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        refused = [res for res, _ in answers if res.status != 201]
        self.assertGreater(len(refused), 0, "the gateway never throttled")
        for res in refused:
            self.assertRefusedFor(res, {"storage_slow_down"})
        self.rgw.set_gateway_option("rgw_max_concurrent_requests", None)
        self.assertAllRead(s, {res.json()["id"]: body for res, body in answers
                               if res.status == 201})

    # ---- the expiry sweep ------------------------------------------------------------------
    def test_the_sweep_removes_expired_bodies_from_the_bucket_and_keeps_the_others(self):
        s = self.sluice("--sweep-interval", "100ms")
        expired = [s.create_ok(f"expired {i}", ttl="10m")["id"] for i in range(12)]
        kept = {s.create_ok(f"kept {i}", ttl="10m")["id"]: f"kept {i}" for i in range(3)}
        self.assertInBucket(expired + list(kept))
        s.stop()
        for paste_id in expired:
            self.assertEqual(s.execute("UPDATE pastes SET expires_at = 0 WHERE id = ?",
                                       (paste_id,)), 1)
        s.start()
        wait_until(lambda: not {PREFIX + i for i in expired} & set(self.rgw.keys()), timeout=60,
                   message="expired bodies removed from the bucket")
        self.assertInBucket(kept)
        for paste_id, body in kept.items():
            self.assertEqual(s.get(f"/raw/{paste_id}").text, body)
        # One DeleteObjects for the batch, which RGW implements: the store never fell back.
        self.assertNotIn("does not implement DeleteObjects", s.log())


if __name__ == "__main__":
    unittest.main()
