#!/usr/bin/env python3
"""The upgrade of an embedded store to the pastes in creation order (migration 21,
src/store/sqlite/sqlite_meta_schema.cc), timed, and the pages a lookup by id walks in each layout.

    bench/ordered_upgrade.py fill OLD_BINARY DATA_DIR [--pastes 1000000] [--body-bytes 512]
    bench/ordered_upgrade.py upgrade NEW_BINARY DATA_DIR [--keep] [--cold] [--in-place]
    bench/ordered_upgrade.py downgrade DATA_DIR
    bench/ordered_upgrade.py lookups DATA_DIR [--samples 2000]

fill: a fresh data dir filled through the API by a binary from before migration 21, with wrk
(bench/wrk/create.lua at 64 connections, as bench/wal_pages.py measures), then a clean stop. The
bodies' size does not matter to the migration (it moves rows, never bodies), so they are small.
upgrade: a copy of DATA_DIR started by NEW_BINARY; the migration's own log lines give the rows and
its time (and the start's, to the listening line). The copy is removed unless --keep. With --cold
the copy's pages are dropped from the page cache first (posix_fadvise DONTNEED on its files only).
With --in-place the store itself is started, not a copy (a store of 10 million, larger than the
disk's room for a second one).
downgrade: a stopped store of the new layout put back in schema 20's (tests/lib/schema20.py), its
rows inserted in creation order into the random id's b-tree, as a live store grew it: the way to a
10 million row old store without 2.5 hours of filling through an old binary.
lookups: for each b-tree a lookup by id walks, its depth and size by page type (dbstat), and the
pages a lookup of a random stored id (and of an absent one, a 404's) reads on a connection whose
page cache starts empty (the sqlite3 command's `.stats` "Page cache misses", less the schema's),
the store stopped.
"""
import argparse
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

from lifted import lifted_limits

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))),
                                "tests", "lib"))
from schema20 import to_schema_20_script, to_schema_21_script  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def start(binary, data_dir, log_path, timeout=3600):
    log = open(log_path, "w")
    began = time.monotonic()
    proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--admin-listen",
                             "127.0.0.1:0", "--data-dir", data_dir] + lifted_limits(),
                            stdout=log, stderr=subprocess.STDOUT)
    while time.monotonic() - began < timeout:
        with open(log_path) as f:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", f.read())
        if m:
            return proc, int(m.group(1)), time.monotonic() - began
        if proc.poll() is not None:
            sys.exit(f"{binary} exited at start-up; see {log_path}")
        time.sleep(0.05)
    sys.exit(f"{binary} did not start; see {log_path}")


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=300)


def fill(args):
    os.makedirs(args.data_dir)
    log = args.data_dir.rstrip("/") + ".fill.log"
    proc, port, _ = start(os.path.realpath(args.binary), args.data_dir, log)
    env = dict(os.environ, BODY_BYTES=str(args.body_bytes), STOP_AFTER=str(args.pastes // 2))
    began = time.monotonic()
    subprocess.run(["wrk", "-t2", "-c64", "-d24h", "-s", os.path.join(REPO, "bench/wrk/create.lua"),
                    f"http://127.0.0.1:{port}"], env=env, stdout=subprocess.DEVNULL, check=True)
    took = time.monotonic() - began
    stop(proc)
    db = sqlite3.connect(os.path.join(args.data_dir, "meta.db"))
    n = db.execute("SELECT count(*) FROM pastes").fetchone()[0]
    version = db.execute("SELECT max(version) FROM schema_version").fetchone()[0]
    print(f"{n} pastes of {args.body_bytes} bytes in {took:.0f} s ({n / took:.0f}/s), "
          f"schema version {version}, meta.db {os.path.getsize(os.path.join(args.data_dir, 'meta.db')) / 2**20:.0f} MiB")


def downgrade(args):
    path = os.path.join(args.data_dir, "meta.db")
    began = time.monotonic()
    db = sqlite3.connect(path, isolation_level=None)
    rows = db.execute("SELECT count(*) FROM pastes").fetchone()[0]
    if any(r[1] == "body" for r in db.execute("PRAGMA table_info(pastes)")):
        db.executescript(to_schema_21_script())  # bodies in rows (schema 22) back apart first
    db.executescript(to_schema_20_script())
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    print(f"{path}: {rows} pastes back in schema 20's layout in {time.monotonic() - began:.0f} s")


def upgrade(args):
    work = tempfile.mkdtemp(prefix="ordered-upgrade-", dir=os.path.dirname(os.path.realpath(args.data_dir)))
    copy = os.path.join(work, "data")
    if args.in_place:
        os.rmdir(work)
        work, copy = None, os.path.realpath(args.data_dir)
    else:
        shutil.copytree(args.data_dir, copy)
    subprocess.run(["sync"], check=True)
    if args.cold:
        # The copy's pages out of the page cache, and no other file's (dropping the whole cache
        # would slow whatever else runs on the machine): the migration reads meta.db from disk.
        for name in os.listdir(copy):
            path = os.path.join(copy, name)
            if os.path.isfile(path):
                fd = os.open(path, os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.close(fd)
    log = os.path.join(work or os.path.dirname(copy), "upgrade.log")
    try:
        proc, _, started = start(os.path.realpath(args.binary), copy, log)
        stop(proc)
        text = open(log).read()
        rows = re.search(r"migration 21 puts (\d+) pastes", text)
        took = re.search(r"migrated to version 21 in ([\d.]+) s", text)
        if not rows or not took:
            sys.exit(f"no migration 21 in {log}")
        rows, took = int(rows.group(1)), float(took.group(1))
        print(f"migration 21: {rows} pastes in {took:.2f} s, {took / rows * 1e6:.2f} s per million; "
              f"start to listening {started:.2f} s")
    finally:
        if args.keep or not work:
            print(f"kept {copy}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def lookups(args):
    path = os.path.join(args.data_dir, "meta.db")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    print(f"{path}: {db.execute('SELECT count(*) FROM pastes').fetchone()[0]} pastes, "
          f"layout: {db.execute('SELECT sql FROM sqlite_master WHERE name = ?', ('pastes',)).fetchone()[0].split(')')[-1].strip() or 'rowid'}")
    print("\n| b-tree | depth | interior pages | leaf pages | MiB |\n|---|---:|---:|---:|---:|")
    for name in ("pastes", "sqlite_autoindex_pastes_1", "pastes_by_id"):
        rows = db.execute("SELECT pagetype, count(*), max(length(path) - length(replace(path, '/', ''))) "
                          "FROM dbstat WHERE name = ? AND pagetype != 'overflow' GROUP BY pagetype",
                          (name,)).fetchall()
        if not rows:
            continue
        pages = {t: n for t, n, _ in rows}
        depth = max(d for _, _, d in rows)  # the root's path is "/", its children's "/000/"
        total = sum(pages.values())
        print(f"| {name} | {depth} | {pages.get('internal', 0)} | {pages.get('leaf', 0)} | "
              f"{total * 4096 / 2**20:.1f} |")
    ids = [r[0] for r in db.execute("SELECT id FROM pastes")]
    db.close()
    rng = random.Random(1)
    sample = rng.sample(ids, min(args.samples, len(ids)))
    absent = ["".join(rng.choices(BASE62, k=12)) for _ in sample]

    # One sqlite3 process per lookup: its page cache starts empty, so its misses are every page the
    # statement reads, the schema's included (counted apart: a read of the one-page storage_usage).
    def misses(sql):
        out = subprocess.run(["sqlite3", "-readonly", path], input=f".stats on\n{sql};\n",
                             capture_output=True, text=True, check=True).stdout
        return int(re.search(r"Page cache misses:\s+(\d+)", out).group(1))

    schema = misses("SELECT * FROM storage_usage") - 1
    lookup = "SELECT created_at, size_bytes, body_n FROM pastes WHERE id = '{}'"
    for label, ids_ in (("stored", sample), ("absent (a 404)", absent)):
        counts = [misses(lookup.format(i)) - schema for i in ids_]
        print(f"\n{len(counts)} lookups of {label} ids, each on a fresh connection: "
              f"{sum(counts) / len(counts):.2f} pages read per lookup besides the schema's "
              f"{schema} (min {min(counts)}, max {max(counts)})")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    f = sub.add_parser("fill")
    f.add_argument("binary")
    f.add_argument("data_dir")
    f.add_argument("--pastes", type=int, default=1_000_000)
    f.add_argument("--body-bytes", type=int, default=512)
    u = sub.add_parser("upgrade")
    u.add_argument("binary")
    u.add_argument("data_dir")
    u.add_argument("--keep", action="store_true")
    u.add_argument("--cold", action="store_true", help="the copy's pages out of the page cache first")
    u.add_argument("--in-place", action="store_true", help="start the store itself, not a copy")
    d = sub.add_parser("downgrade")
    d.add_argument("data_dir")
    lk = sub.add_parser("lookups")
    lk.add_argument("data_dir")
    lk.add_argument("--samples", type=int, default=2000)
    args = p.parse_args()
    {"fill": fill, "upgrade": upgrade, "downgrade": downgrade, "lookups": lookups}[args.what](args)


if __name__ == "__main__":
    main()
