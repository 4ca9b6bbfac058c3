"""Pressure reclaims what idles (issue 32, item 6; docs/overload.md, "Pressure"), on the real
binary with many loopback source addresses (127.0.0.0/8 is all loopback, so 127.1.0.1 and 127.2.0.1
are two /24s) and forwarded IPv6 through a trusted proxy:

- slow bodies trickling above min_body_rate from several addresses hold every create slot: the
  required rate rises as the slots fill with bodies that keep it (bodies that send nothing raise
  nothing: tests/integration/test_honest_uploads.py), and a create at the cap cuts the slowest
  body; an
  innocent client's creates and reads still succeed (at least 99%), and the 408s go to the
  attackers;
- idle keep-alive connections from several addresses fill max_connections: a new connection
  closes the longest-idle one instead of being refused; the innocent client is served;
- one /48 of many /64s, or one /24 of many addresses, cannot take all the create slots or all
  the connections (create_slots_per_network, max_connections_per_network).

Each attack is scaled down (caps of 10 slots and 40 connections, a 2 s grace) to take seconds."""

import threading
import time
import unittest

from promtext import metric
from pressure_load import IdleKeepAlive, Innocent, SlowBodies
from rawhttp import RawConnection
from sluice_harness import SluiceTestCase, wait_until

INNOCENT = "127.9.0.1"
ATTACKERS = [f"127.{n}.0.1" for n in range(1, 6)]  # five /24s: the network share plays no part


def fast_limits():
    # The rate limits are not what is tested: the attackers reconnect at once and the innocent
    # creates five a second, so each key's buckets must let them.
    return ["--ip-create-rate", "1000", "--ip-create-burst", "1000",
            "--ip-create-bytes-rate", "100000000", "--ip-create-bytes-burst", "100000000",
            "--global-create-rate", "100000", "--global-create-burst", "100000"]


class SlowBodyAttackTest(SluiceTestCase):
    def test_slow_bodies_above_the_floor_do_not_keep_an_innocent_client_from_creating(self):
        s = self.server(["--create-slots", "10", "--create-slots-per-client", "2",
                         "--min-body-rate", "100", "--min-body-rate-at-pressure", "8192",
                         "--min-body-rate-grace", "2s", "--body-timeout", "30s"] + fast_limits())
        # 5 addresses x 2 connections, 150 B/s each: above min_body_rate, every slot held.
        attack = SlowBodies(s.port, ATTACKERS, 2, rate=150, declared=100_000).start()
        self.addCleanup(attack.stop)
        wait_until(lambda: metric(s.metrics(), "sluice_pool_in_use", pool="create") >= 10,
                   message="the attackers hold every create slot")
        innocent = Innocent(s.port, INNOCENT, rate=5).start()
        time.sleep(12)
        innocent.stop()
        attack.stop()
        m = s.metrics()
        total = innocent.ok + innocent.failed
        self.assertGreater(total, 40, innocent.outcomes)
        self.assertGreaterEqual(innocent.success_rate(), 0.99, innocent.outcomes)
        # The cuts went to the attackers: 408s they were answered, none the innocent was.
        self.assertGreater(attack.statuses.get(408, 0), 0, attack.statuses)
        self.assertFalse([k for k in innocent.outcomes if "408" in k], innocent.outcomes)
        cut_at_cap = metric(m, "sluice_connections_reclaimed_total", reason="slow_body_at_cap")
        cut_by_rate = metric(m, "sluice_http_timeouts_total", phase="body_rate")
        self.assertGreater(cut_at_cap + cut_by_rate, 0)
        # At most as many as the server cut: a 408 written as the attack stops may go unread.
        self.assertLessEqual(attack.statuses.get(408, 0), cut_at_cap + cut_by_rate)
        # Nothing of theirs was stored; every paste is the innocent's.
        self.assertEqual(s.query("SELECT count(*) FROM pastes")[0][0],
                         innocent.outcomes.get("create 201", 0))

    def test_the_required_body_rate_rises_as_the_create_slots_fill_with_bodies_that_keep_it(self):
        s = self.server(["--create-slots", "10", "--create-slots-per-client", "10",
                         "--min-body-rate", "100", "--min-body-rate-at-pressure", "8100",
                         "--min-body-rate-grace", "60s", "--body-timeout", "60s"]
                        + fast_limits())
        self.assertEqual(metric(s.metrics(), "sluice_http_required_body_rate_bytes"), 100)
        # 7 bodies at 20 KB/s (five times the rate they raise): 70% full, half way from 50% to
        # 90%, so 4,100 B/s.
        working = SlowBodies(s.port, ["127.3.0.1"], 7, rate=20_000, declared=1_000_000).start()
        self.addCleanup(working.stop)
        wait_until(lambda: abs(metric(s.metrics(), "sluice_http_required_body_rate_bytes")
                               - 4100) < 1, message="the required rate at 4,100 B/s")
        # Three bodies that send nothing fill the slots and raise nothing (issue 43, item 2).
        conns = []
        self.addCleanup(lambda: [c.close() for c in conns])
        for _ in range(3):
            conn = RawConnection("127.0.0.1", s.port, timeout=30, source="127.3.0.2")
            conn.send_headers("POST", "/api/v1/pastes", {"Content-Length": "1000"})
            conns.append(conn)
        wait_until(lambda: metric(s.metrics(), "sluice_pool_in_use", pool="create") == 10,
                   message="ten bodies in flight")
        self.assertAlmostEqual(metric(s.metrics(), "sluice_http_required_body_rate_bytes"),
                               4100, delta=1)


class IdleConnectionAttackTest(SluiceTestCase):
    def test_idle_keep_alive_connections_give_way_to_an_innocent_client(self):
        s = self.server(["--max-connections", "40", "--max-connections-per-client", "10",
                         "--idle-timeout", "30s", "--idle-timeout-floor", "1s",
                         "--threads", "2"] + fast_limits())
        # 4 addresses x 10 keep-alive connections, one request every 3 s: the cap is full.
        attack = IdleKeepAlive(s.port, ATTACKERS[:4], 10, interval=3.0).start()
        self.addCleanup(attack.stop)
        wait_until(lambda: attack.statuses.get(200, 0) >= 40,
                   message="forty idle keep-alive connections")
        innocent = Innocent(s.port, INNOCENT, rate=5).start()
        time.sleep(10)
        innocent.stop()
        m = s.metrics()
        attack.stop()
        total = innocent.ok + innocent.failed
        self.assertGreater(total, 40, innocent.outcomes)
        self.assertGreaterEqual(innocent.success_rate(), 0.99, innocent.outcomes)
        reclaimed = metric(m, "sluice_connections_reclaimed_total", reason="idle_at_cap")
        self.assertGreater(reclaimed, 0)
        # The connections closed are the attackers': theirs saw the closes, and the innocent's
        # (one per request) never waited idle, so none of them could be taken.
        self.assertGreaterEqual(attack.closed, 1)
        self.assertFalse([k for k in innocent.outcomes if "error" in k], innocent.outcomes)
        # Under full pressure the idle timeout was at its floor.
        self.assertLessEqual(metric(m, "sluice_http_idle_timeout_seconds"), 30)

    def test_the_idle_timeout_shrinks_as_the_connection_cap_fills(self):
        s = self.server(["--max-connections", "20", "--max-connections-per-client", "20",
                         "--idle-timeout", "30s", "--idle-timeout-floor", "2s",
                         "--first-byte-timeout", "60s"])
        conns = []
        self.addCleanup(lambda: [c.close() for c in conns])
        # 14 of 20 open (70%, the /metrics connection included): half way from 30 s to 2 s.
        for _ in range(13):
            conns.append(RawConnection("127.0.0.1", s.port, source="127.4.0.1"))
        wait_until(lambda: metric(s.metrics(), "sluice_http_connections") >= 14,
                   message="fourteen connections open")
        # One connection more or less (a /metrics connection still closing) is 1.4 s.
        self.assertAlmostEqual(metric(s.metrics(), "sluice_http_idle_timeout_seconds"), 16,
                               delta=1.5)

    def test_a_connection_at_the_cap_closes_the_longest_idle_and_spares_one_mid_request(self):
        s = self.server(["--max-connections", "3", "--max-connections-per-client", "3",
                         "--first-byte-timeout", "60s", "--header-timeout", "60s",
                         "--threads", "1"])
        oldest = RawConnection("127.0.0.1", s.port, source="127.5.0.1")
        newer = RawConnection("127.0.0.1", s.port, source="127.5.0.1")
        self.addCleanup(oldest.close)
        self.addCleanup(newer.close)
        for conn in (oldest, newer):
            conn.send_headers("GET", "/healthz", {})
            self.assertEqual(conn.read_response().status, 200)
            time.sleep(0.2)
        # The third is mid-request: half its head sent.
        busy = RawConnection("127.0.0.1", s.port, source="127.5.0.1")
        self.addCleanup(busy.close)
        busy.send(b"GET /healthz HTTP/1.1\r\n")
        time.sleep(0.2)
        # A new client at the cap: the oldest idle connection is closed, not the busy one.
        fresh = RawConnection("127.0.0.1", s.port, source="127.6.0.1")
        self.addCleanup(fresh.close)
        fresh.send_headers("GET", "/healthz", {})
        self.assertEqual(fresh.read_response().status, 200)
        self.assertTrue(oldest.closed_by_peer(timeout=5))
        busy.send(b"Host: x\r\n\r\n")
        self.assertEqual(busy.read_response().status, 200)
        newer.send_headers("GET", "/healthz", {})
        self.assertEqual(newer.read_response().status, 200)
        m = s.metrics_from(fresh)
        self.assertEqual(metric(m, "sluice_connections_reclaimed_total", reason="idle_at_cap"), 1)
        self.assertEqual(metric(m, "sluice_admission_rejections_total", reason="connections"), 0)


class NetworkShareTest(SluiceTestCase):
    def test_one_slash_48_of_many_slash_64s_cannot_take_every_create_slot(self):
        s = self.server(["--trusted-proxy", "127.0.0.1", "--create-slots", "10",
                         "--create-slots-per-client", "1", "--create-slots-per-network", "4",
                         "--min-body-rate", "0", "--body-timeout", "60s"] + fast_limits())
        held = []
        self.addCleanup(lambda: [c.close() for c in held])
        refused = []
        for n in range(8):  # eight /64s of 2001:db8:1::/48, admitted one after another
            conn = RawConnection("127.0.0.1", s.port, timeout=30)
            conn.send_headers("POST", "/api/v1/pastes", {
                "Content-Length": "1000", "X-Forwarded-For": f"2001:db8:1:{n:x}::1"})
            held.append(conn)
            if n < 4:
                wait_until(lambda: metric(s.metrics(), "sluice_pool_in_use", pool="create") == n + 1,
                           message=f"{n + 1} creates in flight")
            else:
                res = conn.read_response()
                refused.append((res.status, res.json()["reason"]))
        self.assertEqual(refused, [(503, "create_slots_per_network")] * 4)
        self.assertEqual(metric(s.metrics(), "sluice_pool_in_use", pool="create"), 4)
        # Another /48 creates at once.
        res = s.create(b"from another site", headers={"X-Forwarded-For": "2001:db8:2::1"})
        self.assertEqual(res.status, 201, res)

    def test_one_slash_24_of_many_addresses_cannot_take_every_connection(self):
        s = self.server(["--max-connections", "30", "--max-connections-per-client", "3",
                         "--max-connections-per-network", "10", "--first-byte-timeout", "60s",
                         "--threads", "1"])
        conns = []
        self.addCleanup(lambda: [c.close() for c in conns])
        for host in range(1, 6):  # 127.7.7.1 to .5, three each: fifteen asked, ten held
            for _ in range(3):
                conns.append(RawConnection("127.0.0.1", s.port, source=f"127.7.7.{host}"))
        wait_until(lambda: metric(s.metrics(), "sluice_admission_rejections_total",
                                  reason="connections_per_network") == 5,
                   message="five connections refused for their network")
        # Asked something, the ten held are served; the five refused (waiting in the health
        # reserve, or answered at once past it) get the 503 naming the network's share.
        answers = {}
        for conn in conns:
            if conn.closed_by_peer(timeout=0.3):  # refused past the reserve: answered already
                res = conn.read_response()
            else:
                conn.sock.settimeout(10)
                conn.send_headers("GET", "/api/v1/limits", {})
                res = conn.read_response()
            key = (res.status, res.json().get("reason") if res.status != 200 else None)
            answers[key] = answers.get(key, 0) + 1
        self.assertEqual(answers, {(200, None): 10, (503, "connections_per_network"): 5})
        # Another /24 is served.
        other = RawConnection("127.0.0.1", s.port, source="127.8.0.1")
        self.addCleanup(other.close)
        other.send_headers("GET", "/healthz", {})
        self.assertEqual(other.read_response().status, 200)


if __name__ == "__main__":
    unittest.main()
