"""Start the real sluice binary for integration tests, talk to it, stop it.

Standard library only. A `SluiceServer` owns a temporary folder holding the data dir and the server
log; it starts `sluice serve --listen 127.0.0.1:0`, learns the port from the `listening on` log line,
and can stop (SIGTERM, exit status checked), kill -9 and restart on the same data dir. Tests derive
from `SluiceTestCase`, whose servers are always stopped (even when the test fails) and whose logs are
printed when a test fails or errors.

Requests go through `http.client` with only the headers the test names (plus Host), so a test decides
Content-Length, Transfer-Encoding and Expect exactly; `RawConnection` (tests/lib/rawhttp.py) goes one
level lower for requests that send headers without a body. /metrics is read by tests/lib/promtext.py.
"""

import atexit
import ctypes
import http.client
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

from promtext import metric, parse_metrics
from rawhttp import RawConnection, Response, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BIN = os.path.normpath(os.path.join(HERE, "..", "..", "build", "dev", "sluice"))
START_TIMEOUT = 20.0
STOP_TIMEOUT = 30.0
LISTENING = re.compile(r"listening on (https?://\S+)")
# A server built with sanitizers (make test-asan) prints a report and aborts; a report from a
# highlight worker (a child process) only costs a view its colours, so every log is read for one.
SANITIZER_REPORT = re.compile(r"ERROR: (Address|Leak|Thread|UndefinedBehavior)Sanitizer|"
                              r"runtime error: ")
LISTENING_LOCAL = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")
# The admin listener's line comes before the public one, so both are known once that one is seen.
ADMIN_LISTENING = re.compile(r"admin listener at http://127\.0\.0\.1:(\d+)")
ADMIN_TOKEN = "test-admin-token-0123456789"


_live = set()  # servers not yet stopped: killed at exit whatever happened

# Extra settings for every server this harness starts, e.g. "--meta postgres://... --blob s3://...
# --cache redis://...": the same suites then run unchanged against the scaled-out backends
# (tests/stack/api_on_backends.sh). A test that inspects the embedded store's files is skipped then.
BACKEND_ARGS = shlex.split(os.environ.get("SLUICE_TEST_BACKEND_ARGS", ""))


# Every server a test starts is patient unless the test says otherwise: the timeouts sized for a
# quiet production host (a 20 ms metadata read, a 50 ms insert) turn a scheduling hiccup of a shared
# CI machine into a 503, and most suites check what the API answers, not how fast. The flake hunt
# (tests/flake_hunt.py) found test after test that had simply not asked to be patient. A test about
# the timeouts themselves sets the ones it tests (a flag here always yields to the test's own) or
# passes `patient=False` to run on the spec's defaults; the overload suites (tests/scenario,
# tests/stack, the chaos lab) start their servers their own way.
PATIENT_TIMEOUTS = {
    "--read-budget": "5s", "--meta-get-timeout": "2s", "--blob-get-timeout": "3s",
    "--insert-timeout": "2s", "--put-timeout": "5s", "--create-budget": "10s",
    "--delete-budget": "5s", "--cache-timeout": "1s",
}

# The same suites read a server's log right after the request that wrote a line (a reload's, a
# warning's). With the log queue (src/app/log_queue.h) a line lands a moment after the request
# returns, and such a read was a race (the flake hunt: an access line not yet written). Their servers
# write each line on the thread that logs it (log_queue_lines 0). The queue itself is tested by
# tests/unit/logging and tests/integration/test_log_stall.py, and every scenario and stack server
# runs it.
SYNCHRONOUS_LOG = {"--log-queue-lines": "0"}


def _without_passwords(arg):
    """A URL's password as ***, as the server's own start-up line shows it (Settings::Describe in
    src/app/settings_loader.cc): a CI log of a failed test is public."""
    return re.sub(r"(://[^/@:\s]*:)[^@/\s]+@", r"\1***@", arg)


def _embedded_only():
    if BACKEND_ARGS:
        raise unittest.SkipTest("inspects the embedded store's files; this run uses "
                                + " ".join(BACKEND_ARGS))


_liblz4 = None


def _has_column(conn, table, column):
    return any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})"))


def decode_stored_body(stored, codec):
    """The body a row of meta.db (or of its inline_bodies) holds, in its form (include/sluice/store/
    body_codec.h): 0 the bytes as received; 1 four bytes of the size (little-endian), then one LZ4
    block. The block is decoded by liblz4 (the server's runtime library) through ctypes, so that
    any python3 runs the tests (a pyenv one does not see Debian's python3-lz4); the format around
    it is read here, apart from the server's code."""
    global _liblz4
    stored = bytes(stored)
    if codec == 0:
        return stored
    assert codec == 1, f"unknown body codec {codec}"
    if _liblz4 is None:
        _liblz4 = ctypes.CDLL("liblz4.so.1")
        _liblz4.LZ4_decompress_safe.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                                ctypes.c_int]
        _liblz4.LZ4_decompress_safe.restype = ctypes.c_int
    size = int.from_bytes(stored[:4], "little")
    out = ctypes.create_string_buffer(size)
    got = _liblz4.LZ4_decompress_safe(stored[4:], out, len(stored) - 4, size)
    assert got == size, f"stored body does not decode: {got} bytes of {size}"
    return out.raw


def _flush_shared_cache():
    """Each server starts with an empty shared cache, as an embedded one starts with empty limits."""
    for arg in BACKEND_ARGS:
        if arg.startswith("redis://"):
            host, _, port = arg[len("redis://"):].partition(":")
            subprocess.run(["redis-cli", "-h", host, "-p", port.rstrip("/"), "flushall"],
                           capture_output=True, timeout=10, check=True)


@atexit.register
def _kill_leftovers():
    for s in list(_live):
        s.kill()


def _die_with_parent():
    """In the child before exec: SIGKILL it if the test process dies (even by kill -9)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # not Linux: the atexit hook still covers normal exits
        pass


def sluice_bin():
    """Path of the binary under test: $SLUICE_BIN, else build/dev/sluice of this checkout."""
    path = os.environ.get("SLUICE_BIN") or DEFAULT_BIN
    if not os.path.isfile(path):
        raise unittest.SkipTest(f"sluice binary not found at {path} (set SLUICE_BIN)")
    return path


def clean_env(extra=None):
    """The parent's environment without any SLUICE_* setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    env.update(extra or {})
    return env


def run_sluice(args, env=None, timeout=20):
    """Runs the binary to completion (for --version, --help, bad configurations)."""
    return subprocess.run([sluice_bin(), *args], capture_output=True, text=True,
                          env=clean_env(env), timeout=timeout)


# The API and crash suites send hundreds of creates from one address; the design's per-client
# limits (1 create/s, burst 10) would turn most of them into 429s. Unless a test asks for the
# production limits (or sets a limit itself), the harness lifts them far out of the way. The
# overload scenarios set their own limits and always pass production_limits=True.
RELAXED_LIMITS = {
    "--ip-create-rate": "100000", "--ip-create-burst": "100000",
    "--ip-create-bytes-rate": "10000000000", "--ip-create-bytes-burst": "10000000000",
    "--global-create-rate": "100000", "--global-create-burst": "100000",
    "--global-create-bytes-rate": "10000000000", "--global-create-bytes-burst": "10000000000",
    "--ip-read-rate": "100000", "--ip-read-burst": "100000",
    "--delete-rate": "100000", "--delete-burst": "100000",
    # Every test client is 127.0.0.1, so the per-client shares would be the process's caps.
    "--create-slots-per-client": "1000000", "--max-connections-per-client": "10000000",
    # And every test client is in 127.0.0.0/24 (or one forwarded /48), so are the networks'.
    "--create-slots-per-network": "1000000", "--max-connections-per-network": "10000000",
}

# Background work from the start: a test that expires or orphans something waits for its sweep or
# its reaper, not for the minute background_start_delay gives a cold page cache. The delay's own
# test sets it.
PROMPT_BACKGROUND = {"--background-start-delay": "0s"}


class SluiceServer:
    """One sluice process (and its restarts) over one data dir."""

    def __init__(self, args=(), env=None, data_dir=None, port=0, keep_root=False,
                 data_dir_flag=True, production_limits=False, cache=None, patient=True,
                 in_memory_disk=False):
        self.args = list(args)
        if cache is not None:  # a RedisServer, or a URL such as redis://127.0.0.1:6379
            self.args += ["--cache", cache if isinstance(cache, str) else cache.url]
        defaults = {} if production_limits else dict(RELAXED_LIMITS)
        defaults.update(PROMPT_BACKGROUND)
        if patient:
            defaults.update(PATIENT_TIMEOUTS)
            defaults.update(SYNCHRONOUS_LOG)
        env_names = set((env or {}).keys())
        for flag, value in defaults.items():
            env_name = "SLUICE_" + flag[2:].upper().replace("-", "_")
            if flag not in self.args and env_name not in env_names:
                self.args += [flag, value]
        self.env = dict(env or {})
        # in_memory_disk: the data dir and log on tmpfs, where an fsync is never held up by
        # another process's writes (for tests that assert the design's timeouts on a busy disk).
        shm = "/dev/shm" if in_memory_disk and os.path.isdir("/dev/shm") else None
        self.root = tempfile.mkdtemp(prefix="sluice-test-", dir=shm)
        self.data_dir = data_dir or os.path.join(self.root, "data")
        self.log_path = os.path.join(self.root, "server.log")
        self.requested_port = port
        self.data_dir_flag = data_dir_flag  # False: the test names the data dir another way
        self.keep_root = keep_root or bool(os.environ.get("SLUICE_KEEP_TEST_DATA"))
        self.proc = None
        self.port = None
        self.admin_port = None  # the admin listener's, when it runs
        self.admin_token = ADMIN_TOKEN
        self.admin_token_file = os.path.join(self.root, "admin.token")
        with open(self.admin_token_file, "w") as f:
            f.write(ADMIN_TOKEN + "\n")
        self.base_url = None  # as the server announced it (its public URL when one is set)
        self.starts = 0
        self.last_returncode = None

    # ---- lifecycle -------------------------------------------------------------------------
    def command(self):
        cmd = [sluice_bin(), "serve", "--listen", f"127.0.0.1:{self.requested_port}"]
        if self.data_dir_flag and "--data-dir" not in self.args:
            cmd += ["--data-dir", self.data_dir]
        backends = [] if {"--meta", "--blob", "--cache"} & set(self.args) else BACKEND_ARGS
        # Never the default 127.0.0.1:8081: tests run side by side, each with its own listener.
        admin = []
        if "--admin-listen" not in self.args and "SLUICE_ADMIN_LISTEN" not in self.env:
            admin += ["--admin-listen", "127.0.0.1:0"]
        if "--admin-token-file" not in self.args and "SLUICE_ADMIN_TOKEN_FILE" not in self.env:
            admin += ["--admin-token-file", self.admin_token_file]
        return cmd + backends + admin + self.args

    def start(self):
        assert self.proc is None, "already running"
        if self.starts == 0:
            _flush_shared_cache()
        self.starts += 1
        with open(self.log_path, "ab") as log:
            shown = " ".join(_without_passwords(arg) for arg in self.command())
            log.write(f"===== start #{self.starts}: {shown}\n".encode())
            log.flush()
            offset = log.tell()
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=clean_env(self.env),
                                         preexec_fn=_die_with_parent)
            _live.add(self)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            text = self._log_from(offset)
            match = LISTENING.search(text)
            if match:
                self.base_url = match.group(1).rstrip(";,")
                admin = ADMIN_LISTENING.search(text)
                self.admin_port = int(admin.group(1)) if admin else None
                local = LISTENING_LOCAL.search(text)
                if local:
                    self.port = int(local.group(1))
                elif self.requested_port:
                    self.port = self.requested_port
                else:
                    self._abort(f"cannot tell the bound port from the listening line: {match.group(0)}")
                return self
            if self.proc.poll() is not None:
                self._abort(f"sluice exited with status {self.proc.returncode} before listening")
            if time.monotonic() > deadline:
                self._abort(f"sluice did not log 'listening on' within {START_TIMEOUT} s")
            time.sleep(0.02)

    def _abort(self, message):
        self.kill()
        raise AssertionError(f"{message}\n--- server log ---\n{self.log()}")

    def _log_from(self, offset):
        with open(self.log_path, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, expect_code=0, timeout=STOP_TIMEOUT):
        """SIGTERM, wait, and check the exit status (None: do not check). Returns the status."""
        if self.proc is None:
            return self.last_returncode
        proc = self.proc
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"sluice did not exit within {timeout} s of SIGTERM\n"
                                 f"--- server log ---\n{self.log()}")
        self.proc = None
        _live.discard(self)
        self.last_returncode = code
        self.check_no_sanitizer_report()
        if expect_code is not None and code != expect_code:
            raise AssertionError(f"sluice exited with status {code}, expected {expect_code}\n"
                                 f"--- server log ---\n{self.log()}")
        return code

    def check_no_sanitizer_report(self):
        report = SANITIZER_REPORT.search(self.log())
        if report:
            raise AssertionError(f"a sanitizer reported an error ({report.group(0)})\n"
                                 f"--- server log ---\n{self.log()}")

    def kill(self):
        """kill -9, as a crash or power cut would."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.last_returncode = self.proc.wait()
        self.proc = None
        _live.discard(self)

    def restart(self, expect_code=0):
        self.stop(expect_code=expect_code)
        return self.start()

    def cleanup(self):
        """Kills a process still running and removes the temporary folder."""
        self.kill()
        if not self.keep_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return "(no log)"

    # ---- HTTP ------------------------------------------------------------------------------
    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def connection(self, timeout=10):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, content_length="auto", timeout=10,
                conn=None):
        """Sends exactly the headers given (plus Host) and reads the whole response.

        content_length: "auto" sends Content-Length when there is a body; None never sends one;
        an int or str is sent as is, whatever the body.
        """
        own = conn is None
        conn = conn or self.connection(timeout)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            # A dict, or (name, value) pairs when a test repeats a header.
            pairs = list(headers.items() if isinstance(headers, dict) else headers or ())
            names = {k.lower() for k, _ in pairs}
            for k, v in pairs:
                conn.putheader(k, v)
            if body is not None and isinstance(body, str):
                body = body.encode("utf-8")
            if "content-length" not in names:
                if content_length == "auto":
                    if body is not None:
                        conn.putheader("Content-Length", str(len(body)))
                elif content_length is not None:
                    conn.putheader("Content-Length", str(content_length))
            conn.endheaders(body)
            res = conn.getresponse()
            data = res.read()
            return Response(res.status, res.reason, res.headers, data)
        finally:
            if own:
                conn.close()

    def admin_request(self, method, path, body=None, headers=None, token=ADMIN_TOKEN, **kw):
        """A request to the admin listener, with `token` as its bearer token (None: none)."""
        assert self.admin_port, "no admin listener"
        pairs = list(headers.items() if isinstance(headers, dict) else headers or ())
        if token is not None:
            pairs.append(("Authorization", f"Bearer {token}"))
        conn = http.client.HTTPConnection("127.0.0.1", self.admin_port, timeout=10)
        try:
            return self.request(method, path, body=body, headers=pairs, conn=conn, **kw)
        finally:
            conn.close()

    def get(self, path, headers=None, **kw):
        return self.request("GET", path, headers=headers, **kw)

    def head(self, path, headers=None, **kw):
        return self.request("HEAD", path, headers=headers, **kw)

    def create(self, body, ttl=None, headers=None, **kw):
        """POST /api/v1/pastes; returns the Response."""
        path = "/api/v1/pastes" + (f"?ttl={ttl}" if ttl else "")
        return self.request("POST", path, body=body, headers=headers, **kw)

    def create_ok(self, body, ttl=None, headers=None):
        """POST /api/v1/pastes that must answer 201; returns the JSON document."""
        res = self.create(body, ttl=ttl, headers=headers)
        if res.status != 201:
            raise AssertionError(f"create answered {res!r}")
        return res.json()

    def delete(self, paste_id, token=None, headers=None, **kw):
        h = dict(headers or {})
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        return self.request("DELETE", f"/api/v1/pastes/{paste_id}", headers=h, **kw)

    def raw(self):
        return RawConnection("127.0.0.1", self.port)

    def metrics_from(self, conn):
        """Parses /metrics fetched over an already open RawConnection (when no new one may open)."""
        conn.send_headers("GET", "/metrics", {})
        res = conn.read_response()
        if res.status != 200:
            raise AssertionError(f"/metrics answered {res!r}")
        return parse_metrics(res.text)

    def metrics(self):
        """Parses /metrics into {(name, frozenset(labels.items())): value}."""
        res = self.get("/metrics")
        if res.status != 200:
            raise AssertionError(f"/metrics answered {res!r}")
        return parse_metrics(res.text)

    # ---- data dir --------------------------------------------------------------------------
    @property
    def db_path(self):
        _embedded_only()
        return os.path.join(self.data_dir, "meta.db")

    @property
    def blobs_dir(self):
        _embedded_only()
        return os.path.join(self.data_dir, "blobs")

    def blob_path(self, paste_id):
        _embedded_only()
        return os.path.join(self.blobs_dir, paste_id[:2], paste_id)

    @property
    def bodies_db_path(self):
        """SQLite file of the bodies up to --inline-body-bytes: meta.db, beside their rows
        (docs/architecture.md, "Durability")."""
        return self.db_path

    @property
    def legacy_bodies_db_path(self):
        """bodies.db, where small bodies were kept before they moved into meta.db: still read."""
        _embedded_only()
        return os.path.join(self.data_dir, "bodies.db")

    def inline_bodies(self):
        """{id: (body, written_at)} of every body stored in a SQLite table: in meta.db's rows
        (migration 22, dated by the row's creation), its inline_bodies (found through their rows'
        body_n), its bodies (by id: from before, or written apart from a row) and a bodies.db's
        from before (safe while running: WAL)."""
        found = {}
        for path in (self.legacy_bodies_db_path, self.bodies_db_path):
            if not os.path.exists(path):
                continue
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
            try:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
                if "bodies" in tables:
                    found.update({r[0]: (bytes(r[1]), r[2]) for r in
                                  conn.execute("SELECT id, body, written_at FROM bodies")})
                if "inline_bodies" in tables:
                    found.update({r[0]: (decode_stored_body(r[1], r[3]), r[2]) for r in conn.execute(
                        "SELECT p.id, b.body, b.written_at, b.codec FROM pastes p "
                        "JOIN inline_bodies b ON b.n = p.body_n")})
                if "pastes" in tables and _has_column(conn, "pastes", "body"):
                    found.update({r[0]: (decode_stored_body(r[1], r[3]), r[2]) for r in conn.execute(
                        "SELECT id, body, created_at, body_codec FROM pastes "
                        "WHERE body IS NOT NULL")})
            finally:
                conn.close()
        return found

    def unreferenced_inline_bodies(self):
        """How many rows of meta.db's inline_bodies no paste points at: always 0, since a body
        and its row are written, and removed, in one transaction."""
        conn = sqlite3.connect(f"file:{self.bodies_db_path}?mode=ro", uri=True, timeout=10)
        try:
            return conn.execute("SELECT count(*) FROM inline_bodies WHERE n NOT IN "
                                "(SELECT body_n FROM pastes WHERE body_n IS NOT NULL)").fetchone()[0]
        finally:
            conn.close()

    def stored_body(self, paste_id):
        """The stored bytes of a paste's body, from a bodies table or its file; None if neither."""
        inline = self.inline_bodies().get(paste_id)
        if inline is not None:
            return inline[0]
        try:
            with open(self.blob_path(paste_id), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def has_body(self, paste_id):
        return self.stored_body(paste_id) is not None

    def stored_body_ids(self):
        """Ids of every stored body, in a bodies table or as a file in its final location."""
        files = {rel.partition(os.sep)[2] for rel in self.blob_files(include_tmp=False)}
        return files | set(self.inline_bodies())

    def rewrite_body(self, paste_id, data, written_at=None):
        """Replaces (or plants) a body where the server keeps it: its row in meta.db's bodies if it
        has one, else its file. Safe while the server runs (WAL), as damage on disk would be."""
        _embedded_only()
        inline = self.inline_bodies().get(paste_id)
        if inline is None and os.path.exists(self.blob_path(paste_id)):
            with open(self.blob_path(paste_id), "r+b") as f:
                f.truncate()
                f.write(data)
            if written_at is not None:
                os.utime(self.blob_path(paste_id), (written_at, written_at))
            return
        conn = sqlite3.connect(self.bodies_db_path, timeout=10)
        try:
            when = int(written_at if written_at is not None else
                       (inline[1] if inline else time.time()))
            # In its row (dated by the row, so `written_at` does not apply), or by its number.
            changed = conn.execute(
                "UPDATE pastes SET body = ?, body_codec = 0 WHERE id = ? AND body IS NOT NULL",
                (data, paste_id))
            if changed.rowcount == 0:
                changed = conn.execute(
                    "UPDATE inline_bodies SET body = ?, written_at = ?, codec = 0 "
                    "WHERE n = (SELECT body_n FROM pastes WHERE id = ?)", (data, when, paste_id))
            if changed.rowcount == 0:  # in bodies, or planted there: read by id
                conn.execute("INSERT OR REPLACE INTO bodies (id, written_at, body) "
                             "VALUES (?, ?, ?)", (paste_id, when, data))
            conn.commit()
        finally:
            conn.close()

    def query(self, sql, params=()):
        """Runs a read-only query on meta.db (safe while the server runs: WAL)."""
        _embedded_only()
        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=10)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def execute(self, sql, params=()):
        """Writes to meta.db; only while the server is stopped."""
        _embedded_only()
        assert not self.running(), "write meta.db only while the server is stopped"
        conn = sqlite3.connect(self.db_path, timeout=10)
        try:
            cur = conn.execute(sql, params)
            conn.commit()
            return cur.rowcount
        finally:
            conn.close()

    def blob_files(self, include_tmp=True):
        """Every regular file under blobs/, as paths relative to it."""
        _embedded_only()
        out = []
        for dirpath, _dirs, files in os.walk(self.blobs_dir):
            rel = os.path.relpath(dirpath, self.blobs_dir)
            if not include_tmp and rel.split(os.sep)[0] == ".tmp":
                continue
            out.extend(os.path.normpath(os.path.join(rel, f)) for f in files)
        return sorted(out)


class SluiceTestCase(unittest.TestCase):
    """Base class: servers made with `self.server()` are stopped after the test (exit status
    checked) and their logs printed if the test failed."""

    def setUp(self):
        super().setUp()
        self._servers = []

    def server(self, args=(), env=None, start=True, **kw):
        s = SluiceServer(args=args, env=env, **kw)
        self._servers.append(s)
        self.addCleanup(self._finish_server, s)
        if start:
            s.start()
        return s

    def _finish_server(self, s):
        try:
            if s.running():
                s.stop(expect_code=0)
            else:
                s.check_no_sanitizer_report()
        finally:
            s.logs_at_end = s.log()
            s.cleanup()

    def run(self, result=None):
        result = result if result is not None else self.defaultTestResult()
        before = len(result.failures) + len(result.errors)
        out = super().run(result)
        if len(result.failures) + len(result.errors) > before:
            for i, s in enumerate(getattr(self, "_servers", [])):
                text = getattr(s, "logs_at_end", None) or s.log()
                sys.stderr.write(f"\n----- {self.id()}: server {i} log -----\n{text}"
                                 f"----- end of server {i} log -----\n")
        return out

    # ---- assertions --------------------------------------------------------------------------
    def assertStatus(self, res, status):
        self.assertEqual(res.status, status, f"unexpected response: {res!r}")

    def assertJsonError(self, res, status, reason=None):
        """An error answer: the status, a JSON body with 'error' and 'reason'."""
        self.assertStatus(res, status)
        ctype = res.header("Content-Type") or ""
        self.assertTrue(ctype.startswith("application/json"), f"Content-Type {ctype!r}: {res!r}")
        doc = res.json()
        self.assertIsInstance(doc.get("error"), str, doc)
        self.assertTrue(doc["error"], doc)
        self.assertIsInstance(doc.get("reason"), str, doc)
        if reason is not None:
            self.assertEqual(doc["reason"], reason, doc)
        return doc

    @classmethod
    def start_class_server(cls, args=()):
        """One server shared by the class's tests: started now, stopped (it must exit 0) and
        removed after the last test, even when one fails."""
        server = SluiceServer(args=list(args))
        cls.addClassCleanup(server.cleanup)
        server.start()
        cls.addClassCleanup(server.stop, expect_code=0)
        return server


REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
REDIS_SCRIPT = os.path.join(REPO, "scripts", "testenv", "redis.sh")


class RedisServer:
    """A throwaway redis-server (scripts/testenv/redis.sh) on a free port, in its own folder.
    Starting fails the test, never skips it, when redis-server is missing."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="sluice-redis-")
        self.port = free_port()
        _live.add(self)

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def start(self):
        done = subprocess.run(["bash", REDIS_SCRIPT, "start", self.root, str(self.port)],
                              capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise AssertionError(f"redis-server did not start: {done.stderr}{done.stdout}")
        return self

    def pid(self):
        try:
            with open(os.path.join(self.root, "redis.pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def kill(self):
        """SIGKILL, as a crash: nothing is flushed, clients see the connection drop."""
        pid = self.pid()
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        try:
            os.remove(os.path.join(self.root, "redis.pid"))
        except OSError:
            pass

    def cli(self, *args):
        done = subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True,
                              text=True, timeout=10)
        return done.stdout.strip()

    def stop(self):
        subprocess.run(["bash", REDIS_SCRIPT, "stop", self.root], capture_output=True, timeout=60)
        _live.discard(self)
        shutil.rmtree(self.root, ignore_errors=True)


def wait_until(predicate, timeout=10.0, interval=0.05, message="condition"):
    """Polls `predicate` until it is truthy; returns its value or fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} not reached within {timeout} s")
        time.sleep(interval)


def with_write_pool_warm(s):
    """`s` once its PostgreSQL write pool holds a connection, so that its first create waits for
    no connect (the store's insert timeout is then about the insert)."""
    wait_until(lambda: metric(s.metrics(), "sluice_meta_pool_connections", pool="write") >= 1,
               message="write pool warm")
    return s
