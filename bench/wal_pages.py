#!/usr/bin/env python3
"""Pages a durable create writes, by b-tree: what each batch's WAL flush and the checkpoint after it
copy, counted from the WAL itself rather than inferred from a profile.

For each binary: a fresh data dir, PREFILL creates (so the trees have the depth of a used instance),
a clean stop (its checkpoint empties the WAL), a restart, MEASURED creates from CONCURRENCY clients at
once (so they commit in batches, as under load), then SIGKILL before any checkpoint can run. Every
frame left in meta.db-wal is a page those creates wrote; dbstat names the b-tree of each page.
The prefill's clients are Python threads; the measured creates come from wrk (bench/wrk/create.lua,
STOP_AFTER), so their batches have the size they have under bench/run_create_bench.sh's load.

    bench/wal_pages.py before=/tmp/sluice-old after=build/release/sluice [--prefill 20000]

Prints a markdown table per binary. Keep MEASURED * pages per create under the checkpointer's
threshold (4,096 frames, src/store/sqlite/sqlite_db.h), or a checkpoint restarts the WAL mid-count.
"""
import argparse
import collections
import http.client
import os
import re
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time

from lifted import lifted_limits

REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
LIFTED = lifted_limits()


def start(binary, data_dir, log_path):
    log = open(log_path, "w")
    proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--admin-listen",
                             "127.0.0.1:0", "--data-dir", data_dir] + LIFTED,
                            stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        with open(log_path) as f:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", f.read())
        if m:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            sys.exit(f"{binary} exited at start-up; see {log_path}")
        time.sleep(0.05)
    sys.exit(f"{binary} did not start; see {log_path}")


def body(n, size):
    # Unique, valid UTF-8, like bench/wrk/create.lua's: a counter then filler.
    head = f"paste {n} ".encode()
    return head + b"x" * (size - len(head))


def create_many(port, start_n, count, concurrency, size):
    failures = []
    lock = threading.Lock()
    next_n = [start_n]

    def worker():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while True:
            with lock:
                if next_n[0] >= start_n + count:
                    return
                n = next_n[0]
                next_n[0] += 1
            conn.request("POST", "/api/v1/pastes", body=body(n, size),
                         headers={"Content-Type": "text/plain"})
            resp = conn.getresponse()
            resp.read()
            if resp.status != 201:
                with lock:
                    failures.append(resp.status)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        sys.exit(f"{len(failures)} creates failed: {collections.Counter(failures)}")


def wal_frames(path):
    with open(path, "rb") as f:
        wal = f.read()
    page_size = struct.unpack(">I", wal[8:12])[0]
    salt = wal[16:24]
    frames, commits, off = [], 0, 32
    while off + 24 + page_size <= len(wal):
        page, commit = struct.unpack(">II", wal[off:off + 8])
        if wal[off + 8:off + 16] != salt:  # left over from before the last restart
            break
        frames.append(page)
        commits += commit != 0
        off += 24 + page_size
    return page_size, frames, commits


def measure(label, binary, args, work):
    data = os.path.join(work, label)
    os.makedirs(data)
    log = os.path.join(work, f"{label}.log")
    proc, port = start(binary, data, log)
    create_many(port, 0, args.prefill, args.concurrency, args.body_bytes)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    # Empty the WAL, so that every frame in it afterwards is one the measured creates wrote.
    db = sqlite3.connect(os.path.join(data, "meta.db"))
    busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    db.close()
    if busy:
        sys.exit("could not empty the WAL after the prefill")
    proc, port = start(binary, data, log)
    # wrk, as bench/run_create_bench.sh loads the server, so batches have their size under load;
    # each of its 2 threads stops after its share of answers.
    env = dict(os.environ, BODY_BYTES=str(args.body_bytes), STOP_AFTER=str(args.measured // 2))
    if args.corpus:
        env["CORPUS"] = args.corpus
    subprocess.run(["wrk", "-t2", f"-c{args.concurrency}", "-d30s", "-s",
                    os.path.join(REPO, "bench/wrk/create.lua"), f"http://127.0.0.1:{port}"],
                   env=env, stdout=subprocess.DEVNULL, check=True)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    page_size, frames, commits = wal_frames(os.path.join(data, "meta.db-wal"))
    copy = os.path.join(work, f"{label}-copy")
    shutil.copytree(data, copy)
    db = sqlite3.connect(os.path.join(copy, "meta.db"))
    measured = db.execute("SELECT count(*) FROM pastes").fetchone()[0] - args.prefill
    owner = dict(db.execute("SELECT pageno, name || ' (' || pagetype || ')' FROM dbstat"))
    by_tree = collections.Counter(owner.get(p, "free or new") for p in frames)
    print(f"\n### {label}: {binary}\n")
    print(f"{measured} creates of {args.body_bytes} bytes{' of text' if args.corpus else ''} "
          f"after {args.prefill} (wrk, "
          f"{args.concurrency} connections): {commits} commits (mean batch "
          f"{measured / max(commits, 1):.1f}), {len(frames)} frames of {page_size} bytes, "
          f"**{len(frames) / measured:.2f} pages and "
          f"{len(frames) * (page_size + 24) / measured / 1024:.1f} KiB of WAL per create**\n")
    print("| b-tree (page type) | pages | per create |")
    print("|---|---:|---:|")
    for name, n in by_tree.most_common():
        print(f"| {name} | {n} | {n / measured:.2f} |")
    return len(frames) / measured


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("binaries", nargs="+", help="LABEL=PATH")
    p.add_argument("--prefill", type=int, default=20000)
    p.add_argument("--measured", type=int, default=600, help="about; what landed is counted")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--body-bytes", type=int, default=10240)
    p.add_argument("--text", action="store_true",
                   help="measured bodies are windows of the repository's text (bench/growth.py's "
                        "corpus), which compress as pastes do, not one repeated byte")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="wal-pages-")
    args.corpus = None
    try:
        if args.text:
            from growth import write_corpus
            args.corpus = os.path.join(work, "corpus.txt")
            write_corpus(args.corpus)
        results = {}
        for spec in args.binaries:
            label, _, path = spec.partition("=")
            results[label] = measure(label, os.path.realpath(path), args, work)
        if len(results) > 1:
            print("\n| binary | pages per create |\n|---|---:|")
            for label, per in results.items():
                print(f"| {label} | {per:.2f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
