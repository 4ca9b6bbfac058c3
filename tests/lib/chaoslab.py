"""The chaos lab: the spec's overload claims run against the real stack (scripts/stack.sh with
--fault-proxies: Varnish, nginx, N sluice processes, PostgreSQL, Redis, s3rver), with faults put on
the wire by tools/faultproxy, and each result measured beside its prediction.

tools/run_lab.py (`make lab`) runs every scenario here and writes bench/results/lab/; the short
stack test (tests/stack/test_lab_short.py) runs two of them at a reduced scale and asserts them.

A scenario is a function `(lab, scale) -> Result`. `scale` multiplies the offered rates and the
create slots together, so the predicted shed share and the latency at which the cap bites (slots x
processes / offered) stay the same at any scale: a reduced run tests the same claims with less
load. Everything runs on loopback.
"""

import collections
import os
import subprocess
import sys
import tempfile
import threading
import time

import loadgen as lg
from loadgen import PastePool, Request, SizeDist, Stream, body_of, client_ip, random_id, xff
from promtext import metric_sum, parse_metrics
from rawhttp import free_port_range
from sluice_harness import sluice_bin

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "faultproxy"))
import faultproxy  # noqa: E402

# The spec's tier (docs/scale-out.md, "Plan the caps"): 4 processes of 50 create slots, 350 creates/s.
SPEC_PROCESSES = 4
SPEC_SLOTS = 50
SPEC_RATE = 350.0
SPEC_BUCKET_LATENCY = 5.0
# Every lab stack lets a PUT run up to 12 s (the default 1 s timeout would turn a slow bucket into a
# dead one: the scenarios are about a bucket that answers, late).
LAB_ARGS = ["--put-timeout", "12s", "--create-budget", "13s"]
# Paste sizes of the create mix: mostly small, a tail of large ones.
SIZES = SizeDist([(300, 0.45), (3000, 0.35), (30_000, 0.17), (200_000, 0.03)])


# ------------------------------------------------------------------------------------------------
# The stack.

class LabStack:
    """scripts/stack.sh up --fault-proxies, in a folder of its own, on free ports."""

    def __init__(self, processes=SPEC_PROCESSES, args=(), base=None, workdir=None, slots=None):
        self.processes = processes
        self.base = base or free_port_range(30)
        self.dir = workdir or tempfile.mkdtemp(prefix="sluice-lab-")
        self.args = list(LAB_ARGS) + list(args)
        self.slots = slots
        if slots is not None:
            self.args += ["--create-slots", str(slots)]
        self.edge = ("127.0.0.1", self.base)
        self.nginx = ("127.0.0.1", self.base + 1)
        self.apps = [("127.0.0.1", self.base + 10 + i) for i in range(processes)]
        self.proxies = {name: faultproxy.Client(f"127.0.0.1:{self.base + 20 + k}")
                        for k, name in enumerate(("postgres", "redis", "s3", "edge"))}
        self.extra = []

    def _stack(self, *argv, timeout=300):
        env = dict(os.environ, SLUICE_BIN=sluice_bin())
        return subprocess.run([os.path.join(ROOT, "scripts", "stack.sh"), *argv], env=env,
                              capture_output=True, text=True, timeout=timeout)

    def up(self):
        res = self._stack("up", "--processes", str(self.processes), "--base-port", str(self.base),
                          "--dir", self.dir, "--fault-proxies", "--", *self.args)
        if res.returncode != 0:
            self.down()
            raise RuntimeError(f"the stack did not start:\n{res.stdout}\n{res.stderr}")
        return res.stdout

    def restart_apps(self, *extra, meta=None):
        """The sluice processes again, with the stack's settings plus `extra`; faults cleared. With
        `meta`, on that PostgreSQL URL instead of the stack's (for this restart only)."""
        self.clear_faults()
        res = self._stack("restart-apps", "--dir", self.dir, *(("--meta", meta) if meta else ()),
                          "--", *extra)
        if res.returncode != 0:
            raise RuntimeError(f"restart failed:\n{res.stdout}\n{res.stderr}\n{self.logs()}")
        self.extra = list(extra)
        self.warm()

    def warm(self, per_process=5):
        """A few creates and reads on each fresh process, so its pools have opened their
        connections (a PostgreSQL connect rarely fits in a 20 ms read) before anything is measured."""
        for i, (host, port) in enumerate(self.apps):
            for k in range(per_process):
                rec = lg.request(host, port, "POST", "/api/v1/pastes",
                                 headers=xff(client_ip(i * 100 + k, 250)), body=f"warm {k}\n")
                if rec.status == 201:
                    lg.request(host, port, "GET", f"/raw/{rec.json()['id']}")
                lg.request(host, port, "GET", f"/raw/{random_id(k, 99)}")
        time.sleep(1.0)

    def down(self, keep_logs=None):
        """Stops everything; with keep_logs, copies the logs (apps, proxies, nginx, Varnish) there
        first (stack.sh down removes the folder)."""
        if keep_logs:
            import glob
            import shutil
            os.makedirs(keep_logs, exist_ok=True)
            for path in glob.glob(os.path.join(self.dir, "*", "*log")):
                part = os.path.basename(os.path.dirname(path))
                shutil.copy(path, os.path.join(keep_logs, f"{part}-{os.path.basename(path)}"))
        self._stack("down", "--dir", self.dir, timeout=180)

    def clear_faults(self):
        for p in self.proxies.values():
            p.clear()

    def pids(self):
        out = []
        for i in range(self.processes):
            with open(os.path.join(self.dir, f"app{i}", "pid")) as f:
                out.append(int(f.read().strip()))
        return out

    def logs(self, lines=30):
        out = []
        for i in range(self.processes):
            path = os.path.join(self.dir, f"app{i}", "log")
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    out.append(f"--- app{i} ---\n" + "".join(f.readlines()[-lines:]))
        return "\n".join(out)

    def metrics(self, i):
        return lg.scrape(*self.apps[i])

    def metric_sum(self, name, **labels):
        return sum(metric_sum(self.metrics(i), name, **labels) for i in range(self.processes))

    def create(self, body, client, ttl="1d"):
        """One create through nginx as `client`; returns the Record."""
        return lg.request(*self.nginx, "POST", "/api/v1/pastes",
                          headers=dict(xff(client), **{"Sluice-TTL": ttl}), body=body)

    def seed(self, n, make_body, net=200):
        """n pastes created before the load (each from its own client key): [(id, token)]."""
        out = []
        for i in range(n):
            # A busy machine misses the 50 ms insert timeout now and then (a 503): seeding is
            # set-up, not a measurement, so it tries again.
            for attempt in range(10):
                rec = self.create(make_body(i), client_ip(i, net))
                if rec.status == 201 or rec.status < 500:
                    break
                time.sleep(0.2)
            if rec.status != 201:
                raise RuntimeError(f"seeding paste {i}: {rec!r} {rec.body[:200]!r}")
            doc = rec.json()
            out.append((doc["id"], doc["delete_token"]))
        return out

    def wait_outbox_empty(self, timeout):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.metric_sum("sluice_outbox_age_seconds") == 0:
                return time.monotonic() - t0
            time.sleep(0.5)
        return None


# ------------------------------------------------------------------------------------------------
# What the processes and proxies say while a scenario runs.

class Sampler:
    """Every `interval` s: /metrics of each process, its resident memory, each proxy's counters."""

    def __init__(self, lab, interval=1.0):
        self.lab = lab
        self.interval = interval
        self.samples = []   # (t, [metrics or None per process], [rss bytes per process], proxies)
        self._stop = threading.Event()
        self._pids = lab.pids()

    def _one(self):
        t = time.monotonic()
        mets, rss = [], []
        for i, pid in enumerate(self._pids):
            try:
                rec = lg.request(*self.lab.apps[i], "GET", "/metrics", timeout=3)
                mets.append(parse_metrics(rec.body.decode()) if rec.status == 200 else None)
            except Exception:
                mets.append(None)
            try:
                rss.append(lg.rss_bytes(pid)[0])
            except OSError:
                rss.append(None)
        proxies = {}
        for name, p in self.lab.proxies.items():
            try:
                proxies[name] = p.stats()
            except Exception:
                proxies[name] = None
        self.samples.append((t, mets, rss, proxies))

    def _loop(self):
        while not self._stop.is_set():
            t = time.monotonic()
            self._one()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t)))

    def start(self):
        self._thread = threading.Thread(target=self._loop, name="lab-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(15)
        return self

    # ---- series ----
    def total(self, name, **labels):
        """[(t, sum over processes)] of a series (processes that did not answer are skipped)."""
        return [(t, sum(metric_sum(m, name, **labels) for m in mets if m))
                for t, mets, _, _ in self.samples]

    def per_process(self, name, **labels):
        return [[(t, metric_sum(mets[i], name, **labels) if mets[i] else None)
                 for t, mets, _, _ in self.samples] for i in range(len(self._pids))]

    def rss(self):
        return [[(t, r[i]) for t, _, r, _ in self.samples] for i in range(len(self._pids))]

    def peak_rss(self):
        return [max((v for _, v in series if v), default=0) for series in self.rss()]

    def delta(self, name, t_from, t_to, **labels):
        """Growth of a counter summed over processes between the samples nearest two times."""
        pts = self.total(name, **labels)
        if not pts:
            return 0.0
        a = min(pts, key=lambda p: abs(p[0] - t_from))[1]
        b = min(pts, key=lambda p: abs(p[0] - t_to))[1]
        return b - a

    def mean_latency(self, dependency):
        """[(t, mean seconds of the dependency's calls in the last interval)] over all ops and
        processes, from the histogram's _sum and _count."""
        sums = self.total("sluice_dependency_duration_seconds_sum", dependency=dependency)
        counts = self.total("sluice_dependency_duration_seconds_count", dependency=dependency)
        out = []
        for k in range(1, len(sums)):
            dn = counts[k][1] - counts[k - 1][1]
            if dn > 0:
                out.append((sums[k][0], (sums[k][1] - sums[k - 1][1]) / dn))
        return out

    def proxy(self, name, key):
        return [(t, (p.get(name) or {}).get(key, 0)) for t, _, _, p in self.samples]


# ------------------------------------------------------------------------------------------------
# A scenario's outcome.

class Result:
    def __init__(self, name, title, claim):
        self.name = name
        self.title = title
        self.claim = claim
        self.rows = []       # (figure, predicted, measured, ok or None)
        self.notes = []
        self.run = None
        self.sampler = None
        self.t0 = None
        self.windows = []    # (start s, end s, label): faults, shaded on the plot
        self.seconds = 0.0
        self.plot = None
        self.extra_plot = None
        self.records_csv = None

    def row(self, figure, predicted, measured, ok=None):
        self.rows.append((figure, predicted, measured, ok))

    def within(self, figure, predicted, measured, tolerance, unit=""):
        """A row that passes when |measured - predicted| <= tolerance x predicted."""
        ok = measured is not None and abs(measured - predicted) <= tolerance * max(predicted, 1e-9)
        self.row(figure, f"{_n(predicted)}{unit} (±{tolerance:.0%})", f"{_n(measured)}{unit}", ok)
        return ok

    def at_most(self, figure, bound, measured, unit=""):
        ok = measured is not None and measured <= bound
        self.row(figure, f"≤ {_n(bound)}{unit}", f"{_n(measured)}{unit}", ok)
        return ok

    def at_least(self, figure, bound, measured, unit=""):
        ok = measured is not None and measured >= bound
        self.row(figure, f"≥ {_n(bound)}{unit}", f"{_n(measured)}{unit}", ok)
        return ok

    def passed(self):
        return all(ok is not False for *_, ok in self.rows)

    def failures(self):
        return [(f, p, m) for f, p, m, ok in self.rows if ok is False]


def _n(v):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        if abs(v) >= 100:
            return f"{v:,.0f}"
        return f"{v:.3g}"
    return str(v)


# ------------------------------------------------------------------------------------------------
# Helpers over records.

def in_window(records, a, b, key="due"):
    return [r for r in records if a <= getattr(r, key) < b]


def rate(records, a, b, status=None, key="due"):
    """Records with `status` (any when None) whose `key` time lies in [a, b), per second."""
    if b <= a:
        return 0.0
    return sum(1 for r in in_window(records, a, b, key)
               if status is None or r.status == status) / (b - a)


def p99_ms(records):
    lat = lg.latencies(records)
    return None if not lat else 1000 * lg.percentile(lat, 99)


SHED_REASONS = ("create_slots", "create_bytes")


def sheds_and_failures(records):
    """(503s shed at admission by a cap, every other non-2xx answer): the first are the claim, the
    second are timeouts and errors, reported beside it."""
    shed = [r for r in records if r.status == 503 and r.reason in SHED_REASONS]
    other = [r for r in records if r not in shed and not 200 <= r.status < 300]
    return shed, other


def describe_failures(records):
    c = collections.Counter((r.status, r.reason or r.error or "") for r in records)
    return ", ".join(f"{st} {why}: {n}" for (st, why), n in sorted(c.items(), key=str)) or "none"


def share(records, status):
    return (sum(1 for r in records if r.status == status) / len(records)) if records else None


def creates_stream(lab, name, rate_, duration, offset=0.0, net=1, pool=None, sizes=SIZES,
                   client=None, timeout=20.0):
    """Creates through nginx at `rate_`/s, each from its own client key (or all from `client`)."""
    def make(i):
        size = sizes.size(i) if sizes else 300
        who = client(i) if callable(client) else (client or client_ip(i, net))
        return Request("POST", "/api/v1/pastes", dict(xff(who), **{"Sluice-TTL": "1d"}),
                       body_of(size, i, name), tag=size)
    return Stream(name, rate_, duration, make, offset=offset, timeout=timeout, target=lab.nginx,
                  keep_body=4096, on_done=pool.on_created if pool else None)


def edge_reads(lab, name, rate_, duration, ids, offset=0.0):
    """Reads of `ids` (round robin) through Varnish, the edge."""
    return Stream(name, rate_, duration,
                  lambda i: Request("GET", f"/raw/{ids[i % len(ids)]}", tag="edge"),
                  offset=offset, target=lab.edge, keep_body=256)


def run_load(lab, result, streams, actions=(), progress=5.0, sample_every=1.0):
    """Runs the streams with `actions` [(offset, label or None, fn)] while sampling; stores the run
    and sampler on the result. Actions with a label open or close a shaded window on the plot:
    ("start", label) / ("end", label) pairs are matched by label."""
    sampler = Sampler(lab, sample_every).start()
    run = lg.Run("127.0.0.1", lab.nginx[1], streams, progress=progress).start()
    result.t0 = run.t0
    opened = {}
    try:
        for offset, label, fn in sorted(actions, key=lambda a: a[0]):
            run.sleep_until(offset)
            fn()
            if label:
                kind, name = label
                if kind == "start":
                    opened[name] = run.now()
                else:
                    result.windows.append((opened.pop(name, 0.0), run.now(), name))
        run.wait()
        time.sleep(sample_every * 1.5)
    finally:
        sampler.stop()
        for name, start in opened.items():
            result.windows.append((start, run.now(), name))
    result.run, result.sampler = run, sampler
    dead = [i for i, pid in enumerate(sampler._pids) if not os.path.exists(f"/proc/{pid}")]
    if dead:
        result.row("sluice processes alive after the scenario", "all",
                   f"process {', '.join(map(str, dead))} exited (see its log)", False)
    problem = run.schedule_problem()
    if problem:
        result.notes.append(f"load generator: {problem} (figures measured anyway; treat with care)")
    result.notes.append(f"load generator schedule: {run.schedule_summary()}, {run.threads} threads")
    return run


def set_proxy(lab, name, **faults):
    return lambda: lab.proxies[name].set(**faults)


def clear_proxy(lab, name):
    return lambda: lab.proxies[name].clear()


# ------------------------------------------------------------------------------------------------
# Scenarios. Each restarts the processes it needs with its own settings, so one cannot leave
# memory, caches or breakers behind for the next.

def baseline(lab, scale, duration=20.0):
    """No fault: the same kinds of load as the scenarios, to show what this machine does on a good
    day (the timeouts a busy machine misses are counted here, so the scenarios can be read against
    them)."""
    offered = SPEC_RATE * scale
    res = Result("baseline", f"Baseline, no fault: {offered:g} creates/s, cold and hot reads",
                 "every create 201, every unknown id 404, every hot read 200")
    lab.restart_apps("--create-slots", str(max(1, round(SPEC_SLOTS * scale))))
    hot = [pid for pid, _ in lab.seed(5, lambda i: f"hot paste {i}\n" * 40)]
    streams = [creates_stream(lab, "create", offered, duration),
               Stream("miss_read", 30, duration, lambda i: Request(
                   "GET", f"/raw/{random_id(i, 3)}", xff(client_ip(i, 4))), target=lab.nginx,
                   keep_body=512),
               edge_reads(lab, "hot_read", 20, duration, hot)]
    run = run_load(lab, res, streams)
    for name, want in (("create", 201), ("miss_read", 404), ("hot_read", 200)):
        recs = run.records(name)
        res.at_least(f"{name}: share answered {want}", 0.99, share(recs, want))
        failed = [r for r in recs if r.status != want]
        res.row(f"  {name}: the others", "", describe_failures(failed), None)
        res.row(f"  {name}: p50 / p99", "", f"{_n(1000 * lg.percentile(lg.latencies(recs), 50))} / "
                f"{_n(p99_ms(recs))} ms", None)
    return res


def slow_bucket(lab, scale, duration=60.0, latency=SPEC_BUCKET_LATENCY, shed_p99_ms=50.0):
    """350 creates/s offered while every S3 answer takes 5 s: 40/s admitted, 89% shed."""
    slots = max(1, round(SPEC_SLOTS * scale))
    offered = SPEC_RATE * scale
    res = Result("slow_bucket", f"Slow bucket: S3 answers {latency:g} s late, {offered:g} creates/s "
                 f"offered", "creates shed to slots x processes / latency with fast 503s; hot reads at "
                 "the edge and /healthz untouched")
    lab.restart_apps("--create-slots", str(slots))
    hot = [pid for pid, _ in lab.seed(5, lambda i: f"hot paste {i}\n" * 40)]
    for pid in hot:  # into the edge
        lg.request(*lab.edge, "GET", f"/raw/{pid}")
    cap = slots * lab.processes / latency
    predicted = min(offered, cap)
    warm = 3.0
    streams = [creates_stream(lab, "create", offered, duration + warm),
               edge_reads(lab, "hot_read", 50 * max(scale, 0.4), duration + warm, hot),
               Stream("healthz", 5, duration + warm, lambda i: Request("GET", "/healthz"),
                      target=lab.nginx)]
    actions = [(warm, ("start", f"S3 +{latency:g} s"),
                set_proxy(lab, "s3", down={"latency_ms": latency * 1000}))]
    run = run_load(lab, res, streams, actions)
    lab.clear_faults()
    creates = run.records("create")
    a, b = warm + latency + 1.0, warm + duration
    window = [r for r in creates if run.t0 + a <= r.due < run.t0 + b]
    admitted = rate(creates, run.t0 + a, run.t0 + b, 201)
    shed, failed = sheds_and_failures(window)
    res.within("admitted creates/s (steady state)", predicted, admitted, 0.15, "/s")
    res.within("shed share of creates (503 create_slots)", 1 - predicted / offered,
               len(shed) / len(window) if window else None, 0.10)
    res.at_most("503 p99 of the shed creates", shed_p99_ms, p99_ms(shed), " ms")
    res.at_most("creates neither 201 nor shed (share)", 0.02,
                len(failed) / len(window) if window else None)
    res.row("  which", "", describe_failures(failed), None)
    inflight = [v for t, v in res.sampler.total("sluice_pool_in_use", pool="create")
                if run.t0 + a <= t < run.t0 + b]
    res.row("create slots in use, all processes (mean in the steady state)",
            slots * lab.processes, _n(sum(inflight) / len(inflight)) if inflight else None, None)
    hot_recs = in_window(run.records("hot_read"), run.t0 + a, run.t0 + b)
    hits = sum(1 for r in hot_recs if r.header("x-cache") == "HIT")
    res.row("hot reads at the edge while the bucket is sick",
            f"{_n(50 * max(scale, 0.4))}/s, all 200",
            f"{_n(rate(hot_recs, run.t0 + a, run.t0 + b, 200))}/s 200, {hits} of {len(hot_recs)} "
            f"edge hits", all(r.status == 200 for r in hot_recs))
    res.row("/healthz", "all 200", lg.describe(run.records("healthz")),
            all(r.status == 200 for r in run.records("healthz")))
    peak = metric_sum(lab.metrics(0), "sluice_pool_peak", pool="create")
    res.at_most("create slots in use, peak (process 0)", slots, peak)
    res.figures = {"admitted": admitted, "predicted": predicted, "offered": offered,
                   "shed_p99_ms": p99_ms(shed), "cap": cap}
    return res


def knee(lab, scale, steps=(0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0), measure=5.0):
    """PUT latency stepped from 0.05 s to 10 s at a fixed offered rate: admitted creates follow
    min(offered, slots x processes / latency); the cap bites at slots x processes / offered."""
    slots = max(1, round(SPEC_SLOTS * scale))
    offered = SPEC_RATE * scale
    res = Result("knee", f"The cap's knee: PUT latency stepped {steps[0]:g} s to {steps[-1]:g} s, "
                 f"{offered:g} creates/s offered", "admitted = min(offered, slots x processes / L); "
                 "the knee at slots x processes / offered")
    lab.restart_apps("--create-slots", str(slots))
    plan, t = [], 1.0
    for L in steps:
        # At least two turnovers of the slots: admissions come in waves of one latency apart.
        length = L + 1.0 + max(measure, 2 * L)
        plan.append((L, t, t + length))
        t += length
    actions = [(start, ("start", f"{L:g} s"),
                set_proxy(lab, "s3", down={"latency_ms": L * 1000})) for L, start, _ in plan]
    actions += [(end - 0.01, ("end", f"{L:g} s"), (lambda: None)) for L, _, end in plan]
    run = run_load(lab, res, [creates_stream(lab, "create", offered, t)], actions)
    res.windows = []  # one shade per step is noise on this plot: the steps are on the x axis
    lab.clear_faults()
    creates = run.records("create")
    cap_inflight = slots * lab.processes
    points = []
    for L, start, end in plan:
        a, b = run.t0 + start + L + 1.0, run.t0 + end
        measured = rate(creates, a, b, 201)
        predicted = min(offered, cap_inflight / L)
        inflight = [v for t, v in res.sampler.total("sluice_pool_in_use", pool="create")
                    if a <= t < b]
        mean_inflight = sum(inflight) / len(inflight) if inflight else 0.0
        points.append((L, measured, predicted, rate(creates, a, b, 503), mean_inflight))
        res.within(f"admitted/s at PUT latency {L:g} s (slots in use: {mean_inflight:.0f} of "
                   f"{cap_inflight})", predicted, measured, 0.15, "/s")
    res.row("the knee (cap starts to bite)", f"{cap_inflight / offered:.2f} s "
            f"({cap_inflight} in flight / {offered:g}/s)", "see the headline plot", None)
    res.knee_points = points
    res.knee_params = {"offered": offered, "inflight": cap_inflight, "slots": slots,
                       "processes": lab.processes}
    res.figures = {"points": points}
    return res


def max_size_flood(lab, scale, duration=30.0, latency=8.0, over=1.5):
    """1 MB creates against the 32 MiB byte cap of each process while S3 answers late: sheds with
    create_bytes, and each process's resident memory stays under baseline + cap + slack."""
    cap_bytes = 32 * 1024 * 1024
    slack = 64 * 1024 * 1024
    body = 1_000_000
    # 1.5x what the byte caps pass: floor(32 MiB / 1 MB) = 33 bodies per process per latency.
    offered = round(over * (cap_bytes // body) * lab.processes / latency, 1)
    res = Result("max_size_flood", f"Max-size flood: {offered:g}/s of 1 MB creates, S3 answers "
                 f"{latency:g} s late", "memory bounded by the byte cap: baseline + 32 MiB + slack "
                 "per process; the excess shed with 503 create_bytes")
    lab.restart_apps("--create-slots", "50", "--cache-bytes", "0",
                     "--global-create-bytes-rate", "1000000000",
                     "--global-create-bytes-burst", "1000000000")
    for i in range(4):
        lab.create(f"warm {i}\n".encode(), client_ip(i, 201))
    time.sleep(1.0)
    pids = lab.pids()
    baseline = [lg.rss_bytes(p)[0] for p in pids]
    for p in pids:
        lg.reset_peak_rss(p)
    payload = ("0123456789abcdef" * (body // 16 + 1))[:body].encode()
    stream = Stream("create", offered, duration, lambda i: Request(
        "POST", "/api/v1/pastes", xff(client_ip(i, 3)), payload, tag=body),
        timeout=latency + 15, target=lab.nginx, keep_body=2048)
    actions = [(0.0, ("start", f"S3 +{latency:g} s"),
                set_proxy(lab, "s3", down={"latency_ms": latency * 1000}))]
    run = run_load(lab, res, [stream], actions, sample_every=0.5)
    lab.clear_faults()
    hwm = [lg.rss_bytes(p)[1] for p in pids]
    peaks = [max(a, b) for a, b in zip(res.sampler.peak_rss(), hwm)]
    creates = run.records("create")
    per_process = cap_bytes // body
    predicted = min(offered, per_process * lab.processes / latency)
    admitted = rate(creates, run.t0 + latency + 1, run.t0 + duration, 201)
    res.within("admitted creates/s", predicted, admitted, 0.2, "/s")
    shed, failed = sheds_and_failures(creates)
    reasons = lg.by_reason(shed)
    res.row("503 reasons of the shed creates", "create_bytes",
            ", ".join(f"{k}: {v}" for k, v in reasons.items()) or "none", "create_bytes" in reasons)
    res.at_most("503 p99 of the shed creates", 50.0, p99_ms(shed), " ms")
    res.row("creates neither 201 nor shed", "", describe_failures(failed), None)
    in_use = max((v for _, v in res.sampler.total("sluice_create_bytes_in_use")), default=0)
    res.at_most("create bytes in use, peak summed over processes (MiB)",
                lab.processes * cap_bytes / 2**20, in_use / 2**20)
    for i, (b0, pk) in enumerate(zip(baseline, peaks)):
        res.at_most(f"peak RSS process {i} (MiB; baseline {b0 / 2**20:.0f})",
                    (b0 + cap_bytes + slack) / 2**20, pk / 2**20)
    res.figures = {"peaks_mib": [p / 2**20 for p in peaks],
                   "bounds_mib": [(b + cap_bytes + slack) / 2**20 for b in baseline]}
    return res


def primary_blip(lab, scale, duration=24.0, blip_at=8.0, blip=2.0, slow=2.0, fraction=0.2):
    """For 2 s, 20% of the primary's answers come 2 s late: the reads and creates that meet them
    fail fast (503, or 500 for a create whose insert timed out), and no retry wave follows."""
    reads_rate = 150 * scale
    creates_rate = 20 * max(scale, 0.5)
    res = Result("primary_blip", f"Primary blip: {fraction:.0%} of PostgreSQL answers {slow:g} s "
                 f"late for {blip:g} s", "timeouts are not retried: the primary sees the same "
                 "calls per second after the blip as before, and users see errors only during it")
    lab.restart_apps()
    streams = [
        Stream("miss_read", reads_rate, duration, lambda i: Request(
            "GET", f"/raw/{random_id(i, 5)}", xff(client_ip(i, 6))), target=lab.nginx,
            keep_body=512),
        creates_stream(lab, "create", creates_rate, duration, net=7),
    ]
    actions = [(blip_at, ("start", "blip"), set_proxy(
                   lab, "postgres", down={"latency_ms": slow * 1000, "fraction": fraction})),
               (blip_at + blip, ("end", "blip"), clear_proxy(lab, "postgres"))]
    run = run_load(lab, res, streams, actions, sample_every=0.5)
    s, t0 = res.sampler, run.t0
    calls = lambda a, b: s.delta("sluice_dependency_duration_seconds_count", t0 + a, t0 + b,
                                 dependency="meta")
    retries = lambda a, b: s.delta("sluice_dependency_retries_total", t0 + a, t0 + b,
                                   dependency="meta")
    before = calls(2.0, blip_at) / (blip_at - 2.0)
    after_from = blip_at + blip + 1.0
    after = calls(after_from, duration) / (duration - after_from)
    c_all = calls(blip_at, duration)
    amplification = (c_all + retries(blip_at, duration)) / c_all if c_all else None
    res.at_most("retry amplification at the primary (attempts per call, blip to end)", 1.1,
                amplification)
    res.at_most("primary calls/s after the blip ÷ before", 1.15, after / before if before else None)
    conns = s.proxy("postgres", "accepted")
    new_conns = lambda a, b: (min(conns, key=lambda p: abs(p[0] - t0 - b))[1] -
                              min(conns, key=lambda p: abs(p[0] - t0 - a))[1])
    res.row("new connections to the primary: before / during+1 s / after (per s)",
            "no reconnect storm",
            f"{new_conns(2.0, blip_at) / (blip_at - 2):.1f} / "
            f"{new_conns(blip_at, blip_at + blip + 1) / (blip + 1):.1f} / "
            f"{new_conns(after_from, duration) / (duration - after_from):.1f}", None)
    reads = run.records("miss_read")
    base = share(in_window(reads, t0 + 1.0, t0 + blip_at), 404)
    res.row("reads answered 404 before the blip (the baseline; every id is unknown)", "1",
            _n(base), None)
    after_reads = in_window(reads, t0 + blip_at + blip + 1.0, t0 + duration)
    res.at_least("reads answered 404 from 1 s after the blip (baseline - 0.03)",
                 round(min(base or 1, 1.0) - 0.03, 3), share(after_reads, 404))
    during = in_window(reads, t0 + blip_at, t0 + blip_at + blip)
    res.row("reads during the blip", f"~{fraction:.0%} 503 (the slow share), never a 404 for a "
            "timeout", lg.describe(during), None)
    err = [r for r in reads + run.records("create") if r.status in (500, 503)]
    res.at_most("errors' p99 (reads 300 ms budget, creates 2 s)", 2000.0, p99_ms(err), " ms")
    res.figures = {"amplification": amplification, "before": before, "after": after}
    return res


def primary_refusing(lab, scale, duration=24.0, down_at=6.0, down_for=8.0):
    """PostgreSQL refuses connections (and its established ones are reset): the breaker opens, 503s
    come at once, and traffic resumes within one breaker window of its return."""
    reads_rate = 100 * scale
    creates_rate = 20 * max(scale, 0.5)
    res = Result("primary_refusing", f"Primary refusing for {down_for:g} s",
                 "fast 503s while it refuses (the breaker opens), one probe per 5 s window, "
                 "service back within a window of its return")
    lab.restart_apps()
    def refuse():
        lab.proxies["postgres"].set(refuse=True)
        lab.proxies["postgres"].reset()
    streams = [
        Stream("miss_read", reads_rate, duration, lambda i: Request(
            "GET", f"/raw/{random_id(i, 9)}", xff(client_ip(i, 8))), target=lab.nginx,
            keep_body=512),
        creates_stream(lab, "create", creates_rate, duration, net=9),
    ]
    actions = [(down_at, ("start", "refusing"), refuse),
               (down_at + down_for, ("end", "refusing"), clear_proxy(lab, "postgres"))]
    run = run_load(lab, res, streams, actions, sample_every=0.5)
    t0 = run.t0
    allr = run.records("miss_read") + run.records("create")
    during = in_window(allr, t0 + down_at + 0.5, t0 + down_at + down_for)
    res.at_least("share of answers that are 503 while it refuses", 0.95, share(during, 503))
    res.at_most("503 p99 while it refuses", 50.0, p99_ms([r for r in during if r.status == 503]),
                " ms")
    back = t0 + down_at + down_for
    firsts = [r.start for r in run.records("create") if r.status == 201 and r.start >= back]
    resumed = (min(firsts) - back) if firsts else None
    res.at_most("first 201 after it returns", 5.5, resumed, " s")
    opened = res.sampler.delta("sluice_breaker_transitions_total", t0, t0 + duration,
                               dependency="meta", to="open")
    res.at_least("breaker openings (summed over processes)", 1, opened)
    res.figures = {"resumed_s": resumed}
    return res


def abuse(lab, scale, duration=30.0):
    """One abusive key and eight honest users behind one NAT address, among ordinary users: each
    key gets its burst plus its rate, and nobody else notices."""
    res = Result("abuse", "One abusive key, a NAT of eight honest users, ordinary users",
                 "per-key budget (1/s, burst 10) held across processes; other keys unaffected")
    lab.restart_apps()
    rate_, burst = 1.0, 10
    streams = [
        creates_stream(lab, "abusive", 20.0, duration, client="10.66.0.1", sizes=None),
        creates_stream(lab, "nat", 8 * 0.5, duration, client="10.77.0.1", sizes=None),
        creates_stream(lab, "honest", 10 * max(scale, 0.5), duration, net=11),
    ]
    run = run_load(lab, res, streams)
    decided = {o: res.sampler.delta("sluice_shared_limit_decisions_total", run.t0,
                                    run.t0 + duration, outcome=o)
               for o in ("allowed", "refused", "fail_open")}
    total = sum(decided.values())
    res.at_most("shared-limit decisions that failed open (Redis past its 5 ms budget)", 0.01,
                decided["fail_open"] / total if total else None)
    for name in ("abusive", "nat"):
        recs = run.records(name)
        ok = sum(1 for r in recs if r.status == 201)
        res.at_most(f"{name} key: creates admitted in {duration:g} s", burst + rate_ * duration + 2,
                    ok)
        reasons = lg.by_reason([r for r in recs if r.status == 429])
        res.row(f"{name} key: refusals", "429 ip_create_count",
                ", ".join(f"{k}: {v}" for k, v in reasons.items()),
                set(reasons) <= {"ip_create_count", "ip_create_bytes"})
    res.at_least("ordinary users: share of 201", 0.99, share(run.records("honest"), 201))
    res.at_most("429 p99", 50.0, p99_ms([r for r in run.records("abusive") if r.status == 429]),
                " ms")
    return res


def neighbour_crawl(lab, scale, duration=30.0):
    """A neighbour crawls random ids from one key while others read a hot paste and create: the
    crawler is held to its origin-read budget and fill share; hot reads and creates are untouched."""
    crawl_rate = 200 * max(scale, 0.5)
    res = Result("neighbour_crawl", f"Neighbour crawling cold ids at {crawl_rate:g}/s from one key",
                 "the crawler is held to its 50/s origin-read budget; hot reads and creates unaffected")
    lab.restart_apps()
    hot = [pid for pid, _ in lab.seed(1, lambda i: "the hot paste\n" * 30)]
    streams = [
        Stream("crawl", crawl_rate, duration, lambda i: Request(
            "GET", f"/raw/{random_id(i, 12)}", xff("10.88.0.1")), target=lab.nginx,
            keep_body=512),
        edge_reads(lab, "hot_read", 100 * max(scale, 0.4), duration, hot),
        creates_stream(lab, "create", 10 * max(scale, 0.5), duration, net=13),
    ]
    run = run_load(lab, res, streams)
    crawl = run.records("crawl")
    served = rate(crawl, run.t0 + 2, run.t0 + duration, 404)
    res.at_most("crawler's misses served per second (after its 50 burst)", 50 * 1.15, served, "/s")
    reasons = lg.by_reason([r for r in crawl if r.status in (429, 503)])
    res.row("crawler refusals", "429 origin_get_ip / 503 fill_cap",
            ", ".join(f"{k}: {v}" for k, v in reasons.items()), None)
    res.at_least("hot reads: share of 200", 1.0, share(run.records("hot_read"), 200))
    res.at_least("creates: share of 201", 0.99, share(run.records("create"), 201))
    return res


def redis_lost(lab, scale, duration=45.0, lost_at=8.0, refuse_for=12.0, hang_for=12.0,
               creates_rate=None, restart=True):
    """Redis goes away (refusing, then black-holed) and comes back: creates never stop, the
    per-client limits open, the global cap falls to each process's share, and the shared limits
    return with Redis."""
    creates_rate = creates_rate or 100 * scale
    res = Result("redis_lost", f"Redis lost: refusing {refuse_for:g} s, then black-holed "
                 f"{hang_for:g} s, then back", "no create outage: 201s continue, "
                 "sluice_limiter_fail_open is 1 while it is gone and 0 after")
    if restart:
        lab.restart_apps()
    def refuse():
        lab.proxies["redis"].set(refuse=True)
        lab.proxies["redis"].reset()
    back = lost_at + refuse_for + hang_for
    streams = [creates_stream(lab, "create", creates_rate, duration, net=14, sizes=None)]
    actions = [(lost_at, ("start", "refused"), refuse),
               (lost_at + refuse_for, ("end", "refused"), set_proxy(lab, "redis", blackhole=True)),
               (lost_at + refuse_for + 0.01, ("start", "black hole"), lambda: None),
               (back, ("end", "black hole"), clear_proxy(lab, "redis"))]
    run = run_load(lab, res, streams, actions, sample_every=0.5)
    t0, creates = run.t0, run.records("create")
    base = share(in_window(creates, t0 + 1.0, t0 + lost_at), 201)
    res.row("share of creates answered 201 before (the baseline)", "1", _n(base), None)
    for label, a, b in (("refused", lost_at, lost_at + refuse_for),
                        ("black-holed", lost_at + refuse_for, back), ("after", back, duration)):
        w = in_window(creates, t0 + a, t0 + b)
        res.at_least(f"share of creates answered 201: {label} (baseline - 0.03)",
                     round(min(base or 1, 1.0) - 0.03, 3), share(w, 201))
    gone = [r for r in creates if t0 + lost_at <= r.due < t0 + back]
    res.at_most("201 p99 while it is gone", 500.0, p99_ms([r for r in gone if r.status == 201]),
                " ms")
    failed = [r for r in gone if r.status != 201]
    res.row("creates not answered 201 while it is gone", "none caused by Redis (no 503 "
            "naming a limit)", f"{len(failed)} of {len(gone)}: " + (", ".join(
                f"{st} {reason}" for (st, reason), n in collections.Counter(
                    (r.status, r.reason) for r in failed).items()) or "none"), None)
    fo = res.sampler.total("sluice_limiter_fail_open")
    during = [v for t, v in fo if t0 + lost_at + 2 <= t < t0 + back]
    res.row("processes failing open while it is gone (max)", lab.processes,
            max(during, default=None), max(during, default=0) == lab.processes)
    after = [(t - t0 - back, v) for t, v in fo if t >= t0 + back]
    restored = next((t for t, v in after if v == 0), None)
    res.at_most("shared limits back after Redis returns", 10.0, restored, " s")
    res.figures = {"restored_s": restored}
    return res


def delete_slow_bucket(lab, scale, pastes=None, latency=6.0, delete_rate=5.0):
    """Deletes while every S3 call takes 6 s (over the worker's timeout): each delete is a prompt
    204, the outbox holds the body deletes, and catches up once the bucket recovers."""
    n = pastes or max(20, int(100 * scale))
    res = Result("delete_slow_bucket", f"{n} deletes while S3 answers {latency:g} s late",
                 "deletes answered 204 at once; the outbox catches up after the bucket recovers")
    lab.restart_apps()
    seeded = lab.seed(n, lambda i: f"to be deleted {i}\n" * 10, net=15)
    hot = [pid for pid, _ in lab.seed(3, lambda i: f"hot {i}\n" * 40, net=16)]
    for pid in hot:
        lg.request(*lab.edge, "GET", f"/raw/{pid}")
    duration = n / delete_rate
    pool = PastePool(seeded)
    def make(i):
        pid, token = pool.take_deletable()
        return Request("DELETE", f"/api/v1/pastes/{pid}", {"Authorization": f"Bearer {token}"},
                       tag=pid)
    streams = [Stream("delete", delete_rate, duration, make, offset=1.0, target=lab.nginx),
               edge_reads(lab, "hot_read", 40, duration + 2, hot)]
    actions = [(0.5, ("start", f"S3 +{latency:g} s"),
                set_proxy(lab, "s3", down={"latency_ms": latency * 1000}))]
    # The bucket recovers after the last delete plus a few seconds, inside the sampled run.
    streams.append(Stream("tail", 1, 14, lambda i: Request("GET", "/healthz"),
                          offset=duration + 2, target=lab.nginx))
    actions.append((duration + 4, ("end", f"S3 +{latency:g} s"), clear_proxy(lab, "s3")))
    run = run_load(lab, res, streams, actions, sample_every=0.5)
    dels = run.records("delete")
    res.at_least("deletes answered 204 (share)", 1.0, share(dels, 204))
    res.at_most("delete p99", 200.0, p99_ms(dels), " ms")
    gone = [lg.request(*lab.nginx, "GET", f"/raw/{r.tag}").status for r in dels[:10]]
    res.row("deleted pastes read through nginx", "404", ", ".join(map(str, sorted(set(gone)))),
            set(gone) == {404})
    age = max((v for _, v in res.sampler.total("sluice_outbox_age_seconds")), default=0)
    res.at_least("outbox age while the bucket is slow (max over processes, summed)", 1.0, age, " s")
    recovered = run.t0 + duration + 4
    ages = [(t, v) for t, v in res.sampler.total("sluice_outbox_age_seconds") if t >= recovered]
    caught = next((t - recovered for t, v in ages if v == 0), None)
    if caught is None:
        waited = lab.wait_outbox_empty(90)
        caught = None if waited is None else (time.monotonic() - recovered)
    res.at_most("outbox empty, counted from the bucket's recovery", 60.0, caught, " s")
    hot_recs = run.records("hot_read")
    res.row("hot reads at the edge meanwhile", "all 200",
            f"{lg.describe(hot_recs)}, "
            f"{sum(1 for r in hot_recs if r.header('x-cache') == 'HIT')} edge hits",
            all(r.status == 200 for r in hot_recs))
    return res


def view_ladder(lab, scale, duration=30.0, render_delay=0.2):
    """Views of highlighted pastes at 1.5x the highlighter's capacity: the excess goes plain at
    admission, the highlighted share is utilization x capacity / offered, no view waits."""
    delay = render_delay / max(scale, 0.25)
    slots = 4
    capacity = lab.processes * slots / delay
    offered = 1.5 * capacity
    res = Result("view_ladder", f"View ladder at 1.5x the highlighter ({offered:.0f} views/s, "
                 f"{capacity:.0f}/s capacity)", "highlighted share = 0.8 x capacity / offered; the "
                 "rest plain at admission, in milliseconds")
    lab.restart_apps("--fault-injection", "true", "--render-delay", f"{int(delay * 1000)}ms",
                     "--highlight-cache-bytes", "0", "--highlight-slots", str(slots))
    code = "def handler(request):\n    total = 0\n    for i in range(10):\n        total += i\n" \
           "    return {'ok': True, 'total': total}\n"
    ids = [pid for pid, _ in lab.seed(20, lambda i: f"# view {i}\n" + code * 8, net=17)]
    stream = Stream("view", offered, duration, lambda i: Request(
        "GET", f"/{ids[i % len(ids)]}", {**xff(client_ip(i % 200, 18)), "Accept": "text/html"}),
        target=lab.nginx,
        keep_body=256, timeout=10)
    run = run_load(lab, res, [stream], sample_every=0.5)
    views = in_window(run.records("view"), run.t0 + 4, run.t0 + duration)
    rung = lambda r: (r.header("x-sluice-rung") or "").split(";")[0]
    high = sum(1 for r in views if rung(r) == "highlighted")
    plain = [r for r in views if rung(r) == "plain"]
    predicted = 0.8 * capacity / offered
    res.within("highlighted share", predicted, high / len(views) if views else None, 0.2)
    res.at_most("plain (shed) view p99", 1000 * delay / 2, p99_ms(plain), " ms")
    res.at_least("views answered 200 (share)", 1.0, share(views, 200))
    return res


PATRONI = os.path.join(ROOT, "scripts", "testenv", "patroni.sh")


def _patroni_role(rest_port):
    """The member's own view of itself (Patroni's REST API /patroni): "master" once its PostgreSQL
    has left recovery, "replica" before; None when it does not answer."""
    import json
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{rest_port}/patroni", timeout=0.5) as r:
            doc = json.load(r)
    except (OSError, ValueError):
        return None
    return doc.get("role") if doc.get("state") == "running" else None


def primary_fails_over(lab, scale, duration=30.0, kill_at=8.0, members=2):
    """A Patroni cluster (scripts/testenv/patroni.sh: one etcd, two members on Debian's PostgreSQL
    15, synchronous_mode, ttl 5 s, loop_wait 1 s) started beside the stack's own PostgreSQL, the
    processes restarted on its multi-host URL (target_session_attrs=read-write), then the leader's
    machine lost: its Patroni and its postmaster killed -9 together. Creates and reads through nginx
    throughout; afterwards every paste answered 201 is read back, byte for byte."""
    creates_rate = 20 * max(scale, 0.5)
    reads_rate = 60 * scale
    res = Result("primary_fails_over", "Primary fails over (Patroni, synchronous standby)",
                 "creates answer 503 with Retry-After (never 500) until the standby is promoted and "
                 "the breaker lets a probe through, then 201 again without a restart; no "
                 "acknowledged paste is missing afterwards")
    pdir = os.path.join(lab.dir, "patroni")
    base = free_port_range(2 + 2 * members)
    started = subprocess.run([PATRONI, "start", pdir, str(base), str(members)],
                             capture_output=True, text=True, timeout=180)
    if started.returncode != 0:
        subprocess.run([PATRONI, "stop", pdir], capture_output=True, timeout=120)
        raise RuntimeError(f"the Patroni cluster did not start:\n{started.stderr}")
    url = started.stdout.strip().splitlines()[-1]
    try:
        subprocess.run([sluice_bin(), "migrate", "--meta", url], check=True, capture_output=True,
                       timeout=60)
        lab.restart_apps(meta=url)
        leader = subprocess.run([PATRONI, "leader", pdir], capture_output=True, text=True,
                                check=True).stdout.strip()
        survivor = subprocess.run([PATRONI, "sync", pdir], capture_output=True, text=True,
                                  check=True).stdout.strip()
        with open(os.path.join(pdir, survivor, "rest_port")) as f:
            survivor_rest = int(f.read())
        res.notes.append(f"Patroni cluster: {url}; leader {leader}, synchronous standby {survivor}")
        pool = PastePool(lab.seed(20, lambda i: body_of(300, i, "seed"), net=15))
        streams = [
            creates_stream(lab, "create", creates_rate, duration, net=16, pool=pool),
            Stream("read", reads_rate, duration, lambda i: Request(
                "GET", f"/raw/{pool.cold(i)}", xff(client_ip(i, 17))), target=lab.nginx,
                keep_body=512),
        ]
        marks = {}

        def kill():
            # The kill is done when the script returns: a create that ended before then may have
            # committed on the old leader, which is fine (its standby had it).
            subprocess.run([PATRONI, "kill-leader", pdir], capture_output=True, timeout=30)
            marks["killed"] = time.monotonic()
            # The survivor's own word that it writes, polled beside the load.
            def watch():
                while time.monotonic() - marks["killed"] < duration:
                    if _patroni_role(survivor_rest) in ("master", "primary"):
                        marks["promoted"] = time.monotonic()
                        return
                    time.sleep(0.05)
            threading.Thread(target=watch, daemon=True).start()

        actions = [(kill_at, ("start", "leader lost"), kill)]
        run = run_load(lab, res, streams, actions, sample_every=0.5)
        t0 = run.t0
        killed, promoted = marks.get("killed"), marks.get("promoted")
        if promoted:
            res.windows = [(killed - t0, promoted - t0, "leader lost → standby promoted")]
        creates, reads = run.records("create"), run.records("read")
        res.fine = {"t0": t0, "records": creates + reads,
                    "marks": [(killed - t0, "leader killed")] +
                             ([(promoted - t0, "standby promoted")] if promoted else [])}
        res.row("promotion (kill -9 to the survivor writing)", "≈ ttl 5 s + loop_wait 1 s",
                _n(None if promoted is None else promoted - killed) + " s", None)
        # The failover's refusals; a stray 503 later (a busy machine's insert timeout) is not it.
        refused = [r for r in creates if r.status == 503 and r.end and r.start >= killed - 0.5
                   and r.reason in ("primary_failover", "outcome_unknown", "deadline_exceeded")]
        window = (max(r.end for r in refused) - min(r.end for r in refused)) if refused else 0.0
        res.at_most("create 503 window (first to last 503 after the kill)", 12.0, window, " s")
        firsts = [r.end for r in creates if r.status == 201 and r.start >= killed]
        first = min(firsts) if firsts else None
        res.at_most("first 201 after the kill", 12.0, None if first is None else first - killed,
                    " s")
        res.at_most("first 201 after the promotion (the breaker's 5 s window bounds it)", 6.5,
                    None if first is None or promoted is None else first - promoted, " s")
        res.at_most("creates answered 500", 0, sum(1 for r in creates if r.status == 500))
        res.at_most("reads of existing pastes answered 404", 0,
                    sum(1 for r in reads if r.status == 404))
        res.at_most("503s without Retry-After", 0, sum(
            1 for r in creates + reads if r.status == 503 and r.retry_after is None))
        res.row("answers after the kill", "201/200 or 503 primary_failover",
                describe_failures([r for r in creates + reads if r.start >= killed]), None)
        # Every acknowledged paste, read back from each process directly (its own cache empty for
        # most of them), byte for byte.
        acked = [r for r in creates if r.status == 201]
        missing = []
        for k, r in enumerate(acked):
            body = body_of(SIZES.size(r.index), r.index, "create")
            for attempt in range(3):  # a 503 here is the reader's luck, not a lost paste
                host, port = lab.apps[(k + attempt) % len(lab.apps)]
                got = lg.request(host, port, "GET", f"/raw/{r.json()['id']}",
                                 headers=xff(client_ip(k, 18)))
                if got.status != 503:
                    break
                time.sleep(0.2)
            if got.status != 200 or got.body != body:
                missing.append(r)
                res.notes.append(
                    f"acknowledged {r.json()['id']} (create started {r.start - killed:+.3f} s, "
                    f"answered {r.end - killed:+.3f} s from the kill): read back {got.status} "
                    f"{got.reason or ''}, body {'differs' if got.status == 200 else 'absent'}")
        res.row("acknowledged pastes (201)", "", str(len(acked)), None)
        res.at_most("acknowledged pastes missing or different afterwards (synchronous mode)", 0,
                    len(missing))
        served = 0
        for i, (host, port) in enumerate(lab.apps):
            rec = lg.request(host, port, "POST", "/api/v1/pastes", headers=xff(client_ip(i, 19)),
                             body=f"after the failover {i}\n")
            served += rec.status == 201
        res.at_least("processes serving creates on the new primary, no restart", lab.processes,
                     served)
        res.figures = {"promotion_s": None if promoted is None else promoted - killed,
                       "window_s": window, "missing": len(missing), "acknowledged": len(acked)}
        return res
    finally:
        subprocess.run([PATRONI, "stop", pdir], capture_output=True, timeout=120)


SCENARIOS = [baseline, slow_bucket, knee, max_size_flood, primary_blip, primary_refusing, abuse,
             neighbour_crawl, redis_lost, delete_slow_bucket, view_ladder, primary_fails_over]
