"""The chaos lab's fault proxy (tools/faultproxy/faultproxy.py), each fault measured at the socket.

The real program runs as a subprocess in front of an echo server on loopback; the test talks to it
through plain sockets and drives it through its control port. Timings are asserted only against the
fault's own size (an added 200 ms is measured >= 200 ms) with a generous upper bound, so a busy
machine cannot fail them.

Run: cd tests/integration && PYTHONPATH=../lib python3 -m unittest -v test_faultproxy
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "faultproxy"))
import faultproxy  # noqa: E402
from rawhttp import free_port  # noqa: E402

SLACK = 2.0  # upper bound on scheduling noise: only the lower bound is the fault's own size


class EchoServer:
    """Echoes every byte back on each connection; counts the connections it accepted."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn):
        with conn:
            try:
                while True:
                    data = conn.recv(65536)
                    if not data:
                        return
                    conn.sendall(data)
            except OSError:
                return

    def close(self):
        self.sock.close()


class FaultProxyTest(unittest.TestCase):
    def setUp(self):
        self.echo = EchoServer()
        self.addCleanup(self.echo.close)
        self.port = free_port()
        control = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "tools", "faultproxy", "faultproxy.py"), "serve",
             "--listen", f"127.0.0.1:{self.port}", "--upstream", f"127.0.0.1:{self.echo.port}",
             "--control", f"127.0.0.1:{control}", "--name", "test"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(self._stop)
        self.assertIn("faultproxy test", self.proc.stdout.readline())
        self.ctl = faultproxy.Client(f"127.0.0.1:{control}")

    def _stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.proc.stdout.close()

    def connect(self, timeout=5.0):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        self.addCleanup(s.close)
        return s

    def roundtrip(self, s, payload=b"ping"):
        """Seconds from sending `payload` to having it all back."""
        t0 = time.monotonic()
        s.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = s.recv(65536)
            self.assertTrue(chunk, "connection closed before the echo came back")
            got += chunk
        self.assertEqual(got, payload)
        return time.monotonic() - t0

    # ---- plain forwarding --------------------------------------------------------------------
    def test_forwards_bytes_both_ways_and_counts_them(self):
        s = self.connect()
        payload = os.urandom(300_000)
        self.assertLess(self.roundtrip(s, payload), SLACK)
        stats = self.ctl.stats()
        self.assertEqual((stats["bytes_up"], stats["bytes_down"]), (300_000, 300_000))
        self.assertEqual(stats["accepted"], 1)

    # ---- latency -----------------------------------------------------------------------------
    def test_latency_on_answers_adds_its_delay(self):
        s = self.connect()
        self.ctl.set(down={"latency_ms": 200})
        times = [self.roundtrip(s) for _ in range(3)]
        for t in times:
            self.assertGreaterEqual(t, 0.200, times)
            self.assertLess(t, 0.200 + SLACK, times)
        self.assertEqual(self.ctl.stats()["delayed_chunks_down"], 3)
        self.ctl.clear()
        self.assertLess(self.roundtrip(s), 0.200)

    def test_latency_on_requests_and_answers_adds_up(self):
        s = self.connect()
        self.ctl.set(up={"latency_ms": 150}, down={"latency_ms": 100})
        t = self.roundtrip(s)
        self.assertGreaterEqual(t, 0.250)
        self.assertLess(t, 0.250 + SLACK)

    def test_jitter_stays_within_its_range_and_keeps_order(self):
        s = self.connect()
        self.ctl.set(down={"latency_ms": 100, "jitter_ms": 100})
        times = [self.roundtrip(s, f"m{i}".encode()) for i in range(5)]
        for t in times:
            self.assertGreaterEqual(t, 0.100, times)
            self.assertLess(t, 0.200 + SLACK, times)
        # Many small writes at once: jitter never reorders bytes on one connection.
        payload = b"".join(f"[{i:04d}]".encode() for i in range(200))
        for i in range(200):
            s.sendall(f"[{i:04d}]".encode())
        got = b""
        while len(got) < len(payload):
            got += s.recv(65536)
        self.assertEqual(got, payload)

    def test_fraction_delays_only_that_share_of_chunks(self):
        s = self.connect()
        self.ctl.set(down={"latency_ms": 1, "fraction": 0.0})
        for _ in range(20):
            self.roundtrip(s)
        self.assertEqual(self.ctl.stats()["delayed_chunks_down"], 0)
        self.ctl.set(down={"latency_ms": 1, "fraction": 0.5})
        for _ in range(60):
            self.roundtrip(s)
        delayed = self.ctl.stats()["delayed_chunks_down"]
        self.assertGreater(delayed, 10)   # binomial(60, 0.5): outside [10, 50] about 1 in 10^7
        self.assertLess(delayed, 50)

    # ---- bandwidth ---------------------------------------------------------------------------
    def test_bandwidth_limit_caps_bytes_per_second(self):
        s = self.connect(timeout=15)
        self.ctl.set(down={"bandwidth": 64_000})
        t = self.roundtrip(s, os.urandom(128_000))
        # 128,000 bytes at 64,000 B/s: 2 s, less the first slice (1/20 s) that goes at once.
        self.assertGreaterEqual(t, 1.9)
        self.assertLess(t, 2.0 + SLACK)

    # ---- refusal -----------------------------------------------------------------------------
    def test_refuse_closes_the_listener_but_keeps_established_connections(self):
        s = self.connect()
        self.roundtrip(s)
        self.ctl.set(refuse=True)
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", self.port), timeout=5).close()
        self.roundtrip(s)  # established: still forwarded
        self.assertFalse(self.ctl.stats()["listening"])
        self.ctl.clear()
        self.roundtrip(self.connect())

    # ---- black hole --------------------------------------------------------------------------
    def test_blackhole_accepts_and_never_answers_then_delivers_held_bytes(self):
        old = self.connect()
        self.roundtrip(old)
        accepted_before = self.echo.accepted
        self.ctl.set(blackhole=True)
        new = self.connect(timeout=0.5)  # the connect itself succeeds
        new.sendall(b"anyone there?")
        with self.assertRaises(socket.timeout):
            new.recv(100)
        self.assertEqual(self.echo.accepted, accepted_before, "no upstream for a black-holed one")
        old.settimeout(0.5)
        old.sendall(b"held")
        with self.assertRaises(socket.timeout):
            old.recv(100)
        self.assertEqual(self.ctl.stats()["blackholed"], 1)
        self.ctl.clear()
        old.settimeout(5)
        self.assertEqual(old.recv(100), b"held")  # held, not lost
        new.settimeout(5)
        try:
            self.assertEqual(new.recv(100), b"")  # closed once the fault clears
        except ConnectionResetError:
            pass

    # ---- resets ------------------------------------------------------------------------------
    def test_reset_sends_rst_on_established_connections(self):
        a, b = self.connect(), self.connect()
        self.roundtrip(a)
        self.roundtrip(b)
        self.assertEqual(self.ctl.reset(), 2)
        for s in (a, b):
            with self.assertRaises(ConnectionResetError):
                s.sendall(b"x")
                s.recv(100)
        self.roundtrip(self.connect())  # new connections are fine

    def test_drop_resets_that_share_of_new_connections(self):
        self.ctl.set(drop=1.0)
        with self.assertRaises(ConnectionResetError):
            # On loopback the reset can come back before connect() returns, or after.
            s = self.connect()
            s.sendall(b"x")
            s.recv(100)
        self.ctl.set(drop=0.5)
        dropped = 0
        for _ in range(40):
            try:
                # On loopback the reset can come back before connect() returns.
                c = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            except ConnectionResetError:
                dropped += 1
                continue
            try:
                self.roundtrip(c)
            except (ConnectionResetError, AssertionError, BrokenPipeError):
                dropped += 1
            finally:
                c.close()
        self.assertEqual(self.ctl.stats()["dropped"], dropped + 1)
        self.assertGreater(dropped, 5)    # binomial(40, 0.5): outside [6, 34] about 1 in 10^5
        self.assertLess(dropped, 35)

    # ---- the control port --------------------------------------------------------------------
    def test_control_port_refuses_unknown_faults_with_400(self):
        for bad in ({"latncy": 1}, {"down": {"latency": 5}}, {"drop": 2}, {"up": {"fraction": -1}},
                    [1]):
            req = urllib.request.Request(self.ctl.base + "/faults", method="PUT",
                                         data=json.dumps(bad).encode())
            with self.assertRaises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=5)
            self.assertEqual(e.exception.code, 400, bad)
            self.assertIn("error", json.loads(e.exception.read()))
        self.assertEqual(self.ctl.stats()["faults_changed"], 0)
        self.roundtrip(self.connect())

    def test_only_loopback_addresses(self):
        with self.assertRaises(ValueError):
            faultproxy.parse_address("10.0.0.1:5432")
        self.assertEqual(faultproxy.parse_address("127.0.0.1:5432"), ("127.0.0.1", 5432))


if __name__ == "__main__":
    unittest.main()
