"""One client cannot take the edge (issue 11, items 1 and 3), with raw sockets from several loopback
addresses: the per-client connection cap, the /healthz reserve over a full connection cap, the
first-byte timeout, the per-client share of the create slots, and the minimum body rate."""

import http.client
import threading
import time
import unittest

from promtext import metric, parse_metrics
from rawhttp import RawConnection
from sluice_harness import SluiceTestCase, wait_until

CREATE = "/api/v1/pastes"


def get_from(s, source, path, timeout=10):
    """GET `path` on a new connection from the loopback address `source`."""
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=timeout,
                                      source_address=(source, 0))
    try:
        conn.request("GET", path)
        res = conn.getresponse()
        return res.status, res.read(), res.getheader("Connection")
    finally:
        conn.close()


def metrics_from(s, source):
    status, body, _ = get_from(s, source, "/metrics")
    if status != 200:
        raise AssertionError(f"/metrics from {source} answered {status}")
    return parse_metrics(body.decode())


def create_from(s, source, body):
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10, source_address=(source, 0))
    try:
        conn.request("POST", CREATE, body=body, headers={"Content-Length": str(len(body))})
        res = conn.getresponse()
        return res.status, res.read()
    finally:
        conn.close()


class ConnectionShareTest(SluiceTestCase):
    def open_idle(self, s, source, n):
        conns = [RawConnection("127.0.0.1", s.port, source=source) for _ in range(n)]
        self.addCleanup(lambda: [c.close() for c in conns])
        return conns

    def test_one_address_cannot_take_every_connection(self):
        # One event loop, so connections are accepted in the order they were opened.
        s = self.server(["--max-connections", "50", "--max-connections-per-client", "10",
                         "--first-byte-timeout", "60s", "--threads", "1"])
        self.open_idle(s, "127.0.0.1", 10)
        wait_until(lambda: metric(metrics_from(s, "127.0.0.2"), "sluice_http_connections") >= 10,
                   message="ten idle connections from 127.0.0.1")
        # The eleventh from the same address is refused, with the cap named...
        extra = RawConnection("127.0.0.1", s.port)
        self.addCleanup(extra.close)
        extra.send_headers("GET", "/api/v1/limits", {})
        res = extra.read_response()
        self.assertEqual(res.status, 503)
        self.assertEqual(res.json()["reason"], "connections_per_client")
        self.assertEqual(res.header("Retry-After"), "5")
        self.assertTrue(extra.closed_by_peer())
        # ...while another address is served as before, on a connection it may keep.
        other = RawConnection("127.0.0.1", s.port, source="127.0.0.2")
        self.addCleanup(other.close)
        for _ in range(2):
            other.send_headers("GET", "/api/v1/limits", {})
            self.assertEqual(other.read_response().status, 200)
        m = metrics_from(s, "127.0.0.2")
        self.assertEqual(metric(m, "sluice_admission_rejections_total",
                                reason="connections_per_client"), 1)
        self.assertEqual(metric(m, "sluice_admission_rejections_total", reason="connections"), 0)

    def test_healthz_answers_when_the_connection_cap_is_full(self):
        s = self.server(["--max-connections", "6", "--max-connections-per-client", "3",
                         "--first-byte-timeout", "60s", "--threads", "1"])
        self.open_idle(s, "127.0.0.1", 3)
        self.open_idle(s, "127.0.0.2", 3)
        wait_until(lambda: get_from(s, "127.0.0.3", "/healthz")[0] == 200,
                   message="a health check answered")
        # Every connection of the cap is held: a request other than /healthz gets the 503...
        status, body, _ = get_from(s, "127.0.0.3", "/api/v1/limits")
        self.assertEqual(status, 503)
        self.assertIn(b'"connections"', body)
        # ...and /healthz is answered from the reserve, then the connection closes.
        status, _, connection = get_from(s, "127.0.0.3", "/healthz")
        self.assertEqual(status, 200)
        self.assertEqual(connection, "close")
        # A few health checks at once, from several addresses, all answered.
        results = []
        threads = [threading.Thread(target=lambda a=a: results.append(
            get_from(s, a, "/healthz")[0])) for a in ("127.0.0.3", "127.0.0.4", "127.0.0.5")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results, [200, 200, 200])

    def test_a_connection_that_sends_nothing_is_closed_at_the_first_byte_timeout(self):
        s = self.server(["--first-byte-timeout", "1s", "--idle-timeout", "60s",
                         "--header-timeout", "60s"])
        silent = RawConnection("127.0.0.1", s.port, timeout=30)
        used = RawConnection("127.0.0.1", s.port, timeout=30)
        self.addCleanup(silent.close)
        self.addCleanup(used.close)
        used.send_headers("GET", "/healthz", {})
        self.assertEqual(used.read_response().status, 200)
        started = time.monotonic()
        # Closed without an answer, long before the 60 s idle timeout.
        self.assertTrue(silent.closed_by_peer(timeout=30))
        self.assertLess(time.monotonic() - started, 30)
        self.assertEqual(silent.buf, b"")
        # A connection that has asked something waits idle_timeout, not first_byte_timeout.
        time.sleep(1.5)
        used.send_headers("GET", "/healthz", {})
        self.assertEqual(used.read_response().status, 200)
        m = metrics_from(s, "127.0.0.2")
        self.assertEqual(metric(m, "sluice_http_timeouts_total", phase="first_byte"), 1)


class SlowBodyTest(SluiceTestCase):
    def start_create(self, s, source, declared=1000):
        conn = RawConnection("127.0.0.1", s.port, timeout=30, source=source)
        self.addCleanup(conn.close)
        conn.send_headers("POST", CREATE, {"Content-Length": str(declared)})
        return conn

    def test_two_addresses_cannot_hold_every_create_slot(self):
        # Within the create rate (a burst of 5); the rate floor is off, so only the share acts.
        s = self.server(["--create-slots", "6", "--create-slots-per-client", "2",
                         "--ip-create-rate", "1", "--ip-create-burst", "5",
                         "--min-body-rate", "0", "--body-timeout", "60s", "--threads", "1"])
        slow = []
        stop = threading.Event()

        def trickle():
            while not stop.wait(2.0):  # a byte every 2 s
                for c in slow:
                    try:
                        c.send(b"x")
                    except OSError:
                        pass

        sender = threading.Thread(target=trickle)
        sender.start()
        self.addCleanup(lambda: (stop.set(), sender.join()))
        for source in ("127.0.0.1", "127.0.0.2"):
            for _ in range(2):
                slow.append(self.start_create(s, source))
            wait_until(lambda: metric(metrics_from(s, "127.0.0.3"), "sluice_pool_in_use",
                                      pool="create") == len(slow),
                       message=f"{len(slow)} slow creates admitted")
            refused = self.start_create(s, source)
            res = refused.read_response()
            self.assertEqual(res.status, 503)
            self.assertEqual(res.json()["reason"], "create_slots_per_client")
            self.assertIsNotNone(res.header("Retry-After"))
        # Four slow uploads hold four of the six slots; a third address still creates.
        status, body = create_from(s, "127.0.0.3", b"meanwhile")
        self.assertEqual(status, 201, body)
        m = metrics_from(s, "127.0.0.3")
        self.assertEqual(metric(m, "sluice_admission_rejections_total",
                                reason="create_slots_per_client"), 2)
        self.assertEqual(metric(m, "sluice_admission_rejections_total", reason="create_slots"), 0)

    def test_a_body_under_the_minimum_rate_is_cut_with_408_and_frees_its_slot(self):
        s = self.server(["--create-slots", "1", "--min-body-rate", "100",
                         "--min-body-rate-grace", "1s", "--body-timeout", "60s"])
        conn = self.start_create(s, "127.0.0.1")
        conn.send(b"x" * 10)  # then nothing: 10 bytes are behind 100 B/s once the grace is over
        started = time.monotonic()
        res = conn.read_response()
        self.assertEqual(res.status, 408)
        self.assertEqual(res.json()["reason"], "body_too_slow")
        self.assertLess(time.monotonic() - started, 30, "cut long before the 60 s body timeout")
        # The only slot is free again at once.
        status, body = create_from(s, "127.0.0.2", b"after")
        self.assertEqual(status, 201, body)
        m = metrics_from(s, "127.0.0.2")
        self.assertEqual(metric(m, "sluice_http_timeouts_total", phase="body_rate"), 1)
        self.assertEqual(metric(m, "sluice_http_timeouts_total", phase="body"), 0)
        self.assertEqual(s.query("SELECT count(*) FROM pastes")[0][0], 1)

    def test_a_body_above_the_minimum_rate_is_not_cut(self):
        s = self.server(["--min-body-rate", "100", "--min-body-rate-grace", "1s",
                         "--body-timeout", "60s"])
        conn = self.start_create(s, "127.0.0.1")
        for _ in range(5):  # 1,000 bytes over 2.5 s: 400 B/s, well over the floor
            conn.send(b"y" * 200)
            time.sleep(0.5)
        res = conn.read_response()
        self.assertEqual(res.status, 201, res)
        self.assertEqual(metric(s.metrics(), "sluice_http_timeouts_total", phase="body_rate"), 0)


if __name__ == "__main__":
    unittest.main()
