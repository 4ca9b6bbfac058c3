"""A PostgreSQL proxy that misbehaves on purpose: a small asyncio TCP proxy in front of a real
server that can lose the answers of chosen statements.

It reads the client's side of the wire protocol (start-up packet, then typed messages) so that it
knows which connection is which (the `application_name` of the start-up packet: sluice's pools say
sluice-read, sluice-write, sluice-cleanup) and when a statement has been sent in full (Sync, or a
simple Query). The server's side is forwarded as raw bytes, except after a statement chosen for a
fault, which then gets, by mode:

  pass           nothing happens (the default)
  reset          the server's answer is awaited, so the statement surely ran, and instead of it the
                 client gets a TCP reset (RST); the server's side is closed too
  reset_at_send  the client gets a reset as soon as the statement has gone to the server, without
                 waiting for an answer: the statement may or may not run
  drop           the answer is swallowed and the connection left open and silent (the client waits
                 until its own timeout)
  delay          the answer is forwarded `delay` seconds late

A statement is chosen when its SQL text contains one of `match` (all if empty), its connection's
application_name one of `apps` (all if empty), and a draw falls under `probability`.

In a test: `proxy = PgProxy("127.0.0.1", 5432).start()`, then `proxy.configure(mode="reset",
match=["INSERT INTO pastes"])`, `proxy.port`, `proxy.faults`, `proxy.stop()`. As a program:
`python3 pg_proxy.py UPSTREAM_HOST UPSTREAM_PORT` prints `listening on 127.0.0.1:PORT`, then reads
commands on stdin, one a line: `mode MODE`, `match TEXT|TEXT`, `apps NAME|NAME`, `probability P`,
`delay SECONDS`, `stats`.
"""

import asyncio
import random
import socket
import struct
import sys
import threading

MODES = ("pass", "reset", "reset_at_send", "drop", "delay")
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
PROTOCOL_3 = 196608


class _Conn:
    def __init__(self):
        self.app = ""
        self.fault = None  # the mode chosen for the statement in flight, if any
        self.poisoned = False  # a dropped answer: everything after it is swallowed too


class PgProxy:
    def __init__(self, upstream_host, upstream_port, listen_host="127.0.0.1", seed=None):
        self.upstream = (upstream_host, int(upstream_port))
        self.listen_host = listen_host
        self.port = None
        self.mode = "pass"
        self.match = []
        self.apps = []
        self.probability = 1.0
        self.delay = 0.5
        self.faults = 0  # statements a fault was applied to
        self.statements = 0  # statements seen in full
        self.connections = 0
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._loop = None
        self._server = None
        self._thread = None
        self._ready = threading.Event()

    # ---- control (any thread) -------------------------------------------------------------
    def configure(self, mode=None, match=None, apps=None, probability=None, delay=None):
        with self._lock:
            if mode is not None:
                if mode not in MODES:
                    raise ValueError(f"unknown mode {mode!r}; one of {MODES}")
                self.mode = mode
            if match is not None:
                self.match = list(match)
            if apps is not None:
                self.apps = list(apps)
            if probability is not None:
                self.probability = float(probability)
            if delay is not None:
                self.delay = float(delay)

    def reset_stats(self):
        with self._lock:
            self.faults = self.statements = self.connections = 0

    def stats(self):
        with self._lock:
            return {"mode": self.mode, "faults": self.faults, "statements": self.statements,
                    "connections": self.connections}

    def start(self):
        self._thread = threading.Thread(target=self._run, name="pg-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("pg proxy did not start")
        return self

    def stop(self):
        if self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    # ---- the proxy (its own thread and loop) -----------------------------------------------
    def _run(self):
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, self.listen_host, 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    def _chosen(self, conn, sql):
        with self._lock:
            self.statements += 1
            if self.mode == "pass":
                return None
            if self.apps and conn.app not in self.apps:
                return None
            if self.match and not any(m in sql for m in self.match):
                return None
            if self._random.random() >= self.probability:
                return None
            self.faults += 1
            return self.mode

    @staticmethod
    def _reset(writer):
        """Closes with a TCP reset, as a crashed peer or a middlebox would."""
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        writer.transport.abort()

    async def _accept(self, client_reader, client_writer):
        with self._lock:
            self.connections += 1
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            self._reset(client_writer)
            return
        conn = _Conn()
        up = asyncio.ensure_future(
            self._client_to_server(conn, client_reader, server_writer, client_writer))
        down = asyncio.ensure_future(
            self._server_to_client(conn, server_reader, client_writer, server_writer))
        await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
        for task in (up, down):
            task.cancel()
        for w in (client_writer, server_writer):
            if not w.transport.is_closing():
                w.transport.abort()

    async def _client_to_server(self, conn, reader, server_writer, client_writer):
        try:
            # Start-up: untyped, length-prefixed packets. An SSL or GSS encryption request gets one
            # byte back (the server's 'N', forwarded raw) and is followed by the real start-up.
            while True:
                head = await reader.readexactly(4)
                (length,) = struct.unpack("!I", head)
                body = await reader.readexactly(length - 4)
                server_writer.write(head + body)
                await server_writer.drain()
                (code,) = struct.unpack("!I", body[:4])
                if code in (SSL_REQUEST, GSSENC_REQUEST):
                    continue
                if code == PROTOCOL_3:
                    fields = body[4:].split(b"\0")
                    for key, value in zip(fields[0::2], fields[1::2]):
                        if key == b"application_name":
                            conn.app = value.decode("utf-8", "replace")
                break
            sql = ""
            while True:
                kind = await reader.readexactly(1)
                head = await reader.readexactly(4)
                (length,) = struct.unpack("!I", head)
                body = await reader.readexactly(length - 4)
                if kind == b"P":  # Parse: name \0 query \0 ...
                    sql = body.split(b"\0", 2)[1].decode("utf-8", "replace")
                elif kind == b"Q":
                    sql = body.rstrip(b"\0").decode("utf-8", "replace")
                if kind in (b"S", b"Q"):
                    # Chosen before the last message leaves, so the answer cannot overtake it.
                    fault = self._chosen(conn, sql)
                    conn.fault = fault
                    server_writer.write(kind + head + body)
                    await server_writer.drain()
                    if fault == "reset_at_send":
                        self._reset(client_writer)
                        server_writer.transport.abort()
                        return
                    sql = ""
                else:
                    server_writer.write(kind + head + body)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            return

    async def _server_to_client(self, conn, reader, client_writer, server_writer):
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    return
                fault = conn.fault
                if conn.poisoned or fault == "drop":
                    conn.poisoned = True
                    continue
                if fault == "reset":
                    self._reset(client_writer)
                    server_writer.transport.abort()
                    return
                if fault == "delay":
                    conn.fault = None
                    await asyncio.sleep(self.delay)
                client_writer.write(data)
                await client_writer.drain()
        except (ConnectionError, OSError):
            return


def main():
    if len(sys.argv) != 3:
        print("usage: pg_proxy.py UPSTREAM_HOST UPSTREAM_PORT", file=sys.stderr)
        return 2
    proxy = PgProxy(sys.argv[1], int(sys.argv[2])).start()
    print(f"listening on 127.0.0.1:{proxy.port}", flush=True)
    for line in sys.stdin:
        words = line.split(None, 1)
        if not words:
            continue
        verb, arg = words[0], (words[1].strip() if len(words) > 1 else "")
        try:
            if verb == "mode":
                proxy.configure(mode=arg)
            elif verb == "match":
                proxy.configure(match=[m for m in arg.split("|") if m])
            elif verb == "apps":
                proxy.configure(apps=[a for a in arg.split("|") if a])
            elif verb == "probability":
                proxy.configure(probability=float(arg))
            elif verb == "delay":
                proxy.configure(delay=float(arg))
            elif verb != "stats":
                raise ValueError(f"unknown command {verb!r}")
            print(proxy.stats(), flush=True)
        except ValueError as e:
            print(f"error: {e}", flush=True)
    proxy.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
