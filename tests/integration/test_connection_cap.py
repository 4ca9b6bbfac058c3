"""The per-process connection cap: one connection past it gets a 503 naming the cap and is closed,
instead of the process running out of file descriptors; connections already open keep working."""

import unittest

from promtext import metric
from sluice_harness import SluiceTestCase, wait_until


class ConnectionCapTest(SluiceTestCase):
    def test_one_past_the_cap_gets_503_and_the_open_ones_keep_working(self):
        s = self.server(["--max-connections", "4", "--threads", "1"])
        idle = [s.raw() for _ in range(4)]
        for conn in idle:  # each is accepted and counted before the next one arrives
            conn.send_headers("GET", "/healthz", {})
            self.assertEqual(conn.read_response().status, 200)
        wait_until(lambda: metric(s.metrics_from(idle[0]), "sluice_http_connections") == 4,
                   message="four open connections")

        # Over the cap the connection is taken into the /healthz reserve (src/http/edge.h), so it
        # is answered once it asks: a 503 for anything but /healthz.
        refused = s.raw()
        refused.send_headers("GET", "/api/v1/limits", {})
        res = refused.read_response()
        self.assertEqual(res.status, 503)
        self.assertEqual(res.json()["reason"], "connections")
        self.assertEqual(res.header("Retry-After"), "5")
        self.assertTrue(refused.closed_by_peer())
        refused.close()

        idle[1].send_headers("GET", "/healthz", {})
        self.assertEqual(idle[1].read_response().status, 200)

        idle[0].close()
        wait_until(lambda: s.get("/api/v1/limits").status == 200,
                   message="a slot frees when one closes")
        self.assertGreaterEqual(
            metric(s.metrics_from(idle[2]), "sluice_admission_rejections_total", reason="connections"), 1)
        for conn in idle[1:]:
            conn.close()


if __name__ == "__main__":
    unittest.main()
