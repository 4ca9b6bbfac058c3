"""Which event loop a connection lives on: the one holding fewest open connections
(include/sluice/admission/connection_balancer.h), whatever the kernel's SO_REUSEPORT hash chose.
Many keep-alive connections end up spread evenly, as sluice_http_loop_connections shows."""

import unittest

from promtext import metric
from sluice_harness import SluiceTestCase, wait_until

LOOPS = 4
CONNECTIONS = 200


class LoopBalanceTest(SluiceTestCase):
    def loads(self, conn):
        m = self.s.metrics_from(conn)
        return [metric(m, "sluice_http_loop_connections", loop=str(i)) for i in range(LOOPS)]

    def open_served(self, count):
        """Opens `count` connections one at a time, each served (so seated) before the next."""
        conns = []
        for _ in range(count):
            conn = self.s.raw()
            conn.send_headers("GET", "/healthz", {})
            self.assertEqual(conn.read_response().status, 200)
            conns.append(conn)
        return conns

    def assert_even(self, conn):
        loads = self.loads(conn)
        self.assertEqual(sum(loads), CONNECTIONS, loads)
        # The kernel's hash alone leaves a spread of about 12 here; two listeners choosing at once
        # may pick the same loop, so the spread is at most one per listener.
        self.assertLessEqual(max(loads) - min(loads), LOOPS, loads)

    def test_keep_alive_connections_are_spread_evenly_over_the_loops(self):
        self.s = self.server(["--threads", str(LOOPS)])
        conns = self.open_served(CONNECTIONS)
        self.assert_even(conns[0])

        # Half of them close, from whichever loops they were on: the next hundred fill the loops
        # left lightest.
        for conn in conns[1:101]:
            conn.close()
        wait_until(lambda: sum(self.loads(conns[0])) == CONNECTIONS - 100,
                   message="the closed connections leave their loops")
        conns += self.open_served(100)
        self.assert_even(conns[0])
        # Every seat is given back however its connection ends: closed cleanly, or reset.
        for conn in conns[101:150]:
            conn.close()
        for conn in conns[150:]:
            conn.reset()
        wait_until(lambda: sum(self.loads(conns[0])) == 1, message="only the asking connection left")
        conns[0].close()


if __name__ == "__main__":
    unittest.main()
