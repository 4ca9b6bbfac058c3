#!/usr/bin/env python3
"""A small TCP fault proxy for the chaos lab: sits between sluice and one real dependency
(PostgreSQL, Redis, s3rver, or the edge's backend) and breaks the wire on command.

    faultproxy.py serve --listen 127.0.0.1:PORT --upstream 127.0.0.1:PORT --control 127.0.0.1:PORT
                        [--name NAME] [--faults JSON]
    faultproxy.py ctl --control 127.0.0.1:PORT get|stats|clear|reset|set JSON

Faults (the JSON of `PUT /faults`; every key optional, a missing key means no such fault):

    {"up":   {"latency_ms": 0, "jitter_ms": 0, "fraction": 1.0, "bandwidth": null},
     "down": {"latency_ms": 200, ...},
     "refuse": false, "blackhole": false, "drop": 0.0}

- `up` is client -> upstream (requests), `down` upstream -> client (answers). `latency_ms` is added to
  every chunk read in that direction (`fraction` < 1: to that share of chunks only), plus a uniform
  0..`jitter_ms`; order on a connection is kept, so a delayed chunk delays those behind it, as on a
  real TCP connection. `bandwidth` caps bytes per second per connection in that direction.
- `refuse`: the listening socket is closed, so new connections get ECONNREFUSED; established ones
  carry on.
- `blackhole`: new connections are accepted and never answered (no upstream is opened, what the client
  sends is read and discarded); established connections stop forwarding in both directions (bytes are
  held, and delivered once the fault clears). Black-holed new connections are closed when it clears.
- `drop`: that share of new connections is reset (RST) right after the accept.
- `POST /reset` resets (RST) every established connection once; `GET /stats` counts connections,
  bytes and faults applied; `DELETE /faults` clears everything.

The control port speaks just enough HTTP/1.1 for curl and urllib. Standard library only (Debian
packages no toxiproxy). Only loopback addresses are accepted, for the control port too.
"""

import argparse
import asyncio
import json
import random
import socket
import struct
import sys
import time
import urllib.request

DIRECTIONS = ("up", "down")
DIRECTION_KEYS = {"latency_ms", "jitter_ms", "fraction", "bandwidth"}
TOP_KEYS = set(DIRECTIONS) | {"refuse", "blackhole", "drop"}
CHUNK = 65536


def parse_address(text):
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if host not in ("127.0.0.1", "localhost", "::1") and not host.startswith("127."):
        raise ValueError(f"{text}: only loopback addresses")
    return host, int(port)


def validate(faults):
    """Checks a faults document; returns it normalised (raises ValueError with the reason)."""
    if not isinstance(faults, dict):
        raise ValueError("faults must be a JSON object")
    unknown = set(faults) - TOP_KEYS
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}; known: {sorted(TOP_KEYS)}")
    out = {}
    for d in DIRECTIONS:
        spec = faults.get(d) or {}
        if not isinstance(spec, dict):
            raise ValueError(f"{d} must be an object")
        bad = set(spec) - DIRECTION_KEYS
        if bad:
            raise ValueError(f"unknown keys in {d}: {sorted(bad)}; known: {sorted(DIRECTION_KEYS)}")
        norm = {"latency_ms": float(spec.get("latency_ms") or 0),
                "jitter_ms": float(spec.get("jitter_ms") or 0),
                "fraction": float(spec.get("fraction", 1.0) if spec.get("fraction") is not None
                                  else 1.0),
                "bandwidth": None if spec.get("bandwidth") in (None, 0) else float(spec["bandwidth"])}
        if norm["latency_ms"] < 0 or norm["jitter_ms"] < 0:
            raise ValueError(f"{d}: latency and jitter must be >= 0")
        if not 0.0 <= norm["fraction"] <= 1.0:
            raise ValueError(f"{d}: fraction must be in [0, 1]")
        if norm["bandwidth"] is not None and norm["bandwidth"] <= 0:
            raise ValueError(f"{d}: bandwidth must be > 0 bytes/s")
        out[d] = norm
    out["refuse"] = bool(faults.get("refuse", False))
    out["blackhole"] = bool(faults.get("blackhole", False))
    out["drop"] = float(faults.get("drop") or 0.0)
    if not 0.0 <= out["drop"] <= 1.0:
        raise ValueError("drop must be in [0, 1]")
    return out


def abort(writer):
    """Closes with RST (SO_LINGER 0) rather than FIN: a reset, as a crashed peer or a middlebox
    sends it."""
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    writer.transport.abort()


class Connection:
    def __init__(self, proxy, cr, cw):
        self.proxy = proxy
        self.cr, self.cw = cr, cw
        self.ur = self.uw = None
        self.tasks = []

    def reset(self):
        abort(self.cw)
        if self.uw is not None:
            abort(self.uw)
        for t in self.tasks:
            t.cancel()


class Proxy:
    def __init__(self, name, listen, upstream, faults=None):
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.faults = validate(faults or {})
        self.server = None
        self.conns = set()
        self.blackholed = set()
        self.resume = asyncio.Event()  # set while not black-holed
        self.resume.set()
        self.stats = {"accepted": 0, "refused_upstream": 0, "dropped": 0, "blackholed": 0,
                      "reset": 0, "bytes_up": 0, "bytes_down": 0, "delayed_chunks_up": 0,
                      "delayed_chunks_down": 0, "faults_changed": 0}

    async def start(self):
        await self._listen()

    async def _listen(self):
        if self.server is None:
            self.server = await asyncio.start_server(self._accept, self.listen[0], self.listen[1],
                                                     reuse_address=True, backlog=1024)

    async def _unlisten(self):
        if self.server is not None:
            # close() alone: the listening socket goes at once (new connections are refused), while
            # wait_closed() would, on newer Pythons, wait for the established ones too.
            self.server.close()
            self.server = None

    async def set_faults(self, faults):
        self.faults = validate(faults)
        self.stats["faults_changed"] += 1
        if self.faults["refuse"]:
            await self._unlisten()
        else:
            await self._listen()
        if self.faults["blackhole"]:
            self.resume.clear()
        else:
            self.resume.set()
            for w in list(self.blackholed):
                w.close()
            self.blackholed.clear()
        return self.faults

    def reset_all(self):
        n = 0
        for c in list(self.conns):
            c.reset()
            n += 1
        for w in list(self.blackholed):
            abort(w)
            n += 1
        self.blackholed.clear()
        self.stats["reset"] += n
        return n

    def snapshot(self):
        return dict(self.stats, active=len(self.conns), blackholed_open=len(self.blackholed),
                    listening=self.server is not None, name=self.name,
                    listen=f"{self.listen[0]}:{self.listen[1]}",
                    upstream=f"{self.upstream[0]}:{self.upstream[1]}", faults=self.faults)

    async def _accept(self, cr, cw):
        self.stats["accepted"] += 1
        f = self.faults
        if f["drop"] > 0 and random.random() < f["drop"]:
            self.stats["dropped"] += 1
            abort(cw)
            return
        if f["blackhole"]:
            self.stats["blackholed"] += 1
            self.blackholed.add(cw)
            try:
                while await cr.read(CHUNK):
                    pass
            except (ConnectionError, OSError):
                pass
            finally:
                self.blackholed.discard(cw)
                cw.close()
            return
        conn = Connection(self, cr, cw)
        try:
            conn.ur, conn.uw = await asyncio.open_connection(*self.upstream)
        except OSError:
            # The upstream refused: pass the refusal on as a reset, the nearest thing a proxy that
            # already accepted can say.
            self.stats["refused_upstream"] += 1
            abort(cw)
            return
        for s in (cw, conn.uw):
            sock = s.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conns.add(conn)
        conn.tasks = [asyncio.ensure_future(self._pipe(conn, cr, conn.uw, "up")),
                      asyncio.ensure_future(self._pipe(conn, conn.ur, cw, "down"))]
        try:
            await asyncio.gather(*conn.tasks, return_exceptions=True)
        finally:
            self.conns.discard(conn)
            for w in (cw, conn.uw):
                w.close()

    async def _pipe(self, conn, reader, writer, direction):
        """Reads chunks in one direction and hands them, stamped with their delivery time, to a
        writer task: a delay shifts the chunk without slowing the reading, so latency stays latency
        and does not turn into a throughput limit."""
        queue = asyncio.Queue()
        sender = asyncio.ensure_future(self._send(queue, writer, direction))
        last_due = 0.0
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                spec = self.faults[direction]
                delay = 0.0
                if spec["latency_ms"] or spec["jitter_ms"]:
                    if spec["fraction"] >= 1.0 or random.random() < spec["fraction"]:
                        delay = (spec["latency_ms"] + random.uniform(0, spec["jitter_ms"])) / 1000
                        self.stats["delayed_chunks_" + direction] += 1
                # Keep order: never deliver before the chunk ahead of this one.
                due = max(last_due, time.monotonic() + delay)
                last_due = due
                await queue.put((due, data))
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            await queue.put(None)
        try:
            await sender
        finally:
            # The other side is done: half-close so the peer sees EOF, as TCP would.
            try:
                if writer.can_write_eof():
                    writer.write_eof()
            except (OSError, RuntimeError):
                pass

    async def _send(self, queue, writer, direction):
        allowance_at = time.monotonic()  # when the bandwidth cap lets the next byte out
        while True:
            item = await queue.get()
            if item is None:
                return
            due, data = item
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            await self.resume.wait()
            bw = self.faults[direction]["bandwidth"]
            view = memoryview(data)
            while view:
                if bw:
                    # Small slices so a low rate is smooth rather than one burst per chunk.
                    piece = view[:max(1, min(len(view), int(bw / 20) or 1))]
                    now = time.monotonic()
                    allowance_at = max(allowance_at, now)
                    if allowance_at > now:
                        await asyncio.sleep(allowance_at - now)
                    allowance_at += len(piece) / bw
                else:
                    piece = view
                try:
                    writer.write(piece)
                    await writer.drain()
                except (ConnectionError, OSError):
                    return
                self.stats["bytes_" + direction] += len(piece)
                view = view[len(piece):]


class Control:
    """GET /faults, PUT /faults (JSON), DELETE /faults, POST /reset, GET /stats."""

    def __init__(self, proxy):
        self.proxy = proxy

    async def handle(self, reader, writer):
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = 0
            for line in lines[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v.strip())
            body = await reader.readexactly(length) if length else b""
            status, answer = await self.route(method, path.split("?")[0], body)
        except (ValueError, json.JSONDecodeError) as e:
            status, answer = 400, {"error": str(e)}
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        data = json.dumps(answer, sort_keys=True).encode() + b"\n"
        writer.write(f"HTTP/1.1 {status} {'OK' if status < 400 else 'Error'}\r\n"
                     f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                     f"Connection: close\r\n\r\n".encode() + data)
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    async def route(self, method, path, body):
        p = self.proxy
        if path == "/faults":
            if method == "GET":
                return 200, p.faults
            if method == "PUT":
                return 200, await p.set_faults(json.loads(body or b"{}"))
            if method == "DELETE":
                return 200, await p.set_faults({})
            return 405, {"error": "GET, PUT or DELETE"}
        if path == "/reset" and method == "POST":
            return 200, {"reset": p.reset_all()}
        if path == "/stats" and method == "GET":
            return 200, p.snapshot()
        return 404, {"error": f"no {method} {path}; see GET/PUT/DELETE /faults, POST /reset, "
                              f"GET /stats"}


async def serve(args):
    listen = parse_address(args.listen)
    upstream = parse_address(args.upstream)
    control = parse_address(args.control)
    proxy = Proxy(args.name or args.listen, listen, upstream,
                  json.loads(args.faults) if args.faults else None)
    await proxy.start()
    if proxy.faults["refuse"]:
        await proxy._unlisten()
    if proxy.faults["blackhole"]:
        proxy.resume.clear()
    ctl = await asyncio.start_server(Control(proxy).handle, control[0], control[1],
                                     reuse_address=True)
    print(f"faultproxy {proxy.name}: {args.listen} -> {args.upstream}, control "
          f"http://{args.control}", flush=True)
    async with ctl:
        await ctl.serve_forever()


class Client:
    """Drives a running proxy from Python (the lab and the tests)."""

    def __init__(self, control):
        self.base = f"http://{control}" if isinstance(control, str) else \
            f"http://{control[0]}:{control[1]}"

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        with urllib.request.urlopen(req, timeout=10) as res:
            return json.loads(res.read())

    def set(self, **faults):
        """Replaces the faults: set(down={"latency_ms": 200}, drop=0.1)."""
        return self._call("PUT", "/faults", faults)

    def clear(self):
        return self._call("DELETE", "/faults")

    def reset(self):
        return self._call("POST", "/reset", {})["reset"]

    def stats(self):
        return self._call("GET", "/stats")


def ctl(args):
    url = f"http://{args.control}"
    method, path, body = {"get": ("GET", "/faults", None), "stats": ("GET", "/stats", None),
                          "clear": ("DELETE", "/faults", None), "reset": ("POST", "/reset", b""),
                          "set": ("PUT", "/faults", (args.json or "{}").encode())}[args.action]
    req = urllib.request.Request(url + path, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            print(res.read().decode().strip())
    except urllib.error.HTTPError as e:
        print(e.read().decode().strip(), file=sys.stderr)
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run one proxy")
    s.add_argument("--listen", required=True)
    s.add_argument("--upstream", required=True)
    s.add_argument("--control", required=True)
    s.add_argument("--name")
    s.add_argument("--faults", help="initial faults (JSON)")
    c = sub.add_parser("ctl", help="change or read a running proxy")
    c.add_argument("--control", required=True)
    c.add_argument("action", choices=["get", "stats", "clear", "reset", "set"])
    c.add_argument("json", nargs="?")
    args = ap.parse_args()
    if args.cmd == "serve":
        try:
            asyncio.run(serve(args))
        except KeyboardInterrupt:
            pass
        return 0
    return ctl(args)


if __name__ == "__main__":
    sys.exit(main())
