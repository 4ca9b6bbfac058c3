"""`sluice paste`, the polite client, against the real server and against scripted fake servers.

The fake servers (a few lines of socket code in this file) play the answers a real server gives only
under load or failure: a connection closed without an answer, a 500, a 429 then a 201. They count
the requests they see, which is how the "never re-send a create whose fate is unknown" rule is
checked.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_paste_client
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

from loopback_server import LoopbackServer
from rawhttp import free_port
from sluice_harness import SluiceTestCase, clean_env, run_sluice, sluice_bin

URL_RE = re.compile(r"^http://127\.0\.0\.1:\d+/([0-9A-Za-z]{12})$")
TEXT = "héllo wörld — 日本語 🐍\r\nline\twith tab  \n\n  trailing   \n"
PASTE_TIMEOUT = 60  # seconds a paste command may take before the test gives up on it


def serve_help():
    try:
        return run_sluice(["serve", "--help"]).stdout
    except unittest.SkipTest:
        return ""


def has_paste_command():
    try:
        return run_sluice(["paste", "--help"]).returncode == 0
    except unittest.SkipTest:
        return False


RATE_FLAGS = ("--ip-create-rate", "--ip-create-burst")
HAS_RATE_FLAGS = all(flag in serve_help() for flag in RATE_FLAGS)


# Where `sluice paste` keeps its delete tokens during these tests: never the user's own.
STATE_HOME = tempfile.mkdtemp(prefix="sluice-paste-state-")


def paste(server_url, args=(), stdin=None, timeout=PASTE_TIMEOUT):
    """Runs `sluice paste --server URL ARGS`; returns (CompletedProcess, seconds it took)."""
    started = time.monotonic()
    if isinstance(stdin, str):
        stdin = stdin.encode("utf-8")
    proc = subprocess.run([sluice_bin(), "paste", "--server", server_url, *args],
                          input=stdin if stdin is not None else b"", capture_output=True,
                          env=clean_env({"XDG_STATE_HOME": STATE_HOME}), timeout=timeout)
    proc.stdout = proc.stdout.decode("utf-8", "replace")
    proc.stderr = proc.stderr.decode("utf-8", "replace")
    return proc, time.monotonic() - started


class FakeServer(LoopbackServer):
    """A one-thread HTTP/1.1 server that reads each request in full (headers, then the
    Content-Length body, which sluice paste sends after its Expect wait) and then plays the next
    scripted action: "close" (hang up without a word) or (status, headers dict, body str). Counts
    connections and complete requests. With send_continue it answers `Expect: 100-continue` as
    sluice does; without, it plays a server that ignores Expect."""

    def __init__(self, script, send_continue=True):
        self.script = list(script)
        self.send_continue = send_continue
        self.requests = []  # (request line, headers dict, body bytes)
        super().__init__()

    def handle(self, conn):
        with conn:
            conn.settimeout(10)
            self._serve(conn)

    def _serve(self, conn):
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = conn.recv(65536)
            if not chunk:
                return
            buf += chunk
        head, buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip()
                   for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        if self.send_continue and headers.get("expect", "").lower() == "100-continue":
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        while len(buf) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return
            buf += chunk
        self.requests.append((lines[0], headers, buf[:length]))
        action = self.script.pop(0) if self.script else "close"
        if action == "close":
            return
        status, extra, body = action
        body = body.encode("utf-8")
        reply = [f"HTTP/1.1 {status} Scripted", f"Content-Length: {len(body)}",
                 "Content-Type: application/json", "Connection: close"]
        reply += [f"{k}: {v}" for k, v in extra.items()]
        conn.sendall(("\r\n".join(reply) + "\r\n\r\n").encode("latin-1") + body)


@unittest.skipUnless(has_paste_command(), "this sluice binary has no `paste` command yet")
class PasteClientTest(SluiceTestCase):

    def assertReadsBack(self, server, stdout, body):
        line = stdout.strip()
        match = URL_RE.match(line)
        self.assertIsNotNone(match, f"stdout is not one paste URL: {stdout!r}")
        res = server.get(f"/raw/{match.group(1)}")
        self.assertStatus(res, 200)
        self.assertEqual(res.body, body.encode("utf-8"))
        return match.group(1)

    def fake(self, script, send_continue=True):
        f = FakeServer(script, send_continue)
        self.addCleanup(f.stop)
        return f

    def write_file(self, content):
        fd, path = tempfile.mkstemp(prefix="sluice-paste-")
        with os.fdopen(fd, "wb") as f:
            f.write(content.encode("utf-8") if isinstance(content, str) else content)
        self.addCleanup(os.unlink, path)
        return path

    # ---- against the real server --------------------------------------------------------------

    def test_paste_from_a_file_prints_a_url_that_reads_back(self):
        s = self.server()
        proc, _ = paste(s.url, [self.write_file(TEXT)])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertReadsBack(s, proc.stdout, TEXT)
        self.assertRegex(proc.stderr, r"(?m)^delete token: \S+$")

    def test_paste_from_stdin_prints_a_url_that_reads_back(self):
        s = self.server()
        for args in ([], ["-"]):
            with self.subTest(args=args):
                proc, _ = paste(s.url, args, stdin=TEXT)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertReadsBack(s, proc.stdout, TEXT)

    def test_json_prints_the_whole_answer_and_the_token_deletes(self):
        s = self.server()
        proc, _ = paste(s.url, ["--json", "--ttl", "1h"], stdin="short-lived\n")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        doc = json.loads(proc.stdout)
        self.assertReadsBack(s, doc["url"], "short-lived\n")
        self.assertIn(f"delete token: {doc['delete_token']}", proc.stderr)
        self.assertStatus(s.delete(doc["id"], token=doc["delete_token"]), 204)

    def test_without_a_home_the_token_is_printed_and_nothing_is_written_here(self):
        # A cron job or `env -i`: no HOME, no XDG_STATE_HOME. The token file must not appear in
        # whatever folder the command ran from.
        s = self.server()
        here = tempfile.mkdtemp(prefix="sluice-paste-homeless-")
        self.addCleanup(shutil.rmtree, here, ignore_errors=True)
        env = {k: v for k, v in clean_env().items() if k not in ("HOME", "XDG_STATE_HOME")}
        for home in (None, "relative/home"):
            with self.subTest(HOME=home):
                proc = subprocess.run(
                    [sluice_bin(), "paste", "--server", s.url], input=TEXT.encode(),
                    capture_output=True, cwd=here, timeout=PASTE_TIMEOUT,
                    env=env if home is None else {**env, "HOME": home})
                stderr = proc.stderr.decode()
                self.assertEqual(proc.returncode, 0, stderr)
                self.assertReadsBack(s, proc.stdout.decode(), TEXT)
                self.assertRegex(stderr, r"(?m)^delete token: \S+$")
                self.assertIn("the delete token was not kept: no place to keep it", stderr)
                self.assertEqual(os.listdir(here), [])

    def test_too_large_exits_1_and_says_why(self):
        s = self.server(["--max-paste-bytes", "100"])
        proc, _ = paste(s.url, [self.write_file("x" * 500)])
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertEqual(proc.stdout, "")
        self.assertIn("413", proc.stderr)
        self.assertIn("too_large", proc.stderr)
        self.assertEqual(s.query("SELECT COUNT(*) FROM pastes"), [(0,)])

    def test_bad_ttl_exits_1_with_the_servers_error(self):
        s = self.server()
        proc, _ = paste(s.url, ["--ttl", "7y"], stdin="x\n")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("400", proc.stderr)
        self.assertIn('"reason"', proc.stderr)

    @unittest.skipUnless(HAS_RATE_FLAGS, f"sluice serve has no {' / '.join(RATE_FLAGS)} yet")
    def test_a_429_is_waited_out_within_max_wait(self):
        s = self.server(["--ip-create-rate", "0.5", "--ip-create-burst", "1"])
        first, _ = paste(s.url, stdin="first\n")
        self.assertEqual(first.returncode, 0, first.stderr)
        second, took = paste(s.url, ["--max-wait", "10s"], stdin="second\n")
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertReadsBack(s, second.stdout, "second\n")
        self.assertRegex(second.stderr, r"server busy \(\w+\), retrying in [\d.]+ s")
        self.assertGreater(took, 0.5, "the client must wait for the bucket, not hammer it")

    @unittest.skipUnless(HAS_RATE_FLAGS, f"sluice serve has no {' / '.join(RATE_FLAGS)} yet")
    def test_a_429_past_max_wait_exits_1_at_once(self):
        s = self.server(["--ip-create-rate", "0.5", "--ip-create-burst", "1"])
        first, _ = paste(s.url, stdin="first\n")
        self.assertEqual(first.returncode, 0, first.stderr)
        second, took = paste(s.url, ["--max-wait", "0"], stdin="second\n")
        self.assertEqual(second.returncode, 1, second.stderr)
        self.assertEqual(second.stdout, "")
        self.assertIn("--max-wait", second.stderr)
        self.assertLess(took, 5.0)
        self.assertEqual(s.query("SELECT COUNT(*) FROM pastes"), [(1,)])

    def test_a_server_that_is_not_listening_exits_1_quickly(self):
        proc, took = paste(f"http://127.0.0.1:{free_port()}", stdin="nobody home\n")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("nothing was sent", proc.stderr)
        self.assertLess(took, 5.0)

    def test_junk_urls_are_usage_errors(self):
        # (https:// is a real server now: tests/integration/test_cli_tls.py.)
        for url in ("ftp://x", "http://", "https://", "http://host:99999"):
            with self.subTest(url=url):
                proc, _ = paste(url, stdin="x\n")
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn("--server", proc.stderr)

    def test_a_missing_file_is_a_usage_error(self):
        proc, _ = paste("http://127.0.0.1:1", ["/nonexistent/sluice-paste-input"])
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("cannot open", proc.stderr)

    # ---- against scripted fake servers: the retry rule ---------------------------------------

    def test_a_request_closed_without_an_answer_is_never_sent_again(self):
        f = self.fake(["close", "close"], send_continue=False)
        proc, _ = paste(f.url, stdin="fate unknown\n")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("may or may not exist", proc.stderr)
        self.assertEqual(len(f.requests), 1, f.requests)
        self.assertEqual(f.connections, 1)
        self.assertEqual(f.requests[0][2], b"fate unknown\n")

    def test_a_500_is_never_sent_again(self):
        err = json.dumps({"error": "insert failed", "reason": "storage_unavailable"})
        f = self.fake([(500, {}, err), (500, {}, err)])
        proc, _ = paste(f.url, stdin="x\n")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("may or may not exist", proc.stderr)
        self.assertEqual(len(f.requests), 1)

    def test_a_503_with_retry_after_is_sent_again_after_the_wait(self):
        busy = json.dumps({"error": "busy", "reason": "create_slots", "retry_after": 1})
        created = json.dumps({"id": "abcdefghijkl", "url": "http://x/abcdefghijkl",
                              "delete_token": "tok"})
        f = self.fake([(503, {"Retry-After": "1"}, busy), (201, {}, created)])
        proc, took = paste(f.url, ["--max-wait", "5s"], stdin="x\n")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "http://x/abcdefghijkl\n")
        self.assertIn("server busy (create_slots), retrying in", proc.stderr)
        self.assertEqual(len(f.requests), 2)
        self.assertGreaterEqual(took, 1.0, "never sooner than the server asked")
        self.assertEqual(f.requests[0][2], f.requests[1][2])

    def test_a_503_outcome_unknown_is_never_sent_again_despite_its_retry_after(self):
        unknown = json.dumps({"error": "it may or may not have been published",
                              "reason": "outcome_unknown", "retry_after": 1})
        created = json.dumps({"id": "abcdefghijkl", "url": "http://x/abcdefghijkl",
                              "delete_token": "tok"})
        f = self.fake([(503, {"Retry-After": "1"}, unknown), (201, {}, created)])
        proc, _ = paste(f.url, ["--max-wait", "5s"], stdin="x\n")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("may or may not exist", proc.stderr)
        self.assertEqual(len(f.requests), 1)

    def test_a_503_without_retry_after_is_final(self):
        down = json.dumps({"error": "the bucket is slow", "reason": "put_timeout"})
        f = self.fake([(503, {}, down), (503, {}, down)])
        proc, _ = paste(f.url, ["--max-wait", "5s"], stdin="x\n")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertEqual(len(f.requests), 1)

    def test_the_request_is_a_polite_create(self):
        created = json.dumps({"id": "abcdefghijkl", "url": "http://x/abcdefghijkl",
                              "delete_token": "tok"})
        f = self.fake([(201, {}, created)])
        proc, _ = paste(f.url + "/base/", ["--ttl", "1d"], stdin="polite\n")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        line, headers, body = f.requests[0]
        self.assertEqual(line, "POST /base/api/v1/pastes?ttl=1d HTTP/1.1")
        self.assertEqual(headers.get("content-length"), str(len(body)))
        self.assertEqual(headers.get("expect"), "100-continue")
        self.assertNotIn("transfer-encoding", headers)
        self.assertEqual(body, b"polite\n")


if __name__ == "__main__":
    unittest.main()
