"""The adaptive create cap (create_cap = "aimd"): the cap follows the PUT latency, multiplicative
decrease when PUTs are slower than the target, additive increase when they are fast again.
Outcomes only: what the cap is after a run of slow or fast PUTs, never how long anything took."""

import threading
import unittest

from promtext import metric
from sluice_harness import SluiceTestCase, wait_until


def create_cap(server):
    return metric(server.metrics(), "sluice_pool_limit", pool="create")


class AdaptiveCreateCapTest(SluiceTestCase):
    def burst_of_creates(self, server, count, first_key):
        """`count` creates at once from distinct client keys; returns their statuses."""
        statuses = []
        lock = threading.Lock()

        def one(i):
            res = server.create(b"x" * 100, headers={"X-Forwarded-For": f"10.1.{(first_key + i) // 250}.{(first_key + i) % 250}"})
            with lock:
                statuses.append(res.status)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return statuses

    def test_slow_puts_shrink_the_cap_and_fast_puts_grow_it_back(self):
        s = self.server(["--create-cap", "aimd", "--create-slots", "40", "--aimd-target", "400ms",
                         "--trusted-proxy", "127.0.0.1", "--fault-injection", "true",
                         "--faults", "blob.put:latency=800ms"])
        start = create_cap(s)
        self.assertEqual(start, 20, "the adaptive cap starts at half its ceiling")

        for round_ in range(4):
            statuses = self.burst_of_creates(s, 15, round_ * 15)
            self.assertTrue(set(statuses) <= {201, 503}, statuses)
        shrunk = create_cap(s)
        self.assertLess(shrunk, start, "PUTs slower than the target must lower the cap")

        self.assertEqual(s.admin_request("PUT", "/debug/faults", body=b"").status, 204)
        key = 1000
        for _ in range(30):
            statuses = self.burst_of_creates(s, int(max(2, create_cap(s))), key)
            key += 50
            if create_cap(s) > shrunk + 3:
                break
        self.assertGreater(create_cap(s), shrunk + 3, "fast PUTs while busy must raise the cap again")
        self.assertLessEqual(create_cap(s), 40, "never above create_slots")

    def test_static_cap_is_the_default_and_never_moves(self):
        s = self.server(["--create-slots", "7", "--trusted-proxy", "127.0.0.1", "--fault-injection",
                         "true", "--faults", "blob.put:latency=300ms"])
        self.assertEqual(create_cap(s), 7)
        self.burst_of_creates(s, 15, 0)
        self.assertEqual(create_cap(s), 7)


if __name__ == "__main__":
    unittest.main()
