#!/usr/bin/env python3
"""Pressure reclaims what idles (docs/overload.md, "Pressure"; bench/results/pressure.md): the two
attacks of issue 32, item 6, at the issue's scale, against the current binary and, if given, a
baseline.

    bench/pressure_attack.py [--binary build/dev/sluice] [--baseline /tmp/base/build/dev/sluice]

For each binary, on the embedded store with the default limits (production_limits: the harness's
relaxed test limits off):

  slow   create_slots 50: 5 addresses x 10 connections each declare 100 KB and trickle it at
         1.5 KB/s (above min_body_rate, 75 KB/s in all), reconnecting as soon as one is answered
         (the issue's attack; cut at the grace, they reconnect faster than their create rate
         allows, so their own per-client bucket, 1/s, keeps them off most slots);
  slow50 the same from 50 addresses (50 /24s) x 1 connection, each within its create rate even
         when cut at the grace, so that the slots stay full and the cut at the cap is exercised;
  idle   max_connections 1,000: 4 addresses x 256 keep-alive connections each ask for /healthz
         every 25 s and sit idle between, reconnecting as soon as one is closed;

while an innocent client, from an address of its own, creates a 1 KB paste and reads it back once
a second (each request on a new connection). Recorded: the innocent client's success rate, what
each side was answered, and, every 0.5 s from the admin listener's /metrics (which the public caps
do not touch), the open connections, the create slots in use, the effective idle timeout and the
required body rate (the last two are absent from a baseline without them).
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from pressure_load import IdleKeepAlive, Innocent, SlowBodies  # noqa: E402
from promtext import metric, parse_metrics  # noqa: E402
from sluice_harness import SluiceServer  # noqa: E402

INNOCENT = "127.9.0.1"
ATTACKERS = [f"127.{n}.0.1" for n in range(1, 6)]  # one /24 each
MANY_ATTACKERS = [f"127.{n}.0.1" for n in range(10, 60)]  # fifty /24s


class Sampler:
    """Samples the gauges from the admin listener every `period` seconds."""

    def __init__(self, server, period=0.5):
        self.server = server
        self.period = period
        self.rows = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.t0 = time.monotonic()

    def _run(self):
        while not self.stop_event.is_set():
            try:
                res = self.server.admin_request("GET", "/metrics", timeout=5)
                m = parse_metrics(res.text)

                def gauge(name, **labels):
                    key = (name, frozenset(labels.items()))
                    return m.get(key)

                self.rows.append({
                    "t": round(time.monotonic() - self.t0, 2),
                    "connections": gauge("sluice_http_connections"),
                    "create_in_use": gauge("sluice_pool_in_use", pool="create"),
                    "idle_timeout_s": gauge("sluice_http_idle_timeout_seconds"),
                    "required_rate": gauge("sluice_http_required_body_rate_bytes"),
                    "idle_reclaimed": metric(m, "sluice_connections_reclaimed_total",
                                             reason="idle_at_cap"),
                    "bodies_cut": metric(m, "sluice_connections_reclaimed_total",
                                         reason="slow_body_at_cap"),
                    "body_rate_cuts": metric(m, "sluice_http_timeouts_total",
                                             phase="body_rate"),
                })
            except Exception as e:  # a sample lost is a gap in the plot, not a failed run
                self.rows.append({"t": round(time.monotonic() - self.t0, 2), "error": str(e)})
            self.stop_event.wait(self.period)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stop_event.set()
        self.thread.join(timeout=10)


def run_attack(binary, kind, seconds, warmup):
    os.environ["SLUICE_BIN"] = binary
    args = ["--threads", "2"]
    if kind in ("slow", "slow50"):
        args += ["--create-slots", "50"]
    else:
        args += ["--max-connections", "1000"]
    server = SluiceServer(args=args, production_limits=True, patient=False)
    server.start()
    try:
        sampler = Sampler(server).start()
        if kind == "slow":
            attack = SlowBodies(server.port, ATTACKERS, 10, rate=1500, declared=100_000)
        elif kind == "slow50":
            attack = SlowBodies(server.port, MANY_ATTACKERS, 1, rate=1500, declared=100_000)
        else:
            attack = IdleKeepAlive(server.port, ATTACKERS[:4], 256, interval=25.0)
        attack.start()
        time.sleep(warmup)  # the attack takes hold before the innocent client starts
        innocent = Innocent(server.port, INNOCENT, rate=1.0, body=b"x" * 1000).start()
        time.sleep(seconds)
        innocent.stop()
        attack.stop()
        sampler.stop()
        return {
            "binary": binary,
            "attack": kind,
            "innocent_ok": innocent.ok,
            "innocent_failed": innocent.failed,
            "innocent_success_rate": round(innocent.success_rate(), 4),
            "innocent_outcomes": innocent.outcomes,
            "attacker_answers": {str(k): v for k, v in attack.statuses.items()},
            "attacker_closed_without_answer": attack.closed,
            "attacker_connections_opened": attack.opened,
            "samples": sampler.rows,
            "warmup_s": warmup,
        }
    finally:
        server.kill()
        server.cleanup()


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing (apt-get install python3-matplotlib): no plot", file=sys.stderr)
        return False
    current = [r for r in results if r["label"] == "current"]
    kinds = [k for k in ("idle", "slow", "slow50") if any(r["attack"] == k for r in current)]
    fig, axes = plt.subplots(len(kinds), 1, figsize=(10, 4 * len(kinds)), squeeze=False)
    for ax, kind in zip(axes[:, 0], kinds):
        run = next((r for r in current if r["attack"] == kind), None)
        if not run:
            continue
        rows = [r for r in run["samples"] if "error" not in r]
        t = [r["t"] for r in rows]
        if kind == "idle":
            ax.plot(t, [r["connections"] or 0 for r in rows], label="open connections (cap 1,000)",
                    color="tab:blue")
            ax.set_ylabel("connections")
            ax2 = ax.twinx()
            ax2.plot(t, [r["idle_timeout_s"] or 0 for r in rows], color="tab:red",
                     label="effective idle timeout (s)")
            ax2.set_ylabel("idle timeout (s)")
            ax2.set_ylim(0, 32)
            ax.set_title("idle keep-alive attack: 4 addresses x 256 connections, "
                         f"innocent success {run['innocent_success_rate']:.1%}")
        else:
            ax.plot(t, [r["create_in_use"] or 0 for r in rows], label="create slots in use (50)",
                    color="tab:blue")
            ax.set_ylabel("create slots in use")
            ax2 = ax.twinx()
            ax2.plot(t, [(r["required_rate"] or 0) / 1024 for r in rows], color="tab:red",
                     label="required body rate (KiB/s)")
            ax2.set_ylabel("required body rate (KiB/s)")
            ax2.set_ylim(0, 70)
            who = "5 addresses x 10" if kind == "slow" else "50 addresses x 1"
            ax.set_title(f"slow-body attack: {who} bodies at 1.5 KB/s, "
                         f"innocent success {run['innocent_success_rate']:.1%}")
        ax.axvline(run["warmup_s"], color="gray", linestyle=":", label="innocent client starts")
        ax.set_xlabel("seconds since the server started")
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return True


def machine():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{platform.node()}: {os.cpu_count()} cores ({cpu}), Linux {platform.release()}"


def summarise(result):
    rows = [r for r in result["samples"] if "error" not in r]
    after = [r for r in rows if r["t"] >= result["warmup_s"]]

    def span(key):
        values = [r[key] for r in after if r.get(key) is not None]
        return (min(values), max(values)) if values else None

    return {
        "connections": span("connections"),
        "create_in_use": span("create_in_use"),
        "idle_timeout_s": span("idle_timeout_s"),
        "required_rate": span("required_rate"),
        "idle_reclaimed": after[-1]["idle_reclaimed"] if after else None,
        "bodies_cut": after[-1]["bodies_cut"] if after else None,
        "body_rate_cuts": after[-1]["body_rate_cuts"] if after else None,
    }


def write_markdown(results, path, command, plotted):
    lines = ["# Pressure reclaims what idles: the two attacks of issue 32, item 6", "",
             "Written by `bench/pressure_attack.py` (docs/overload.md, \"Pressure\").", "",
             f"- machine: {machine()}",
             f"- command: `{command}`",
             f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             "Each run: the embedded store, default limits (`--threads 2`); the attack starts, "
             "then after the warm-up an innocent client (its own address) creates a 1 KB paste "
             "and reads it back once a second, each request on a new connection.", "",
             "- **slow**: `create_slots 50`; 5 addresses x 10 connections, each declaring 100 KB "
             "and trickling it at 1.5 KB/s (above `min_body_rate` 1 KB/s), reconnecting at once.",
             "- **slow50**: the same bodies from 50 addresses (fifty /24s) x 1 connection, each "
             "within its create rate even when cut at the grace, so the slots stay full.",
             "- **idle**: `max_connections 1000`; 4 addresses x 256 keep-alive connections, one "
             "`/healthz` every 25 s each, reconnecting at once when closed.", "",
             "| binary | attack | innocent requests | succeeded | innocent failures | attackers "
             "answered | reclaimed at the cap | cut by the rate |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        s = summarise(r)
        failures = ", ".join(f"{k}: {v}" for k, v in sorted(r["innocent_outcomes"].items())
                             if not (k.startswith("create 201") or k.startswith("read 200")))
        answers = ", ".join(f"{k}: {v}" for k, v in sorted(r["attacker_answers"].items()))
        answers += f", closed: {r['attacker_closed_without_answer']}"
        reclaimed = s["idle_reclaimed"] if r["attack"] == "idle" else s["bodies_cut"]
        lines.append(f"| {r['label']} | {r['attack']} | {r['innocent_ok'] + r['innocent_failed']} "
                     f"| {r['innocent_success_rate']:.1%} | {failures or 'none'} | {answers} | "
                     f"{reclaimed if reclaimed is not None else 'n/a'} | "
                     f"{s['body_rate_cuts'] if r['attack'] != 'idle' else 'n/a'} |")
    lines += ["", "How the pressure gauges followed, after the warm-up (min to max of the samples, "
              "every 0.5 s from the admin listener's /metrics):", "",
              "| binary | attack | open connections | create slots in use | idle timeout (s) | "
              "required body rate (B/s) |", "|---|---|---|---|---|---|"]

    def fmt(v):
        return "n/a" if v is None else f"{v[0]:g} to {v[1]:g}"

    for r in results:
        s = summarise(r)
        lines.append(f"| {r['label']} | {r['attack']} | {fmt(s['connections'])} | "
                     f"{fmt(s['create_in_use'])} | {fmt(s['idle_timeout_s'])} | "
                     f"{fmt(s['required_rate'])} |")
    lines += [""]
    if plotted:
        lines += ["![the gauges over the current binary's runs](pressure.png)", "",
                  "`pressure.png`: for the current binary, open connections and the effective "
                  "idle timeout during the idle attack (top), create slots in use and the "
                  "required body rate during the slow-body attacks (below).", ""]
    lines += ["Raw samples: `pressure.json`.", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def raise_fd_limit():
    # A thousand attacking sockets in this process, beside the server's own.
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main():
    raise_fd_limit()
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.path.join(HERE, "..", "build", "dev", "sluice"))
    parser.add_argument("--baseline", help="a binary from before (e.g. commit de5e2f2)")
    parser.add_argument("--seconds", type=float, default=60, help="innocent client's run")
    parser.add_argument("--warmup", type=float, default=15, help="attack alone first")
    parser.add_argument("--attacks", default="idle,slow,slow50")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    runs = [("current", os.path.abspath(args.binary))]
    if args.baseline:
        runs.insert(0, ("baseline", os.path.abspath(args.baseline)))
    results = []
    for label, binary in runs:
        for kind in args.attacks.split(","):
            print(f"{label}: {kind} attack ...", file=sys.stderr, flush=True)
            r = run_attack(binary, kind, args.seconds, args.warmup)
            r["label"] = label
            results.append(r)
            print(f"  innocent {r['innocent_success_rate']:.1%} of "
                  f"{r['innocent_ok'] + r['innocent_failed']}: {r['innocent_outcomes']}; "
                  f"attackers {r['attacker_answers']}", file=sys.stderr, flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "pressure.json"), "w") as f:
        json.dump(results, f, indent=1)
    plotted = plot(results, os.path.join(args.out, "pressure.png"))
    command = "bench/pressure_attack.py " + " ".join(sys.argv[1:])
    write_markdown(results, os.path.join(args.out, "pressure.md"), command.strip(), plotted)


if __name__ == "__main__":
    main()
