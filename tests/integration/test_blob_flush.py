"""How large bodies are made durable (src/store/fs/fs_blob_store.cc, docs/architecture.md,
"Durability"): the server runs under strace, creates pastes larger than inline_body_bytes, and the
trace must show the file protocol flushing its own files and folders only, in order, and never the
whole filesystem with syncfs(2), which would make every create wait for a neighbour's dirty pages.

For each acknowledged paste: fdatasync of its temp file, then the rename into blobs/<shard>/<id>,
then an fsync of blobs/<shard>; and an fsync of blobs itself after a shard folder was created.
Skipped where strace is missing or cannot trace (no ptrace in the container).

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_blob_flush
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import unittest

from sluice_harness import SluiceServer, SluiceTestCase

BODY_BYTES = 100 * 1024  # over the default inline_body_bytes (64 KiB): a file of its own
TRACED = "syncfs,sync,fdatasync,fsync,rename,renameat,renameat2"
# "1234  fsync(7</path/to/dir>) = 0" or "1234  fsync(7</path/to/dir> <unfinished ...>"
CALL = re.compile(r"^\d+\s+(\w+)\((.*)")
FD_PATH = re.compile(r"^\d+<([^>]*)>")


def strace_usable():
    if shutil.which("strace") is None:
        return False
    probe = subprocess.run(["strace", "-qq", "-e", "trace=none", "true"], capture_output=True,
                           timeout=30)
    return probe.returncode == 0


class StracedServer(SluiceServer):
    """A sluice process run under `strace -f`, its flushes and renames written to trace_path."""

    def __init__(self, trace_path, **kw):
        super().__init__(**kw)
        self.trace_path = trace_path

    def command(self):
        return ["strace", "-f", "-qq", "-y", "-e", "signal=none", "-e", f"trace={TRACED}",
                "-o", self.trace_path] + super().command()

    def stop(self, *args, **kw):
        """SIGTERM to sluice itself (not strace), so it exits as it would untraced, and strace
        with its status; then the harness's checks."""
        if self.proc is not None and self.proc.poll() is None:
            children = f"/proc/{self.proc.pid}/task/{self.proc.pid}/children"
            with open(children) as f:
                pids = [int(p) for p in f.read().split()]
            assert len(pids) == 1, f"expected one traced child, found {pids}"
            os.kill(pids[0], signal.SIGTERM)
            self.proc.wait(timeout=30)
        return super().stop(*args, **kw)


class LargeBodyFlushTest(SluiceTestCase):

    def setUp(self):
        super().setUp()
        if not strace_usable():
            self.skipTest("strace is missing or cannot trace here")
        self.trace_dir = tempfile.mkdtemp(prefix="sluice-strace-")
        self.addCleanup(shutil.rmtree, self.trace_dir, ignore_errors=True)

    def test_large_bodies_flush_their_own_files_and_folders_never_syncfs(self):
        trace_path = os.path.join(self.trace_dir, "trace")
        s = StracedServer(trace_path)
        blobs = os.path.realpath(s.blobs_dir)  # skips unless the store is the embedded one
        self._servers.append(s)
        self.addCleanup(self._finish_server, s)
        s.start()

        bodies = {}
        lock = threading.Lock()

        def create(tag):
            body = (f"[{tag}]" + "large paste line\n" * (BODY_BYTES // 17)).encode()
            paste_id = s.create_ok(body)["id"]
            with lock:
                bodies[paste_id] = body

        create("first")  # alone: one batch, one new shard folder at least
        # Then several at once, so that a batch is likely to hold more than one body.
        threads = [threading.Thread(target=create, args=(f"t{i}",)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(len(bodies), 9)
        for paste_id, body in bodies.items():
            res = s.request("GET", f"/raw/{paste_id}")
            self.assertEqual(res.status, 200)
            self.assertEqual(res.body, body, f"{paste_id} read back differs")
            with open(s.blob_path(paste_id), "rb") as f:
                self.assertEqual(f.read(), body, f"{paste_id}: the stored file differs")
        s.stop(expect_code=0)

        calls = []  # (name, first argument or resolved fd path, whole line)
        with open(trace_path) as f:
            for line in f:
                m = CALL.match(line)
                if not m:
                    continue  # "<... fsync resumed>" halves and exit lines
                name, rest = m.groups()
                fd = FD_PATH.match(rest)
                calls.append((name, fd.group(1) if fd else rest, line.rstrip("\n")))
        names = [c[0] for c in calls]
        self.assertNotIn("syncfs", names, "a create flushed the whole filesystem")
        self.assertNotIn("sync", names, "a create flushed every filesystem")

        def first_index(pred, start=0):
            for i in range(start, len(calls)):
                if pred(calls[i]):
                    return i
            return None

        for paste_id in bodies:
            shard = os.path.join(blobs, paste_id[:2])
            flushed = first_index(lambda c: c[0] == "fdatasync" and
                                  c[1].startswith(f"{blobs}/.tmp/{paste_id}."))
            self.assertIsNotNone(flushed, f"{paste_id}: its temp file was never fdatasync'ed")
            renamed = first_index(lambda c: c[0].startswith("rename") and
                                  f'/{paste_id[:2]}/{paste_id}"' in c[1])
            self.assertIsNotNone(renamed, f"{paste_id}: no rename into its shard folder")
            self.assertLess(flushed, renamed, f"{paste_id}: renamed before its data was flushed")
            dir_flushed = first_index(lambda c: c[0] == "fsync" and c[1] == shard, renamed)
            self.assertIsNotNone(dir_flushed, f"{paste_id}: {shard} not fsync'ed after the rename")
        # The data dir was empty: the first paste's shard folder was new, and its entry in blobs
        # was flushed after it was made and before the first create was answered.
        first_rename = first_index(lambda c: c[0].startswith("rename") and "/.tmp/" in c[1])
        self.assertIsNotNone(
            first_index(lambda c: c[0] == "fsync" and c[1] == blobs, first_rename),
            "blobs/ never fsync'ed after its first shard folder was created")


if __name__ == "__main__":
    unittest.main()
