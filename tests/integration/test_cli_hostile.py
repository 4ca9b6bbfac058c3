"""The command line against hostile servers (issue 43, "Tried from outside", item 4): `sluice get`,
`delete` and `admin` end within their stated timeouts (connect 5 s, whole exchange 30 s) and
stop reading at their answer caps; a kept delete token is sent only to the origin it was kept
for; a server's text reaches the terminal escaped and the token file only when it is one line of
the expected shape; malformed ids and tokens are refused before any request.

Every fake server here is standard-library sockets and threads on 127.0.0.1, records what it
received, and stops with the test. Each CLI run is bounded: killed past its time limit or past
RSS_KILL_KB of memory, which the test then reports as the failure.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_cli_hostile
"""

import json
import os
import shutil
import socket
import tempfile
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

from loopback_server import LoopbackServer
from sluice_harness import clean_env, sluice_bin

CONNECT_TIMEOUT = 5
EXCHANGE_TIMEOUT = 30
# How much later than its stated timeout a command may end on a busy machine, and when a run is
# killed as hung: the statement is "it ends", not how exactly it is timed.
SLACK = 20
HUNG_AFTER = EXCHANGE_TIMEOUT + 40
# A CLI that reads an endless answer whole grows without bound; one that stops at its cap
# (64 MiB for a paste) stays well below this.
RSS_LIMIT_KB = 256 * 1024
RSS_KILL_KB = 1024 * 1024

ESC = b"\x1b"
BEL = b"\x07"
# Sets the window title, clears the screen, prints a fake prompt: what a hostile server would
# send to a terminal.
HOSTILE_TEXT = "\x1b]0;pwned\x07\x1b[2J\x1b[H$ sudo rm -rf / # "
ID = "AAAAAAAAAAAA"
OTHER_ID = "BBBBBBBBBBBB"
TOKEN = "tok_EN-0123456789abcdefg"


class Run:
    """What one CLI run did: exit code, output, wall time, peak RSS, and whether it was killed."""

    def __init__(self, returncode, stdout, stderr, seconds, peak_rss_kb, killed):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.seconds = seconds
        self.peak_rss_kb = peak_rss_kb
        self.killed = killed

    def __repr__(self):
        return (f"Run(rc={self.returncode}, {self.seconds:.1f} s, {self.peak_rss_kb // 1024} MiB, "
                f"killed={self.killed!r}, stderr={self.stderr[-400:]!r})")


def run_cli(args, home, env=None, time_limit=HUNG_AFTER, stdin=b""):
    """Runs the binary, killing it past `time_limit` seconds or RSS_KILL_KB; peak RSS from
    wait4's rusage (the kernel's own count, not a sample)."""
    out_path = os.path.join(home, f"out-{threading.get_ident()}-{time.monotonic_ns()}")
    extra = {"XDG_STATE_HOME": home, "XDG_CONFIG_HOME": home, "HOME": home}
    extra.update(env or {})
    with open(out_path + ".in", "wb") as f:
        f.write(stdin)
    with open(out_path + ".in", "rb") as fin, open(out_path + ".1", "wb") as fout, \
            open(out_path + ".2", "wb") as ferr:
        started = time.monotonic()
        pid = os.posix_spawn(sluice_bin(), [sluice_bin(), *args], clean_env(extra),
                             file_actions=[(os.POSIX_SPAWN_DUP2, fin.fileno(), 0),
                                           (os.POSIX_SPAWN_DUP2, fout.fileno(), 1),
                                           (os.POSIX_SPAWN_DUP2, ferr.fileno(), 2)])
        killed = None
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done == pid:
                break
            if killed is None:
                rss = _rss_kb(pid)
                if rss > RSS_KILL_KB:
                    killed = f"RSS {rss // 1024} MiB"
                elif time.monotonic() - started > time_limit:
                    killed = f"still running after {time_limit} s"
                if killed:
                    os.kill(pid, 9)
            time.sleep(0.02)
        seconds = time.monotonic() - started
    with open(out_path + ".1", "rb") as f:
        stdout = f.read()
    with open(out_path + ".2", "rb") as f:
        stderr = f.read()
    return Run(os.waitstatus_to_exitcode(status), stdout, stderr, seconds, usage.ru_maxrss,
               killed)


def _rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class HostileServer(LoopbackServer):
    """A loopback HTTP server whose `play(conn, head)` decides what each connection gets after
    the request head (and its Content-Length body) is read. Records each request's head and body,
    serves connections on threads, and closes them all at stop()."""

    def __init__(self, play, family=socket.AF_INET, path=None):
        self.play = play
        self.requests = []  # (head bytes, body bytes)
        super().__init__(threaded=True, family=family, path=path)

    def _recv(self, conn):
        """The next bytes from `conn`, waiting as long as the test runs; b"" at its end."""
        while not self.stopping.is_set():
            try:
                return conn.recv(65536)
            except socket.timeout:
                continue
        return b""

    def handle(self, conn):
        conn.settimeout(0.5)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = self._recv(conn)
            if not chunk:
                return
            buf += chunk
        head, body = buf.split(b"\r\n\r\n", 1)
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        # sluice paste sends its body after one second without "100 Continue": this server
        # plays one that ignores Expect, and waits for the body however long it takes.
        while len(body) < length:
            chunk = self._recv(conn)
            if not chunk:
                break
            body += chunk
        self.requests.append((head, body))
        self.play(self, conn, head)

    # ---- what a connection can get ----

    @staticmethod
    def silent(server, conn, head):
        """Accepts, reads, says nothing, holds the connection until the test ends."""
        server.stopping.wait()

    @staticmethod
    def answer(status, body, headers=None, reason="Scripted"):
        body = body if isinstance(body, bytes) else body.encode("utf-8")

        def play(server, conn, head):
            phrase = reason if isinstance(reason, bytes) else reason.encode("latin-1")
            lines = [f"HTTP/1.1 {status} ".encode() + phrase,
                     f"Content-Length: {len(body)}".encode(), b"Connection: close"]
            for name, value in (headers or {"Content-Type": "application/json"}).items():
                lines.append(f"{name}: {value}".encode("latin-1"))
            conn.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        return play

    @staticmethod
    def on_create(create, other):
        """`create` for a POST, `other` for anything else."""

        def play(server, conn, head):
            (create if head.startswith(b"POST ") else other)(server, conn, head)
        return play

    @staticmethod
    def endless(declared_length=None):
        """A 200 whose body never ends (or declares a length past any cap): megabytes of 'x'
        until the client hangs up or the test ends."""

        def play(server, conn, head):
            length = f"Content-Length: {declared_length}\r\n" if declared_length else ""
            conn.sendall(("HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
                          f"{length}Connection: close\r\n\r\n").encode())
            block = b"x" * (1 << 20)
            conn.settimeout(5)
            sent = 0
            # Bounded by the test: at most 8 GiB, and never past stop().
            while not server.stopping.is_set() and sent < (8 << 30):
                conn.sendall(block)
                sent += len(block)
        return play


def backlog_full_listener():
    """A listening socket whose accept queue is full and never drained: a connect to it is never
    completed (Linux drops the SYN), as a host that does not answer."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(0)
    filler = socket.create_connection(sock.getsockname(), timeout=5)
    return sock, filler


class CliTestCase(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="sluice-cli-hostile-")
        self.addCleanup(shutil.rmtree, self.home, ignore_errors=True)

    def server(self, play, **kw):
        s = HostileServer(play, **kw)
        self.addCleanup(s.stop)
        return s

    def run_cli(self, args, **kw):
        return run_cli(args, self.home, **kw)

    def token_file(self):
        path = os.path.join(self.home, "sluice", "pastes")
        if not os.path.exists(path):
            return []
        with open(path, "rb") as f:
            return f.read().split(b"\n")[:-1]

    def keep_token_for(self, server, base=""):
        """Has `sluice paste --server URL` keep a token the way it does for a real create: the
        server answers the POST with 201 (then plays what it was given for everything else)."""
        answer = json.dumps({"id": ID, "url": f"{server.url}{base}/{ID}", "delete_token": TOKEN,
                             "expires_at": "2099-01-01T00:00:00Z"})
        server.play = HostileServer.on_create(HostileServer.answer(201, answer), server.play)
        made = self.run_cli(["paste", "--server", server.url + base], stdin=b"text\n")
        server.requests.clear()
        server.connections = 0
        return made

    def admin_token(self):
        path = os.path.join(self.home, "admin-token")
        with open(path, "w") as f:
            f.write("admintoken\n")
        return path

    def assertNoTerminalControl(self, data):
        for raw in (ESC, BEL, b"\r", "\u009b".encode(), "\u202e".encode()):
            self.assertNotIn(raw, data)


class TimeoutTest(CliTestCase):
    """Each command against a server that accepts and never answers (or a connect that never
    completes) ends within its stated timeout, with a clear error and a non-zero exit. The runs
    go at once (they only wait), so the class costs one exchange timeout, not five."""

    @classmethod
    def setUpClass(cls):
        cls.home = tempfile.mkdtemp(prefix="sluice-cli-timeouts-")
        cls.silent = HostileServer(HostileServer.silent)
        cls.unix_path = os.path.join(cls.home, "admin.sock")
        cls.silent_unix = HostileServer(HostileServer.silent, family=socket.AF_UNIX,
                                        path=cls.unix_path)
        cls.blackhole, cls.filler = backlog_full_listener()
        blackhole_url = "http://127.0.0.1:%d" % cls.blackhole.getsockname()[1]
        token_file = os.path.join(cls.home, "admin-token")
        with open(token_file, "w") as f:
            f.write("admintoken\n")
        # delete needs a token kept for the silent server's origin: a line as `sluice paste`
        # writes it (both formats name that origin).
        state = os.path.join(cls.home, "sluice")
        os.makedirs(state, mode=0o700)
        with open(os.path.join(state, "pastes"), "w") as f:
            f.write(f"0 - {ID} {TOKEN} {cls.silent.url}/{ID}\n")
        os.chmod(os.path.join(state, "pastes"), 0o600)
        cases = {
            "get": ["get", f"{cls.silent.url}/{ID}"],
            "delete": ["delete", f"{cls.silent.url}/{ID}"],
            "admin": ["admin", "--admin", cls.silent.url, "--token-file", token_file, "reports"],
            "admin_unix": ["admin", "--admin", f"unix:{cls.unix_path}", "--token-file", token_file,
                           "audit"],
            "get_connect": ["get", f"{blackhole_url}/{ID}"],
        }
        with ThreadPoolExecutor(len(cases)) as pool:
            futures = {name: pool.submit(run_cli, args, cls.home) for name, args in cases.items()}
            cls.runs = {name: f.result() for name, f in futures.items()}

    @classmethod
    def tearDownClass(cls):
        cls.silent.stop()
        cls.silent_unix.stop()
        cls.filler.close()
        cls.blackhole.close()
        shutil.rmtree(cls.home, ignore_errors=True)

    def setUp(self):
        pass  # the class's home, not one per test

    def assertEndedWithin(self, run, limit, words):
        self.assertIsNone(run.killed, run)
        self.assertLess(run.seconds, limit + SLACK, run)
        self.assertEqual(run.returncode, 1, run)
        self.assertIn(words, run.stderr.decode(), run)

    def test_get_from_a_silent_server_ends_at_the_exchange_timeout(self):
        self.assertEndedWithin(self.runs["get"], EXCHANGE_TIMEOUT,
                               f"no complete answer within {EXCHANGE_TIMEOUT} s")

    def test_delete_to_a_silent_server_ends_at_the_exchange_timeout(self):
        self.assertEndedWithin(self.runs["delete"], EXCHANGE_TIMEOUT,
                               f"no complete answer within {EXCHANGE_TIMEOUT} s")

    def test_admin_to_a_silent_listener_ends_at_the_exchange_timeout(self):
        self.assertEndedWithin(self.runs["admin"], EXCHANGE_TIMEOUT,
                               f"no complete answer within {EXCHANGE_TIMEOUT} s")

    def test_admin_to_a_silent_unix_socket_ends_at_the_exchange_timeout(self):
        self.assertEndedWithin(self.runs["admin_unix"], EXCHANGE_TIMEOUT,
                               f"no complete answer within {EXCHANGE_TIMEOUT} s")

    def test_get_from_a_host_that_never_completes_the_connect_ends_at_the_connect_timeout(self):
        self.assertEndedWithin(self.runs["get_connect"], CONNECT_TIMEOUT,
                               f"connect timed out after {CONNECT_TIMEOUT} s")


class AnswerCapTest(CliTestCase):
    """An endless or oversized answer ends the command at its cap; memory stays small."""

    def assertCapped(self, run, cap):
        self.assertIsNone(run.killed, run)
        self.assertEqual(run.returncode, 1, run)
        self.assertIn(f"larger than {cap} bytes", run.stderr.decode(), run)
        self.assertLess(run.peak_rss_kb, RSS_LIMIT_KB, run)

    def test_get_of_an_endless_answer_stops_at_the_paste_cap(self):
        s = self.server(HostileServer.endless())
        run = self.run_cli(["get", f"{s.url}/{ID}"])
        self.assertCapped(run, 64 << 20)
        self.assertEqual(run.stdout, b"")  # nothing of a cut answer is printed

    def test_get_of_an_answer_declaring_a_huge_length_is_refused_from_its_head(self):
        s = self.server(HostileServer.endless(declared_length=10 << 30))
        self.assertCapped(self.run_cli(["get", f"{s.url}/{ID}"]), 64 << 20)

    def test_delete_reading_an_endless_answer_stops_at_the_small_answer_cap(self):
        s = self.server(HostileServer.endless())
        self.keep_token_for(s)
        self.assertCapped(self.run_cli(["delete", f"{s.url}/{ID}"]), 1 << 20)


class TokenOriginTest(CliTestCase):
    """A kept delete token goes only to the origin (scheme, host, port, base path) it was kept
    for."""

    def test_a_token_is_never_sent_to_another_host_than_the_one_that_issued_it(self):
        real = self.server(HostileServer.answer(204, b""))
        fake = self.server(HostileServer.answer(204, b""))
        made = self.keep_token_for(real)
        self.assertEqual(made.returncode, 0, made)
        run = self.run_cli(["delete", f"{fake.url}/{ID}"])
        self.assertEqual(run.returncode, 1, run)
        self.assertEqual(fake.connections, 0)  # not a byte, let alone the token
        self.assertEqual(fake.requests, [])
        stderr = run.stderr.decode()
        self.assertIn(f"kept for http://127.0.0.1:{real.port}", stderr)
        self.assertIn("sent only to the server that issued it", stderr)
        # The token is still kept, and the right link still deletes.
        self.assertEqual(len(self.token_file()), 1)
        ok = self.run_cli(["delete", f"{real.url}/{ID}.py?lang=python"])
        self.assertEqual(ok.returncode, 0, ok)
        self.assertIn(f"Authorization: Bearer {TOKEN}".encode(), real.requests[0][0])
        self.assertEqual(self.token_file(), [])

    def test_a_token_is_not_sent_to_another_base_path_of_the_same_host(self):
        real = self.server(HostileServer.answer(204, b""))
        made = self.keep_token_for(real, base="/paste")
        self.assertEqual(made.returncode, 0, made)
        run = self.run_cli(["delete", f"{real.url}/other/{ID}"])
        self.assertEqual(run.returncode, 1, run)
        self.assertEqual(real.requests, [])


class EscapeTest(CliTestCase):
    """A server's text reaches the terminal escaped: error messages, the printed link, `list`,
    admin answers."""

    def test_an_error_message_from_get_is_escaped(self):
        s = self.server(HostileServer.answer(404, json.dumps({"error": HOSTILE_TEXT})))
        run = self.run_cli(["get", f"{s.url}/{ID}"])
        self.assertEqual(run.returncode, 1, run)
        self.assertNoTerminalControl(run.stderr)
        self.assertIn(b"\\u001B]0;pwned\\u0007", run.stderr)  # shown, not obeyed

    def test_a_refusal_body_and_reason_phrase_from_paste_are_escaped(self):
        # Beast refuses a control character in the reason phrase, but not other bytes: a
        # bidirectional override there is shown escaped too.
        s = self.server(HostileServer.answer(400, HOSTILE_TEXT.encode(),
                                             headers={"Content-Type": "text/plain"},
                                             reason="Bad \u202eRequest".encode()))
        run = self.run_cli(["paste", "--server", s.url], stdin=b"x\n")
        self.assertEqual(run.returncode, 1, run)
        self.assertNoTerminalControl(run.stderr)
        self.assertIn(b"pwned", run.stderr)

    def test_a_link_with_escapes_is_not_printed_and_not_kept(self):
        url_with_escapes = f"http://127.0.0.1:1/{ID}{HOSTILE_TEXT}"
        s = self.server(HostileServer.answer(201, json.dumps(
            {"id": ID, "url": url_with_escapes, "delete_token": TOKEN})))
        run = self.run_cli(["paste", "--server", s.url], stdin=b"x\n")
        self.assertEqual(run.returncode, 0, run)
        self.assertNoTerminalControl(run.stdout + run.stderr)
        self.assertEqual(run.stdout, f"{s.url}/{ID}\n".encode())  # made from --server instead
        listed = self.run_cli(["list"])
        self.assertNoTerminalControl(listed.stdout)
        self.assertIn(f"{s.url}/{ID}".encode(), listed.stdout)

    def test_list_escapes_a_line_written_by_hand_or_an_older_sluice(self):
        os.makedirs(os.path.join(self.home, "sluice"))
        with open(os.path.join(self.home, "sluice", "pastes"), "wb") as f:
            f.write(f"0 2099-01-01T00:00:00Z {ID} {TOKEN} http://h/{ID}{HOSTILE_TEXT}\n"
                    .encode())
        listed = self.run_cli(["list"])
        self.assertEqual(listed.returncode, 0, listed)
        self.assertNoTerminalControl(listed.stdout)

    def test_admin_errors_and_json_answers_are_escaped_and_stay_json(self):
        token_file = self.admin_token()
        refused = self.server(HostileServer.answer(403, json.dumps({"error": HOSTILE_TEXT})))
        run = self.run_cli(["admin", "--admin", refused.url, "--token-file", token_file, "audit"])
        self.assertEqual(run.returncode, 1, run)
        self.assertNoTerminalControl(run.stderr)
        # C1 controls and a bidirectional override inside JSON strings: escaped, same JSON.
        doc = {"entries": [{"note": "\u009b2J \u202egnp.exe \u0085x"}]}
        s = self.server(HostileServer.answer(200, json.dumps(doc, ensure_ascii=False)))
        shown = self.run_cli(["admin", "--admin", s.url, "--token-file", token_file, "audit"])
        self.assertEqual(shown.returncode, 0, shown)
        self.assertNoTerminalControl(shown.stdout)
        self.assertNotIn("\u0085".encode(), shown.stdout)
        self.assertEqual(json.loads(shown.stdout), doc)


class TokenStoreForgeryTest(CliTestCase):
    """A create answer cannot add a line to the token file: a field with a line break, a space or
    a control character is not kept."""

    FORGED = f"\n0 - {OTHER_ID} forgedtoken http://127.0.0.1:9/{OTHER_ID}"

    def paste_answering(self, **fields):
        answer = {"id": ID, "delete_token": TOKEN, "expires_at": "2099-01-01T00:00:00Z"}
        s = self.server(lambda *a: None)  # replaced below, once its URL is known
        answer["url"] = f"{s.url}/{ID}"
        answer.update({k: v.replace("URL", s.url) for k, v in fields.items()})
        s.play = HostileServer.answer(201, json.dumps(answer))
        return self.run_cli(["paste", "--server", s.url], stdin=b"x\n")

    def assertNothingForged(self):
        lines = self.token_file()
        self.assertLessEqual(len(lines), 1, lines)
        for line in lines:
            self.assertNotIn(OTHER_ID.encode(), line)
            self.assertNotIn(b"forgedtoken", line)
        listed = self.run_cli(["list"]).stdout
        self.assertNotIn(OTHER_ID.encode(), listed)

    def test_a_newline_in_the_url_forges_no_line(self):
        run = self.paste_answering(url="URL/" + ID + self.FORGED)
        self.assertEqual(run.returncode, 0, run)
        self.assertNothingForged()
        self.assertEqual(len(self.token_file()), 1)  # the paste itself is kept, with a clean link

    def test_a_newline_in_the_token_forges_no_line_and_the_token_is_not_kept(self):
        self.paste_answering(delete_token=TOKEN + self.FORGED)
        self.assertNothingForged()
        self.assertEqual(self.token_file(), [])

    def test_a_newline_in_the_expiry_forges_no_line(self):
        self.paste_answering(expires_at="2099-01-01T00:00:00Z" + self.FORGED)
        self.assertNothingForged()

    def test_a_newline_in_the_id_forges_no_line(self):
        run = self.paste_answering(id=ID + self.FORGED)
        self.assertEqual(run.returncode, 1, run)
        self.assertNothingForged()
        self.assertEqual(self.token_file(), [])


class RefusedBeforeAnyRequestTest(CliTestCase):
    """Malformed ids, links and tokens are refused before a connection is opened."""

    def test_links_whose_id_is_not_12_base62_characters_are_refused(self):
        s = self.server(HostileServer.answer(200, b"text", headers={"Content-Type": "text/plain"}))
        for link in (f"{s.url}/{ID}B", f"{s.url}/AAAAAA-AAAAA", f"{s.url}/{ID}\x1b[2J",
                     f"{s.url}/{ID} x", f"{s.url}/AAAAAAAAAAA"):
            run = self.run_cli(["get", link])
            self.assertEqual(run.returncode, 2, (link, run))
            self.assertNoTerminalControl(run.stderr)
        self.assertEqual(s.connections, 0)

    def test_admin_refuses_a_paste_id_that_is_not_12_base62_characters(self):
        s = self.server(HostileServer.answer(200, b"{}"))
        token_file = self.admin_token()
        for bad in ("AAAA", ID + "B"):
            run = self.run_cli(["admin", "--admin", s.url, "--token-file", token_file, "show", bad])
            self.assertEqual(run.returncode, 2, (bad, run))
        self.assertEqual(s.connections, 0)

    def test_admin_refuses_a_token_file_with_control_characters(self):
        s = self.server(HostileServer.answer(200, b"{}"))
        path = os.path.join(self.home, "admin-token")
        with open(path, "wb") as f:
            f.write(b"admintoken\rX-Injected: 1\n")
        run = self.run_cli(["admin", "--admin", s.url, "--token-file", path, "audit"])
        self.assertEqual(run.returncode, 2, run)
        self.assertEqual(s.connections, 0)

    def test_a_token_line_with_a_control_character_is_never_sent(self):
        s = self.server(HostileServer.answer(204, b""))
        os.makedirs(os.path.join(self.home, "sluice"))
        with open(os.path.join(self.home, "sluice", "pastes"), "wb") as f:
            f.write(f"0 - {ID} tok\x01en {s.url}/{ID}\n".encode())
        run = self.run_cli(["delete", f"{s.url}/{ID}"])
        self.assertEqual(run.returncode, 1, run)
        self.assertEqual(s.connections, 0)


class SlowRefusalTest(CliTestCase):
    def test_max_wait_counts_the_exchanges_not_only_the_pauses(self):
        # Each 429 comes after 3 s and asks for 1 s: with --max-wait 5s the budget is spent after
        # the second answer. Counting only the pauses, five rounds would fit.
        refuse = HostileServer.answer(429, json.dumps({"error": "busy", "reason": "x"}),
                                      headers={"Content-Type": "application/json",
                                               "Retry-After": "1"})

        def slow(server, conn, head):
            server.stopping.wait(3)
            refuse(server, conn, head)
        s = self.server(slow)
        run = self.run_cli(["get", "--max-wait", "5s", f"{s.url}/{ID}"])
        self.assertEqual(run.returncode, 1, run)
        self.assertLessEqual(len(s.requests), 2, run)


class ReviewQueueTest(CliTestCase):
    def test_admin_reports_stops_when_a_page_adds_nothing(self):
        # Every page empty, every page naming a next one: a walk that only stops at --limit
        # pastes would never end.
        s = self.server(HostileServer.answer(200, json.dumps(
            {"pastes": [], "next": "cursor x\r\n", "pending": 0})))
        run = self.run_cli(["admin", "--admin", s.url, "--token-file", self.admin_token(),
                            "reports"], time_limit=EXCHANGE_TIMEOUT)
        self.assertIsNone(run.killed, run)
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(len(s.requests), 1)


if __name__ == "__main__":
    unittest.main()
