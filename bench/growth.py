#!/usr/bin/python3
"""What each operation costs as the embedded store grows (bench/run_growth_bench.sh runs this).

Fills one embedded store through the API (bench/wrk/growth_create.lua: a public pastebin's sizes
and lifetimes) and, each time the live pastes pass a checkpoint, measures in the same run: nginx
serving a static file of the hot paste's bytes (the machine's yardstick, before and after the
reads), durable creates at 64 connections, hot reads, cold reads of ids drawn uniformly from
everything stored (after dropping the page cache), 404s of absent ids (page cache dropped too),
deletes, resident memory and bytes on disk, an online backup (`sluice admin backup`, while
creates run), the start-up after a clean stop and after a kill -9, and the expiry
sweep of a backlog while creates run. The backlog: the pastes the fill gave ttl=30d are given an
expiry a few seconds away while the server is down after its kill -9 (what the store holds when
the clock reaches them, without waiting 30 days). A sample of what was stored is read back byte
for byte at every checkpoint. Results: WORK/growth.json (every figure), then the report and
plots (bench/results/growth.md, growth-*.png).

With --fleet N the store is PostgreSQL (scripts/testenv/postgres.sh with PG_DURABLE=1: fsync and
full_page_writes on) behind N sluice processes and nginx (least_conn), as a fleet runs it, with the
bodies in one folder of files that every process shares (inline_body_bytes 0, so no body sits in a
process's own bodies.db). A checkpoint then measures creates, hot, cold and absent reads, deletes,
the start-up and the sweep; the backup and the co-tenant are the embedded store's questions. The
report goes to bench/results/growth-postgres.md. With --bodies ceph as well, the bodies are in a
bucket of Ceph's RADOS Gateway instead of the shared folder (scripts/testenv/ceph-rgw.sh, its OSD
on BlueStore in a sparse file under WORK/ceph), the fleet as it runs on a real object store; the
disk figure then counts the OSD's file, the monitor's store and PostgreSQL. Such a run can be
resumed (--resume) only while its cluster still runs: scripts/testenv/ceph-rgw.sh makes a new one
at each start.
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from lifted import lifted_limits

REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
LIFTED = lifted_limits() + [
    "--delete-rate", "1000000", "--delete-burst", "1000000",
    # Every wrk connection is one client (127.0.0.1): its share of the store's misses would be the
    # benchmark's limit. The process's own cap (fill_cap, 50) stays.
    "--fill-cap-per-client", "1024", "--max-ttl", "30d"]
# Cold reads and 404s at fewer connections than the fill cap, so that what they measure is the
# store's lookup and not the cap's 503s.
MISS_CONNS = 32
# The backlog a checkpoint's sweep is given: a minute of expiry at 3,500 pastes/s, ten times the
# spec's create peak (the aim: swept while creates run, costing them under 10%).
SWEEP_BACKLOG = 210_000
HOT_BYTES = 10240


def log(*parts):
    print(time.strftime("%H:%M:%S", time.gmtime()), *parts, flush=True)


def to_ms(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    value, unit = float(m.group(1)), m.group(2)
    return value * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]


def wrk(url, seconds, conns=64, script=None, env=None, args=()):
    """Runs wrk and returns {rate, p50, p99, statuses, seconds}."""
    cmd = ["wrk", "-t2", f"-c{conns}", f"-d{seconds}s", "--latency", "--timeout", "10s"]
    if script:
        cmd += ["-s", os.path.join(REPO, "bench/wrk", script)]
    cmd.append(url)
    if args:
        cmd += ["--", *args]
    ran = subprocess.run(cmd, cwd=REPO, env={**os.environ, **(env or {})}, capture_output=True,
                         text=True)
    if ran.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: {ran.stderr.strip()}")
    out = ran.stdout
    result = {"statuses": {}}
    for line in out.splitlines():
        parts = line.split()
        if line.startswith("status "):
            result["statuses"][parts[1]] = int(parts[2])
        elif len(parts) == 2 and parts[0] in ("50%", "99%"):
            result["p" + parts[0][:-1]] = to_ms(parts[1])
        elif " requests in " in line:
            result["requests"] = int(parts[0])
            result["seconds"] = to_ms(parts[3].rstrip(",")) / 1000
        elif line.startswith("  Non-2xx or 3xx responses:"):
            result["non_2xx"] = int(parts[-1])
    result["rate"] = result["requests"] / result["seconds"]
    if not script:  # a plain GET: wrk counts only what was not a success
        result["statuses"]["200"] = result["requests"] - result.get("non_2xx", 0)
    return result


def ok_rate(run, code):
    return run["statuses"].get(str(code), 0) / run["seconds"]


def drop_page_cache():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def disk_reads(path):
    """Read requests the block device under `path` has completed (/proc/diskstats' fourth field:
    one per I/O the disk served, however many pages a request merged)."""
    dev = os.stat(path).st_dev
    major, minor = os.major(dev), os.minor(dev)
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            if int(fields[0]) == major and int(fields[1]) == minor:
                return int(fields[3])
    return 0


def write_corpus(path):
    """The repository's own text, ASCII only (a window may start anywhere), at least 4 MiB."""
    chunks = []
    for top in ("src", "include", "tests", "docs", "bench", "tools"):
        for root, _, files in sorted(os.walk(os.path.join(REPO, top))):
            for name in sorted(files):
                if name.endswith((".cc", ".h", ".py", ".sh", ".md", ".mjs", ".lua", ".yaml")):
                    with open(os.path.join(root, name), "rb") as f:
                        chunks.append(bytes(b for b in f.read() if 9 <= b < 127 or b == 10))
    text = b"".join(chunks)
    while len(text) < 4 << 20:
        text += text
    with open(path, "wb") as f:
        f.write(text)
    return text


class Server:
    def __init__(self, binary, data, log_path, port, admin_port, extra=()):
        self.binary, self.data, self.log_path = binary, data, log_path
        self.extra = list(extra)  # flags after the benchmarks' own
        self.port, self.admin_port = port, admin_port
        self.url = f"http://127.0.0.1:{port}"
        self.admin = f"http://127.0.0.1:{admin_port}"
        self.proc = None

    def start(self):
        """Starts the server; returns the seconds until its first healthy answer."""
        began = time.monotonic()
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--admin-listen",
             f"127.0.0.1:{self.admin_port}", "--data-dir", self.data, *LIFTED, *self.extra],
            stdout=open(self.log_path, "a"), stderr=subprocess.STDOUT)
        while not healthy(self.url):
            if self.proc.poll() is not None:
                sys.exit(f"sluice exited with {self.proc.returncode}; see {self.log_path}")
            time.sleep(0.005)
        return time.monotonic() - began

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        self.proc.wait()

    def wal_bytes(self):
        return file_bytes(os.path.join(self.data, "meta.db-wal"))

    def store_bytes(self):
        return disk_bytes(self.data)

    def rss_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def metric(self, name, combine=None):
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith(name + " ") or line.startswith(name + "{"):
                    return float(line.split()[-1])
        return 0.0

    def create(self, body):
        for _ in range(40):
            request = urllib.request.Request(self.url + "/api/v1/pastes", data=body, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    return json.loads(answer.read())["id"]
            except urllib.error.HTTPError as e:
                if e.code != 503:  # a refusal of the moment (a cold store's timeout): again
                    raise
                time.sleep(0.5)
        sys.exit("no create was accepted in 20 s")

    def raw(self, paste_id):
        with urllib.request.urlopen(f"{self.url}/raw/{paste_id}", timeout=10) as answer:
            return answer.read()


class Fleet(Server):
    """N sluice processes on one PostgreSQL, bodies in one shared folder, nginx in front: the
    Server a checkpoint talks to, its url the balancer, its figures the processes' sum."""

    def __init__(self, binary, work, log_path, port, processes, bodies="files"):
        super().__init__(binary, os.path.join(work, "app0"), log_path, port + 3, port + 4)
        self.work, self.base, self.processes, self.procs = work, port, processes, []
        self.pg_dir = os.path.join(work, "postgres")
        self.bodies = bodies
        self.blobs = os.path.join(work, "ceph" if bodies == "ceph" else "blobs")
        self.blob_args, self.blob_env = [], {}
        self.app_ports = [port + 10 + i for i in range(processes)]
        self.meta_url = None

    def start_dependencies(self):
        os.makedirs(self.blobs, exist_ok=True)
        if self.bodies == "ceph":
            self.start_ceph()
        env = {**os.environ, "PG_DURABLE": "1", "PG_SHARED_BUFFERS": "256MB"}
        self.meta_url = subprocess.run(
            [os.path.join(REPO, "scripts/testenv/postgres.sh"), "start", self.pg_dir,
             str(self.base + 5)], env=env, check=True, capture_output=True,
            text=True).stdout.strip().splitlines()[-1]
        subprocess.run([self.binary, "migrate", "--meta", self.meta_url], check=True,
                       stdout=subprocess.DEVNULL)
        upstreams = "".join(f"server 127.0.0.1:{p} max_fails=0; " for p in self.app_ports)
        # The balancer as deploy/nginx/sluice.conf sets it up: least_conn, kept-alive upstreams,
        # bodies streamed through.
        return (f"upstream fleet {{ least_conn; {upstreams} keepalive 64; }}\n"
                f"  server {{ listen 127.0.0.1:{self.port}; client_max_body_size 2m;"
                " proxy_request_buffering off; proxy_buffering off;"
                " location / { proxy_pass http://fleet; proxy_http_version 1.1;"
                ' proxy_set_header Connection ""; proxy_next_upstream off; } }')

    def start_ceph(self):
        """A one-node Ceph and its gateway, the OSD on BlueStore: a million pastes of a few KB
        are gigabytes, more than memstore should hold in the OSD's memory on a shared machine
        (bench/results/ceph-rgw.md measured it). The file is sparse; BlueStore's cache is the
        size of PostgreSQL's shared_buffers (256 MB), so neither store has more memory."""
        env = {**os.environ, "CEPH_RGW_OBJECTSTORE": "bluestore",
               "CEPH_RGW_BLOCK_BYTES": str(60 << 30), "CEPH_RGW_CACHE_BYTES": str(256 << 20),
               # A start beside other people's builds: ceph's commands may take minutes.
               "CEPH_RGW_PATIENCE": "600"}
        script = os.path.join(REPO, "scripts/testenv/ceph-rgw.sh")
        if ceph_running(self.blobs):  # a resumed run (--resume): its cluster, its bucket
            log(f"ceph: the cluster in {self.blobs} still runs; its bucket is used as it is")
        else:
            subprocess.run([script, "start", self.blobs, "0", "sluice-growth"], env=env,
                           check=True, stdout=subprocess.DEVNULL)

        def read(name):
            with open(os.path.join(self.blobs, name)) as f:
                return f.read().strip()

        self.blob_args = ["--blob", "s3://" + read("bucket"), "--s3-endpoint", read("endpoint")]
        self.blob_env = {"AWS_ACCESS_KEY_ID": read("access_key"),
                         "AWS_SECRET_ACCESS_KEY": read("secret_key"), "AWS_REGION": "us-east-1"}

    def start(self):
        began = time.monotonic()
        self.procs = []
        for i, port in enumerate(self.app_ports):
            data = os.path.join(self.work, f"app{i}")
            os.makedirs(data, exist_ok=True)
            if self.bodies == "files" and not os.path.islink(os.path.join(data, "blobs")):
                os.symlink(self.blobs, os.path.join(data, "blobs"))
            self.procs.append(subprocess.Popen(
                [self.binary, "serve", "--listen", f"127.0.0.1:{port}", "--admin-listen",
                 f"127.0.0.1:{port + 1000}", "--data-dir", data, "--meta", self.meta_url,
                 "--inline-body-bytes", "0", "--processes", str(self.processes), *self.blob_args,
                 *LIFTED],
                env={**os.environ, **self.blob_env},
                stdout=open(self.log_path, "a"), stderr=subprocess.STDOUT))
        self.proc = self.procs[0]
        for port, proc in zip(self.app_ports, self.procs):
            while not healthy(f"http://127.0.0.1:{port}"):
                if proc.poll() is not None:
                    sys.exit(f"sluice exited with {proc.returncode}; see {self.log_path}")
                time.sleep(0.005)
        return time.monotonic() - began

    def stop(self, sig=signal.SIGTERM):
        for proc in self.procs:
            proc.send_signal(sig)
        for proc in self.procs:
            proc.wait()

    def stop_dependencies(self):
        subprocess.run([os.path.join(REPO, "scripts/testenv/postgres.sh"), "pause", self.pg_dir],
                       check=False, stdout=subprocess.DEVNULL)
        if self.bodies == "ceph":
            subprocess.run([os.path.join(REPO, "scripts/testenv/ceph-rgw.sh"), "stop", self.blobs],
                           check=False, stdout=subprocess.DEVNULL)

    def rss_mb(self):
        total = 0.0
        for proc in self.procs:
            with open(f"/proc/{proc.pid}/status") as f:
                total += next((int(line.split()[1]) / 1024 for line in f
                               if line.startswith("VmRSS:")), 0.0)
        return total

    def metric(self, name, combine=sum):
        values = []
        for port in self.app_ports:
            self.url, saved = f"http://127.0.0.1:{port}", self.url
            try:
                values.append(super().metric(name))
            finally:
                self.url = saved
        return combine(values)

    def sql(self, statement):
        """psql's one-line answer to `statement` (UPDATE n, or the value of a SELECT)."""
        return subprocess.run(
            ["/usr/lib/postgresql/15/bin/psql", self.meta_url, "-tAc", statement], check=True,
            capture_output=True, text=True).stdout.strip()

    def wal_bytes(self):
        return disk_bytes(os.path.join(self.pg_dir, "data", "pg_wal"))

    def store_bytes(self):
        return disk_bytes(os.path.join(self.pg_dir, "data")) + disk_bytes(self.blobs)


def healthy(url):
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=1) as answer:
            return answer.status == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def delete_all(url, pastes, conns=16):
    """DELETEs every (id, token) from `conns` keep-alive connections; rate, p50, p99, statuses."""
    host, port = url.removeprefix("http://").split(":")
    latencies, statuses, lock = [], {}, threading.Lock()
    work = iter(pastes)

    def one_connection():
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        while True:
            with lock:
                item = next(work, None)
            if item is None:
                return
            began = time.monotonic()
            conn.request("DELETE", f"/api/v1/pastes/{item[0]}",
                         headers={"Authorization": f"Bearer {item[1]}"})
            answer = conn.getresponse()
            answer.read()
            with lock:
                latencies.append(time.monotonic() - began)
                statuses[str(answer.status)] = statuses.get(str(answer.status), 0) + 1

    began = time.monotonic()
    threads = [threading.Thread(target=one_connection) for _ in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - began
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
    return {"rate": len(latencies) / took, "p50": pick(0.5), "p99": pick(0.99),
            "statuses": statuses}


def describe_binary(path):
    version = subprocess.run([path, "--version"], capture_output=True,
                             text=True).stdout.partition("\n")[0]
    return f"{os.path.realpath(path)} ({version or 'no --version'})"


def file_bytes(path):
    return os.path.getsize(path) if os.path.exists(path) else 0


def disk_bytes(data):
    total = 0
    for root, _, files in os.walk(data):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:  # swept or renamed while walking
                pass
    return total


class Growth:
    def __init__(self, args):
        self.args = args
        self.work = os.path.realpath(args.work)
        self.data = os.path.join(self.work, "data")
        self.samples = os.path.join(self.work, "samples")
        bodies = ("a bucket of Ceph RGW (one node, BlueStore on a file)" if args.bodies == "ceph"
                  else "shared files")
        store = (f"PostgreSQL 15 (fsync on) behind {args.fleet} processes and nginx, bodies in "
                 f"{bodies}" if args.fleet else "embedded (SQLite and files)")
        self.results = {"checkpoints": [], "fill": [], "binary": describe_binary(args.bin),
                        "store": store,
                         "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        self.created = 0  # 201s of the fill and of the measured creates
        self.spent = set()  # sampled ids deleted by a checkpoint

    def setup(self):
        self.corpus_path = os.path.join(self.work, "corpus.txt")
        if self.args.resume:
            # Where a run that stopped left its store: its checkpoints kept, the rest measured.
            with open(os.path.join(self.work, "growth.json")) as f:
                self.results = json.load(f)
            with open(self.corpus_path, "rb") as f:
                self.corpus = f.read()
            # The last fill round's count: counting the rows would read the whole table back
            # from a cold disk (10 minutes at 10 million).
            self.created = self.results["fill"][-1]["live"]
            last = self.results["checkpoints"][-1] if self.results["checkpoints"] else None
            if last and last["live"] >= self.created:  # its sweep came after the last round
                self.created = last.get("live_after", self.created)
            subprocess.run(["rm", "-rf", os.path.join(self.work, "nginx-tmp")], check=True)
        else:
            subprocess.run(["rm", "-rf", self.work], check=True)
            os.makedirs(self.samples)
            os.makedirs(os.path.join(self.work, "static"))
            self.corpus = write_corpus(self.corpus_path)
        self.hot_body = self.corpus[:HOT_BYTES]
        with open(os.path.join(self.work, "static", "hot.txt"), "wb") as f:
            f.write(self.hot_body)
        log_path = os.path.join(self.work, "sluice.log")
        if self.args.fleet:
            self.server = Fleet(self.args.bin, self.work, log_path, self.args.port, self.args.fleet,
                                self.args.bodies)
            self.start_nginx(self.server.start_dependencies())
        else:
            self.server = Server(self.args.bin, self.data, log_path, self.args.port,
                                 self.args.port + 1)
            self.start_nginx()
        self.server.start()

    def start_nginx(self, more_servers=""):
        port = self.args.port + 2
        conf = os.path.join(self.work, "nginx.conf")
        tmp = os.path.join(self.work, "nginx-tmp")
        os.makedirs(tmp)
        # The yardstick keeps its connections as sluice does, as bench/lib.sh's start_static_nginx
        # says why: at nginx's default keepalive_requests (1,000, what runs before 2026-12-04 had)
        # each wrk connection reconnected about once a second, work sluice never does.
        with open(conf, "w") as f:
            f.write(f"""user root; worker_processes auto; daemon off; pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn; events {{ worker_connections 1024; }}
http {{ access_log off; sendfile on; tcp_nopush on; types {{ text/plain txt; }}
  client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy; fastcgi_temp_path {tmp}/fcgi;
  uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
  server {{ listen 127.0.0.1:{port}; root {self.work}/static;
           keepalive_requests 1000000; keepalive_timeout 300s; }}
  {more_servers} }}
""")
        self.nginx = subprocess.Popen(["nginx", "-c", conf], stderr=subprocess.DEVNULL)
        self.nginx_url = f"http://127.0.0.1:{port}/hot.txt"
        for _ in range(100):
            try:
                urllib.request.urlopen(self.nginx_url, timeout=1).read()
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.05)
        sys.exit("nginx did not start")

    def live(self):
        purged = self.server.metric("sluice_expired_purged_total")
        return self.created - purged - self.deleted_total - self.purged_before_restart

    def create_run(self, seconds, sample=True):
        env = {"CORPUS": self.corpus_path}
        if sample:
            env["SAMPLE_DIR"] = self.samples
        run = wrk(self.server.url + "/api/v1/pastes", seconds, script="growth_create.lua", env=env)
        self.created += run["statuses"].get("201", 0)
        return run

    def fill(self, target):
        while self.live() < target:
            began = time.monotonic()
            run = self.create_run(self.args.round_seconds)
            wal = self.server.wal_bytes()
            row = {"t": round(time.monotonic() - self.t0, 1), "live": self.live(),
                   "creates_per_s": round(ok_rate(run, 201)), "p99_ms": run.get("p99"),
                   "wal_mb": round(wal / 1e6, 1),
                   "disk_gb": round(self.server.store_bytes() / 1e9, 2),
                   "rss_mb": round(self.server.rss_mb()),
                   "non_201": sum(n for c, n in run["statuses"].items() if c != "201")}
            self.results["fill"].append(row)
            log(f"fill: {row['live']:.0f} live, {row['creates_per_s']}/s p99 {row['p99_ms']} ms,"
                f" WAL {row['wal_mb']} MB, {row['disk_gb']} GB, {time.monotonic() - began:.0f} s")

    def sample_lines(self):
        lines = []
        for name in sorted(os.listdir(self.samples)):
            with open(os.path.join(self.samples, name)) as f:
                lines += [line for line in f if line.split()[0] not in self.spent]
        return lines

    def verify_sample(self, lines, count):
        """Reads back `count` sampled pastes and checks them byte for byte against the corpus."""
        checked = 0
        for line in random.sample(lines, min(count, len(lines))):
            paste_id = line.split()[0]
            body = None
            for _ in range(20):
                try:
                    body = self.server.raw(paste_id)
                    break
                except urllib.error.HTTPError as e:
                    if e.code == 503:  # a read past its budget: no answer about the paste yet
                        time.sleep(0.25)
                        continue
                    if e.code == 404:  # ttl=10m pastes expire, and ttl=30d ones at checkpoints
                        break
                    raise
            if body is None:
                continue
            head, _, rest = body.partition(b"\n")
            offset = int(head.split()[1])
            if rest != self.corpus[offset:offset + len(rest)]:
                sys.exit(f"paste {paste_id} does not read back as it was created")
            checked += 1
        return checked

    def checkpoint(self, size):
        s = self.server
        c = {"size": size, "live": self.live()}
        log(f"checkpoint at {c['live']:.0f} live pastes")
        nginx_before = wrk(self.nginx_url, self.args.seconds)
        creates = self.create_run(self.args.seconds)
        c["create"] = {"rate": ok_rate(creates, 201), "p50": creates["p50"], "p99": creates["p99"]}
        if self.args.sweep_only:
            self.kill_expire_and_sweep(c)
            return
        hot_id = s.create(self.hot_body)
        self.created += 1
        hot = wrk(f"{s.url}/raw/{hot_id}", self.args.seconds)
        nginx_after = wrk(self.nginx_url, self.args.seconds)
        nginx = (ok_rate(nginx_before, 200) + ok_rate(nginx_after, 200)) / 2
        c["nginx"] = {"rate": nginx, "before": ok_rate(nginx_before, 200),
                      "after": ok_rate(nginx_after, 200)}
        c["hot"] = {"rate": ok_rate(hot, 200), "p50": hot["p50"], "p99": hot["p99"],
                    "vs_nginx": ok_rate(hot, 200) / nginx}
        lines = self.sample_lines()
        if not lines:
            # Every create so far was refused (a store past its deadlines): nothing to read back.
            sys.exit(f"no create was acknowledged by {c['live']:.0f} live pastes (creates: "
                     f"{creates['statuses']}); see {s.log_path}")
        ids_file = os.path.join(self.work, "ids.txt")
        with open(ids_file, "w") as f:
            f.writelines(lines)
        drop_page_cache()
        reads_before = disk_reads(self.work)
        cold = wrk(s.url, self.args.seconds, conns=MISS_CONNS, script="growth_reads.lua",
                   env={"IDS": ids_file})
        # Expired ttl=10m pastes are 404s among them: both are the cost of a lookup. The disk's
        # reads per answer: what the store's layout costs a read it has not cached (nothing
        # else reads from the disk meanwhile; the first reads of the process's own file and the
        # tree's upper pages are counted in it too).
        c["cold"] = {"rate": cold["rate"], "p50": cold["p50"], "p99": cold["p99"],
                     "statuses": cold["statuses"],
                     "disk_reads_per_answer": (disk_reads(self.work) - reads_before)
                     / max(cold["requests"], 1)}
        drop_page_cache()
        reads_before = disk_reads(self.work)
        absent = wrk(s.url, self.args.seconds, conns=MISS_CONNS, script="growth_reads.lua",
                     env={"MODE": "absent"})
        c["absent"] = {"rate": ok_rate(absent, 404), "p50": absent["p50"], "p99": absent["p99"],
                       "disk_reads_per_answer": (disk_reads(self.work) - reads_before)
                       / max(absent["requests"], 1)}
        doomed = random.sample(lines, min(self.args.deletes, len(lines)))
        self.spent.update(line.split()[0] for line in doomed)
        c["delete"] = delete_all(s.url, [line.split()[:2] for line in doomed])
        self.deleted_total += c["delete"]["statuses"].get("204", 0)
        c["verified"] = self.verify_sample(lines, 200)
        c["rss_mb"] = s.rss_mb()
        c["live_at_disk"] = self.live()
        c["disk_bytes"] = s.store_bytes()
        # Every process reports the one ledger of the shared store: the same figure, not a share.
        c["live_body_bytes"] = s.metric("sluice_storage_live_bytes", combine=max)
        c["wal_bytes"] = s.wal_bytes()
        if self.args.fleet:
            c["backup"] = None
        else:
            c["files"] = {name: file_bytes(os.path.join(self.data, name))
                          for name in sorted(os.listdir(self.data))
                          if os.path.isfile(os.path.join(self.data, name))}
            c["cotenant"] = self.beside_dd(c["create"]["rate"])
            c["backup"] = (self.backup(c["create"]["rate"]) if c["live"] < self.args.backup_below
                           else None)
        s.stop()
        c["start_after_stop_s"] = s.start()
        if not self.args.fleet:
            # The restart an operator fears: the page cache gone (a reboot), creates at once.
            s.stop()
            drop_page_cache()
            c["cold_start_s"] = s.start()
            c["creates_after_cold_start"] = [ok_rate(self.create_run(10), 201) for _ in range(3)]
        self.kill_expire_and_sweep(c)

    def kill_expire_and_sweep(self, c):
        """The checkpoint's last steps: the kill -9, the backlog, its sweep; then `c` is kept."""
        c["start_after_kill_s"], c["expired_backlog"] = self.kill_and_expire()
        c["sweep"] = self.sweep(c["create"]["rate"], c["expired_backlog"])
        c["live_after"] = self.live()
        self.results["checkpoints"].append(c)
        log(json.dumps(c))
        self.save()

    def beside_dd(self, quiet_rate):
        """Creates while a disk neighbour writes 3 GB (`dd`, no fsync, as bench/run_create_bench.sh
        runs it): once in the idle CPU class (it competes for the disk, not for the two cores),
        once unrestrained."""
        result = {}
        for name, prefix in (("idle_class", ["chrt", "--idle", "0"]), ("unrestrained", [])):
            target = os.path.join(self.work, "cotenant.bin")
            dd = subprocess.Popen(prefix + ["dd", "if=/dev/zero", f"of={target}", "bs=1M",
                                            "count=3072", "status=none"])
            run = self.create_run(self.args.seconds)
            dd.wait()
            os.remove(target)
            subprocess.run(["sync"], check=True)
            result[name] = {"rate": ok_rate(run, 201), "p99": run["p99"],
                            "ratio": ok_rate(run, 201) / quiet_rate}
        return result

    def backup(self, quiet_rate):
        """`sluice admin backup` of the data dir (meta.db in file order, then the body files) while
        creates run; returns its time, what it copied and what it cost the creates."""
        target = os.path.join(self.work, "backup")
        shutil.rmtree(target, ignore_errors=True)
        began = time.monotonic()
        copy = subprocess.Popen([self.args.bin, "admin", "backup", "--data-dir", self.data, target],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rates, wal_max = [], 0
        while copy.poll() is None:
            run = self.create_run(5)
            rates.append(ok_rate(run, 201))
            wal_max = max(wal_max, file_bytes(os.path.join(self.data, "meta.db-wal")))
        took = time.monotonic() - began
        out, err = copy.communicate()
        if copy.returncode != 0:
            sys.exit("backup failed: " + err)
        rows = sqlite3.connect(os.path.join(target, "meta.db")).execute(
            "SELECT count(*) FROM pastes").fetchone()[0]
        size = sum(file_bytes(os.path.join(folder, name))
                   for folder, _, names in os.walk(target) for name in names)
        shutil.rmtree(target)
        during = sum(rates) / len(rates) if rates else None
        # The command's own time: `took` ends with the last 5 s round of creates.
        copied = re.search(r"backup: ([\d.]+) MB in ([\d.]+) s", out)
        return {"seconds": float(copied.group(2)), "polled_seconds": took, "bytes": size,
                "rows": rows, "create_rate_during": during,
                "create_ratio": during / quiet_rate if during else None, "wal_max_bytes": wal_max,
                "summary": out.strip().splitlines()[-2:]}

    def kill_and_expire(self):
        """kill -9 under creates; backlog the ttl=30d pastes; restart. (start seconds, backlog)"""
        load = subprocess.Popen(
            ["wrk", "-t2", "-c64", "-d4s", "-s", "bench/wrk/growth_create.lua",
             self.server.url + "/api/v1/pastes"], cwd=REPO, env={**os.environ,
                                                                "CORPUS": self.corpus_path},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(2)
        # Whatever it created is counted from the store below, not from wrk's tally.
        self.purged_before_restart += self.server.metric("sluice_expired_purged_total")
        self.server.stop(signal.SIGKILL)
        load.wait()
        now = int(time.time())
        if self.args.fleet:
            backlog = int(self.server.sql(
                f"UPDATE pastes SET expires_at = {now + 3} WHERE id IN (SELECT id FROM pastes"
                f" WHERE expires_at > {now + 8 * 86400} AND NOT deleted"
                f" LIMIT {self.args.sweep_backlog})").split()[-1])
            self.created = int(self.server.sql("SELECT count(*) FROM pastes WHERE NOT deleted"))
        else:
            db = sqlite3.connect(os.path.join(self.data, "meta.db"), timeout=60)
            with db:
                backlog = db.execute(
                    "UPDATE pastes SET expires_at = ? WHERE id IN (SELECT id FROM pastes WHERE"
                    " expires_at > ? AND deleted = 0 LIMIT ?)",
                    (now + 3, now + 8 * 86400, self.args.sweep_backlog)).rowcount
            # The exact count after the kill: what wrk was told and what landed may differ.
            self.created = db.execute(
                "SELECT count(*) FROM pastes WHERE deleted = 0").fetchone()[0]
            db.close()
        self.deleted_total = 0
        self.purged_before_restart = 0
        return self.server.start(), backlog

    def sweep(self, quiet_rate, backlog):
        """Creates in 2 s rounds while the sweeper drains `backlog`, its counter read every 0.2 s:
        the sweep's rate from its first purge to its last, the creates' rate in the rounds it
        overlapped against `quiet_rate`."""
        samples, done = [], threading.Event()

        def watch():
            while not done.is_set():
                samples.append((time.monotonic(), self.server.metric("sluice_expired_purged_total")))
                time.sleep(0.2)

        watcher = threading.Thread(target=watch)
        watcher.start()
        rounds = []
        deadline = time.monotonic() + self.args.sweep_seconds
        while time.monotonic() < deadline:
            began = time.monotonic()
            run = self.create_run(2)
            rounds.append((began, time.monotonic(), ok_rate(run, 201)))
            if samples and samples[-1][1] >= backlog and began > 4 + rounds[0][0]:
                break
        done.set()
        watcher.join()
        moving = [t for (t, n), (_, m) in zip(samples[1:], samples) if n > m]
        result = {"backlog": backlog, "purged": samples[-1][1] if samples else 0,
                  "rounds": [round(r[2]) for r in rounds]}
        if backlog and moving:
            first, last = moving[0] - 0.2, moving[-1]
            result["seconds"] = last - first
            result["purged_per_s"] = result["purged"] / max(last - first, 0.2)
            overlapped = [r[2] for r in rounds if r[1] > first and r[0] < last]
            result["create_rate_during"] = sum(overlapped) / len(overlapped)
            result["create_ratio"] = result["create_rate_during"] / quiet_rate
        return result

    def save(self):
        with open(os.path.join(self.work, "growth.json"), "w") as f:
            json.dump(self.results, f, indent=1)

    def run(self):
        try:
            self.setup()
        except BaseException:
            # What started before the failure (PostgreSQL, Ceph's daemons) is not left running.
            if self.args.fleet and hasattr(self, "server"):
                self.server.stop_dependencies()
            raise
        self.t0 = time.monotonic()
        self.deleted_total = 0
        self.purged_before_restart = 0
        try:
            done = {c["size"] for c in self.results["checkpoints"]}
            for size in self.args.sizes:
                if size in done:
                    continue
                self.fill(size)
                self.checkpoint(size)
        finally:
            self.save()
            self.server.stop()
            self.nginx.send_signal(signal.SIGQUIT)
            self.nginx.wait()
            if self.args.fleet:
                self.server.stop_dependencies()


def ceph_running(folder):
    """True if the gateway scripts/testenv/ceph-rgw.sh started in `folder` still runs."""
    try:
        with open(os.path.join(folder, "radosgw.pid")) as f:
            os.kill(int(f.read().strip()), 0)
        return True
    except (OSError, ValueError):
        return False


def machine():
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "unknown")
    mem = int(next(line.split()[1] for line in open("/proc/meminfo")
                   if line.startswith("MemTotal"))) / 1024 / 1024
    return f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB, {os.uname().release}"


def fmt(value, digits=0):
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def cotenant(c, name):
    run = c.get("cotenant", {}).get(name)
    return f"{fmt(run['rate'])} ({run['ratio']:.2f})" if run else "–"


def report(out, runs, command, notes=""):
    """Writes the report of `runs` ([(label, results)]) to `out`, plots beside it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    base = os.path.splitext(out)[0]
    lines = [
        "# What each operation costs as the store grows", "",
        "Written by `bench/growth.py` (bench/run_growth_bench.sh); what each column is, and how the "
        "sweep's backlog is made, is the script's docstring. Client (wrk) and server share the "
        "machine's cores; every rate is read beside its reference in the same run.", "",
        "| | |", "|---|---|", f"| machine | {machine()} |", f"| command | `{command}` |"]
    for label, r in runs:
        lines.append(f"| {label} | {r.get('store', 'embedded')}: {r.get('binary', '')}, started "
                     f"{r['started']} |")
    for label, r in runs:
        cps = r["checkpoints"]
        empty = cps[0]["create"]["rate"]
        lines += ["", f"## {label}", "",
                  "| live pastes | creates/s (× empty) | create p99 ms | hot reads/s (× nginx) |"
                  " cold read p50 / p99 ms | 404/s, p50 / p99 ms | deletes/s, p99 ms |"
                  " sweep pastes/s (creates ×) | backup s (creates ×) | start after stop / kill -9 s |"
                  " creates beside dd, idle class / unrestrained (× quiet) |"
                  " RSS MiB | disk bytes per paste (body bytes) |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for c in cps:
            live = max(c.get("live_at_disk", c["live"]), 1)
            sweep, backup = c["sweep"], c["backup"] or {"seconds": None, "create_ratio": None}
            lines.append(
                f"| {fmt(c['live'])} | {fmt(c['create']['rate'])} ({c['create']['rate'] / empty:.2f})"
                f" | {fmt(c['create']['p99'], 1)}"
                f" | {fmt(c['hot']['rate'])} ({c['hot']['vs_nginx']:.2f})"
                f" | {fmt(c['cold']['p50'], 2)} / {fmt(c['cold']['p99'], 2)}"
                f" | {fmt(c['absent']['rate'])}, {fmt(c['absent']['p50'], 2)} / "
                f"{fmt(c['absent']['p99'], 2)}"
                f" | {fmt(c['delete']['rate'])}, {fmt(c['delete']['p99'], 1)}"
                f" | {fmt(sweep.get('purged_per_s'))} ({fmt(sweep.get('create_ratio'), 2)})"
                f" | {fmt(backup['seconds'], 1)} ({fmt(backup['create_ratio'], 2)})"
                f" | {c['start_after_stop_s']:.2f} / {c['start_after_kill_s']:.2f}"
                f" | {cotenant(c, 'idle_class')} / {cotenant(c, 'unrestrained')}"
                f" | {fmt(c['rss_mb'])}"
                f" | {fmt(c['disk_bytes'] / live)} ({fmt(c['live_body_bytes'] / live)}) |")
        later = [c for c in cps if "cold_start_s" in c]
        if later:
            lines += ["", "| live pastes | disk reads per cold read / per 404 | start with the page"
                      " cache dropped, s | creates/s in the 1st / 2nd / 3rd 10 s after it (× empty)"
                      " | backup GB, MB/s, WAL at most GB |", "|---:|---:|---:|---:|---:|"]
        for c in later:
            backup = c.get("backup")
            copied = (f"{backup['bytes'] / 1e9:.1f}, {backup['bytes'] / 1e6 / backup['seconds']:.0f}"
                      f", {backup['wal_max_bytes'] / 1e9:.1f}" if backup else "–")
            lines.append(
                f"| {fmt(c['live'])} | {c['cold']['disk_reads_per_answer']:.2f} /"
                f" {c['absent']['disk_reads_per_answer']:.2f} | {c['cold_start_s']:.2f} | "
                + " / ".join(f"{fmt(x)} ({x / empty:.2f})" for x in c["creates_after_cold_start"])
                + f" | {copied} |")
        fill = r["fill"] or [{"creates_per_s": 0, "wal_mb": 0, "rss_mb": 0, "disk_gb": 0}]
        # Rounds recovered from a stopped run's log (its progress lines) have no RSS.
        rss = [x["rss_mb"] for x in fill if x.get("rss_mb") is not None] or [0]
        lines += ["", f"Fill: {len(fill)} rounds; creates/s from {fmt(fill[0]['creates_per_s'])} "
                  f"to {fmt(fill[-1]['creates_per_s'])} (median of the last five "
                  f"{fmt(sorted(x['creates_per_s'] for x in fill[-5:])[len(fill[-5:]) // 2])}); "
                  f"WAL at most {max(x['wal_mb'] for x in fill):.0f} MB; RSS "
                  f"{min(rss)}–{max(rss)} MiB; "
                  f"{fill[-1]['disk_gb']} GB on disk at the end. Cold reads and 404s ran at "
                  f"{MISS_CONNS} connections after the page cache was dropped; every checkpoint "
                  "read back a sample of 200 byte for byte.", ""]
    figures = [("create", "creates/s", "create p99 ms", lambda c: c["create"]),
               ("cold", "cold reads/s", "cold read p99 ms", lambda c: c["cold"]),
               ("absent", "404s/s", "404 p99 ms", lambda c: c["absent"]),
               ("hot", "hot reads/s", "hot read p99 ms", lambda c: c["hot"])]
    fig, axes = plt.subplots(2, len(figures), figsize=(4 * len(figures), 6.5))
    for k, (key, rate_label, p99_label, pick) in enumerate(figures):
        for label, r in runs:
            x = [c["live"] / 1e6 for c in r["checkpoints"]]
            axes[0][k].plot(x, [pick(c)["rate"] for c in r["checkpoints"]], "o-", label=label)
            axes[1][k].plot(x, [pick(c)["p99"] for c in r["checkpoints"]], "o-", label=label)
        axes[0][k].set_ylabel(rate_label)
        axes[1][k].set_ylabel(p99_label)
        for row in axes:
            row[k].set_xlabel("live pastes, millions")
            row[k].set_ylim(bottom=0)
            row[k].grid(alpha=0.3)
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(base + "-operations.png", dpi=90)
    fig, axis = plt.subplots(figsize=(8, 4))
    for label, r in runs:
        axis.plot([x["live"] / 1e6 for x in r["fill"]], [x["creates_per_s"] for x in r["fill"]],
                  ".-", label=label)
    axis.set_xlabel("live pastes, millions")
    axis.set_ylabel("creates/s during the fill")
    axis.set_ylim(bottom=0)
    axis.grid(alpha=0.3)
    axis.legend()
    fig.tight_layout()
    fig.savefig(base + "-fill.png", dpi=90)
    name = os.path.basename(base)
    lines += ["## Plots", "", f"![rate and p99 of each operation]({name}-operations.png)", "",
              f"![creates during the fill]({name}-fill.png)", ""]
    if notes:
        with open(notes) as f:
            lines += ["## Reading this run", "", f.read()]
    with open(out, "w") as f:
        f.write("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", help="the sluice to measure (not with --report)")
    parser.add_argument("--report", metavar="OUT.md",
                        help="write the report of --runs LABEL=growth.json... instead of measuring")
    parser.add_argument("--runs", nargs="*", default=[])
    parser.add_argument("--command", default="", help="the command the report names")
    parser.add_argument("--notes", default="", help="a file of notes the report ends with")
    parser.add_argument("--work", default=os.path.join(REPO, "bench/work/growth"))
    parser.add_argument("--sizes", default="0,1000000,3000000,10000000",
                        type=lambda s: [int(float(x)) for x in s.split(",")])
    parser.add_argument("--seconds", type=int, default=10, help="each measurement's wrk run")
    parser.add_argument("--round-seconds", type=int, default=20, help="each fill round")
    parser.add_argument("--deletes", type=int, default=2000)
    parser.add_argument("--port", type=int, default=19400)
    parser.add_argument("--backup-below", type=float, default=float("inf"),
                        help="measure the backup only at checkpoints below this many pastes")
    parser.add_argument("--sweep-backlog", type=int, default=SWEEP_BACKLOG)
    parser.add_argument("--resume", action="store_true",
                        help="go on with the store and results a stopped run left in --work")
    parser.add_argument("--sweep-only", action="store_true",
                        help="at each checkpoint, only the quiet creates and the sweep beside "
                        "creates (a quick A/B of two binaries; no report)")
    parser.add_argument("--fleet", type=int, default=0, metavar="N",
                        help="N processes on PostgreSQL with shared files, not the embedded store")
    parser.add_argument("--bodies", choices=("files", "ceph"), default="files",
                        help="with --fleet: the bodies in shared files or in a Ceph RGW bucket")
    parser.add_argument("--sweep-seconds", type=int, default=300,
                        help="longest a checkpoint waits for its backlog to be swept")
    args = parser.parse_args()
    if args.report:
        runs = []
        for spec in args.runs:
            label, path = spec.split("=", 1)
            with open(path) as f:
                runs.append((label, json.load(f)))
        report(args.report, runs, args.command, args.notes)
        return
    if os.geteuid() != 0:
        sys.exit("run as root: the cold reads drop the page cache")
    if args.bodies == "ceph" and not args.fleet:
        sys.exit("--bodies ceph goes with --fleet")
    if args.bodies == "ceph" and args.resume and not ceph_running(os.path.join(args.work, "ceph")):
        # ceph-rgw.sh makes a new cluster each start: a resumed run would find its bucket empty.
        sys.exit("--resume with --bodies ceph needs the run's cluster still running "
                 f"({args.work}/ceph)")
    Growth(args).run()


if __name__ == "__main__":
    main()
