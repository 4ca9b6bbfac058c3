#!/usr/bin/env python3
"""The rate of `sluice admin migrate-store` (docs/scale-out.md, "Outgrowing one box").

    SLUICE_BIN=build/dev/sluice bench/migrate_store.py [PASTES] [--rate N] [--jobs J[,J...]]

Creates PASTES pastes (default 10,000: bodies of 200 B to 8 KB, one in a hundred of 100 KB, so
some are files under the data dir) through a sluice server on a fresh data dir, stops it, then
moves them with `sluice admin migrate-store` (copy and verification) to PostgreSQL with a shared
folder of files, and to PostgreSQL with s3rver (both started here by scripts/testenv, in temporary
folders). Prints, for each target, the wall time of the whole command, and pastes/s and MB/s of
body bytes over it, and the rate the command's own progress line reported for the copy alone.
--rate N passes the command's pacing (default 0: unpaced, the figure is what the stores allow).
--jobs J passes the pastes copied at once (default: the command's own); a list (--jobs 1,8) runs
the shared-files target once per value, in that order, each into a fresh database and folder
(and leaves S3 out: its one bucket would already hold the bodies on a second run).
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from sluice_harness import SluiceServer, clean_env, sluice_bin  # noqa: E402
from test_postgres import PostgresServer  # noqa: E402

S3RVER = os.path.normpath(os.path.join(HERE, "..", "scripts", "testenv", "s3rver.sh"))
BUCKET = "sluice-migrate-bench"
S3_ENV = {"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER",
          "AWS_REGION": "us-east-1"}


def settings(path, **values):
    with open(path, "w") as f:
        for key, value in values.items():
            f.write(f"{key} = {json.dumps(value)}\n")
    return path


def migrate(from_file, to_file, rate, jobs=None):
    started = time.monotonic()
    extra = ["--jobs", str(jobs)] if jobs else []
    done = subprocess.run([sluice_bin(), "admin", "migrate-store", "--from", from_file, "--to",
                           to_file, "--rate", str(rate), *extra], capture_output=True, text=True,
                          env=clean_env(S3_ENV), timeout=3600)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"migrate-store failed ({done.returncode}):\n{done.stdout[-3000:]}"
                 f"{done.stderr[-3000:]}")
    summary = json.loads([ln for ln in done.stdout.splitlines() if ln.startswith("{")][-1])
    progress = [ln for ln in done.stderr.splitlines() if "pastes/s" in ln]
    return elapsed, summary, progress[-1] if progress else ""


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    count = int(args[0]) if args else 10_000
    rate = 0
    if "--rate" in sys.argv:
        rate = float(sys.argv[sys.argv.index("--rate") + 1])
    jobs = [None]
    if "--jobs" in sys.argv:
        jobs = [int(j) for j in sys.argv[sys.argv.index("--jobs") + 1].split(",")]
    root = tempfile.mkdtemp(prefix="sluice-migrate-bench-")
    rng = random.Random(47)
    src = SluiceServer(data_dir=os.path.join(root, "source"))
    src.start()
    body_bytes = 0
    made = time.monotonic()
    for i in range(count):
        size = 100_000 if i % 100 == 99 else rng.randint(200, 8000)
        body = (f"paste {i} " * (size // 8 + 1))[:size]
        res = src.create(body)
        if res.status != 201:
            sys.exit(f"create answered {res!r}")
        body_bytes += size
    print(f"created {count} pastes ({body_bytes / 1e6:.1f} MB) in {time.monotonic() - made:.0f} s")
    src.stop()
    pg = PostgresServer()
    s3_dir = tempfile.mkdtemp(prefix="sluice-s3rver-")
    endpoint = subprocess.run([S3RVER, "start", s3_dir, "0", BUCKET], check=True,
                              capture_output=True, text=True, timeout=120).stdout.strip()
    try:
        from_file = settings(os.path.join(root, "from.toml"), data_dir=src.data_dir)
        targets = []
        for name, extra in (("PostgreSQL + shared files", {}),
                            ("PostgreSQL + S3 (s3rver)",
                             {"blob": f"s3://{BUCKET}", "s3_endpoint": endpoint})):
            # One bucket: a second run into it would find the bodies there and skip their PUTs.
            if "blob" in extra and len(jobs) > 1:
                continue
            for j in jobs:
                n = len(targets)
                db = f"bench{n}"
                pg.sql(f"CREATE DATABASE {db}")
                url = pg.url.rsplit("/", 1)[0] + "/" + db
                to_file = settings(os.path.join(root, f"to{n}.toml"),
                                   data_dir=os.path.join(root, f"target{n}"), meta=url, **extra)
                elapsed, summary, progress = migrate(from_file, to_file, rate, j)
                assert summary["moved"] == count and summary["differences"] == 0, summary
                label = name if j is None else f"{name}, --jobs {j}"
                targets.append((label, elapsed, summary, progress))
        print(f"\n{count} pastes, {body_bytes / 1e6:.1f} MB of bodies, --rate {rate:g}")
        print("| target | wall time (copy + verify) | pastes/s | MB/s | the copy's last progress line |")
        print("|---|---|---|---|---|")
        for name, elapsed, summary, progress in targets:
            line = re.sub(r"^migrate-store: ", "", progress)
            print(f"| {name} | {elapsed:.1f} s | {count / elapsed:.0f} | "
                  f"{summary['bytes'] / 1e6 / elapsed:.2f} | {line} |")
    finally:
        subprocess.run([S3RVER, "stop", s3_dir], capture_output=True, timeout=60)
        pg.stop()
        src.cleanup()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(s3_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
