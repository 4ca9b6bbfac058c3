#!/usr/bin/python3
"""Creates and reads per second with the bodies on Ceph RGW against s3rver, in one run
(bench/run_rgw_vs_s3rver_bench.sh runs this).

Every store is started once, before the rounds, and stays up to the end: s3rver
(scripts/testenv/s3rver.sh, the stack's and most tests' S3) and one or more one-node Ceph clusters
with their RADOS Gateway (scripts/testenv/ceph-rgw.sh), the OSD on memstore (the tests' default)
or on BlueStore in a sparse file (what the growth bench runs). Each round then measures every
store in turn, the order rotated from round to round, with the same build and the same load:

- a new sluice process, its metadata in a new embedded store (SQLite, the same cost for every
  store), every body in the bucket (inline_body_bytes 0), no paste cache (cache_bytes 0, so that
  every read is a GET from the bucket), the admission limits lifted as the growth bench lifts
  them (bench/growth.py's LIFTED: one client may hold all of the fill cap), and with
  --deadlines patient (the default) every store deadline at 10 s (put_timeout, read_budget,
  blob_get_timeout, meta_get_timeout): at the production 1 s, 300 ms, 200 ms and 20 ms, on a
  machine that others load, most answers were 503s at a deadline, which measures the deadline
  rather than the store (--deadlines production keeps them);
- creates: wrk at CONNS connections for SECONDS with bench/wrk/growth_create.lua (a public
  pastebin's sizes, mean about 3.4 KB; every answer's id kept);
- reads: wrk at 32 connections (under the process's fill cap of 50 concurrent misses, so that
  what is measured is the store and not the cap's 503s) for SECONDS of GET /raw/{id}, the ids
  drawn uniformly from what the creates made (bench/wrk/growth_reads.lua).

A rate is what answered 201 (creates) or 200 (reads) a second; anything else (a 503 when a PUT or
GET passed its deadline) is counted beside it. Every round's rates are divided by s3rver's of the
same round. For each Ceph store the OSD's resident memory is read before and after the round's
creates: with memstore the objects live there, which says what a million pastes would need.
Results: WORK/results.json, and the report to --out.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

from growth import LIFTED, MISS_CONNS, describe_binary, healthy, log, machine, ok_rate, wrk
from growth import write_corpus

REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
BUCKET = "sluice-bench"


class Store:
    """An S3 the rounds measure: its endpoint, keys and, for Ceph, the OSD's pid."""

    def __init__(self, name, work):
        self.name = name
        self.dir = os.path.join(work, name)
        self.osd_pid = None

    def start(self):
        if self.name == "s3rver":
            script = os.path.join(REPO, "scripts/testenv/s3rver.sh")
            self.endpoint = subprocess.run([script, "start", self.dir, "0", BUCKET], check=True,
                                           capture_output=True, text=True).stdout.split()[-1]
            self.keys = ("S3RVER", "S3RVER")
            return
        # A start beside other people's builds: ceph's commands may take minutes.
        env = {**os.environ, "CEPH_RGW_OBJECTSTORE": self.name.removeprefix("ceph-"),
               "CEPH_RGW_PATIENCE": "600"}
        script = os.path.join(REPO, "scripts/testenv/ceph-rgw.sh")
        subprocess.run([script, "start", self.dir, "0", BUCKET], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        self.endpoint = self.read("endpoint")
        self.keys = (self.read("access_key"), self.read("secret_key"))
        self.osd_pid = int(self.read("osd.pid"))

    def stop(self):
        name = "s3rver.sh" if self.name == "s3rver" else "ceph-rgw.sh"
        subprocess.run([os.path.join(REPO, "scripts/testenv", name), "stop", self.dir],
                       check=False, stdout=subprocess.DEVNULL)

    def read(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return f.read().strip()

    def osd_rss_mb(self):
        if self.osd_pid is None:
            return None
        with open(f"/proc/{self.osd_pid}/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))


def sluice_on(args, store, data, port):
    """A new sluice process on `store`, its metadata in `data`; returns it once it answers."""
    os.makedirs(data)
    proc = subprocess.Popen(
        [args.bin, "serve", "--listen", f"127.0.0.1:{port}", "--admin-listen",
         f"127.0.0.1:{port + 1}", "--data-dir", data, "--blob", f"s3://{BUCKET}",
         "--s3-endpoint", store.endpoint, "--inline-body-bytes", "0", "--cache-bytes", "0",
         "--log-level", "warn", *LIFTED,
         *(["--put-timeout", "10s", "--read-budget", "10s", "--blob-get-timeout", "10s",
            "--meta-get-timeout", "10s"] if args.deadlines == "patient" else [])],
        env={**os.environ, "AWS_ACCESS_KEY_ID": store.keys[0],
             "AWS_SECRET_ACCESS_KEY": store.keys[1], "AWS_REGION": "us-east-1"},
        stdout=open(os.path.join(data, "log"), "w"), stderr=subprocess.STDOUT)
    while not healthy(f"http://127.0.0.1:{port}"):
        if proc.poll() is not None:
            sys.exit(f"sluice exited with {proc.returncode}; see {data}/log")
        time.sleep(0.01)
    return proc


def measure(args, store, round_dir, corpus):
    data = os.path.join(round_dir, store.name)
    samples = os.path.join(round_dir, store.name + "-ids")
    os.makedirs(samples)
    proc = sluice_on(args, store, data, args.port)
    url = f"http://127.0.0.1:{args.port}"
    try:
        rss_before = store.osd_rss_mb()
        creates = wrk(url + "/api/v1/pastes", args.seconds, conns=args.conns,
                      script="growth_create.lua",
                      env={"CORPUS": corpus, "SAMPLE_DIR": samples, "SAMPLE_EVERY": "1"})
        rss_after = store.osd_rss_mb()
        ids = os.path.join(round_dir, store.name + "-ids.txt")
        with open(ids, "w") as out:
            for name in sorted(os.listdir(samples)):
                with open(os.path.join(samples, name)) as f:
                    out.write(f.read())
        reads = wrk(url, args.seconds, conns=MISS_CONNS, script="growth_reads.lua",
                    env={"IDS": ids})
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
    created = creates["statuses"].get("201", 0)
    row = {"store": store.name, "load": os.getloadavg()[0],
           "create": {"rate": ok_rate(creates, 201), "p50": creates["p50"],
                      "p99": creates["p99"], "statuses": creates["statuses"]},
           "read": {"rate": ok_rate(reads, 200), "p50": reads["p50"], "p99": reads["p99"],
                    "statuses": reads["statuses"]},
           "created": created}
    if rss_before is not None:
        row["osd_rss_mb"] = [rss_before, rss_after]
        row["osd_bytes_per_paste"] = (rss_after - rss_before) * 1048576 / max(created, 1)
    log(f"{store.name}: {row['create']['rate']:.0f} creates/s, {row['read']['rate']:.0f} reads/s")
    return row


def others(statuses, ok):
    bad = {code: n for code, n in statuses.items() if code != str(ok)}
    return ", ".join(f"{n} × {code}" for code, n in sorted(bad.items())) or "–"


def times(ratio):
    return "–" if ratio is None else f"{ratio:.2f}"


def report(out, results, command):
    stores = results["stores"]
    lines = [
        "## Creates and reads: Ceph RGW against s3rver", "",
        "Written by `bench/rgw_vs_s3rver.py` (bench/run_rgw_vs_s3rver_bench.sh; how it measures is "
        "the script's docstring): one sluice process, its metadata in SQLite, every body in the "
        "bucket, no paste cache, "
        + ("every store deadline at 10 s" if results.get("deadlines") == "patient"
           else "the production PUT timeout (1 s) and read budget (300 ms)")
        + f"; creates at {results['conns']} connections then reads at {MISS_CONNS} for "
        f"{results['seconds']} s each, the same build and load for every store, the stores "
        "measured in turn in each round (order rotated). × s3rver: the store's rate over s3rver's "
        "in the same round.", "",
        f"- Command: `{command}`",
        f"- Machine: {machine()}, Debian 12; {results['started']}",
        f"- sluice: {results['binary']}", "",
        "| round | store | load | creates/s (× s3rver) | create p50 / p99 ms | not 201 |"
        " reads/s (× s3rver) | read p50 / p99 ms | not 200 | OSD RSS MiB before → after |",
        "|---:|---|---:|---:|---:|---|---:|---:|---|---:|"]
    ratios = {name: {"create": [], "read": []} for name in stores}
    for number, rows in enumerate(results["rounds"], 1):
        base = next(r for r in rows if r["store"] == "s3rver")
        for r in sorted(rows, key=lambda r: stores.index(r["store"])):
            c, g = r["create"], r["read"]
            # No ratio where s3rver answered nothing of the kind in that round.
            rc, rg = (x["rate"] / base[k]["rate"] if base[k]["rate"] else None
                      for k, x in (("create", c), ("read", g)))
            for kind, ratio in (("create", rc), ("read", rg)):
                if ratio is not None:
                    ratios[r["store"]][kind].append(ratio)
            rss = r.get("osd_rss_mb")
            lines.append(
                f"| {number} | {r['store']} | {r['load']:.1f} | {c['rate']:,.0f} ({times(rc)})"
                f" | {c['p50']:.1f} / {c['p99']:.1f} | {others(c['statuses'], 201)}"
                f" | {g['rate']:,.0f} ({times(rg)}) | {g['p50']:.1f} / {g['p99']:.1f}"
                f" | {others(g['statuses'], 200)}"
                f" | {f'{rss[0]:.0f} → {rss[1]:.0f}' if rss else '–'} |")
    median = lambda values: times(statistics.median(values) if values else None)
    lines += ["", "Median over the rounds, × s3rver: " + "; ".join(
        f"{name} creates {median(v['create'])}, reads {median(v['read'])}"
        for name, v in ratios.items() if name != "s3rver") + "."]
    memstore = [r for rows in results["rounds"] for r in rows if r["store"] == "ceph-memstore"]
    if memstore:
        per = statistics.median(r["osd_bytes_per_paste"] for r in memstore)
        lines += ["", f"memstore's OSD grew by a median {per:,.0f} bytes a paste created "
                  f"(the bodies' mean is about 3.4 KB): {per * 1e6 / 2**30:.1f} GiB for a million "
                  "if it went on so. Part of it is the placement groups' logs and caches filling, "
                  "which BlueStore's OSD shows too and which osd_memory_target bounds; the "
                  "objects themselves, in memstore, have no bound but the memstore device size."]
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", default=os.path.join(REPO, "bench/work/rgw-vs-s3rver"))
    parser.add_argument("--stores", default="s3rver,ceph-memstore,ceph-bluestore",
                        type=lambda s: s.split(","))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--conns", type=int, default=64)
    parser.add_argument("--port", type=int, default=19700)
    parser.add_argument("--out", default=os.path.join(REPO, "bench/work/rgw-vs-s3rver.md"))
    parser.add_argument("--command", default="")
    parser.add_argument("--deadlines", choices=("patient", "production"), default="patient")
    parser.add_argument("--report-from", metavar="RESULTS.json",
                        help="only write the report of a run's results.json")
    args = parser.parse_args()
    if args.report_from:
        with open(args.report_from) as f:
            report(args.out, json.load(f), args.command)
        return
    if args.stores[0] != "s3rver" or any(
            s not in ("s3rver", "ceph-memstore", "ceph-bluestore") for s in args.stores):
        sys.exit("--stores: s3rver first (the reference), then ceph-memstore and/or ceph-bluestore")
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    corpus = os.path.join(args.work, "corpus.txt")
    write_corpus(corpus)
    results = {"stores": args.stores, "rounds": [], "seconds": args.seconds, "conns": args.conns,
               "deadlines": args.deadlines,
               "binary": describe_binary(args.bin),
               "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    stores = [Store(name, args.work) for name in args.stores]
    try:
        for store in stores:
            log(f"starting {store.name}")
            store.start()
        for number in range(args.rounds):
            round_dir = os.path.join(args.work, f"round{number + 1}")
            os.makedirs(round_dir)
            turn = stores[number % len(stores):] + stores[:number % len(stores)]
            results["rounds"].append([measure(args, store, round_dir, corpus) for store in turn])
            with open(os.path.join(args.work, "results.json"), "w") as f:
                json.dump(results, f, indent=1)
    finally:
        for store in stores:
            store.stop()
    report(args.out, results, args.command)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
