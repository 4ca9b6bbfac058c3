#!/usr/bin/env python3
"""Encrypted pastes beside plain ones in one run of one server (docs/encryption.md, "Figures").

Creates: ROUNDS interleaved rounds of CREATES creates each, plain (a 10 KB text) then encrypted
(an envelope of the same size, sealed once beforehand by `sluice paste --encrypt`: the client's
cost is not the server's), from THREADS threads on keep-alive connections.
First views: each created paste read once as a browser reads it (Accept: text/html): a plain
paste is highlighted then (the render cache's first fill), an encrypted one answers its shell.
Hot views: wrk -t2 -c32 for SECONDS seconds on one paste of each kind, as a browser and as curl.
Prints one JSON document of rates and their ratios (encrypted / plain). The server and the load
share the machine, so the ratios, not the absolute rates, are the figures.

  bench/encrypted_pairs.py [SLUICE_BIN]     (default build/dev/sluice; a release build for the record)
"""
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROUNDS, CREATES, THREADS, SECONDS = 3, 300, 4, 5
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "dev", "sluice")
RELAXED = ["--ip-create-rate", "100000", "--ip-create-burst", "100000", "--ip-create-bytes-rate",
           "10000000000", "--ip-create-bytes-burst", "10000000000", "--global-create-rate",
           "100000", "--global-create-burst", "100000", "--global-create-bytes-rate",
           "10000000000", "--global-create-bytes-burst", "10000000000", "--ip-read-rate",
           "1000000", "--ip-read-burst", "1000000", "--insert-timeout", "2s",
           "--create-budget", "10s", "--read-budget", "5s"]
TEXT = "".join(f"def handler_{i}(request):\n    return render(request, 'page_{i}.html', "
               f"{{'n': {i}}})  # line {i}\n" for i in range(200))[:10240].encode()


def start(work):
    proc = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0", "--data-dir",
                             os.path.join(work, "data"), *RELAXED],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 20
    log = b""
    while time.time() < deadline:
        log += proc.stdout.readline()
        m = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", log)
        if m:
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            return proc, int(m.group(1))
    proc.kill()
    raise SystemExit("sluice did not start:\n" + log.decode(errors="replace"))


def creates(port, body, query, n):
    ids, lock = [], threading.Lock()

    def worker(count):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for _ in range(count):
            conn.request("POST", "/api/v1/pastes" + query, body=body)
            res = conn.getresponse()
            doc = res.read()
            if res.status == 201:
                with lock:
                    ids.append(json.loads(doc)["id"])
        conn.close()

    threads = [threading.Thread(target=worker, args=(n // THREADS,)) for _ in range(THREADS)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(ids) / (time.perf_counter() - t0), ids


def first_views(port, ids):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    t0 = time.perf_counter()
    for paste_id in ids:
        conn.request("GET", f"/{paste_id}", headers={"Accept": "text/html"})
        res = conn.getresponse()
        res.read()
        assert res.status == 200, res.status
    conn.close()
    return len(ids) / (time.perf_counter() - t0)


def wrk(port, path, browser):
    args = ["wrk", "-t2", "-c32", f"-d{SECONDS}s"]
    if browser:
        args += ["-H", "Accept: text/html"]
    out = subprocess.run(args + [f"http://127.0.0.1:{port}{path}"], capture_output=True,
                         text=True, timeout=SECONDS + 30).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def main():
    work = tempfile.mkdtemp(prefix="sluice-encrypted-bench-")
    proc, port = start(work)
    try:
        # Random bytes do not compress: the envelope is then as large as the plain text, so both
        # kinds move the same bytes and differ only in what the server does with them.
        link = subprocess.run([BIN, "paste", "--server", f"http://127.0.0.1:{port}", "--encrypt"],
                              input=os.urandom(len(TEXT) * 3 // 4 - 100), capture_output=True, check=True).stdout.decode().strip()
        envelope = subprocess.run(["curl", "-s", link.split("#")[0].replace(
            f":{port}/", f":{port}/raw/")], capture_output=True, check=True).stdout
        rates = {"plain": [], "encrypted": []}
        ids = {"plain": [], "encrypted": []}
        for _ in range(ROUNDS):
            for kind, body, query in (("plain", TEXT, ""), ("encrypted", envelope, "?encrypted=1")):
                rate, made = creates(port, body, query, CREATES)
                rates[kind].append(rate)
                ids[kind] += made
        views = {kind: first_views(port, ids[kind][:600]) for kind in ("plain", "encrypted")}
        hot = {}
        for kind in ("plain", "encrypted"):
            hot[kind + "_view"] = wrk(port, "/" + ids[kind][0], True)
            hot[kind + "_raw"] = wrk(port, "/raw/" + ids[kind][0], False)
        med = {k: sorted(v)[len(v) // 2] for k, v in rates.items()}
        print(json.dumps({
            "binary": BIN, "text_bytes": len(TEXT), "envelope_bytes": len(envelope),
            "creates_per_s_median": med, "creates_ratio": round(med["encrypted"] / med["plain"], 2),
            "first_views_per_s": views,
            "first_views_ratio": round(views["encrypted"] / views["plain"], 2),
            "hot_reads_per_s": hot,
            "hot_view_ratio": round(hot["encrypted_view"] / hot["plain_view"], 2),
            "hot_raw_ratio": round(hot["encrypted_raw"] / hot["plain_raw"], 2),
        }, indent=2))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
