#!/usr/bin/env python3
"""What a view attack costs a bystander, and what a slow reader costs in memory, for two binaries
in one run (docs/overload.md, "What a view costs").

For each binary: a bystander on its own address reads one 10 KB paste raw, over keep-alive, one
request at a time: first quietly, then while six attackers (one process and address each) loop
on a route: connect, ask as a browser, read 1 KB, close, again. The routes: a 1-byte raw read (the
reference: the floor any such flood costs on two shared cores), then the views of the pastes that
found the problem: a million line breaks, one line of a million '<', and one line of nested
Markdown quotes (its /rendered view). Reported per route: the bystander's p50 as a multiple of
its quiet p50 and of the reference, the attackers' requests a second, and the server's CPU.
Then forty readers (forty addresses) ask for the line-break page and read nothing: the growth of
the server's RSS divided by forty is what a slow reader holds.

Usage: bench/view_cost.py BEFORE_BIN AFTER_BIN [OUT.md] [SECONDS]
"""
import multiprocessing
import os
import platform
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from loadgen import rss_bytes  # noqa: E402
from rawhttp import RawConnection  # noqa: E402
from sluice_harness import SluiceServer  # noqa: E402

ATTACKERS = 6
READERS = 40
BROWSER = {"Accept": "text/html"}
ATTACKS = [
    ("1 MB of line breaks, /ID", b"\n" * 999_999, "/{}"),
    ("one line of 1 MB '<', /ID", b"<" * 999_999, "/{}"),
    ("one line of 1 MB nested Markdown quotes, /ID/rendered", b">" * 999_990 + b" x\n",
     "/{}/rendered"),
]


def attacker(port, path, source, stop_at, done):
    request = f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: text/html\r\n\r\n".encode()
    while time.monotonic() < stop_at:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30,
                                         source_address=(source, 0))
            s.sendall(request)
            s.recv(1024)
            s.close()
            with done.get_lock():
                done.value += 1
        except OSError:
            time.sleep(0.01)


def bystander_p50(port, path, seconds):
    conn = RawConnection("127.0.0.1", port, timeout=60, source="127.0.9.1")
    latencies = []
    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at:
        start = time.perf_counter()
        conn.send_headers("GET", path, {})
        response = conn.read_response()
        latencies.append(time.perf_counter() - start)
        assert response.status == 200, response.status
    conn.sock.close()
    return statistics.median(latencies)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def under_attack(server, raw, path, seconds):
    stop_at = time.monotonic() + seconds + 1
    done = multiprocessing.Value("l", 0)
    procs = [multiprocessing.Process(target=attacker,
                                     args=(server.port, path, f"127.0.5.{i + 1}", stop_at, done))
             for i in range(ATTACKERS)]
    for p in procs:
        p.start()
    time.sleep(0.5)
    cpu0, n0, t0 = cpu_seconds(server.proc.pid), done.value, time.monotonic()
    p50 = bystander_p50(server.port, raw, seconds)
    cpu1, n1, t1 = cpu_seconds(server.proc.pid), done.value, time.monotonic()
    for p in procs:
        p.join()
    return p50, (n1 - n0) / (t1 - t0), (cpu1 - cpu0) / (t1 - t0)


def slow_reader_bytes(server):
    paste = server.create_ok(ATTACKS[0][1])["id"]
    assert server.get(f"/{paste}", headers=BROWSER, timeout=120).status == 200
    before, _ = rss_bytes(server.proc.pid)
    readers = []
    for i in range(READERS):
        c = RawConnection("127.0.0.1", server.port, timeout=120, source=f"127.0.7.{i + 1}")
        c.send_headers("GET", f"/{paste}", BROWSER)
        readers.append(c)
    for c in readers:
        c.read_head()
    time.sleep(1)
    after, _ = rss_bytes(server.proc.pid)
    for c in readers:
        c.sock.close()
    return (after - before) / READERS


def measure(binary, seconds):
    os.environ["SLUICE_BIN"] = os.path.abspath(binary)
    server = SluiceServer()
    server.start()
    try:
        bystander = server.create_ok("b" * 10_240)["id"]
        raw = f"/raw/{bystander}"
        bystander_p50(server.port, raw, 1)  # warm: the paste is cached
        quiet = bystander_p50(server.port, raw, seconds)
        tiny = server.create_ok("t")["id"]
        rows = [("reference: a 1-byte raw read",) + under_attack(server, raw, f"/raw/{tiny}",
                                                                  seconds)]
        for name, body, shape in ATTACKS:
            paste = server.create_ok(body)["id"]
            rows.append((name,) + under_attack(server, raw, shape.format(paste), seconds))
        return quiet, rows, slow_reader_bytes(server)
    finally:
        server.stop()


def main():
    before_bin, after_bin = sys.argv[1], sys.argv[2]
    out = sys.argv[3] if len(sys.argv) > 3 else None
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 8
    load_before = os.getloadavg()
    results = {"before": measure(before_bin, seconds), "after": measure(after_bin, seconds)}
    load_after = os.getloadavg()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines = ["# What a view attack costs a bystander (bench/view_cost.py)", "",
             f"Command: `bench/view_cost.py {before_bin} {after_bin} {out or ''} {seconds:g}`  ",
             f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  ",
             f"Commit: {commit}  ",
             f"Machine: {os.cpu_count()} cores, {platform.platform()}; load average "
             f"{load_before[0]:.2f} before, {load_after[0]:.2f} after", "",
             "A bystander's raw read (10 KB, keep-alive, one at a time, its own address) while "
             f"{ATTACKERS} attackers (one process and address each) loop on a route: connect, "
             "ask as a browser, read 1 KB, close, again. The bystander's p50 is given as a "
             "multiple of its quiet p50 and of its p50 under the same attackers on a 1-byte raw "
             "read (the floor any request flood costs on 2 shared cores, load generator "
             f"included); attacks/s and the server's CPU in cores beside it; {seconds:g} s each.",
             ""]
    for label, binary in (("before", before_bin), ("after", after_bin)):
        quiet, rows, per_reader = results[label]
        floor = rows[0][1]
        lines += [f"## {label}: `{binary}`", "", f"Quiet p50: {quiet * 1e3:.3f} ms.", "",
                  "| attackers on | bystander p50 | x quiet | x reference | attacks/s | "
                  "server cores |", "|---|---|---|---|---|---|"]
        for name, p50, rate, cores in rows:
            lines.append(f"| {name} | {p50 * 1e3:.3f} ms | {p50 / quiet:.1f} | "
                         f"{p50 / floor:.1f} | {rate:.0f} | {cores:.2f} |")
        lines += ["", f"RSS per slow reader of the line-break page ({READERS} readers on their "
                  f"own addresses that read nothing): {per_reader / 2**20:.2f} MiB.", ""]
    text = "\n".join(lines)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
