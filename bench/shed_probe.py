#!/usr/bin/env python3
"""Open-loop latency probe of shed answers (standard library and tests/lib/rawhttp.py only).

    shed_probe.py URL RATE COUNT [BODY_BYTES] [WORKERS]

Sends COUNT POSTs of BODY_BYTES-byte UTF-8 bodies to URL (http://host:port/path) at a fixed
RATE per second, each on a NEW connection (a refused create is answered with `Connection: close`,
so keep-alive cannot carry the next request anyway). Request i is due at t0 + i / RATE whether or
not earlier answers came back (open loop: a slow answer does not delay the next request), and a
pool of WORKERS threads sends them.

Two latencies per request, in milliseconds:
  - "sched": from the request's due time to the last byte of the answer (includes any delay of
    this client in starting it: the figure that does not hide queueing, coordinated-omission free);
  - "conn":  from the start of connect() to the last byte (connection setup + request + answer).

Prints "key value" lines for the shell script and a human summary:
  status <code> <count>, reason <code> <reason> <count>, error <kind> <count>,
  lat <group> <sched|conn> <n> <p50> <p90> <p99> <p999> <max>   (group: all, shed, 201, <code>)
  late_starts <n>  (requests started more than 1 ms after their due time)
"""
import json
import os
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from rawhttp import RawConnection  # noqa: E402


def make_body(size, seq):
    unit = "shed probe — naïve café, Grüße, 日本語, ✓ 🚀\n".encode()
    head = ("probe request %012d %f\n" % (seq, time.time())).encode()
    data = head + unit * (size // len(unit) + 1)
    data = data[:size]
    while True:
        try:
            data.decode("utf-8")
            break
        except UnicodeDecodeError:
            data = data[:-1]
    return data + b"." * (size - len(data))


def pct(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def main():
    url, rate, count = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    body_bytes = int(sys.argv[4]) if len(sys.argv) > 4 else 10240
    workers = int(sys.argv[5]) if len(sys.argv) > 5 else 64
    u = urlsplit(url)
    host, port, path = u.hostname, u.port or 80, u.path or "/"
    bodies = [make_body(body_bytes, i) for i in range(count)]
    head_fmt = ("POST %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: shed_probe\r\n"
                "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n\r\n")
    results = [None] * count
    late = [0]
    lock = threading.Lock()

    def one(i, due):
        start = time.perf_counter()
        if start - due > 0.001:
            with lock:
                late[0] += 1
        req = (head_fmt % (path, host, port, body_bytes)).encode() + bodies[i]
        conn = None
        try:
            conn = RawConnection(host, port, timeout=30)
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                conn.send(req)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may answer and close before the whole body is sent: read the answer
            res = conn.read_response()
            status, body = res.status, res.body
            end = time.perf_counter()
            reason = ""
            if status >= 400:
                try:
                    reason = json.loads(body).get("reason", "")
                except ValueError:
                    reason = "?"
            results[i] = (status, reason, (end - due) * 1e3, (end - start) * 1e3)
        except Exception as e:  # noqa: BLE001 - every failure kind is counted
            end = time.perf_counter()
            results[i] = ("error", type(e).__name__, (end - due) * 1e3, (end - start) * 1e3)
        finally:
            if conn is not None:
                conn.close()

    with ThreadPoolExecutor(max_workers=workers) as pool:
        t0 = time.perf_counter() + 0.05
        for i in range(count):
            due = t0 + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            pool.submit(one, i, due)
    elapsed = time.perf_counter() - t0

    statuses, reasons, errors, groups = {}, {}, {}, {}
    for r in results:
        status, reason, sched, conn = r
        if status == "error":
            errors[reason] = errors.get(reason, 0) + 1
            continue
        statuses[status] = statuses.get(status, 0) + 1
        if reason:
            reasons[(status, reason)] = reasons.get((status, reason), 0) + 1
        keys = ["all", str(status)]
        if status in (429, 503):
            keys.append("shed")
        for k in keys:
            g = groups.setdefault(k, ([], []))
            g[0].append(sched)
            g[1].append(conn)
    print("offered_rate %.1f" % rate)
    print("achieved_rate %.1f" % (count / elapsed))
    print("requests %d" % count)
    for code in sorted(statuses):
        print("status %d %d" % (code, statuses[code]))
    for (code, reason) in sorted(reasons):
        print("reason %d %s %d" % (code, reason, reasons[(code, reason)]))
    for kind in sorted(errors):
        print("error %s %d" % (kind, errors[kind]))
    print("late_starts %d" % late[0])
    for k in sorted(groups):
        for idx, name in ((0, "sched"), (1, "conn")):
            v = groups[k][idx]
            print("lat %s %s %d %.3f %.3f %.3f %.3f %.3f" % (
                k, name, len(v), pct(v, 50), pct(v, 90), pct(v, 99), pct(v, 99.9), max(v)))


if __name__ == "__main__":
    main()
