#!/usr/bin/python3
"""What an online backup of the embedded store costs, and how fast it reads (issue 48, item 4).

Fills one embedded store through the API to --pastes (bench/wrk/growth_create.lua: a public
pastebin's sizes and lifetimes, the growth bench's fill), measures durable creates at 64
connections alone, then copies the data dir while creates run, once per method, each after the
page cache was dropped (so the copy reads the disk, as it does at a size past memory):

- `vacuum`: `sqlite3 meta.db "VACUUM INTO ..."` (what docs/operations.md said before), then the
  bodies' files with `cp -r`;
- `sluice`: `sluice admin backup` (SQLite's online backup, pages in file order, then the files);
- `sluice --rate R`: the same, held to R MB/s.

For each: seconds, MB copied and MB/s, the creates' rate meanwhile against the rate alone (one
run), and the largest WAL seen. Writes the table to --out with the command and the machine.

    bench/backup_bench.py --bin build/release/sluice --pastes 1000000
"""
import argparse
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from growth import REPO, Server, disk_bytes, drop_page_cache, log, machine, ok_rate, wrk, write_corpus  # noqa: E402


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = os.path.realpath(args.work)
        self.data = os.path.join(self.work, "data")
        self.copy = os.path.join(self.work, "copy")
        self.corpus = os.path.join(self.work, "corpus.txt")

    def creates(self, seconds):
        return wrk(self.server.url + "/api/v1/pastes", seconds, script="growth_create.lua",
                   env={"CORPUS": self.corpus})

    def fill(self):
        made = 0
        while made < self.args.pastes:
            run = self.creates(20)
            made += run["statuses"].get("201", 0)
            log(f"fill: {made} created, {ok_rate(run, 201):.0f}/s")

    def methods(self):
        meta = os.path.join(self.data, "meta.db")
        rate = self.args.rate
        return [
            ("vacuum", f"sqlite3 VACUUM INTO, then cp -r blobs",
             ["bash", "-c", f"set -e; mkdir -p {self.copy}; sqlite3 {meta} \"VACUUM INTO "
                            f"'{self.copy}/meta.db'\"; cp -r {self.data}/blobs {self.copy}/"]),
            ("sluice", "sluice admin backup",
             [self.args.bin, "admin", "backup", "--data-dir", self.data, self.copy]),
            (f"sluice-{rate:g}", f"sluice admin backup --rate {rate:g}",
             [self.args.bin, "admin", "backup", "--data-dir", self.data, self.copy, "--rate",
              str(rate)]),
        ]

    def one(self, name, command, quiet):
        shutil.rmtree(self.copy, ignore_errors=True)
        drop_page_cache()
        log(f"{name}: {' '.join(command)}")
        began = time.monotonic()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # The copy's own end, not the end of the creates' window it fell in.
        ended = {}

        def wait():
            ended["out"] = proc.communicate()
            ended["at"] = time.monotonic()

        waiter = threading.Thread(target=wait)
        waiter.start()
        rates, wal_max = [], 0
        while waiter.is_alive():
            run = self.creates(5)
            rates.append(ok_rate(run, 201))
            wal_max = max(wal_max, self.server.wal_bytes())
        waiter.join()
        took = ended["at"] - began
        out, err = ended["out"]
        if proc.returncode != 0:
            sys.exit(f"{name} failed ({proc.returncode}): {out}{err}")
        copied = disk_bytes(self.copy)
        during = sum(rates) / len(rates) if rates else None
        row = {"name": name, "seconds": took, "mb": copied / 1e6, "mb_per_s": copied / 1e6 / took,
               "creates_during": during, "ratio": during / quiet if during else None,
               "wal_max_mb": wal_max / 1e6}
        log(f"{name}: {took:.1f} s, {row['mb']:.0f} MB, {row['mb_per_s']:.1f} MB/s, creates "
            f"{during or 0:.0f}/s ({(row['ratio'] or 0):.2f}x), WAL up to {row['wal_max_mb']:.0f} MB")
        return row

    def run(self):
        subprocess.run(["rm", "-rf", self.work], check=True)
        os.makedirs(self.work)
        write_corpus(self.corpus)
        self.server = Server(self.args.bin, self.data, os.path.join(self.work, "sluice.log"),
                             self.args.port, self.args.port + 1)
        self.server.start()
        try:
            self.fill()
            stored = disk_bytes(self.data)
            quiet = ok_rate(self.creates(10), 201)
            log(f"creates alone: {quiet:.0f}/s; data dir {stored / 1e9:.2f} GB")
            rows = [(label, self.one(name, command, quiet))
                    for name, label, command in self.methods()]
        finally:
            self.server.stop()
        self.report(stored, quiet, rows)
        shutil.rmtree(self.work, ignore_errors=True)

    def report(self, stored, quiet, rows):
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        lines = [
            "# An online backup of the embedded store (bench/backup_bench.py)", "",
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {commit}, {machine()}.",
            f"Command: `{' '.join(sys.argv)}`", "",
            f"{self.args.pastes:,} pastes created through the API (bench/wrk/growth_create.lua), "
            f"data dir {stored / 1e9:.2f} GB; durable creates at 64 connections alone: "
            f"{quiet:,.0f}/s. Each copy starts with the page cache dropped, creates running "
            "beside it in 5 s windows.", "",
            "| method | seconds | MB copied | MB/s | creates meanwhile (x alone) | WAL at most |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for label, r in rows:
            lines.append(f"| {label} | {r['seconds']:.1f} | {r['mb']:,.0f} | {r['mb_per_s']:.1f} | "
                         f"{r['creates_during'] or 0:,.0f} ({r['ratio'] or 0:.2f}) | "
                         f"{r['wal_max_mb']:,.0f} MB |")
        with open(self.args.out, "a") as f:
            f.write("\n".join(lines) + "\n\n")
        print("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(REPO, "build/release/sluice"))
    parser.add_argument("--pastes", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=50.0, help="MB/s of the paced copy")
    parser.add_argument("--work", default=os.path.join(REPO, "bench/work/backup"))
    parser.add_argument("--port", type=int, default=18480)
    parser.add_argument("--out", default=os.path.join(REPO, "bench/results/backup.md"))
    Bench(parser.parse_args()).run()


if __name__ == "__main__":
    main()
