"""HTTP at the socket level, for the tests, the benches and the tools: the one raw client.

Standard library only, and it imports nothing else of tests/lib, so a bench script or a fake server
can use it alone (bench/shed_probe.py adds tests/lib to sys.path for it).

- `free_port()` and `free_port_range(span)`: loopback ports nobody listens on.
- `parse_head(raw)`: a status line and header block -> (status, {lower name: value}).
- `RawConnection`: a socket for what http.client cannot do: send any bytes (headers now, a body
  later or never, malformed framing), read one Content-Length-framed response, tell whether the
  server closed the connection.
- `send_raw(port, data)`: one exchange of raw bytes on a new connection, read until the server
  closes it or goes quiet: (status, every byte after the first head, closed).

tests/lib/loadgen.py's open-loop `exchange` writes and reads at once (a server may answer before it
reads the body); it parses what it reads with `parse_head` from here.
"""

import http.client
import json
import random
import socket
import struct


class Response:
    """A fully read HTTP response."""

    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers  # http.client.HTTPMessage: case-insensitive get()
        self.body = body

    def header(self, name):
        return self.headers.get(name)

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    @property
    def text(self):
        return self.body.decode("utf-8")

    def __repr__(self):
        return f"<Response {self.status} {dict(self.headers)!r} {self.body[:300]!r}>"


def free_port():
    """A loopback port free now (the kernel's pick: another process may take it before use)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_range(span):
    """A base port with `span` free loopback ports above it, below the kernel's ephemeral range (so
    no outgoing connection, the tests' own included, takes one of them meanwhile)."""
    for _ in range(200):
        base = random.randrange(20000, 32000 - span)
        ok = True
        for p in range(base, base + span):
            with socket.socket() as t:
                t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    t.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port range on loopback")


def parse_head(raw):
    """A response's status line and headers (bytes, without the blank line) -> (status, headers):
    header names lower-cased, a repeated header keeps its last value."""
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


def _needs_more(buf):
    """True while `buf` (which holds a whole head) lacks part of its Content-Length body."""
    head, _, body = buf.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) < int(line.split(b":", 1)[1])
    return False


class RawConnection:
    """A socket for requests http.client cannot make: headers now, body later or never."""

    def __init__(self, host, port, timeout=10, source=None):
        # source: the local address to connect from (127.0.0.2 is another client on loopback).
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.buf = b""

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.sock.sendall(data)

    def send_headers(self, method, path, headers):
        lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        self.send("\r\n".join(lines) + "\r\n\r\n")

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed before a whole response")
        self.buf += chunk

    def read_head(self):
        """Reads one status line and header block; returns (status, {lower name: value})."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        return parse_head(head)

    def read_response(self, head_request=False):
        """Reads a whole response (Content-Length framed); returns a Response."""
        status, headers = self.read_head()
        length = 0 if head_request or status in (204, 304) or status < 200 else int(
            headers.get("content-length", "0"))
        while len(self.buf) < length:
            self._fill()
        body, self.buf = self.buf[:length], self.buf[length:]
        msg = http.client.HTTPMessage()
        for k, v in headers.items():
            msg[k] = v
        return Response(status, "", msg, body)

    def closed_by_peer(self, timeout=10):
        """True when the server closes the connection (EOF or reset) within `timeout`."""
        self.sock.settimeout(timeout)
        return self._read_to_end()

    def read_until_quiet(self, quiet=1.0):
        """Reads into `buf` until the server closes (True), or, once a whole response is in, stays
        silent for `quiet` seconds or, before that, for the connection's timeout (False)."""
        return self._read_to_end(quiet_after_response=quiet)

    def _read_to_end(self, quiet_after_response=None):
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buf += chunk
                if (quiet_after_response is not None and b"\r\n\r\n" in self.buf
                        and not _needs_more(self.buf)):
                    # One full response: closed only if the server ends the connection now.
                    self.sock.settimeout(quiet_after_response)
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()

    def reset(self):
        """Closes with a RST instead of a FIN (SO_LINGER with a zero timeout), as a client that
        crashed or a middlebox that gave up would."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


def request(port, method, path, body=None, headers=None, timeout=10, host="127.0.0.1"):
    """One request on a connection of its own, through http.client: (status, headers, body)."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        res = conn.getresponse()
        return res.status, dict(res.getheaders()), res.read()
    finally:
        conn.close()


def send_raw(port, data, timeout=5, host="127.0.0.1"):
    """Sends raw bytes on a new connection, reads until the server closes or goes quiet; returns
    (status or None when nothing came back, every byte after the first head, closed)."""
    conn = RawConnection(host, port, timeout=timeout)
    try:
        conn.send(data)
        closed = conn.read_until_quiet()
    finally:
        conn.close()
    if not conn.buf:
        return None, b"", closed
    status = int(conn.buf.split(b" ", 2)[1])
    body = conn.buf.split(b"\r\n\r\n", 1)[1]
    return status, body, closed
