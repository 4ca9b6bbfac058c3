"""systemd's readiness protocol, against a real peer.

deploy/systemd/sluice.service is `Type=notify`: systemd counts sluice as started only when it sends
READY=1 (src/app/systemd_notify.cc), and must then be able to connect; it sends STOPPING=1 when the
drain starts. Each test binds the unix datagram socket systemd would, names it in NOTIFY_SOCKET and
reads what the real binary sends, with the sender's credentials (NotifyAccess=main ignores a
message from any other process, a highlight worker included).
"""

import os
import re
import signal
import socket
import struct
import subprocess
import tempfile
import unittest

from sluice_harness import SluiceServer, SluiceTestCase, clean_env

STATUS_PORT = re.compile(r"STATUS=serving on 127\.0\.0\.1:(\d+)")


class NotifyPeer:
    """What systemd does for a Type=notify unit: a datagram socket with SO_PASSCRED."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sluice-notify-")
        self.path = os.path.join(self.dir, "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(self.path)

    def receive(self, timeout=20.0):
        """(message, sender pid) of the next datagram."""
        self.sock.settimeout(timeout)
        data, ancillary, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
        pid = None
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid, _, _ = struct.unpack("iII", payload[:12])
        return data.decode(), pid

    def receive_until(self, assignment, timeout=20.0):
        """Messages up to the first holding `assignment` (e.g. READY=1); returns them all."""
        seen = []
        while True:
            try:
                message, pid = self.receive(timeout)
            except socket.timeout:
                raise AssertionError(f"no {assignment} within {timeout} s; received {seen!r}")
            seen.append((message, pid))
            if assignment in message.split("\n"):
                return seen

    def close(self):
        self.sock.close()
        try:
            os.unlink(self.path)
        finally:
            os.rmdir(self.dir)


class SystemdNotifyTest(SluiceTestCase):
    def setUp(self):
        super().setUp()
        self.peer = NotifyPeer()
        self.addCleanup(self.peer.close)

    def test_ready_when_listening_then_stopping_on_sigterm(self):
        # Started here rather than by the harness, which returns once it reads the listening line:
        # the peer acts on READY=1 alone, as systemd would.
        server = SluiceServer(env={"NOTIFY_SOCKET": self.peer.path})
        self.addCleanup(server.cleanup)
        with open(server.log_path, "wb") as log:
            proc = subprocess.Popen(server.command(), stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=clean_env(server.env))
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait()))
        messages = self.peer.receive_until("READY=1")
        ready, sender = messages[-1]
        port = STATUS_PORT.search(ready)
        self.assertIsNotNone(port, f"READY=1 without the listener in STATUS=: {ready!r}")
        # Ready means bound: a connection the moment READY=1 arrives is accepted and answered.
        with socket.create_connection(("127.0.0.1", int(port.group(1))), timeout=10) as conn:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            conn.settimeout(10)
            self.assertTrue(conn.recv(64).startswith(b"HTTP/1.1 200"), server.log())
        # From the main process (NotifyAccess=main), not one of its workers.
        self.assertEqual(sender, proc.pid)
        self.assertIn(f"listening on http://127.0.0.1:{port.group(1)}", server.log())
        self.assertNotIn("STOPPING=1", "\n".join(m for m, _ in messages))

        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=60), 0, server.log())
        messages = self.peer.receive_until("STOPPING=1", timeout=5)
        stopping, sender = messages[-1]
        self.assertEqual(sender, proc.pid)
        self.assertIn("STATUS=draining", stopping)
        # Nothing claims readiness again between the two.
        self.assertNotIn("READY=1", "\n".join(m for m, _ in messages))

    def test_an_unreachable_notify_socket_is_logged_and_served_anyway(self):
        # A unit pointing at a socket that is gone (or a stale variable in a shell) must not stop
        # the server from serving: the failure is a warning in the log.
        missing = os.path.join(self.peer.dir, "gone.sock")
        server = self.server(env={"NOTIFY_SOCKET": missing})
        self.assertEqual(server.get("/healthz").status, 200)
        self.assertRegex(server.log(), r"warn.*sd_notify\(READY=1\)")

    def test_nothing_is_sent_without_notify_socket(self):
        server = self.server()
        self.assertEqual(server.get("/healthz").status, 200)
        self.assertNotIn("sd_notify", server.log())


if __name__ == "__main__":
    unittest.main()
