"""Pressure that cannot be turned on the honest (issue 43, items 2 and 5; docs/overload.md,
"Pressure"), on the real binary with loopback source addresses (127.0.0.0/8 is all loopback, so
127.61.0.1 and 127.62.0.1 are two /24s):

- two /24s hold 40 of the 50 create slots with bodies that declare 1,000 bytes and send one
  (cut at the grace, they reconnect at once): honest phones uploading 400 KB at 30 KB/s, faster
  than every attacker's body, are all answered 201. Before, the slots' fill alone raised the rate
  every body had to keep to about 50 KB/s, and every phone was cut with a 408 at the grace;
- trickling bodies hold every unit of their /24's share (create_slots_per_network): a creator of
  that /24 who sends its paste at once cuts the slowest of them and is answered 201, where
  before it was refused 503 until the trickles ended;
- a trickled body on a route that is not a create (a GET that carries one) is cut with a 408 at
  the rate floor once the grace has passed, not held until body_timeout.

The margins, so that a busy machine cannot turn an outcome: the phones send at 30 KB/s, 29 times
the 1,024 B/s floor they must keep now, and under the ~49 KB/s the fill alone would require; the
attackers send 1 byte per body (a rate under 1 B/s, a thousandth of the floor); the non-create
trickle sends 1 byte a second against the 1,024 B/s floor, cut at a 2 s grace and awaited 15 s.
"""

import http.client
import threading
import time
import unittest

from promtext import metric
from pressure_load import Phone, SlowBodies
from rawhttp import RawConnection
from sluice_harness import SluiceTestCase, wait_until

FLOOR = 1024  # min_body_rate, the default


class HonestSlowUploadTest(SluiceTestCase):
    def test_bodies_that_send_nothing_do_not_raise_the_rate_honest_phones_must_keep(self):
        # The defaults of the report: 50 slots, 10 per address, 20 per /24, a floor of
        # 1,024 B/s after a 5 s grace, 64 KiB/s at full pressure (0.9).
        s = self.server(["--create-slots", "50", "--create-slots-per-client", "10",
                         "--create-slots-per-network", "20", "--min-body-rate", str(FLOOR),
                         "--min-body-rate-grace", "5s", "--min-body-rate-at-pressure", "65536",
                         "--body-timeout", "30s"])
        # Two /24s, two addresses each, each address within its share of 10: 20 bodies per /24,
        # 40 of the 50 slots, each sending one byte of the 1,000 it declares.
        sources = ["127.61.0.1", "127.61.0.2", "127.62.0.1", "127.62.0.2"]
        attack = SlowBodies(s.port, sources, 10, rate=10, declared=1000, sends_at_most=1).start()
        self.addCleanup(attack.stop)
        wait_until(lambda: metric(s.metrics(), "sluice_pool_in_use", pool="create") >= 38,
                   timeout=20, message="the attackers hold 80% of the create slots")
        required = metric(s.metrics(), "sluice_http_required_body_rate_bytes")
        phones = [Phone(s.port, f"127.70.0.{n}").start() for n in range(1, 6)]
        for phone in phones:
            phone.join()
        attack.stop()
        outcomes = [(p.status, p.reason, round(p.seconds or 0, 1)) for p in phones]
        self.assertEqual([p.status for p in phones], [201] * len(phones), outcomes)
        # The attackers' fill raised nothing: they do not keep the rate themselves.
        self.assertEqual(required, FLOOR)
        # The attackers were cut meanwhile, by the floor, and stored nothing.
        self.assertGreater(attack.statuses.get(408, 0), 0, attack.statuses)
        self.assertEqual(s.query("SELECT count(*) FROM pastes")[0][0], len(phones))

    def test_a_creator_of_a_slash_24_whose_share_trickles_creates_by_cutting_the_slowest(self):
        # A grace and a body_timeout longer than the test: only a cut can free a unit of the
        # /24's share while the trickles go on.
        s = self.server(["--create-slots", "50", "--create-slots-per-client", "10",
                         "--create-slots-per-network", "20", "--min-body-rate", str(FLOOR),
                         "--min-body-rate-grace", "60s", "--body-timeout", "60s"])
        sources = ["127.63.0.1", "127.63.0.2"]
        attack = SlowBodies(s.port, sources, 10, rate=10, declared=1000, sends_at_most=1).start()
        self.addCleanup(attack.stop)
        wait_until(lambda: metric(s.metrics(), "sluice_pool_in_use", pool="create") >= 20,
                   timeout=20, message="the trickles hold their /24's share")
        # Each body sent its byte 0.1 s after its headers; give every one the 0.5 s a body needs
        # before it may be judged, so the first create finds one to cut.
        time.sleep(0.6)
        answers = []
        for n in range(3):
            # The cut trickle reconnected: its /24's share is full again before each create.
            wait_until(lambda: metric(s.metrics(), "sluice_pool_in_use", pool="create") >= 20,
                       timeout=20, message="the trickles hold their /24's share again")
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10,
                                              source_address=("127.63.0.200", 0))
            try:
                res = s.create(f"from the same campus, {n}".encode(), conn=conn)
            finally:
                conn.close()
            answers.append((res.status, res.json().get("reason") if res.status != 201 else None))
        attack.stop()
        self.assertEqual(answers, [(201, None)] * 3)
        m = s.metrics()
        self.assertEqual(
            metric(m, "sluice_connections_reclaimed_total", reason="slow_body_at_cap"), 3)
        self.assertGreater(attack.statuses.get(408, 0), 0, attack.statuses)


class SmallBodyFloorTest(SluiceTestCase):
    def test_a_trickled_body_on_a_route_that_is_not_a_create_is_cut_at_the_floor(self):
        s = self.server(["--min-body-rate", str(FLOOR), "--min-body-rate-grace", "2s",
                         "--body-timeout", "30s"])
        conn = RawConnection("127.0.0.1", s.port, timeout=15, source="127.64.0.1")
        self.addCleanup(conn.close)
        started = time.monotonic()
        conn.send_headers("GET", "/healthz", {"Content-Length": "1000"})
        stop = threading.Event()

        def trickle():  # a byte a second, until answered
            while not stop.wait(1.0):
                try:
                    conn.send(b"x")
                except OSError:
                    return

        sender = threading.Thread(target=trickle, daemon=True)
        sender.start()
        self.addCleanup(stop.set)
        res = conn.read_response()  # a timeout here (15 s, half body_timeout) fails the test
        stop.set()
        self.assertEqual((res.status, res.json()["reason"]), (408, "body_too_slow"))
        self.assertLess(time.monotonic() - started, 15)
        self.assertEqual(metric(s.metrics(), "sluice_http_timeouts_total", phase="body_rate"), 1)


if __name__ == "__main__":
    unittest.main()
