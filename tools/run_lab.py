#!/usr/bin/env python3
"""The chaos lab (`make lab`): starts the whole stack with a fault proxy on every wire, runs each
scenario of tests/lib/chaoslab.py at the spec's scale, and writes bench/results/lab/report.md with
the spec's prediction beside each measured figure and a plot of each scenario over time.

    python3 tools/run_lab.py [--bin build/dev/sluice] [--scale 1.0] [--only slow_bucket knee ...]
                             [--output bench/results/lab] [--processes 4]

--scale multiplies the offered rates and the create slots together (the knee and the shed share do
not move); use it on a machine that cannot offer 350 creates/s through Python, and the report says
so. Every response is written to build/lab/records/<scenario>.csv. Plots need Debian's
python3-matplotlib (scripts/install-deps.sh lab); when the interpreter running this lacks it, the
script runs itself again with /usr/bin/python3.
"""

import argparse
import datetime
import os
import subprocess
import sys
import time
import traceback

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

try:
    import matplotlib
except ImportError:
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != \
            os.path.realpath("/usr/bin/python3") and not os.environ.get("SLUICE_LAB_REEXEC"):
        os.environ["SLUICE_LAB_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])
    sys.exit("python3-matplotlib is missing: scripts/install-deps.sh lab")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import chaoslab  # noqa: E402
import run_chaos  # noqa: E402  (the machine's description, shared with make chaos)

STATUS_COLOURS = {200: "tab:green", 201: "tab:blue", 204: "tab:cyan", 404: "tab:gray",
                  429: "tab:orange", 500: "tab:brown", 502: "tab:purple", 503: "tab:red",
                  0: "black"}


def per_second(times, t_end):
    n = int(t_end) + 1
    counts = [0] * n
    for t in times:
        if 0 <= t < n:
            counts[int(t)] += 1
    return list(range(n)), counts


def plot_scenario(res, path):
    run, s, t0 = res.run, res.sampler, res.t0
    recs = run.records()
    t_end = max((r.end or r.due) - t0 for r in recs) if recs else 1
    fig, axes = plt.subplots(4, 1, figsize=(9, 10), sharex=True)
    ax = axes[0]
    for stream in dict.fromkeys(r.stream for r in recs):
        xs, ys = per_second([r.due - t0 for r in recs if r.stream == stream], t_end)
        ax.plot(xs, ys, linestyle="--", linewidth=1, label=f"arrivals: {stream}")
    statuses = sorted(set(r.status for r in recs))
    for st in statuses:
        xs, ys = per_second([r.end - t0 for r in recs if r.status == st and r.end], t_end)
        ax.plot(xs, ys, color=STATUS_COLOURS.get(st), linewidth=1.5,
                label=f"{st if st else 'no answer'} /s")
    ax.set_ylabel("per second")
    ax.set_title(res.title, fontsize=10)
    ax.legend(fontsize=7, ncol=3, loc="upper right")
    ax = axes[1]
    for pool in ("create", "read", "fill", "highlight"):
        pts = s.total("sluice_pool_in_use", pool=pool)
        if any(v for _, v in pts):
            ax.plot([t - t0 for t, _ in pts], [v for _, v in pts], label=f"{pool} (all processes)")
    ax.set_ylabel("in flight")
    ax.legend(fontsize=7, loc="upper left")
    age = s.total("sluice_outbox_age_seconds")
    if any(v for _, v in age):
        # The delete backlog, on its own scale: the oldest pending delete's age, summed.
        twin = ax.twinx()
        twin.plot([t - t0 for t, _ in age], [v for _, v in age], color="tab:purple",
                  linestyle=":", label="outbox age (s, right)")
        twin.set_ylabel("outbox age s")
        twin.legend(fontsize=7, loc="upper right")
    ax = axes[2]
    for dep in ("blob", "meta", "redis"):
        pts = s.mean_latency(dep)
        if pts:
            ax.plot([t - t0 for t, _ in pts], [1000 * v for _, v in pts], marker=".",
                    linewidth=1, label=f"{dep}: mean call")
    ax.set_yscale("log")
    ax.set_ylabel("dependency ms")
    ax.legend(fontsize=7, loc="upper right")
    ax = axes[3]
    for i, series in enumerate(s.rss()):
        ax.plot([t - t0 for t, _ in series], [(v or 0) / 2**20 for _, v in series],
                label=f"process {i}")
    ax.set_ylabel("RSS MiB")
    ax.set_xlabel("seconds")
    ax.legend(fontsize=7, ncol=4, loc="upper right")
    for a in axes:
        for start, end, label in res.windows:
            a.axvspan(start, end, color="tab:red", alpha=0.08)
        a.grid(alpha=0.3)
    for start, end, label in res.windows:
        axes[0].text(start, axes[0].get_ylim()[1] * 0.95, label, fontsize=7, va="top")
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)


def plot_fine(res, path, step=0.1):
    """Answers per status in 100 ms bins, creates and reads apart, with the scenario's marks (a
    failover is over in seconds: a per-second plot hides its edges)."""
    fine = res.fine
    t0, recs = fine["t0"], [r for r in fine["records"] if r.end]
    t_end = max(r.end - t0 for r in recs) if recs else 1
    n = int(t_end / step) + 1
    streams = list(dict.fromkeys(r.stream for r in recs))
    fig, axes = plt.subplots(len(streams), 1, figsize=(9, 3 * len(streams)), sharex=True,
                             squeeze=False)
    for ax, stream in zip(axes[:, 0], streams):
        mine = [r for r in recs if r.stream == stream]
        for st in sorted(set(r.status for r in mine)):
            counts = [0] * n
            for r in mine:
                if r.status == st:
                    counts[min(n - 1, int((r.end - t0) / step))] += 1
            ax.step([k * step for k in range(n)], counts, where="post",
                    color=STATUS_COLOURS.get(st), linewidth=1,
                    label=f"{st if st else 'no answer'}")
        for x, label in fine["marks"]:
            ax.axvline(x, color="black", linestyle=":", linewidth=1)
            ax.text(x, ax.get_ylim()[1] * 0.95, f" {label}", fontsize=7, va="top")
        ax.set_ylabel(f"{stream}: answers per {step * 1000:.0f} ms")
        ax.legend(fontsize=7, ncol=4, loc="upper right")
        ax.grid(alpha=0.3)
    axes[0, 0].set_title(res.title, fontsize=10)
    axes[-1, 0].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)


def plot_knee(res, path):
    p = res.knee_params
    Ls = [L for L, *_ in res.knee_points]
    fig, ax = plt.subplots(figsize=(8, 5))
    lo, hi = min(Ls) / 1.5, max(Ls) * 1.5
    xs = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    ax.plot(xs, [min(p["offered"], p["inflight"] / x) for x in xs], color="tab:gray",
            label=f"predicted min({p['offered']:g}/s, {p['inflight']} in flight / L)")
    ax.plot(Ls, [pt[1] for pt in res.knee_points], "o", color="tab:blue",
            label="measured (201s per second, steady state)")
    knee = p["inflight"] / p["offered"]
    ax.axvline(knee, color="tab:red", linestyle=":", label=f"knee {knee:.2f} s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("PUT latency (s), added on the wire by the fault proxy in front of s3rver")
    ax.set_ylabel("admitted creates per second")
    ax.set_title(f"Admitted creates vs PUT latency: {p['processes']} processes x {p['slots']} "
                 f"slots, {p['offered']:g}/s offered", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def proxy_overhead(lab, n=300):
    """Redis PING round trips straight to Redis and through its fault proxy (no fault): the lab's
    own hop, which every dependency call pays."""
    import socket
    def pings(port):
        times = []
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for _ in range(n):
                t = time.monotonic()
                s.sendall(b"PING\r\n")
                buf = b""
                while not buf.endswith(b"\r\n"):
                    buf += s.recv(64)
                times.append(time.monotonic() - t)
        return times
    direct, proxied = pings(lab.base + 3), pings(lab.base + 6)
    pct = chaoslab.lg.percentile
    return (f"Redis PING straight p50 {1000 * pct(direct, 50):.2f} ms p99 "
            f"{1000 * pct(direct, 99):.2f} ms; through the fault proxy p50 "
            f"{1000 * pct(proxied, 50):.2f} ms p99 {1000 * pct(proxied, 99):.2f} ms")


def cell(v):
    return str(v).replace("|", "\\|")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "dev", "sluice"))
    ap.add_argument("--scale", type=float, default=float(os.environ.get("LAB_SCALE", "1.0")))
    ap.add_argument("--processes", type=int, default=chaoslab.SPEC_PROCESSES)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "lab"))
    ap.add_argument("--note", default=os.environ.get("LAB_NOTE", ""),
                    help="a sentence for the report (e.g. what else the machine was doing)")
    args = ap.parse_args()
    os.environ["SLUICE_BIN"] = os.path.abspath(args.bin)
    if not os.path.isfile(os.environ["SLUICE_BIN"]):
        sys.exit(f"no sluice binary at {args.bin} (make build)")
    scenarios = [f for f in chaoslab.SCENARIOS if not args.only or f.__name__ in args.only]
    os.makedirs(args.output, exist_ok=True)
    records_dir = os.path.join(ROOT, "build", "lab", "records")
    os.makedirs(records_dir, exist_ok=True)

    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = run_chaos.loadavg()
    t_start = time.monotonic()
    lab = chaoslab.LabStack(processes=args.processes,
                            workdir=os.path.join(ROOT, "build", "lab", "stack"))
    os.makedirs(lab.dir, exist_ok=True)
    print(f"starting the stack ({args.processes} processes, fault proxies) in {lab.dir}",
          flush=True)
    subprocess.run([os.path.join(ROOT, "scripts", "stack.sh"), "down", "--dir", lab.dir],
                   capture_output=True)
    os.makedirs(lab.dir, exist_ok=True)
    print(lab.up(), flush=True)
    args.overhead = proxy_overhead(lab)
    print(f"the proxy's own hop: {args.overhead}", flush=True)
    results = []
    try:
        for fn in scenarios:
            print(f"\n=== {fn.__name__} (scale {args.scale:g}) ===", flush=True)
            t = time.monotonic()
            try:
                res = fn(lab, args.scale)
            except Exception as e:  # one broken scenario must not lose the others' figures
                traceback.print_exc()
                res = chaoslab.Result(fn.__name__, fn.__name__, (fn.__doc__ or "").split("\n")[0])
                res.row("scenario ran", "yes", f"no: {e!r}", False)
                res.notes.append(lab.logs(15))
            res.seconds = time.monotonic() - t
            res.notes.insert(0, "sluice settings added for this scenario: " +
                             (f"`{' '.join(lab.extra)}`" if lab.extra else "none"))
            if res.run is not None:
                res.records_csv = res.run.write_records(
                    os.path.join(records_dir, f"{res.name}.csv"))
                res.plot = f"{res.name}.png"
                plot_scenario(res, os.path.join(args.output, res.plot))
            if getattr(res, "knee_points", None):
                res.extra_plot = "headline-knee.png"
                plot_knee(res, os.path.join(args.output, res.extra_plot))
            if getattr(res, "fine", None):
                res.extra_plot = f"{res.name}-100ms.png"
                plot_fine(res, os.path.join(args.output, res.extra_plot))
            for fig, pred, meas, ok in res.rows:
                mark = "" if ok is None else ("ok" if ok else "MISS")
                print(f"  {fig}: predicted {pred}, measured {meas} {mark}", flush=True)
            results.append(res)
    finally:
        lab.down(keep_logs=os.path.join(ROOT, "build", "lab", "logs"))
    elapsed = time.monotonic() - t_start
    write_report(args, results, started, load_before, elapsed)
    print(f"\nwrote {os.path.join(args.output, 'report.md')} in {elapsed / 60:.1f} min")
    return 0 if all(r.passed() for r in results) else 1


def write_report(args, results, started, load_before, elapsed):
    info = run_chaos.machine()
    version = run_chaos.binary_version(os.environ["SLUICE_BIN"])
    lines = ["# sluice chaos lab", "",
             "Produced by `tools/run_lab.py` (`make lab`): the whole stack on loopback (Varnish, "
             f"nginx, {args.processes} sluice processes, PostgreSQL, Redis, s3rver), a fault proxy "
             "(`tools/faultproxy`) on the wire in front of PostgreSQL, Redis, s3rver and between "
             "Varnish and nginx, and an open-loop load (`tests/lib/loadgen.py`). Each scenario puts "
             "the spec's prediction beside the measured figure (ok: within the stated tolerance; "
             "MISS: not) and plots, per second: arrivals per stream and answers per status, "
             "in-flight per pool (summed over the processes), each dependency's mean call latency "
             "(from `sluice_dependency_duration_seconds`), and each process's resident memory. "
             "Shaded: the fault's window.", ""]
    if args.scale != 1.0:
        lines += [f"**Reduced scale: {args.scale:g}.** Offered rates and create slots are "
                  f"multiplied by {args.scale:g} together, so the shed share and the latency at "
                  "which the cap bites are the spec's; the absolute rates are not. "
                  "`make lab` (scale 1) offers the spec's 350 creates/s to 4 x 50 slots.", ""]
    if args.note:
        lines += [args.note, ""]
    lines += ["| | |", "|---|---|",
              f"| date | {started.strftime('%Y-%m-%dT%H:%M:%SZ')} |"]
    lines += [f"| {k} | {cell(v)} |" for k, v in info.items()]
    lines += [f"| load average before / after | {load_before} / {run_chaos.loadavg()} |",
              f"| sluice | {cell(version)} |",
              f"| scale | {args.scale:g} |",
              f"| stack settings | `{' '.join(chaoslab.LAB_ARGS)}` on every process (a slow bucket, "
              "not a dead one), the rest defaults; each scenario restarts the processes with "
              "its own additions (listed below) |",
              f"| command | `python3 tools/run_lab.py --scale {args.scale:g}"
              f"{' --only ' + ' '.join(args.only) if args.only else ''}` |",
              f"| lab run time | {elapsed / 60:.1f} min |",
              f"| the fault proxy's own hop (no fault) | {args.overhead} |",
              f"| result | {sum(r.passed() for r in results)} of {len(results)} scenarios "
              "within every stated tolerance |", ""]
    knee = next((r for r in results if getattr(r, "knee_points", None)), None)
    if knee:
        lines += ["## Headline: admitted creates against PUT latency", "",
                  f"![admitted creates vs PUT latency]({knee.extra_plot})", "",
                  "| PUT latency | predicted admitted/s | measured admitted/s | measured/predicted "
                  "| measured 503/s | create slots in use (mean, all processes) |",
                  "|---:|---:|---:|---:|---:|---:|"]
        for L, m, p, shed, inflight in knee.knee_points:
            lines.append(f"| {L:g} s | {p:.1f} | {m:.1f} | {m / p:.2f} | {shed:.1f} | "
                         f"{inflight:.1f} of {knee.knee_params['inflight']} |")
        lines.append("")
    lines += ["## Summary", "", "| scenario | result | run time |", "|---|---|---:|"]
    for r in results:
        lines.append(f"| [{r.title}](#{r.name}) | {'ok' if r.passed() else 'MISS: ' + '; '.join(f[0] for f in r.failures())} | {r.seconds:.0f} s |")
    lines.append("")
    for r in results:
        lines += [f"<a id=\"{r.name}\"></a>", f"## {r.title}", "", f"Claim: {r.claim}.", ""]
        doc = (getattr(chaoslab, r.name, None).__doc__ or "").strip() \
            if hasattr(chaoslab, r.name) else ""
        if doc:
            lines += [" ".join(doc.split()), ""]
        lines += ["| figure | predicted | measured | |", "|---|---|---|---|"]
        for fig, pred, meas, ok in r.rows:
            lines.append(f"| {cell(fig)} | {cell(pred)} | {cell(meas)} | "
                         f"{'' if ok is None else ('ok' if ok else '**MISS**')} |")
        lines.append("")
        for n in r.notes:
            lines += [f"- {n}" if "\n" not in n else "```\n" + n + "\n```"]
        if r.notes:
            lines.append("")
        if r.plot:
            lines += [f"![{r.name}]({r.plot})", ""]
        if getattr(r, "fine", None) and r.extra_plot:
            lines += [f"![{r.name}, answers per 100 ms]({r.extra_plot})", ""]
    with open(os.path.join(args.output, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
