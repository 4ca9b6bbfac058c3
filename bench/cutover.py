#!/usr/bin/env python3
"""The cutover of docs/scale-out.md ("Outgrowing one box"), measured: what a copy beside a serving
server costs it, and how long the read-only window lasts.

    SLUICE_BIN=build/dev/sluice nice -n 10 bench/cutover.py [--pastes N] [--changes K]
                                [--jobs J] [--seconds S] [--whole-second-pass] [--full-verify]

1. Fills a data dir through one server with N small pastes (default 100,000: wrk at 64
   connections, bench/wrk/cutover_mix.lua MODE=fill, 100-400 bytes each), plus 400 made here whose
   delete tokens are kept, and 20 burn pastes.
2. The serving rate: a read+create load (cutover_mix.lua: 90% GET /raw of ids drawn from 10,000 of
   the store, 10% creates) for S seconds (default 20) without a copy, S seconds with
   `migrate-store` running beside it at its default pacing (--rate 200, its default --jobs) once
   its count of the rows has ended, and S seconds without again. Prints each rate and the ratio.
   --serving-only: first S seconds of the load to warm the page cache (not counted), then
   without, beside, without, beside, and stops there.
3. The first pass, unpaced (--rate 0 --jobs J), to PostgreSQL (scripts/testenv/postgres.sh,
   PG_DURABLE=1: fsync on) and a folder of files, while the server runs.
4. K changes through the server (default 1,000 creates, and 100 deletes, 10 claims of burn
   pastes, 10 reports, 1 takedown), then `sluice admin read-only on`, a create probed (503
   read_only), `migrate-store --changed --rate 0 --jobs J`, `sluice admin read-only off`: the
   window, from the first command's start to the last one's end.
   --whole-second-pass: before the window, the same changes' second pass without --changed (every
   paste copied and verified again), for comparison. --full-verify: afterwards, a whole
   `--verify-only` of the target, which must find no difference.
"""
import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, HERE)
from lifted import lifted_limits  # noqa: E402
from sluice_harness import SluiceServer, clean_env, run_sluice, sluice_bin  # noqa: E402
from test_postgres import PostgresServer  # noqa: E402


def log(*parts):
    print(time.strftime("%H:%M:%S", time.gmtime()), *parts, flush=True)


def settings(path, **values):
    with open(path, "w") as f:
        for key, value in values.items():
            f.write(f"{key} = {json.dumps(value)}\n")
    return path


def count(server):
    conn = sqlite3.connect(f"file:{server.db_path}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute("SELECT COUNT(*) FROM pastes").fetchone()[0]
    finally:
        conn.close()


def wrk(url, seconds, env, conns=64):
    cmd = ["wrk", "-t2", f"-c{conns}", f"-d{seconds}s", "--timeout", "10s", "-s",
           os.path.join(HERE, "wrk", "cutover_mix.lua"), url]
    ran = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True)
    if ran.returncode != 0:
        sys.exit(f"wrk: {ran.stderr}")
    out = {"statuses": {}}
    for line in ran.stdout.splitlines():
        parts = line.split()
        if line.startswith("status "):
            out["statuses"][parts[1]] = int(parts[2])
        elif " requests in " in line:
            out["requests"] = int(parts[0])
            text = parts[3].rstrip(",")
            out["seconds"] = float(text[:-1]) * (60 if text.endswith("m") else 1) \
                if not text.endswith("ms") else float(text[:-2]) / 1000
    return out


def rates(run):
    s = run["seconds"]
    return run["statuses"].get("200", 0) / s, run["statuses"].get("201", 0) / s


def migrate(args, env=None, background=False):
    cmd = [sluice_bin(), "admin", "migrate-store", *args]
    if background:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=clean_env(env))
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(env), timeout=4 * 3600)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"migrate-store {args} failed ({done.returncode}):\n{done.stdout[-3000:]}"
                 f"{done.stderr[-3000:]}")
    summary = json.loads([ln for ln in done.stdout.splitlines() if ln.startswith("{")][-1])
    return elapsed, summary


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pastes", type=int, default=100_000)
    p.add_argument("--changes", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=8)
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--whole-second-pass", action="store_true")
    p.add_argument("--full-verify", action="store_true")
    p.add_argument("--serving-only", action="store_true")
    a = p.parse_args()
    root = tempfile.mkdtemp(prefix="sluice-cutover-bench-")
    src = SluiceServer(["--trusted-proxy", "127.0.0.1", "--report-hide-threshold", "100",
                        *lifted_limits()], data_dir=os.path.join(root, "source"))
    src.start()
    os.environ["PG_DURABLE"] = "1"
    pg = PostgresServer()
    figures = {"pastes": a.pastes, "changes": a.changes, "jobs": a.jobs}
    try:
        # ---- 1. the store ------------------------------------------------------------------
        log(f"filling {a.pastes} pastes")
        kept = [src.create_ok(f"kept {i} " * 20) for i in range(400)]
        burns = [src.request("POST", "/api/v1/pastes?burn=1", body=f"burn {i}").json()
                 for i in range(20)]
        started = time.monotonic()
        while count(src) < a.pastes:
            wrk(src.url, 30, {"MODE": "fill"})
            log(f"  {count(src)} pastes")
        figures["fill_seconds"] = time.monotonic() - started
        ids = os.path.join(root, "ids.txt")
        conn = sqlite3.connect(f"file:{src.db_path}?mode=ro", uri=True)
        with open(ids, "w") as f:
            for (paste_id,) in conn.execute("SELECT id FROM pastes ORDER BY random() LIMIT 10000"):
                f.write(paste_id + "\n")
        conn.close()
        from_file = settings(os.path.join(root, "from.toml"), data_dir=src.data_dir)

        def target(name):
            pg.sql(f"CREATE DATABASE {name}")
            url = pg.url.rsplit("/", 1)[0] + "/" + name
            return settings(os.path.join(root, f"{name}.toml"),
                            data_dir=os.path.join(root, name), meta=url)

        # ---- 2. the serving rate beside a paced copy -----------------------------------------
        mix = {"IDS": ids, "CREATE_SHARE": "0.1"}

        def beside_copy(name):
            serving_to = target(name)
            copy = migrate(["--from", from_file, "--to", serving_to], background=True)
            lines = []
            reader = threading.Thread(target=lambda: lines.extend(copy.stderr), daemon=True)
            reader.start()
            waited = time.monotonic()
            while not any("pastes/s" in ln for ln in lines):
                if copy.poll() is not None:
                    sys.exit(f"the paced copy ended early: {copy.stdout.read()}")
                time.sleep(0.2)
            figures[f"count_walk_seconds_{name}"] = time.monotonic() - waited
            log("serving rate beside the paced copy")
            run = wrk(src.url, a.seconds, mix)
            copy.kill()
            copy.wait()
            figures[f"paced_copy_progress_{name}"] = [
                ln.strip() for ln in lines if "pastes/s" in ln][-1]
            return run

        def without():
            log("serving rate without a copy")
            return wrk(src.url, a.seconds, mix)

        if a.serving_only:
            log("warming up")
            wrk(src.url, a.seconds, mix)
            runs = (("without_1", without()), ("beside_1", beside_copy("serving1")),
                    ("without_2", without()), ("beside_2", beside_copy("serving2")))
        else:
            runs = (("before", without()), ("beside", beside_copy("serving")),
                    ("after", without()))
        for name, run in runs:
            figures[f"serving_{name}"] = dict(zip(("reads_per_s", "creates_per_s"), rates(run)),
                                              statuses=run["statuses"])
        if a.serving_only:
            print(json.dumps(figures, indent=2))
            return

        # ---- 3. the first pass ---------------------------------------------------------------
        to_file = target("cutover")
        total = count(src)
        figures["pastes_at_first_pass"] = total
        log(f"first pass of {total} pastes, --rate 0 --jobs {a.jobs}")
        elapsed, summary = migrate(["--from", from_file, "--to", to_file, "--rate", "0",
                                    "--jobs", str(a.jobs)])
        figures["first_pass"] = {"seconds": elapsed, "summary": summary}
        log(f"  {elapsed:.0f} s: {summary}")

        # ---- 4. the changes, then the window ---------------------------------------------------
        rng = random.Random(47)
        log(f"{a.changes} creates and the other changes")
        for i in range(a.changes):
            src.create_ok(f"made after the first pass {i} " * 10)
        for doc in kept[:100]:
            assert src.delete(doc["id"], token=doc["delete_token"]).status == 204
        for doc in burns[:10]:
            assert src.request("POST", f"/api/v1/pastes/{doc['id']}/claim").status == 200
        for i, doc in enumerate(kept[100:110]):
            res = src.request("POST", f"/api/v1/pastes/{doc['id']}/report",
                              body=json.dumps({"reason": "spam"}),
                              headers={"Content-Type": "application/json",
                                       "X-Forwarded-For": f"198.51.{100 + i}.7"})
            assert res.status in (200, 201, 202), res
        assert src.admin_request("POST", f"/admin/pastes/{kept[200]['id']}/takedown",
                                 body="{}").status == 200
        rng.shuffle(kept)
        if a.whole_second_pass:
            log("a whole second pass (no --changed), for comparison")
            elapsed, summary = migrate(["--from", from_file, "--to", to_file, "--rate", "0",
                                        "--jobs", str(a.jobs)])
            figures["whole_second_pass"] = {"seconds": elapsed, "summary": summary}
            log(f"  {elapsed:.0f} s: {summary}")
            # The same changes again for the window's pass to find.
            for i in range(a.changes):
                src.create_ok(f"made after the second pass {i} " * 10)
        admin = ["admin", "--admin", f"http://127.0.0.1:{src.admin_port}", "--token-file",
                 src.admin_token_file, "read-only"]
        log("the window")
        window_started = time.monotonic()
        assert run_sluice(admin + ["on"]).returncode == 0
        probe = src.create("in the window")
        assert probe.status == 503 and probe.json()["reason"] == "read_only", probe
        elapsed, summary = migrate(["--from", from_file, "--to", to_file, "--changed", "--rate",
                                    "0", "--jobs", str(a.jobs)])
        assert run_sluice(admin + ["off"]).returncode == 0
        figures["window_seconds"] = time.monotonic() - window_started
        figures["changed_pass"] = {"seconds": elapsed, "summary": summary}
        log(f"  window {figures['window_seconds']:.1f} s; pass {elapsed:.1f} s: {summary}")
        if a.full_verify:
            log("a whole verification")
            elapsed, summary = migrate(["--from", from_file, "--to", to_file, "--verify-only",
                                        "--rate", "0", "--jobs", str(a.jobs)])
            figures["full_verify"] = {"seconds": elapsed, "summary": summary}
            log(f"  {elapsed:.0f} s: {summary}")
        print(json.dumps(figures, indent=2))
    finally:
        src.stop()
        pg.stop()
        src.cleanup()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
