"""Crash test: kill -9 in the middle of a stream of creates and deletes, restart, and check that
nothing acknowledged was lost, every acknowledged delete stayed deleted, nothing partial is ever
served or left in a final blob location, and that the bodies a crash orphaned are reaped.

Environment:
  SLUICE_CRASH_ITERATIONS  kill/restart cycles (default 5; `make chaos` runs more)
  SLUICE_CRASH_SEED        random seed, printed by every run so a failure can be replayed
  SLUICE_CRASH_THREADS     client threads (default 4)

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_crash
"""

import hashlib
import http.client
import json
import math
import os
import random
import sys
import threading
import time
import unittest

from sluice_harness import SluiceTestCase, wait_until

MAX_BODY = 200_000
# After each restart but the last, the older pastes and deletes read back through the API are a
# sample of this many each; the last restart reads back all of them. Reading everything after
# every restart made iteration i cost the creates of all i iterations: 50 cycles took quadratically
# longer, the test's own reads and not the server (whose start-up and reads hold as the store
# grows: bench/results/growth.md).
OLDER_SAMPLE = 300
# Characters of 1 to 4 UTF-8 bytes; newlines and spaces so the text looks like text.
ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" + " " * 12 + "\n" * 4 +
    ".,;:!?()[]{}<>\"'&=+-*/\\|#@$%^~`_\t" + "éüßñøåçÀÖ" + "αβγδλπΩЖжщЯ" + "אבגعربي" +
    "日本語文字中文漢字한국어" + "€™…•" + "🐍🚀💾🔥😀🦀")


def digest(body):
    return hashlib.sha256(body).digest()


def is_continuation(byte):
    return byte & 0xC0 == 0x80


class BodyMaker:
    """Unique random UTF-8 bodies of log-uniform size, 1 B to 200 KB. Half of them repeat a short
    stretch of text, as pastes do, so that both forms a small body is stored in (as received, and
    compressed: include/sluice/store/body_codec.h) go through the kills."""

    def __init__(self, rng):
        self.rng = rng
        self.pool = "".join(rng.choices(ALPHABET, k=MAX_BODY)).encode("utf-8")
        self.lock = threading.Lock()

    def make(self, tag):
        with self.lock:
            size = int(math.exp(self.rng.uniform(0, math.log(MAX_BODY))))
            start = self.rng.randrange(0, len(self.pool) - MAX_BODY)
            short = "".join(self.rng.choices(ALPHABET, k=size)).encode("utf-8")[:size]
            stretch = self.rng.randrange(16, 400) if self.rng.random() < 0.5 else 0
        marker = f"[{tag}]".encode()
        if size <= 2 * len(marker):
            # Too small to carry the tag: random text (may repeat another body; that is harmless).
            body = short
        else:
            # The tag at both ends: a truncated copy of this body is never equal to a sent body.
            end = start + size - 2 * len(marker)
            while is_continuation(self.pool[start]):
                start += 1
            while end < len(self.pool) and is_continuation(self.pool[end]):
                end -= 1
            if stretch:
                text = self.pool[start:start + stretch] * (size // stretch + 1)
                body = marker + text[:end - start] + marker
            else:
                body = marker + self.pool[start:end] + marker
        # A short body cut mid-character loses that character; never empty.
        return body.decode("utf-8", "ignore").encode("utf-8") or b"x"


class CreateStream:
    """Client threads posting creates back to back until the server dies or `stop` is set."""

    def __init__(self, port, threads, maker, iteration, sent):
        self.port = port
        self.maker = maker
        self.iteration = iteration
        self.sent = sent  # digests of every body whose create was attempted (shared, locked)
        self.lock = threading.Lock()
        self.acked = {}  # id -> body, for every 201
        self.tokens = {}  # id -> delete token
        self.unanswered = 0  # requests that got no response (the kill came first)
        self.statuses = {}
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True)
                        for i in range(threads)]

    def start(self):
        for t in self.threads:
            t.start()

    def join(self, timeout=60):
        self.stop.set()
        for t in self.threads:
            t.join(timeout)
            if t.is_alive():
                raise AssertionError("a client thread did not finish")

    def acks(self):
        with self.lock:
            return len(self.acked)

    def run(self, thread_no):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        seq = 0
        try:
            while not self.stop.is_set():
                seq += 1
                body = self.maker.make(f"{self.iteration}.{thread_no}.{seq}")
                with self.lock:
                    self.sent.add(digest(body))
                try:
                    conn.putrequest("POST", "/api/v1/pastes", skip_accept_encoding=True)
                    conn.putheader("Content-Length", str(len(body)))
                    conn.endheaders(body)
                    res = conn.getresponse()
                    data = res.read()
                except (OSError, http.client.HTTPException):
                    with self.lock:
                        self.unanswered += 1
                    return  # the server is gone
                with self.lock:
                    self.statuses[res.status] = self.statuses.get(res.status, 0) + 1
                    if res.status == 201:
                        created = json.loads(data)
                        self.acked[created["id"]] = body
                        self.tokens[created["id"]] = created["delete_token"]
                if res.will_close:
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        finally:
            conn.close()


class DeleteStream:
    """One client thread deleting acknowledged pastes, oldest first, until the server dies."""

    def __init__(self, port, candidates, tokens):
        self.port = port
        self.candidates = list(candidates)
        self.tokens = tokens
        self.deleted = set()  # 204s: these must stay deleted
        self.unanswered = set()  # sent, no answer: either state is allowed, but never partial
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            for paste_id in self.candidates:
                if self.stop.is_set():
                    return
                try:
                    conn.request("DELETE", f"/api/v1/pastes/{paste_id}",
                                 headers={"Authorization": f"Bearer {self.tokens[paste_id]}"})
                    res = conn.getresponse()
                    res.read()
                except (OSError, http.client.HTTPException):
                    self.unanswered.add(paste_id)
                    return
                if res.status == 204:
                    self.deleted.add(paste_id)
                time.sleep(0.005)  # a delete stream, not a delete flood
        finally:
            conn.close()


class CrashTest(SluiceTestCase):

    def test_kill_9_mid_stream_loses_no_acknowledged_paste_and_serves_no_partial_body(self):
        iterations = int(os.environ.get("SLUICE_CRASH_ITERATIONS", "5"))
        threads = int(os.environ.get("SLUICE_CRASH_THREADS", "4"))
        seed = int(os.environ.get("SLUICE_CRASH_SEED", str(random.SystemRandom().randrange(2**32))))
        print(f"\ncrash test: seed {seed}, {iterations} iterations, {threads} client threads",
              file=sys.stderr)
        rng = random.Random(seed)
        maker = BodyMaker(rng)
        # Orphans older than 3 s (above the 2 s create budget, so no create in flight is reaped).
        s = self.server(["--sweep-interval", "200ms", "--reap-interval", "200ms",
                         "--orphan-age-floor", "3s"])
        acked = {}  # every id ever acknowledged -> its body
        tokens = {}
        deleted = set()  # every acknowledged delete
        maybe_deleted = set()  # deletes the kill left unanswered
        sent = set()  # digests of every body ever sent
        totals = {"unanswered": 0, "in_db_not_acked": set(), "orphan_files": set()}

        for it in range(1, iterations + 1):
            stream = CreateStream(s.port, threads, maker, it, sent)
            # Half of what earlier iterations created, deleted while the creates run.
            live = sorted(set(acked) - deleted - maybe_deleted)
            deleter = DeleteStream(s.port, rng.sample(live, len(live) // 2), tokens)
            stream.start()
            deleter.thread.start()
            try:
                wait_until(lambda: stream.acks() >= 10, timeout=30,
                           message=f"iteration {it}: 10 acknowledged creates")
                time.sleep(rng.uniform(0.0, 1.0))
            finally:
                s.kill()
                stream.join()
                deleter.stop.set()
                deleter.thread.join(30)
            deleted |= deleter.deleted
            maybe_deleted |= deleter.unanswered
            tokens.update(stream.tokens)
            overlap = set(stream.acked) & set(acked)
            self.assertEqual(overlap, set(), "an id was handed out twice")
            acked.update(stream.acked)
            totals["unanswered"] += stream.unanswered
            print(f"iteration {it}: {len(stream.acked)} acknowledged, {stream.unanswered} "
                  f"unanswered at the kill, statuses {dict(sorted(stream.statuses.items()))}; "
                  f"{len(deleter.deleted)} deletes acknowledged, {len(deleter.unanswered)} "
                  f"unanswered", file=sys.stderr)

            s.start()
            began = time.monotonic()
            older = set(acked) - set(stream.acked)
            older_deleted = deleted - deleter.deleted
            if it < iterations:
                older = set(rng.sample(sorted(older), min(OLDER_SAMPLE, len(older))))
                older_deleted = set(rng.sample(sorted(older_deleted),
                                               min(OLDER_SAMPLE, len(older_deleted))))
            check = {i: acked[i] for i in older | set(stream.acked)}
            self.check_data_dir(s, check, older_deleted | deleter.deleted, acked, deleted,
                                maybe_deleted, sent, totals, it)
            print(f"iteration {it}: checked {len(check)} pastes and "
                  f"{len(older_deleted | deleter.deleted)} deletes in "
                  f"{time.monotonic() - began:.1f} s", file=sys.stderr)

        # The reaper and the outbox finish what the crashes left: every stored body (a file in a
        # final location or a row of meta.db's bodies) belongs to a live row (orphans reaped, deleted
        # pastes' bodies removed).
        def stray_bodies():
            live_rows = {r[0] for r in s.query("SELECT id FROM pastes WHERE deleted = 0")}
            return sorted(s.stored_body_ids() - live_rows)
        # Plus orphans planted as a crash between PUT and insert leaves them, an hour old, so the
        # reaper provably has work even when the kills happened to leave none: files, and rows of
        # meta.db's bodies (where bodies up to --inline-body-bytes live, beside their rows).
        old = time.time() - 3600
        for n in range(3):
            orphan_id = f"rphn{n}{rng.randrange(10**7):07d}"
            path = s.blob_path(orphan_id)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(b"a body whose row never committed")
            os.utime(path, (old, old))
        for n in range(2):
            s.rewrite_body(f"rphi{n}{rng.randrange(10**7):07d}", b"an inline orphan", old)
        orphans_at_end = len(stray_bodies())
        wait_until(lambda: not stray_bodies(), timeout=60,
                   message="orphaned and deleted bodies reaped")
        for paste_id in set(acked) - deleted - maybe_deleted:
            self.assertTrue(s.has_body(paste_id),
                            f"the reaper removed the body of live paste {paste_id}")

        # Both forms went through the kills: the test covers the compressed one too.
        forms = dict(s.query("SELECT body_codec, count(*) FROM pastes WHERE body IS NOT NULL "
                             "GROUP BY body_codec"))
        self.assertGreater(forms.get(0, 0), 0, "no body stored as received")
        self.assertGreater(forms.get(1, 0), 0, "no body stored compressed")

        print(f"crash test: {iterations} iterations, {len(acked) - len(deleted)} acknowledged "
              f"pastes verified byte-identical, 0 lost; {len(deleted)} acknowledged deletes "
              f"verified gone, 0 resurrected; {orphans_at_end} stray bodies after the last restart, "
              f"all reaped; {totals['unanswered']} creates unanswered at a kill, "
              f"{len(totals['in_db_not_acked'])} of them found complete in the store afterwards, "
              f"{len(totals['orphan_files'])} complete orphan bodies (reaper's work); "
              f"{forms.get(1, 0)} of the small bodies left stored compressed, {forms.get(0, 0)} as "
              f"received; seed {seed}",
              file=sys.stderr)

    def check_data_dir(self, s, check, check_deleted, acked, deleted, maybe_deleted, sent, totals,
                       it):
        """Reads back `check` (id -> body, acknowledged pastes) and `check_deleted` (acknowledged
        deletes); `acked` and `deleted` are every acknowledged paste and delete."""
        where = f"after restart {it}"
        # Start-up drops whatever a crash left half-written.
        tmp = os.path.join(s.blobs_dir, ".tmp")
        self.assertEqual(os.listdir(tmp) if os.path.isdir(tmp) else [], [], where)

        conn = s.connection(timeout=30)
        try:
            def read(paste_id):
                for _attempt in range(10):
                    res = s.request("GET", f"/raw/{paste_id}", conn=conn)
                    if res.status != 503:  # slow store: not an answer about the paste
                        return res
                    time.sleep(0.2)
                return res

            # Every acknowledged paste, from every iteration so far, byte for byte; a delete the
            # kill left unanswered may have happened or not, but never half.
            lost = []
            for paste_id, body in check.items():
                if paste_id in deleted:
                    continue
                res = read(paste_id)
                if paste_id in maybe_deleted and res.status == 404:
                    continue
                if res.status != 200 or res.body != body:
                    lost.append((paste_id, res.status, len(body), len(res.body)))
            self.assertEqual(lost, [], f"{where}: acknowledged pastes lost or altered "
                                       f"(id, status, sent bytes, got bytes)")

            # Every acknowledged delete stays deleted.
            resurrected = [(paste_id, res.status) for paste_id in sorted(check_deleted)
                           if (res := read(paste_id)).status != 404]
            self.assertEqual(resurrected, [], f"{where}: acknowledged deletes serving again")

            # Every live row the server knows serves a complete body that was sent.
            rows = s.query("SELECT id FROM pastes WHERE deleted = 0 AND expires_at > ?",
                           (int(time.time()) + 60,))
            bad = []
            for (paste_id,) in rows:
                if paste_id in acked:
                    continue
                totals["in_db_not_acked"].add(paste_id)
                res = read(paste_id)
                if res.status != 200 or digest(res.body) not in sent:
                    bad.append((paste_id, res.status, len(res.body)))
            self.assertEqual(bad, [], f"{where}: rows serving a partial or unknown body "
                                      f"(id, status, bytes)")
        finally:
            conn.close()

        # Files in final blob locations are complete bodies or absent.
        row_ids = {r[0] for r in s.query("SELECT id FROM pastes")}
        partial = []
        for rel in s.blob_files(include_tmp=False):
            shard, _, name = rel.partition(os.sep)
            self.assertEqual(shard, name[:2], f"{where}: {rel} is in the wrong shard")
            try:
                with open(os.path.join(s.blobs_dir, rel), "rb") as f:
                    content = f.read()
            except FileNotFoundError:
                # Listed, then removed by the running server's outbox or orphan reaper: gone is
                # not partial. A live paste's file is checked for separately below.
                continue
            if digest(content) not in sent:
                partial.append((rel, len(content)))
            elif name not in row_ids:
                totals["orphan_files"].add(name)
        # Rows of the bodies table likewise: a whole body that was sent, or none.
        for paste_id, (content, _written_at) in s.inline_bodies().items():
            if digest(content) not in sent:
                partial.append((f"bodies:{paste_id}", len(content)))
            elif paste_id not in row_ids:
                totals["orphan_files"].add(paste_id)
        self.assertEqual(partial, [], f"{where}: incomplete bodies in final blob locations")
        self.assertEqual(s.unreferenced_inline_bodies(), 0,
                         f"{where}: inline bodies that no row points at")
        for paste_id in set(acked) - deleted - maybe_deleted:
            self.assertTrue(s.has_body(paste_id), f"{where}: no stored body for {paste_id}")


if __name__ == "__main__":
    unittest.main()
