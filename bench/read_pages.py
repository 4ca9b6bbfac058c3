#!/usr/bin/env python3
"""Pages a read of a stored paste fetches from meta.db when nothing is cached, by b-tree: the
read-side counterpart of bench/wal_pages.py, counted from the server's own reads rather than
inferred from the disk's totals.

For each binary: a fresh data dir, at least PASTES creates of BODY_BYTES of repository text (wrk,
bench/wrk/create.lua with CORPUS, in rounds of 20 s), a clean stop, READS ids drawn at
random, the page cache dropped, a start, strace attached to every thread for pread64, then the
reads one at a time (GET /raw/{id}, no process cache). Each page of meta.db read for the first
time since the drop is one the disk had to serve (the kernel's read-ahead aside); dbstat names
the b-tree and the page type of each. Two phases of READS reads are counted: the first just after
the drop, when a read pays for the trees' interior pages as well, and the second after WARM more
reads of other pastes, when the interior pages (about 9 MiB a million pastes) and much of the id
index are cached, as in a server that has run a while with a store larger than its memory.

    bench/read_pages.py before=/tmp/sluice-old after=build/release/sluice [--pastes 1000000]

Prints a markdown table per binary and one comparing them. Needs root (drop_caches) and strace.
"""
import argparse
import collections
import glob
import http.client
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

from growth import drop_page_cache, disk_reads, write_corpus
from wal_pages import start

REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
# strace's lines: a call whole, or (another thread's call in between) cut in two.
WHOLE = re.compile(r"^(\d+)\s+pread64\((\d+), .*, (\d+), (\d+)\)\s+=\s+\d+")
BEGUN = re.compile(r"^(\d+)\s+pread64\((\d+), <unfinished")
RESUMED = re.compile(r"^(\d+)\s+<\.\.\. pread64 resumed>.*, (\d+), (\d+)\)\s+=\s+\d+")


def fill(port, db_path, args, corpus):
    """Rounds of wrk's creates until the store holds `args.pastes` rows."""
    env = dict(os.environ, BODY_BYTES=str(args.body_bytes), CORPUS=corpus)
    while True:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        rows = db.execute("SELECT COALESCE(MAX(rowid), 0) FROM pastes").fetchone()[0]
        db.close()
        if rows >= args.pastes:
            return
        subprocess.run(["wrk", "-t2", "-c64", "-d20s", "-s",
                        os.path.join(REPO, "bench/wrk/create.lua"), f"http://127.0.0.1:{port}"],
                       env=env, stdout=subprocess.DEVNULL, check=True)


def meta_fds(pid, db_path):
    fds = set()
    for link in glob.glob(f"/proc/{pid}/fd/*"):
        try:
            if os.readlink(link) == os.path.realpath(db_path):
                fds.add(int(os.path.basename(link)))
        except OSError:
            pass
    return fds


def preads(trace):
    """(offset in the trace, fd, size, position) of each pread64 in strace's output."""
    begun = {}
    with open(trace) as f:
        at = 0
        for line in f:
            line_at = at
            at += len(line)
            if m := WHOLE.match(line):
                yield line_at, int(m.group(2)), int(m.group(3)), int(m.group(4))
            elif m := BEGUN.match(line):
                begun[m.group(1)] = int(m.group(2))
            elif (m := RESUMED.match(line)) and m.group(1) in begun:
                yield line_at, begun.pop(m.group(1)), int(m.group(2)), int(m.group(3))


def measure(label, binary, args, work, corpus):
    data = os.path.join(work, label)
    db_path = os.path.join(data, "meta.db")
    log = os.path.join(work, f"{label}.log")
    filled_in = None
    if not os.path.exists(db_path):  # else a kept store (--work and --keep) is measured again
        os.makedirs(data)
        proc, port = start(binary, data, log)
        began = time.monotonic()
        fill(port, db_path, args, corpus)
        filled_in = time.monotonic() - began
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    db = sqlite3.connect(db_path)
    pastes = db.execute("SELECT count(*) FROM pastes").fetchone()[0]
    ids = [r[0] for r in db.execute("SELECT id FROM pastes")]
    owner = {page: (name, kind) for page, name, kind in
             db.execute("SELECT pageno, name, pagetype FROM dbstat")}
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    version = db.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
    db.close()
    chosen = random.Random(48).sample(ids, 2 * args.reads + args.warm)

    drop_page_cache()
    proc, port = start(binary, data, log)
    trace = os.path.join(work, f"{label}.strace")
    tracer = subprocess.Popen(["strace", "-f", "-qq", "-s", "0", "-e", "trace=pread64",
                               "-o", trace, "-p", str(proc.pid)], stderr=subprocess.DEVNULL)
    time.sleep(2)  # strace attaches to each thread
    reads_before = disk_reads(data)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    marks = []  # the trace's length before each read, to split it by read
    statuses = collections.Counter()
    for paste_id in chosen:
        marks.append(os.path.getsize(trace))
        conn.request("GET", f"/raw/{paste_id}")
        resp = conn.getresponse()
        resp.read()
        statuses[resp.status] += 1
    time.sleep(1)
    disk = disk_reads(data) - reads_before
    fds = meta_fds(proc.pid, db_path)  # every reader's connection is open by now
    tracer.send_signal(signal.SIGINT)
    tracer.wait(timeout=30)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)

    # First touches of each page, in the order the server read them; strace writes a line per
    # call as it returns, so the file's offsets split the calls by the read that made them.
    seen = set()
    phases = [collections.Counter(), collections.Counter(), collections.Counter()]
    warm_at, last_at = marks[args.reads], marks[args.reads + args.warm]
    for at, fd, size, position in preads(trace):
        if fd not in fds:
            continue
        for page in range(position // page_size + 1, (position + size - 1) // page_size + 2):
            if page in seen:
                continue
            seen.add(page)
            name, kind = owner.get(page, ("header or free", ""))
            phase = 0 if at < warm_at else 1 if at < last_at else 2
            phases[phase][f"{name} ({kind})" if kind else name] += 1
    first, _, last = phases
    firsts = sum(first.values()) / args.reads
    lasts = sum(last.values()) / args.reads
    print(f"\n### {label}: {binary}\n")
    print(f"{pastes} pastes of {args.body_bytes} bytes (schema {version}, meta.db "
          f"{os.path.getsize(db_path) / 2**30:.2f} GiB"
          f"{f', filled in {filled_in:.0f} s' if filled_in else ', kept from a run before'}); "
          f"{len(chosen)} reads one at a time after the page cache was dropped, answered "
          f"{dict(statuses)}; the disk completed {disk} reads meanwhile "
          f"({disk / len(chosen):.2f} a read).\n")
    print(f"| b-tree (page type) | the first {args.reads} reads: pages a read | "
          f"{args.reads} after {args.warm} more: pages a read |")
    print("|---|---:|---:|")
    for name in sorted(set(first) | set(last), key=lambda n: -(first[n] + last[n])):
        print(f"| {name} | {first[name] / args.reads:.2f} | {last[name] / args.reads:.2f} |")
    print(f"| **all** | **{firsts:.2f}** | **{lasts:.2f}** |")
    return firsts, lasts, disk / len(chosen)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("binaries", nargs="+", help="LABEL=PATH")
    p.add_argument("--pastes", type=int, default=1_000_000)
    p.add_argument("--reads", type=int, default=2000, help="reads counted in each phase")
    p.add_argument("--warm", type=int, default=20000, help="reads between the two phases")
    p.add_argument("--body-bytes", type=int, default=3500)
    p.add_argument("--work", help="where the stores go (default: a temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the stores (an upgrade to time)")
    p.add_argument("--again", metavar="DIR", help="measure the stores a --keep run left in DIR")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("read_pages.py drops the page cache: run it as root")
    work = args.again or tempfile.mkdtemp(prefix="read-pages-", dir=args.work)
    try:
        corpus = os.path.join(work, "corpus.txt")
        if not os.path.exists(corpus):
            write_corpus(corpus)
        results = {}
        for spec in args.binaries:
            label, _, path = spec.partition("=")
            results[label] = measure(label, os.path.realpath(path), args, work, corpus)
        print(f"\n| binary | pages a read, the first {args.reads} | {args.reads} after "
              f"{args.warm} more | disk reads a read, all |")
        print("|---|---:|---:|---:|")
        for label, (first, second, disk) in results.items():
            print(f"| {label} | {first:.2f} | {second:.2f} | {disk:.2f} |")
    finally:
        if args.keep or args.again:
            print(f"\nthe stores are in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
