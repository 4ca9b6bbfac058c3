"""Hostile input and hostile clients: every attack a public, anonymous pastebin sees on day one,
tried against the real binary, each with the status (and connection fate) the protocol requires.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_hostile
Set SLUICE_HOSTILE_REPORT=FILE to also write the table of inputs tried and their outcomes.
"""

import html.parser
import json
import os
import socket
import subprocess
import threading
import time
import unittest

from promtext import metric, parse_metrics
from rawhttp import RawConnection, free_port, send_raw
from sluice_harness import SluiceServer, SluiceTestCase, wait_until

OUTCOMES = []  # (attack, input, status, connection closed) for the report


def record(attack, name, status, closed=None):
    OUTCOMES.append((attack, name, status, closed))


def tearDownModule():
    path = os.environ.get("SLUICE_HOSTILE_REPORT")
    if not path:
        return
    with open(path, "w") as f:
        f.write("| attack | input | status | connection closed |\n|---|---|---|---|\n")
        for attack, name, status, closed in OUTCOMES:
            shown = "" if closed is None else ("yes" if closed else "no")
            f.write(f"| {attack} | {name} | {status} | {shown} |\n")


def request(method, target, headers=(), body=b"", host=True):
    lines = [f"{method} {target} HTTP/1.1".encode("latin-1")]
    if host:
        lines.append(b"Host: 127.0.0.1")
    lines += [h.encode("latin-1") if isinstance(h, str) else h for h in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


CREATE = "/api/v1/pastes"

# Request smuggling and parser abuse: (name, raw request, expected status, must close).
FRAMING_CASES = [
    ("Content-Length and Transfer-Encoding: chunked",
     request("POST", CREATE, ["Content-Length: 5", "Transfer-Encoding: chunked"], b"0\r\n\r\n"),
     400, True),
    ("Content-Length and Transfer-Encoding: identity",
     request("POST", CREATE, ["Transfer-Encoding: identity", "Content-Length: 5"], b"hello"),
     400, True),
    ("two equal Content-Lengths",
     request("POST", CREATE, ["Content-Length: 5", "Content-Length: 5"], b"hello"), 400, True),
    ("two different Content-Lengths",
     request("POST", CREATE, ["Content-Length: 5", "Content-Length: 6"], b"hello!"), 400, True),
    ("Content-Length list '5, 6'",
     request("POST", CREATE, ["Content-Length: 5, 6"], b"hello!"), 400, True),
    ("Content-Length '+5'", request("POST", CREATE, ["Content-Length: +5"], b"hello"), 400, True),
    ("Content-Length '-1'", request("POST", CREATE, ["Content-Length: -1"], b"hello"), 400, True),
    ("Content-Length '0x5'", request("POST", CREATE, ["Content-Length: 0x5"], b"hello"), 400, True),
    ("Content-Length of 23 digits",
     request("POST", CREATE, ["Content-Length: 99999999999999999999999"], b"hello"), 400, True),
    ("space before the colon",
     request("POST", CREATE, ["Content-Length : 5"], b"hello"), 400, True),
    ("Transfer-Encoding twice (chunked, identity)",
     request("POST", CREATE, ["Transfer-Encoding: chunked", "Transfer-Encoding: identity"],
             b"0\r\n\r\n"), 400, True),
    ("Transfer-Encoding: gzip (not chunked last)",
     request("POST", CREATE, ["Transfer-Encoding: gzip"], b"hello"), 400, True),
    # A coding before chunked frames the body but is not implemented: 501 (RFC 9112 6.1).
    ("Transfer-Encoding: gzip, chunked on a create",
     request("POST", CREATE, ["Transfer-Encoding: gzip, chunked"], b"0\r\n\r\n"), 501, True),
    ("Transfer-Encoding: identity, chunked",
     request("POST", CREATE, ["Transfer-Encoding: identity, chunked"], b"0\r\n\r\n"), 501, True),
    # Not a coding named chunked, so chunked is not last: the length is unknown (RFC 9112 6.3).
    ("Transfer-Encoding: xchunked",
     request("POST", CREATE, ["Transfer-Encoding: xchunked"], b"0\r\n\r\n"), 400, True),
    ("Transfer-Encoding: chunked, chunked",
     request("POST", CREATE, ["Transfer-Encoding: chunked, chunked"], b"0\r\n\r\n"), 400, True),
    ("Content-Length list '5, 5'",
     request("POST", CREATE, ["Content-Length: 5, 5"], b"hello"), 400, True),
    ("obs-fold header line",
     request("GET", "/healthz", ["X-A: a", " folded"]), 400, True),
    ("obs-fold with a tab, folding a Transfer-Encoding",
     request("POST", CREATE, ["X-A: a", "\tTransfer-Encoding: chunked", "Content-Length: 5"],
             b"hello"), 400, True),
    ("chunked body with a quoted extension",
     request("POST", CREATE, ["Transfer-Encoding: chunked"], b'5;x="\r\n"\r\nhello\r\n0\r\n\r\n'),
     411, True),
    # A body on a route that takes none has no meaning (RFC 9110 9.3.1): a small one is read and
    # dropped, keeping the connection; only one over 16 KB is refused, as too large.
    ("chunked body on a GET",
     request("GET", "/healthz", ["Transfer-Encoding: chunked"], b"5\r\nhello\r\n0\r\n\r\n"),
     200, False),
    ("5-byte body on a GET", request("GET", "/healthz", ["Content-Length: 5"], b"hello"), 200,
     False),
    ("Content-Length: 0 on a GET", request("GET", "/healthz", ["Content-Length: 0"]), 200, False),
    ("20 KB body on a GET",
     request("GET", "/healthz", ["Content-Length: 20000"], b"a" * 20000), 413, True),
    ("bare LF line endings", b"GET /healthz HTTP/1.1\nHost: x\n\n", 400, True),
    ("NUL in a header value", request("GET", "/healthz", [b"X-A: a\x00b"]), 400, True),
    ("HTTP/1.1 without Host", request("GET", "/healthz", host=False), 400, True),
    ("two Host headers", request("GET", "/healthz", ["Host: evil.example"]), 400, True),
    ("version HTTP/2.0 on an HTTP/1 connection", request("GET", "/healthz HTTP/2.0 x"), 400, True),
    ("HTTP/0.9 request line", b"GET /healthz\r\n\r\n", 400, True),
    ("target without a leading slash", request("GET", "healthz"), 400, True),
    ("space inside the target", request("GET", "/raw/abc def"), 400, True),
    ("DEL byte inside the target", request("GET", "/raw/abc\x7fdef"), 400, True),
    ("method with a control byte", request("G\x01T", "/healthz"), 400, True),
    ("unknown method BREW", request("BREW", "/healthz"), 501, False),
    ("lower-case method get", request("get", "/healthz"), 501, False),
    ("TRACE", request("TRACE", "/"), 405, False),
    ("CONNECT", request("CONNECT", "evil.example:443"), 400, True),
    ("DELETE on a view route", request("DELETE", "/abcdefghijkl"), 405, False),
    ("target of 20 KB", request("GET", "/" + "a" * 20000), 414, True),
    ("target of 100 KB", request("GET", "/" + "a" * 100000), 414, True),
    ("target of 9 KB", request("GET", "/" + "a" * 9000), 414, True),
    ("200 fields of 100 bytes (21.9 KB)",
     request("GET", "/healthz", [f"X-H{i:03d}: " + "a" * 92 for i in range(200)]), 431, True),
    ("5,000 header fields",
     request("GET", "/healthz", [f"X-{i}: y" for i in range(5000)]), 431, True),
    ("one header of 20 KB", request("GET", "/healthz", ["X-Big: " + "a" * 20000]), 431, True),
    ("bytes that are not HTTP", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,
     400, True),
]

# Paste text that must be refused: (name, bytes).
BAD_TEXT = [
    ("NUL byte", b"abc\x00def"),
    ("overlong '/' (C0 AF)", b"a\xc0\xafb"),
    ("overlong NUL (C0 80)", b"a\xc0\x80b"),
    ("overlong 3-byte '/' (E0 80 AF)", b"a\xe0\x80\xafb"),
    ("overlong 4-byte (F0 80 80 AF)", b"a\xf0\x80\x80\xafb"),
    ("UTF-16 surrogate D800 (ED A0 80)", b"a\xed\xa0\x80b"),
    ("UTF-16 surrogate DFFF (ED BF BF)", b"a\xed\xbf\xbfb"),
    ("surrogate pair as CESU-8", b"\xed\xa0\xbd\xed\xb8\x80"),
    ("code point above U+10FFFF (F4 90 80 80)", b"a\xf4\x90\x80\x80b"),
    ("5-byte sequence (F8)", b"a\xf8\x88\x80\x80\x80b"),
    ("lone continuation byte", b"a\x80b"),
    ("truncated 3-byte sequence at the end", b"abc\xe2\x82"),
    ("Latin-1 text", "caf\u00e9".encode("latin-1")),
    ("empty", b""),
]

# Texts that must be stored and served back byte for byte.
GOOD_TEXT = [
    ("BOM then text", b"\xef\xbb\xbfhello"),
    ("U+FFFF noncharacter", "a\uffffb".encode("utf-8")),
    ("U+10FFFF", "a\U0010ffffb".encode("utf-8")),
    ("CRLF and tabs", b"a\r\n\tb\r\n"),
    ("right-to-left override", "abc\u202edef".encode("utf-8")),
]

# Ids that must never reach the filesystem: (name, path segment as sent).
BAD_IDS = [
    ("../ in the raw route", "/raw/../../../etc/passwd"),
    ("..%2f encoded", "/raw/..%2f..%2f..%2fetc%2fpasswd"),
    ("..%252f double encoded", "/raw/..%252f..%252fetc%252fpasswd"),
    ("backslashes", "/raw/..\\..\\etc\\passwd"),
    ("%5c encoded backslashes", "/raw/..%5c..%5cmeta.db"),
    ("absolute path encoded", "/raw/%2fetc%2fpasswd"),
    ("dot segments in a view", "/..%2fmeta.db"),
    ("the database's name", "/raw/meta.db"),
    ("a shard folder", "/raw/.tmp"),
    ("12 chars with a dot", "/raw/abcdef.ghijk"),
    ("13 base62 chars", "/raw/abcdefghijklm"),
    ("11 base62 chars", "/raw/abcdefghijk"),
    ("NUL encoded", "/raw/abcdefghijk%00"),
    ("unicode look-alike", "/raw/abcdefghijk\u0430".encode("utf-8").decode("latin-1")),
    ("delete with ../", "/api/v1/pastes/..%2f..%2fmeta.db"),
]

MARK = "XSS7f3q"
HOSTILE_PASTES = [
    f"<script>alert('{MARK}')</script>",
    f"</pre><img src=x onerror=alert('{MARK}')>",
    f"\"><svg onload=alert('{MARK}')>",
    f"</textarea><script>{MARK}</script>",
    f"<!-- {MARK} --><a href=\"javascript:alert('{MARK}')\">x</a>",
    f"<style>body{{background:url('{MARK}')}}</style>",
    f"<meta http-equiv=refresh content=\"0;url=//{MARK}\">",
    f"{{{{7*7}}}} ${{{MARK}}} ]]> <![CDATA[{MARK}]]>",
]


class MarkupScan(html.parser.HTMLParser):
    """Where a marker string landed: in text (safe) or in markup (a tag, attribute, comment or
    script/style body: unsafe)."""

    def __init__(self, mark):
        super().__init__(convert_charrefs=True)
        self.mark = mark
        self.text = []
        self.in_markup = []
        self.raw_element = None

    def handle_starttag(self, tag, attrs):
        if self.mark in tag or any(self.mark in (k or "") or self.mark in (v or "")
                                   for k, v in attrs):
            self.in_markup.append(f"<{tag} {attrs}>")
        if tag in ("script", "style"):
            self.raw_element = tag

    def handle_endtag(self, tag):
        if tag == self.raw_element:
            self.raw_element = None

    def handle_data(self, data):
        if self.raw_element and self.mark in data:
            self.in_markup.append(f"<{self.raw_element}>{data}")
        else:
            self.text.append(data)

    def handle_comment(self, data):
        if self.mark in data:
            self.in_markup.append(f"<!--{data}-->")


class ParserAbuseTest(SluiceTestCase):

    def test_every_smuggling_and_parser_abuse_case_is_refused_as_the_protocol_requires(self):
        s = self.server()
        failures = []
        for name, data, want_status, want_close in FRAMING_CASES:
            status, body, closed = send_raw(s.port, data)
            record("framing", name, status, closed)
            if status != want_status or (want_close and not closed):
                failures.append((name, status, closed, body[:100]))
            elif status >= 400:
                try:
                    json.loads(body)
                except ValueError:
                    failures.append((name, "body is not JSON", body[:100]))
        self.assertEqual(failures, [])
        # None of it created anything, and the server is still serving.
        self.assertEqual(s.query("SELECT count(*) FROM pastes")[0][0], 0)
        self.assertEqual(s.get("/healthz").status, 200)

    def test_a_smuggled_second_request_is_never_answered(self):
        s = self.server()
        # A front end honouring Content-Length would see one request; one honouring chunked would
        # see a second, smuggled GET. Refusing and closing leaves nothing to smuggle.
        smuggled = request("GET", "/metrics")
        data = request("POST", CREATE, ["Content-Length: 6", "Transfer-Encoding: chunked"],
                       b"0\r\n\r\n" + smuggled)
        status, body, closed = send_raw(s.port, data)
        self.assertEqual((status, closed), (400, True))
        self.assertNotIn(b"HTTP/1.1 200", body)

    def test_absolute_form_target_is_routed_by_its_path(self):
        s = self.server()
        status, body, _ = send_raw(s.port, request("GET", "http://evil.example/healthz"))
        self.assertEqual((status, body), (200, b"ok\n"))


class ContentTest(SluiceTestCase):

    def test_invalid_text_is_refused_by_every_create_route(self):
        s = self.server()
        failures = []
        for name, body in BAD_TEXT:
            api = s.create(body)
            root = s.request("POST", "/", body=body)
            boundary = "b0undary"
            form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\n"
                    .encode() + body + f"\r\n--{boundary}--\r\n".encode())
            multipart = s.request("POST", "/", body=form, headers={
                "Content-Type": f"multipart/form-data; boundary={boundary}"})
            record("paste text", name, f"{api.status} / {root.status} / {multipart.status}")
            for route, res in (("api", api), ("post /", root), ("form", multipart)):
                if res.status != 400 or "error" not in res.json():
                    failures.append((name, route, res.status, res.body[:80]))
        self.assertEqual(failures, [])
        self.assertEqual(s.query("SELECT count(*) FROM pastes")[0][0], 0)

    def test_unusual_but_valid_text_round_trips_byte_for_byte(self):
        s = self.server()
        for name, body in GOOD_TEXT:
            created = s.create_ok(body)
            got = s.get(f"/raw/{created['id']}")
            record("paste text", name, got.status)
            self.assertEqual((got.status, got.body), (200, body), name)

    def test_hostile_pastes_are_text_in_every_view(self):
        s = self.server()
        for paste in HOSTILE_PASTES:
            created = s.create_ok(paste.encode())
            paste_id = created["id"]
            views = {
                "view": s.get(f"/{paste_id}"),
                "view as browser": s.get(f"/{paste_id}", headers={"Accept": "text/html"}),
                "raw": s.get(f"/raw/{paste_id}"),
                "create page": s.request(
                    "POST", "/", body=_form(paste), headers={
                        "Accept": "text/html",
                        "Content-Type": "multipart/form-data; boundary=xx"}),
            }
            for view, res in views.items():
                self.assertIn(res.status, (200, 201), (view, paste))
                content_type = res.header("Content-Type") or ""
                record("hostile paste", f"{paste[:40]} in {view}",
                       f"{res.status} {content_type.split(';')[0]}")
                if view == "raw":
                    self.assertEqual(res.body, paste.encode())
                    self.assertTrue(content_type.startswith("text/plain"), content_type)
                    self.assertEqual(res.header("X-Content-Type-Options"), "nosniff")
                    self.assertIn("sandbox", res.header("Content-Security-Policy") or "")
                    continue
                if not content_type.startswith("text/html"):
                    continue
                self.assert_strict_csp(res, view)
                scan = MarkupScan(MARK)
                scan.feed(res.text)
                self.assertEqual(scan.in_markup, [], f"{view}: paste text became markup")
                if view != "create page":
                    self.assertIn(paste, "".join(scan.text), f"{view}: paste text not shown")

    def test_hostile_ids_in_the_url_are_escaped_in_error_pages(self):
        s = self.server()
        for target in (f"/%3Cscript%3E{MARK}%3C/script%3E", f"/raw/%22%3E%3Csvg%20onload={MARK}%3E"):
            res = s.get(target, headers={"Accept": "text/html"})
            self.assertEqual(res.status, 404)
            scan = MarkupScan(MARK)
            scan.feed(res.text)
            self.assertEqual(scan.in_markup, [])

    def assert_strict_csp(self, res, where):
        csp = res.header("Content-Security-Policy") or ""
        directives = {}
        for part in csp.split(";"):
            words = part.split()
            if words:
                directives[words[0]] = words[1:]
        script = directives.get("script-src", directives.get("default-src"))
        self.assertIsNotNone(script, f"{where}: no script-src or default-src in '{csp}'")
        self.assertNotIn("'unsafe-inline'", script, where)
        self.assertNotIn("'unsafe-eval'", script, where)
        self.assertFalse(any(w in ("*", "data:", "http:", "https:") for w in script), where)


def _form(text):
    return (b"--xx\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\n" + text.encode()
            + b"\r\n--xx--\r\n")


class PathTraversalTest(SluiceTestCase):

    def test_ids_that_are_not_ids_never_reach_the_filesystem(self):
        s = self.server()
        created = s.create_ok(b"a real paste")
        # Bait files where a traversal would find them.
        with open(os.path.join(s.root, "secret"), "w") as f:
            f.write("SECRET-BAIT")
        failures = []
        for name, target in BAD_IDS:
            method = "DELETE" if target.startswith("/api/") else "GET"
            headers = {"Authorization": "Bearer AAAAAAAAAAAAAAAAAAAAAA"} if method == "DELETE" else {}
            status, body, _ = send_raw(s.port, request(method, target, [
                f"{k}: {v}" for k, v in headers.items()]))
            record("path traversal", name, status)
            if status not in (400, 404) or b"SECRET" in body or b"SQLite" in body:
                failures.append((name, status, body[:80]))
        self.assertEqual(failures, [])
        # Nothing was removed or created outside the paste's own file.
        self.assertTrue(os.path.isfile(os.path.join(s.root, "secret")))
        self.assertTrue(os.path.isfile(s.db_path))
        self.assertEqual(s.get(f"/raw/{created['id']}").body, b"a real paste")


class ClientAddressTest(SluiceTestCase):

    def create_from(self, s, forwarded):
        return s.create(b"x", headers={"X-Forwarded-For": forwarded} if forwarded else None)

    def test_forged_forwarded_for_never_changes_the_key_without_a_trusted_proxy(self):
        s = self.server(["--ip-create-burst", "3", "--ip-create-rate", "0.01"])
        statuses = [self.create_from(s, f"10.0.{i}.{i}").status for i in range(6)]
        statuses.append(self.create_from(s, "").status)
        record("client address", "6 creates, each with another forged X-Forwarded-For",
               " ".join(map(str, statuses)))
        self.assertEqual(statuses, [201, 201, 201, 429, 429, 429, 429])

    def test_behind_a_trusted_proxy_only_its_appended_hop_counts(self):
        s = self.server(["--ip-create-burst", "3", "--ip-create-rate", "0.01",
                         "--trusted-proxy", "127.0.0.1"])
        # The proxy appends the address it saw; whatever the client wrote before it is ignored.
        same_client = [self.create_from(s, f"6.6.6.{i}, 203.0.113.7").status for i in range(5)]
        record("client address", "5 creates via the trusted proxy, forged first hops, one client",
               " ".join(map(str, same_client)))
        self.assertEqual(same_client, [201, 201, 201, 429, 429])
        # Another real client behind the same proxy has its own budget.
        self.assertEqual(self.create_from(s, "203.0.113.8").status, 201)
        # Several X-Forwarded-For fields: the last field's last hop is the one the proxy wrote.
        res = s.create(b"x", headers=[("X-Forwarded-For", "198.51.100.1"),
                                      ("X-Forwarded-For", "203.0.113.7")])
        self.assertEqual(res.status, 429)


class SlowClientTest(SluiceTestCase):
    ARGS = ["--header-timeout", "1s", "--idle-timeout", "2s", "--body-timeout", "1s"]

    def trickle(self, conn, data, interval, stop):
        """Sends `data` a byte at a time; returns how many bytes went out before the cut."""
        sent = 0
        for byte in data:
            if stop.is_set():
                break
            try:
                conn.sock.sendall(bytes([byte]))
            except OSError:
                break
            sent += 1
            time.sleep(interval)
        return sent

    def test_headers_sent_a_byte_at_a_time_are_cut_off(self):
        s = self.server(self.ARGS)
        conn = RawConnection("127.0.0.1", s.port)
        headers = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"
        stop = threading.Event()
        result = {}
        sender = threading.Thread(
            target=lambda: result.setdefault("sent", self.trickle(conn, headers, 0.05, stop)))
        sender.start()
        try:
            # 230 bytes at 20 bytes/s would take over 11 s; the cut comes at the 1 s header
            # timeout. The stream closes the socket at its timeout, so there is no 408 to read.
            self.assertTrue(conn.closed_by_peer(timeout=10))
        finally:
            stop.set()
            sender.join()
            conn.close()
        record("slow client", "headers a byte every 50 ms", "cut off", True)
        self.assertLess(result["sent"], len(headers))
        self.assertEqual(metric(s.metrics(), "sluice_http_timeouts_total", phase="headers"), 1)

    def test_a_slow_body_cannot_hold_a_create_slot_past_the_body_timeout(self):
        s = self.server(self.ARGS + ["--create-slots", "1"])
        conn = RawConnection("127.0.0.1", s.port)
        conn.send_headers("POST", CREATE, {"Content-Length": "100"})
        stop = threading.Event()
        result = {}
        sender = threading.Thread(
            target=lambda: result.setdefault("sent", self.trickle(conn, b"x" * 100, 0.1, stop)))
        sender.start()
        try:
            time.sleep(0.3)
            # The slow client holds the only slot for now...
            blocked = s.create(b"meanwhile")
            self.assertEqual(blocked.status, 503)
            # ...until its body timeout cuts it off.
            self.assertTrue(conn.closed_by_peer(timeout=10))
        finally:
            stop.set()
            sender.join()
            conn.close()
        record("slow client", "create body a byte every 100 ms", "cut off", True)
        self.assertLess(result["sent"], 100)
        self.assertEqual(s.create(b"after").status, 201)
        self.assertEqual(metric(s.metrics(), "sluice_http_timeouts_total", phase="body"), 1)
        self.assertEqual(s.query("SELECT count(*) FROM pastes")[0][0], 1)

    def test_idle_keep_alive_and_silent_connections_are_closed(self):
        s = self.server(self.ARGS)
        silent = RawConnection("127.0.0.1", s.port)
        used = RawConnection("127.0.0.1", s.port)
        used.send_headers("GET", "/healthz", {})
        self.assertEqual(used.read_response().status, 200)
        try:
            self.assertTrue(silent.closed_by_peer(timeout=15))
            self.assertTrue(used.closed_by_peer(timeout=15))
        finally:
            silent.close()
            used.close()
        record("slow client", "connection that never sends", "closed", True)
        record("slow client", "idle keep-alive connection", "closed", True)

    def test_many_slowloris_connections_do_not_stop_other_clients(self):
        # A longer header timeout than the other tests, so all 60 arrive before the first is cut
        # even on a busy machine. One event loop, so one accept queue: with one per thread
        # (SO_REUSEPORT) the kernel spreads connections over the queues, and the probe below
        # could be accepted before slowloris connections still waiting in the other queue.
        s = self.server(["--header-timeout", "5s", "--idle-timeout", "10s",
                         "--max-connections", "40", "--threads", "1"])
        loris = []
        try:
            for _ in range(60):
                try:
                    c = RawConnection("127.0.0.1", s.port)
                    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n")
                    loris.append(c)
                except OSError:
                    break
            # Past the cap the extra connections got a 503; once the header timeout cuts the
            # others, normal clients are served again.
            served = wait_until(lambda: (r := s.get("/metrics")).status == 200 and r, timeout=30,
                                message="served again after the slowloris connections were cut")
            refused = metric(parse_metrics(served.text), "sluice_admission_rejections_total",
                             reason="connections")
            record("slow client", "60 slowloris connections against a cap of 40",
                   f"{int(refused)} refused with 503, the rest cut at the header timeout")
            self.assertGreaterEqual(refused, 1)
        finally:
            for c in loris:
                c.close()


@unittest.skipUnless(os.geteuid() == 0, "mounting a small tmpfs needs root (CI runs as root)")
class WireAnswersTest(SluiceTestCase):
    """Answers that are not attacks but must still be what RFC 9110/9112 and the README say."""

    def raw_head(self, s, data):
        """The raw head (bytes) of the first response to `data` on a new connection."""
        conn = RawConnection("127.0.0.1", s.port)
        try:
            conn.send(data)
            while b"\r\n\r\n" not in conn.buf:
                conn._fill()
            return conn.buf.split(b"\r\n\r\n", 1)[0]
        finally:
            conn.close()

    def test_304_and_204_carry_no_content_length(self):
        s = self.server()
        doc = s.create_ok(b"hello")
        etag = s.get(f"/raw/{doc['id']}").header("ETag")
        self.assertTrue(etag)
        for method in ("GET", "HEAD"):
            head = self.raw_head(s, request(method, f"/raw/{doc['id']}",
                                            [f"If-None-Match: {etag}"]))
            self.assertTrue(head.startswith(b"HTTP/1.1 304"), head)
            self.assertNotIn(b"content-length", head.lower(), head)
            record("wire", f"{method} answered 304", 304, None)
        head = self.raw_head(s, request("DELETE", f"/api/v1/pastes/{doc['id']}",
                                        [f"Authorization: Bearer {doc['delete_token']}"]))
        self.assertTrue(head.startswith(b"HTTP/1.1 204"), head)
        self.assertNotIn(b"content-length", head.lower(), head)
        record("wire", "DELETE answered 204", 204, None)

    def test_empty_lines_before_a_request_line_are_ignored(self):
        s = self.server()
        # On a fresh connection...
        status, body, _ = send_raw(s.port, b"\r\n\r\n" + request("GET", "/healthz"))
        self.assertEqual((status, body), (200, b"ok\n"))
        # ...and between keep-alive requests (a CRLF after a body, as some clients send).
        conn = RawConnection("127.0.0.1", s.port)
        try:
            conn.send(request("POST", CREATE, ["Content-Length: 5"], b"hello") + b"\r\n" +
                      request("GET", "/healthz") + b"\r\n\r\n")
            self.assertEqual(conn.read_response().status, 201)
            res = conn.read_response()
            self.assertEqual((res.status, res.body), (200, b"ok\n"))
            conn.send(request("GET", "/healthz"))
            self.assertEqual(conn.read_response().status, 200)
        finally:
            conn.close()
        record("wire", "CRLF before the request line, fresh and kept alive", 200, False)

    def test_a_get_with_a_small_body_is_answered_and_the_connection_kept(self):
        s = self.server()
        conn = RawConnection("127.0.0.1", s.port)
        try:
            conn.send(request("GET", "/healthz", ["Content-Length: 5"], b"hello") +
                      request("GET", "/healthz", ["Transfer-Encoding: chunked"],
                              b"3\r\nabc\r\n0\r\n\r\n") +
                      request("GET", "/healthz"))
            for _ in range(3):
                res = conn.read_response()
                self.assertEqual((res.status, res.body), (200, b"ok\n"))
        finally:
            conn.close()

    def test_multipart_that_the_route_cannot_take_apart_is_refused_not_stored(self):
        s = self.server()
        form = (b"--xx\r\nContent-Disposition: form-data; name=\"file\"; filename=\"secret.txt\""
                b"\r\n\r\nhello\r\n--xx--\r\n")
        api = s.create(form, headers={"Content-Type": "multipart/form-data; boundary=xx"})
        self.assertEqual(api.status, 415, api)
        self.assertEqual(api.json()["reason"], "unsupported_media_type")
        for content_type in ("multipart/form-data", "multipart/form-data; boundary=",
                             "multipart/mixed; boundary=xx", "Multipart/Form-Data; charset=x"):
            res = s.request("POST", "/", body=form, headers={"Content-Type": content_type})
            self.assertEqual(res.status, 400, (content_type, res))
            self.assertEqual(res.json()["reason"], "bad_multipart")
            record("wire", f"POST / as {content_type}", res.status)
        record("wire", "multipart to the raw-body API", api.status)
        self.assertEqual(s.query("SELECT count(*) FROM pastes")[0][0], 0)
        # A form with its boundary still works, and the raw API still takes any other text.
        ok = s.request("POST", "/", body=form,
                       headers={"Content-Type": "multipart/form-data; boundary=xx"})
        self.assertEqual(ok.status, 201, ok)
        self.assertEqual(s.create(b"plain", headers={"Content-Type": "text/plain"}).status, 201)

    def test_the_delete_page_of_a_malformed_id_is_404(self):
        s = self.server()
        for path in ("/delete/abc", "/delete/abcdefghijk!", "/delete/..%2fmeta.db"):
            res = s.get(path)
            self.assertEqual(res.status, 404, (path, res))
            self.assertEqual(res.json()["reason"], "not_found")
            record("wire", f"GET {path}", res.status)
        # A well-formed id still gets its confirmation page.
        doc = s.create_ok(b"hello")
        self.assertEqual(s.get(f"/delete/{doc['id']}?token=x").status, 200)

    def test_parser_refusals_and_slow_reads_are_counted(self):
        s = self.server(["--body-timeout", "1s"])
        for data in (request("GET", "/" + "a" * 9000), b"GET / HTTP/1.1\r\nHost: x\r\n y\r\n\r\n",
                     request("GET", "/healthz", [f"X-H{i:03d}: " + "a" * 92 for i in range(200)])):
            send_raw(s.port, data)
        m = s.metrics()
        self.assertEqual(metric(m, "sluice_http_requests_total", route="unparsed", status="414"), 1)
        self.assertEqual(metric(m, "sluice_http_requests_total", route="unparsed", status="400"), 1)
        self.assertEqual(metric(m, "sluice_http_requests_total", route="unparsed", status="431"), 1)
        # A client that asks for a large paste many times and never reads: the server's writes
        # stall and are cut at body_timeout.
        doc = s.create_ok(b"x" * 900_000)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(15)
        sock.connect(("127.0.0.1", s.port))
        try:
            sock.sendall(request("GET", f"/raw/{doc['id']}") * 20)
            self.assertTrue(wait_until(
                lambda: metric(s.metrics(), "sluice_http_timeouts_total", phase="write") == 1,
                timeout=15))
        finally:
            sock.close()
        record("slow client", "never reads its answers", "cut off", True)

    def test_a_wildcard_listen_address_hands_out_loopback_links(self):
        for address, host in (("0.0.0.0", "127.0.0.1"), ("[::]", "[::1]")):
            with self.subTest(address=address):
                port = free_port()
                s = WildcardServer(address, port=port)
                self._servers.append(s)
                self.addCleanup(self._finish_server, s)
                s.start()
                doc = s.create_ok(b"hello")
                self.assertEqual(doc["url"], f"http://{host}:{port}/{doc['id']}")
                self.assertTrue(doc["raw_url"].startswith(f"http://{host}:{port}/raw/"), doc)
                self.assertIn("set public_url", s.log())
                record("wire", f"links with --listen {address}:PORT", doc["url"].split("/")[2])
                s.stop()


class WildcardServer(SluiceServer):
    """A server listening on a wildcard address instead of the harness's 127.0.0.1."""

    def __init__(self, address, **kw):
        super().__init__(**kw)
        self.address = address

    def command(self):
        cmd = super().command()
        at = cmd.index("--listen") + 1
        cmd[at] = f"{self.address}:{self.requested_port}"
        return cmd


class DiskFullTest(SluiceTestCase):
    """The embedded store on a real, small filesystem that fills up."""

    def setUp(self):
        super().setUp()
        self.mount = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"sluice-full-{os.getpid()}")
        os.makedirs(self.mount, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", self.mount], check=True)
        self.addCleanup(os.rmdir, self.mount)
        self.addCleanup(subprocess.run, ["umount", "-l", self.mount], check=False)

    def test_disk_full_answers_503_damages_nothing_and_recovers(self):
        s = self.server(["--breaker-open-for", "1s", "--cache-bytes", "0"],
                        data_dir=os.path.join(self.mount, "data"))
        stored = {}
        for i in range(5):
            body = f"paste {i} ".encode() * 1000
            stored[s.create_ok(body)["id"]] = body
        # Fill the disk with a ballast file, leaving a few kilobytes. Unbuffered: a buffered file
        # kept the tail of a short write and raised ENOSPC again from its close, outside the try
        # (once the store's schema grew and the last write no longer ended on a boundary).
        ballast = os.path.join(self.mount, "ballast")
        with open(ballast, "wb", buffering=0) as f:
            try:
                while f.write(b"\0" * 65536):
                    pass
            except OSError:
                pass
        statuses = []
        for i in range(20):
            res = s.create(f"while full {i} ".encode() * 2000)
            statuses.append(res.status)
            if res.status == 201:
                stored[res.json()["id"]] = f"while full {i} ".encode() * 2000
            else:
                self.assertIn(res.status, (503,), res.body)
                self.assertIn("error", res.json())
        record("disk full", "20 creates of 20 KB on a full disk",
               f"{statuses.count(503)} x 503, {statuses.count(201)} x 201 (before the last bytes ran out)")
        self.assertGreaterEqual(statuses.count(503), 15, statuses)
        # Reads of what was stored keep working while the disk is full.
        for paste_id, body in stored.items():
            self.assertEqual(s.get(f"/raw/{paste_id}").body, body)
        # Space returns: creates succeed again without a restart.
        os.remove(ballast)
        wait_until(lambda: s.create(b"space is back").status == 201, timeout=20,
                   message="creates succeed once space returns")
        record("disk full", "create after space returns", 201)
        s.restart()
        for paste_id, body in stored.items():
            got = s.get(f"/raw/{paste_id}")
            self.assertEqual((got.status, got.body), (200, body), paste_id)


if __name__ == "__main__":
    unittest.main()
