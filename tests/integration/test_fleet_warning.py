"""A fleet on embedded stores is said to be one at start.

With `processes` above 1 the operator means a fleet sharing one Redis; with SQLite or files in the
data dir each process still keeps its own pastes, and a paste made on one is 404 on the others
(issue 15, item 7). The start log must say so, and must stay quiet for a single process.
"""

import unittest

from sluice_harness import SluiceTestCase, _embedded_only

WARNING = "each process has its own pastes"


class FleetWarningTest(SluiceTestCase):
    def setUp(self):
        super().setUp()
        _embedded_only()

    def test_two_processes_on_embedded_stores_are_warned_about(self):
        server = self.server(["--processes", "2"])
        log = server.log()
        line = next((l for l in log.splitlines() if WARNING in l), None)
        self.assertIsNotNone(line, log)
        self.assertIn("warn", line)
        self.assertIn("processes = 2", line)
        self.assertIn("SQLite", line)
        self.assertIn("files", line)
        self.assertIn("PostgreSQL", line)
        self.assertIn("S3", line)
        # A warning, not a refusal: the README's Redis example still starts.
        self.assertEqual(server.get("/healthz").status, 200)

    def test_one_process_is_not_warned_about(self):
        server = self.server()
        self.assertNotIn(WARNING, server.log())


if __name__ == "__main__":
    unittest.main()
