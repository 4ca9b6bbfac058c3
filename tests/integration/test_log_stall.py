"""A log nobody reads stalls no request (src/app/log_queue.h).

sluice writes its log to stdout: under systemd a pipe to journald, in a container the runtime's
pipe. When the reader stops (journald busy on a slow disk, a wedged log shipper) a synchronous
logger blocks on the full pipe, and with it the event loop that logged. Here the server's stdout is
a pipe this test stops reading once the server is up, and the access log writes a line per
request: a pipe holds 64 KiB, so a few hundred requests fill it. Every request must still be
answered, and the lines that did not fit are counted in sluice_log_lines_dropped_total. A stop
(SIGTERM) must not wait for the reader either: the server exits within its drain, plus the few
seconds it gives the log (src/app/main.cc's kLogCloseTimeout).

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_log_stall
"""

import http.client
import os
import select
import shutil
import subprocess
import tempfile
import time
import unittest

from promtext import metric, parse_metrics
from sluice_harness import LISTENING_LOCAL, clean_env, sluice_bin

REQUESTS = 12000  # a line of access log each: more than the queue (8,192 lines) and the pipe hold
# Only turns a stalled server into a failure instead of a hang; an answer takes milliseconds.
ANSWER_TIMEOUT_S = 30
# The same for the stop: 1 s of drain and 5 s for the log, against a hang without end.
EXIT_TIMEOUT_S = 60


class LogStallTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="sluice-logstall-")
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)
        self.proc = subprocess.Popen(
            [sluice_bin(), "serve", "--listen", "127.0.0.1:0", "--data-dir",
             os.path.join(self.root, "data"), "--admin-listen", "", "--access-log", "true",
             "--ip-read-rate", "100000", "--ip-read-burst", "100000", "--drain-timeout", "1s"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=clean_env())
        self.addCleanup(self.stop)
        self.port = self.read_until_listening()

    def read_until_listening(self):
        seen = b""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 1)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                seen += chunk
                match = LISTENING_LOCAL.search(seen.decode(errors="replace"))
                if match:
                    return int(match.group(1))
        self.fail(f"the server did not say where it listens: {seen[-2000:]!r}")

    def stop(self):
        self.proc.terminate()
        # Reading what is left lets a server without the queue reach its exit too.
        out, _ = self.proc.communicate(timeout=60)
        self.log_tail = out[-4000:]

    def get(self, conn, path):
        conn.request("GET", path)
        res = conn.getresponse()
        return res.status, res.read()

    def flood(self):
        """Requests until the pipe and the queue are full: returns the answers' statuses."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=ANSWER_TIMEOUT_S)
        self.addCleanup(conn.close)
        statuses = {}
        for _ in range(REQUESTS):
            status, _ = self.get(conn, "/healthz")
            statuses[status] = statuses.get(status, 0) + 1
        return conn, statuses

    def test_every_request_is_answered_with_the_log_unread(self):
        conn, statuses = self.flood()
        self.assertEqual(statuses, {200: REQUESTS})
        status, body = self.get(conn, "/metrics")
        self.assertEqual(status, 200)
        dropped = metric(parse_metrics(body.decode()), "sluice_log_lines_dropped_total")
        # The pipe and the queue (8,192 lines) hold some; the rest were dropped, and counted.
        self.assertGreater(dropped, 0)

    def test_a_stop_does_not_wait_for_the_reader(self):
        conn, statuses = self.flood()
        self.assertEqual(statuses, {200: REQUESTS})
        conn.close()
        self.proc.terminate()
        try:
            code = self.proc.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.fail(f"SIGTERM left the server running after {EXIT_TIMEOUT_S} s with its log unread")
        self.assertEqual(code, 0)


if __name__ == "__main__":
    unittest.main()
