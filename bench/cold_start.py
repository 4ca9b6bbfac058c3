#!/usr/bin/python3
"""Creates and cold reads just after a restart with the page cache dropped (a reboot), on an
embedded store larger than memory, for two binaries in one run (bench/run_cold_start_bench.sh).

The store is one bench/run_growth_bench.sh left in bench/work/growth-after/ (data/, corpus.txt and
the sampled ids.txt): 10 million pastes, 29 GB, on a machine of 24 GiB. Each trial stops the
server, drops the page cache, starts BIN and, at once, runs creates (bench/wrk/growth_create.lua,
64 connections) in three 10 s windows (--windows); the reference is the same binary's creates on
an empty store in the same run (a fresh data dir, after 10 s of warm-up), so each window is a ratio
against it, the aim of bench/results/growth-notes.md (at least 0.8 within 30 s of the start);
--windows runs more of them, to see what follows (background work that waits for a while after
the start, background_start_delay, begins in them). The two binaries take turns (before, after,
after, before, ...) so that neither always meets the store at the same moment of its expiry. A
trial also counts the disk's completed reads in its windows (/proc/diskstats).

Then, per binary, cold reads after such a start: the page cache dropped, the server started, and
once its start-up work is done (the read-ahead of the id index, logged by a build that has one, as
3900b7d had before it was reverted, bench/results/cold-start-readahead.md; 5 s for one that has
not), uniform reads of sampled ids at 32 connections (what the growth bench's cold reads are,
there without a restart), with the disk's reads per answer: 10 s of one half of the ids, then 10 s
of the other half, pastes nobody has read since the start, once the first half's reads have
brought the trees' upper pages in as a serving process has them.
Every create adds pastes to the store (about 150,000 a trial): say so when you read the figures.
"""
import argparse
import json
import os
import re
import sqlite3
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import growth  # noqa: E402

WINDOW_S = 10
READ_AHEAD_LINE = re.compile(r"index pastes_by_id \((\d+) entries\) read ahead in ([\d.]+) s")


def creates(server, corpus, seconds):
    run = growth.wrk(server.url + "/api/v1/pastes", seconds, script="growth_create.lua",
                     env={"CORPUS": corpus})
    return growth.ok_rate(run, 201), run


def empty_store_rate(binary, corpus, log_path, port):
    with tempfile.TemporaryDirectory(dir=os.path.dirname(log_path)) as data:
        server = growth.Server(binary, data, log_path, port, port + 1)
        server.start()
        creates(server, corpus, WINDOW_S)  # the empty store's own warm-up: its files, its WAL
        rate, run = creates(server, corpus, WINDOW_S)
        server.stop()
    return {"rate": rate, "p99": run["p99"]}


def log_size(path):
    return os.path.getsize(path) if os.path.exists(path) else 0


def wait_for_read_ahead(log_path, offset, give_up_s):
    """Seconds until the server logged its read-ahead of the id index, and what it said; None
    if it did not within `give_up_s` (a build without one)."""
    began = time.monotonic()
    while True:
        with open(log_path, errors="replace") as f:
            f.seek(offset)
            found = READ_AHEAD_LINE.search(f.read())
        if found:
            return {"entries": int(found.group(1)), "seconds": float(found.group(2))}
        if time.monotonic() - began >= give_up_s:
            return None
        time.sleep(0.1)


def reads_ahead(binary):
    """Whether `binary` has the read-ahead of the id index (its log line's words are in it)."""
    with open(binary, "rb") as f:
        return b"read ahead in" in f.read()


def cold_start_trial(binary, store, log_path, port, windows_wanted):
    server = growth.Server(binary, os.path.join(store, "data"), log_path, port, port + 1)
    growth.drop_page_cache()
    reads_before = growth.disk_reads(store)
    offset = log_size(log_path)
    start_s = server.start()
    windows = []
    for _ in range(windows_wanted):
        rate, run = creates(server, os.path.join(store, "corpus.txt"), WINDOW_S)
        windows.append({"rate": rate, "p99": run["p99"],
                        "non_201": sum(n for c, n in run["statuses"].items() if c != "201")})
    reads = growth.disk_reads(store) - reads_before
    purged = server.metric("sluice_expired_purged_total")
    server.stop()
    return {"start_s": start_s, "windows": windows, "disk_reads": reads, "purged": purged,
            "read_ahead": wait_for_read_ahead(log_path, offset, 0)}


def split_ids(store):
    """ids.txt's lines in two halves that share no paste: the first half's reads warm what every
    read walks (the trees' upper pages), the second's are of pastes nobody read since the start."""
    with open(os.path.join(store, "ids.txt")) as f:
        lines = f.readlines()
    halves = []
    for i, part in enumerate((lines[0::2], lines[1::2])):
        path = os.path.join(store, f"ids-half{i}.txt")
        with open(path, "w") as f:
            f.writelines(part)
        halves.append(path)
    return halves


def cold_read_trial(binary, store, log_path, port):
    server = growth.Server(binary, os.path.join(store, "data"), log_path, port, port + 1)
    growth.drop_page_cache()
    offset = log_size(log_path)
    server.start()
    if reads_ahead(binary):
        read_ahead = wait_for_read_ahead(log_path, offset, 120)
    else:
        read_ahead = None
        time.sleep(5)
    result = {"read_ahead": read_ahead}
    for name, ids in zip(("first", "then"), split_ids(store)):
        reads_before = growth.disk_reads(store)
        run = growth.wrk(server.url, WINDOW_S, conns=growth.MISS_CONNS,
                         script="growth_reads.lua", env={"IDS": ids})
        reads = growth.disk_reads(store) - reads_before
        result[name] = {"rate": run["rate"], "p50": run["p50"], "p99": run["p99"],
                        "statuses": run["statuses"],
                        "disk_reads_per_answer": reads / max(run["requests"], 1)}
    server.stop()
    return result


def report(out, results, command):
    before, after = results["labels"]
    lines = [
        "# Creates and cold reads just after a restart with the page cache dropped",
        "",
        "Written by `bench/cold_start.py` (bench/run_cold_start_bench.sh); what each figure is, "
        "is the script's docstring. One run, both binaries on the same store, taking turns.",
        "",
        "| | |", "|---|---|",
        f"| machine | {results['machine']} |",
        f"| command | `{command}` |",
        f"| store | {results['store']}: {results['rows']:,} rows at the start, "
        f"{results['store_gb']:.1f} GB |",
        f"| run | {results['started']} |",
    ]
    for label in (before, after):
        lines.append(f"| {label} | {results['binaries'][label]} |")
    count = len(results["trials"][0]["windows"])
    spans = [f"{i * WINDOW_S}-{(i + 1) * WINDOW_S} s" for i in range(count)]
    lines += ["", f"## Creates in the first {count * WINDOW_S} s after the start (x the same "
              "binary on an empty store)", "",
              "| trial | binary | start s | " + " | ".join(spans) + " | disk reads | "
              "expired pastes swept | id index read ahead |",
              "|---:|---|---:|" + "---:|" * count + "---:|---:|---|"]
    for i, t in enumerate(results["trials"], 1):
        empty = results["empty"][t["label"]]["rate"]
        cells = " | ".join(f"{w['rate']:,.0f} ({w['rate'] / empty:.2f})" for w in t["windows"])
        ahead = t["read_ahead"]
        ahead_cell = f"{ahead['entries']:,} entries in {ahead['seconds']:.1f} s" if ahead else "–"
        lines.append(f"| {i} | {t['label']} | {t['start_s']:.2f} | {cells} | "
                     f"{t['disk_reads']:,} | {t['purged']:,.0f} | {ahead_cell} |")
    lines += ["", "Empty store (the reference, creates/s at 64 connections): " + "; ".join(
        f"{label} {results['empty'][label]['rate']:,.0f}" for label in (before, after)) + ".", ""]
    lines += ["## Cold reads after such a start", "",
              "Uniform reads of sampled ids at 32 connections: 10 s of half of them once the "
              "start-up work is done, then 10 s of the other half (pastes nobody had read since "
              "the start; the trees' upper pages are by then what a serving process has cached).",
              "",
              "| binary | id index read ahead | window | reads/s | p50 / p99 ms | statuses | "
              "disk reads per answer |", "|---|---|---|---:|---:|---|---:|"]
    for label in (before, after):
        r = results["reads"][label]
        ahead = r["read_ahead"]
        ahead_cell = f"yes, {ahead['seconds']:.1f} s" if ahead else "no"
        for window, title in (("first", "first 10 s"), ("then", "next 10 s, other ids")):
            w = r[window]
            statuses = ", ".join(f"{code}: {n:,}" for code, n in sorted(w["statuses"].items()))
            lines.append(f"| {label} | {ahead_cell} | {title} | {w['rate']:,.0f} | "
                         f"{w['p50']:.1f} / {w['p99']:.1f} | {statuses} | "
                         f"{w['disk_reads_per_answer']:.2f} |")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="bench/work/growth-after")
    parser.add_argument("--before", required=True, help="LABEL=BINARY")
    parser.add_argument("--after", required=True, help="LABEL=BINARY")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--windows", type=int, default=3,
                        help="10 s windows of creates after each start (the aim looks at 3)")
    parser.add_argument("--port", type=int, default=19700)
    parser.add_argument("--out", default="bench/results/cold-start.md")
    parser.add_argument("--command", default="bench/run_cold_start_bench.sh")
    args = parser.parse_args()
    store = os.path.realpath(args.store)
    for name in ("data/meta.db", "corpus.txt", "ids.txt"):
        if not os.path.exists(os.path.join(store, name)):
            sys.exit(f"{store}/{name} is missing: run bench/run_growth_bench.sh first")
    binaries = dict(pair.split("=", 1) for pair in (args.before, args.after))
    labels = list(binaries)
    log_path = os.path.join(store, "cold-start.log")
    db = sqlite3.connect(f"file:{store}/data/meta.db?mode=ro", uri=True)
    rows = db.execute("SELECT max(rowid) FROM pastes").fetchone()[0] or 0
    db.close()
    results = {"machine": growth.machine(), "store": store, "rows": rows,
               "store_gb": growth.disk_bytes(os.path.join(store, "data")) / 1e9,
               "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "labels": labels,
               "binaries": {label: growth.describe_binary(path)
                            for label, path in binaries.items()},
               "empty": {}, "trials": [], "reads": {}}
    corpus = os.path.join(store, "corpus.txt")
    for label in labels:
        results["empty"][label] = empty_store_rate(binaries[label], corpus, log_path, args.port)
        growth.log(f"{label}: empty store {results['empty'][label]['rate']:,.0f} creates/s")
    order = []
    for r in range(args.rounds):
        order += labels if r % 2 == 0 else labels[::-1]
    for label in order:
        trial = cold_start_trial(binaries[label], store, log_path, args.port, args.windows)
        trial["label"] = label
        results["trials"].append(trial)
        growth.log(f"{label}: {json.dumps(trial)}")
    for label in labels:
        results["reads"][label] = cold_read_trial(binaries[label], store, log_path, args.port)
        growth.log(f"{label} reads: {json.dumps(results['reads'][label])}")
    with open(os.path.join(store, "cold-start.json"), "w") as f:
        json.dump(results, f, indent=1)
    report(args.out, results, args.command)
    growth.log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
