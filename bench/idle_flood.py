#!/usr/bin/env python3
"""An idle flood from one address: N connections from 127.0.0.1 that never send a byte, against one
sluice binary; prints what the server holds (open connections, resident memory) and whether another
address (127.0.0.2) and /healthz are still served.

    python3 bench/idle_flood.py --bin build/dev/sluice [--connections 5000] [--hold 3] [-- FLAGS]

Run it once with main's binary and once with this branch's: bench/results/edge-abuse.md quotes both.
Only loopback; the client raises its own descriptor limit to the hard limit.
"""

import argparse
import http.client
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from promtext import metric, parse_metrics  # noqa: E402
from rawhttp import free_port  # noqa: E402


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def get_from(port, source, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5, source_address=(source, 0))
    try:
        conn.request("GET", path)
        res = conn.getresponse()
        return res.status, res.read()
    except OSError as e:
        return f"{type(e).__name__}", b""
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--connections", type=int, default=5000)
    ap.add_argument("--hold", type=float, default=3.0, help="seconds to hold before measuring")
    ap.add_argument("server_args", nargs="*", help="more `sluice serve` flags (after --)")
    args = ap.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    root = tempfile.mkdtemp(prefix="sluice-flood-")
    port = free_port()
    cmd = [args.bin, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir",
           os.path.join(root, "data"), "--threads", "2", *args.server_args]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(os.path.join(root, "log"), "w"))
    try:
        for _ in range(100):
            if get_from(port, "127.0.0.1", "/healthz")[0] == 200:
                break
            time.sleep(0.1)
        base_rss = rss_kb(server.pid)
        socks = []
        started = time.monotonic()
        for _ in range(args.connections):
            try:
                socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError:
                break
        opened = time.monotonic() - started
        time.sleep(0.5)
        early_rss = rss_kb(server.pid)
        status, body = get_from(port, "127.0.0.2", "/metrics")
        early = metric(parse_metrics(body.decode()), "sluice_http_connections") if status == 200 \
            else f"unknown (/metrics answered {status})"
        time.sleep(max(0.0, args.hold - 0.5))
        # Connections the flood still holds after `hold` seconds: closed ones (answered or not)
        # read to EOF at once, open ones have nothing to read.
        alive = 0
        for s in socks:
            s.setblocking(False)
            try:
                while s.recv(65536):
                    pass
            except BlockingIOError:
                alive += 1
            except OSError:
                pass
        status, body = get_from(port, "127.0.0.2", "/metrics")
        m = parse_metrics(body.decode()) if status == 200 else {}
        if status != 200:
            print(f"/metrics from 127.0.0.2 answered {status}: {body.decode()[:120]}")
        print(f"binary: {args.bin} {' '.join(args.server_args)}")
        print(f"flood: {len(socks)} connections from 127.0.0.1 opened in {opened:.1f} s, "
              f"held {args.hold:.0f} s, none sends a byte")
        print(f"server: sluice_http_connections {metric(m, 'sluice_http_connections'):.0f}, "
              f"rejections connections_per_client "
              f"{metric(m, 'sluice_admission_rejections_total', reason='connections_per_client'):.0f}, "
              f"connections {metric(m, 'sluice_admission_rejections_total', reason='connections'):.0f}")
        print(f"0.5 s after the flood opened: sluice_http_connections {early}, "
              f"resident memory {early_rss / 1024:.1f} MiB")
        print(f"server resident memory: {base_rss / 1024:.1f} MiB before, "
              f"{rss_kb(server.pid) / 1024:.1f} MiB after {args.hold:.0f} s")
        print(f"flood connections still open after {args.hold:.0f} s: {alive}")
        print(f"from 127.0.0.2: /healthz {get_from(port, '127.0.0.2', '/healthz')[0]}, "
              f"/api/v1/limits {get_from(port, '127.0.0.2', '/api/v1/limits')[0]}")
        for s in socks:
            s.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
