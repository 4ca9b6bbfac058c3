"""The two attacks of issue 32, item 6, and the innocent client that must still be served, for
tests/integration/test_pressure.py and bench/pressure_attack.py: one implementation, so the test
asserts on the load the benchmark measures.

- SlowBodies: N connections from a few source addresses, each declaring a body and trickling it
  at a rate above min_body_rate, reconnecting as soon as the server cuts or refuses one.
- IdleKeepAlive: N keep-alive connections that ask for /healthz once every `interval` seconds and
  sit idle between, reconnecting as soon as the server closes one.
- Phone: one honest slow upload (400 KB at 30 KB/s), for tests/integration/test_honest_uploads.py
  and bench/honest_uploads.py.
- Innocent: one client creating a paste and reading it back, over and over, from its own address.

Each attacker runs its connections on one thread with a selector, so a thousand connections cost
one thread, not a thousand.
"""

import http.client
import selectors
import socket
import threading
import time

from rawhttp import RawConnection


def _status_of(buf):
    """The status of the response whose head is in `buf`, or None while the head is incomplete."""
    if b"\r\n" not in buf:
        return None
    line = buf.split(b"\r\n", 1)[0].split()
    try:
        return int(line[1])
    except (IndexError, ValueError):
        return 0


class _Attack:
    """The selector loop both attacks share: `_start(slot)` opens a connection for one slot,
    `_on_tick(conn, now)` acts on it when its time comes, `_on_readable` on an answer or close."""

    def __init__(self, port, sources, per_source, host="127.0.0.1"):
        self.port = port
        self.host = host
        self.slots = [s for s in sources for _ in range(per_source)]
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.statuses = {}     # status answered -> count
        self.closed = 0        # connections the server closed without an answer
        self.opened = 0
        self.thread = None

    def count(self, key):
        with self.lock:
            self.statuses[key] = self.statuses.get(key, 0) + 1

    def start(self):
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.stop_event.set()
        if self.thread:
            self.thread.join(timeout=30)

    def _open(self, source):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((source, 0))
        sock.settimeout(2)
        sock.connect((self.host, self.port))
        sock.setblocking(False)
        self.opened += 1
        return sock

    def _run(self):
        sel = selectors.DefaultSelector()
        conns = []
        for i, source in enumerate(self.slots):
            conns.append({"slot": i, "source": source, "sock": None, "next": 0.0, "buf": b""})
        try:
            while not self.stop_event.is_set():
                now = time.monotonic()
                for c in conns:
                    if c["sock"] is None and now >= c["next"]:
                        try:
                            c["sock"] = self._open(c["source"])
                            c["buf"] = b""
                            sel.register(c["sock"], selectors.EVENT_READ, c)
                            self._on_open(c, now)
                        except OSError:
                            c["sock"] = None
                            c["next"] = now + 0.1
                    elif c["sock"] is not None and now >= c["next"]:
                        self._tick(sel, c, now)
                timeout = max(0.0, min([c["next"] for c in conns] + [now + 0.05]) - now)
                for key, _ in sel.select(timeout=min(timeout, 0.05)):
                    self._readable(sel, key.data, time.monotonic())
        finally:
            for c in conns:
                if c["sock"] is not None:
                    try:
                        sel.unregister(c["sock"])
                    except (KeyError, ValueError):
                        pass
                    c["sock"].close()

    def _drop(self, sel, c, now, retry_after):
        try:
            sel.unregister(c["sock"])
        except (KeyError, ValueError):
            pass
        c["sock"].close()
        c["sock"] = None
        c["next"] = now + retry_after

    def _send(self, sel, c, now, data):
        try:
            c["sock"].send(data)
            return True
        except BlockingIOError:
            return True
        except OSError:
            with self.lock:
                self.closed += 1
            self._drop(sel, c, now, 0.0)
            return False


class SlowBodies(_Attack):
    """Creates whose bodies trickle in at `rate` bytes per second (in ten sends a second), each
    going silent after `sends_at_most` bytes when that is given (a body that declares much and
    sends next to nothing: it costs its sender nothing but a connection)."""

    def __init__(self, port, sources, per_source, rate=1500, declared=100_000, sends_at_most=None,
                 **kw):
        super().__init__(port, sources, per_source, **kw)
        self.rate = rate
        self.declared = declared
        self.sends_at_most = declared if sends_at_most is None else sends_at_most

    def _on_open(self, c, now):
        c["sent"] = 0
        head = (f"POST /api/v1/pastes HTTP/1.1\r\nHost: x\r\nContent-Length: {self.declared}"
                "\r\n\r\n").encode()
        c["sock"].send(head)
        c["next"] = now + 0.1

    def _tick(self, sel, c, now):
        chunk = max(1, int(self.rate / 10))
        left = self.sends_at_most - c["sent"]
        if left > 0 and self._send(sel, c, now, b"s" * min(chunk, left)):
            c["sent"] += min(chunk, left)
        if c["sock"] is not None:
            c["next"] = now + 0.1

    def _readable(self, sel, c, now):
        try:
            data = c["sock"].recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            c["buf"] += data
            status = _status_of(c["buf"])
            if status is None:
                return
            self.count(status)
            # Cut (408) or refused (503): at once again, as an attacker would.
            self._drop(sel, c, now, 0.0 if status == 408 else 0.05)
            return
        with self.lock:
            self.closed += 1
        self._drop(sel, c, now, 0.0)


class IdleKeepAlive(_Attack):
    """Keep-alive connections asking for /healthz every `interval` seconds, idle between."""

    def __init__(self, port, sources, per_source, interval=25.0, **kw):
        super().__init__(port, sources, per_source, **kw)
        self.interval = interval

    def _ask(self, sel, c, now):
        c["buf"] = b""
        if self._send(sel, c, now, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"):
            c["next"] = now + self.interval

    def _on_open(self, c, now):
        c["buf"] = b""
        try:
            c["sock"].send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        except OSError:
            pass
        c["next"] = now + self.interval

    def _tick(self, sel, c, now):
        self._ask(sel, c, now)

    def _readable(self, sel, c, now):
        try:
            data = c["sock"].recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            with self.lock:
                self.closed += 1  # closed by the server while idle: reclaimed or timed out
            self._drop(sel, c, now, 0.0)
            return
        c["buf"] += data
        status = _status_of(c["buf"])
        if status is not None and b"\r\n\r\n" in c["buf"]:
            self.count(status)
            c["buf"] = b""
            if status == 503:  # refused at the cap: the server closes it; come back soon
                self._drop(sel, c, now, 0.2)


class Innocent:
    """Creates a small paste and reads it back, `rate` times a second, each request on a new
    connection from `source`, recording every outcome (and each status or error seen)."""

    def __init__(self, port, source, rate=5.0, body=b"innocent " * 100, headers=None,
                 host="127.0.0.1", timeout=10):
        self.port = port
        self.source = source
        self.rate = rate
        self.body = body
        self.headers = dict(headers or {})
        self.host = host
        self.timeout = timeout
        self.ok = 0
        self.failed = 0
        self.outcomes = {}   # "create 201", "read 200", "create 503 create_slots", "error ..."
        self.samples = []    # (monotonic time, ok) for each request
        self.stop_event = threading.Event()
        self.thread = None

    def _note(self, ok, what):
        if ok:
            self.ok += 1
        else:
            self.failed += 1
        self.outcomes[what] = self.outcomes.get(what, 0) + 1
        self.samples.append((time.monotonic(), ok))

    def _request(self, method, path, body=None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout,
                                          source_address=(self.source, 0))
        try:
            headers = dict(self.headers)
            if body is not None:
                headers["Content-Length"] = str(len(body))
            conn.request(method, path, body=body, headers=headers)
            res = conn.getresponse()
            return res.status, res.read()
        finally:
            conn.close()

    def once(self):
        try:
            status, data = self._request("POST", "/api/v1/pastes", self.body)
        except OSError as e:
            self._note(False, f"create error {type(e).__name__}")
            return
        if status != 201:
            reason = ""
            if b'"reason"' in data:
                reason = data.split(b'"reason"', 1)[1].split(b'"')[1].decode(errors="replace")
            self._note(False, f"create {status} {reason}".strip())
            return
        self._note(True, "create 201")
        paste_id = data.split(b'"id"', 1)[1].split(b'"')[1].decode()
        try:
            status, text = self._request("GET", f"/raw/{paste_id}")
        except OSError as e:
            self._note(False, f"read error {type(e).__name__}")
            return
        self._note(status == 200 and text == self.body, f"read {status}")

    def _run(self):
        period = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            self.once()
            next_at += period
            delay = next_at - time.monotonic()
            if delay > 0:
                self.stop_event.wait(delay)
            else:
                next_at = time.monotonic()

    def start(self):
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.stop_event.set()
        if self.thread:
            self.thread.join(timeout=30)

    def success_rate(self):
        total = self.ok + self.failed
        return self.ok / total if total else 0.0


class Phone:
    """One honest slow upload from `source` (issue 43): a create of `size` bytes sent at `rate`
    bytes per second on a fixed schedule (ten sends a second, never ahead of it), then its
    answer: `status` (201, a status, or "error ..."), `reason`, `seconds`."""

    def __init__(self, port, source, size=400_000, rate=30_000):
        self.port = port
        self.source = source
        self.size = size
        self.rate = rate
        self.status = None
        self.reason = None
        self.seconds = None
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        started = time.monotonic()
        conn = RawConnection("127.0.0.1", self.port, timeout=60, source=self.source)
        try:
            conn.send_headers("POST", "/api/v1/pastes", {"Content-Length": str(self.size)})
            sent = 0
            tick = 0
            while sent < self.size:
                tick += 1
                due = started + tick * 0.1
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                # Never ahead of the schedule: a stalled phone catches up to `rate` at most.
                chunk = min(self.size - sent, int(self.rate * (time.monotonic() - started)) - sent)
                if chunk <= 0:
                    continue
                try:
                    conn.send(b"p" * chunk)
                except OSError:
                    break  # answered (and closed) before the whole body: read why
                sent += chunk
            res = conn.read_response()
            self.status = res.status
            self.reason = res.json().get("reason") if res.status != 201 else None
        except OSError as e:
            self.status = f"error {type(e).__name__}"
        finally:
            self.seconds = time.monotonic() - started
            conn.close()

    def start(self):
        self.thread.start()
        return self

    def join(self):
        self.thread.join(timeout=60)
