"""`sluice admin migrate-store` (docs/scale-out.md, "Outgrowing one box"): pastes of every kind made
through a server on a data dir move to PostgreSQL and S3 (s3rver) or PostgreSQL and shared files,
and read back byte-identical with the same metadata through a server started on the new backends;
expired and deleted pastes stay behind; abuse notices move open and closed, and go on closing on
the new store; a copy killed with SIGKILL resumes with nothing lost and nothing twice; a body
damaged on disk is named, not copied; a dry run writes nothing.

PostgreSQL and s3rver are started by this suite (scripts/testenv), in temporary folders on free
ports; a missing one is a failure.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_migrate_store
"""

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import unittest

from sluice_harness import SluiceTestCase, clean_env, run_sluice, sluice_bin, wait_until
from test_postgres import PostgresServer

HERE = os.path.dirname(os.path.abspath(__file__))
S3RVER = os.path.normpath(os.path.join(HERE, "..", "..", "scripts", "testenv", "s3rver.sh"))
BUCKET = "sluice-migrate"
S3_ENV = {"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER",
          "AWS_REGION": "us-east-1"}
JSON = {"Content-Type": "application/json"}
RELAXED = ["--insert-timeout", "2s", "--meta-get-timeout", "2s", "--read-budget", "5s"]
PLAIN = 200
# Over inline_body_bytes (64 KiB): these bodies are files under the data dir, not rows of meta.db.
LARGE = 3


class S3rver:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sluice-s3rver-")
        self.endpoint = subprocess.run([S3RVER, "start", self.dir, "0", BUCKET], check=True,
                                       capture_output=True, text=True, timeout=120).stdout.strip()

    def stop(self):
        subprocess.run([S3RVER, "stop", self.dir], capture_output=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)


class MigrateStoreTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = PostgresServer.for_class(cls)
        cls.databases = 0

    def database(self):
        """A fresh PostgreSQL database for one test: its URL."""
        type(self).databases += 1
        name = f"migrate{self.databases}"
        self.pg.sql(f"CREATE DATABASE {name}")
        return self.pg.url.rsplit("/", 1)[0] + "/" + name

    def settings(self, name, **values):
        path = os.path.join(self.root, name + ".toml")
        with open(path, "w") as f:
            for key, value in values.items():
                f.write(f"{key} = {json.dumps(value)}\n")
        return path

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="sluice-migrate-")
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)

    # ---- the source: pastes of every kind ----------------------------------------------------
    def source(self, plain=PLAIN):
        """A server on a data dir with `plain` small pastes, large ones, burn and counted ones
        (some views spent), encrypted, forks, reported, withheld, taken down, deleted, expired,
        and a block. Returns (server, {id: metadata doc}, live ids, dead ids)."""
        s = self.server(["--trusted-proxy", "127.0.0.1", "--report-hide-threshold", "3",
                         "--report-burst", "100", "--report-global-burst", "1000"])
        made = []
        for i in range(plain):
            doc = s.create_ok(f"paste {i}\n" + "x" * (i * 37 % 3000))
            made.append(doc["id"])
            if i == 1:
                self.token = (doc["id"], doc["delete_token"])
        for i in range(LARGE):
            made.append(s.create_ok(bytes([65 + i]) * 100_000 + b"\nend")["id"])
        burn = s.request("POST", "/api/v1/pastes?burn=1", body=b"read once").json()["id"]
        counted = s.request("POST", "/api/v1/pastes?max_views=5", body=b"five readers").json()["id"]
        for _ in range(2):
            self.assertStatus(s.request("POST", f"/api/v1/pastes/{counted}/claim", body=b""), 200)
        envelope = ('{"v":1,"alg":"A256GCM","iv":"1mkFfKWJEgyIfyhC","z":"none","kdf":null,'
                    '"ct":"MAwUYivQ86SLN-tmr0X-FCkVWbwNsPRvvO_eETo"}')
        sealed = s.request("POST", "/api/v1/pastes?encrypted=1", body=envelope).json()["id"]
        fork = s.request("POST", f"/api/v1/pastes?parent={made[0]}", body=b"paste 0, forked")
        self.assertStatus(fork, 201)
        fork = fork.json()["id"]
        reported = s.create_ok("reported once")["id"]
        self.report(s, reported, "198.19.1.1")
        withheld = s.create_ok("withheld by three networks")["id"]
        for n in range(3):
            self.report(s, withheld, f"198.19.{n + 10}.1")
        self.assertStatus(s.get(f"/raw/{withheld}"), 451)
        taken = s.create_ok("taken down")["id"]
        self.assertStatus(s.admin_request("POST", f"/admin/pastes/{taken}/takedown",
                                          body='{"reason": "notice"}',
                                          headers={"Content-Type": "application/json"}), 200)
        block = s.admin_request("POST", "/admin/blocks",
                                body='{"prefix": "203.0.113.0/24", "duration": "1d", '
                                     '"reason": "spam run"}',
                                headers={"Content-Type": "application/json"})
        self.assertIn(block.status, (200, 201), block)
        gone = s.create_ok("deleted by its owner")
        self.assertStatus(s.delete(gone["id"], token=gone["delete_token"]), 204)
        expired = [s.create_ok(f"expired {i}", ttl="10m")["id"] for i in range(5)]
        live = made + [burn, counted, sealed, fork, reported, withheld, taken]
        docs = {i: self.meta_doc(s, i) for i in live}
        self.kinds = {"burn": burn, "counted": counted, "fork": fork, "reported": reported,
                      "withheld": withheld, "taken": taken, "first": made[0]}
        s.stop()
        with sqlite3.connect(s.db_path) as db:
            db.executemany("UPDATE pastes SET expires_at = 0 WHERE id = ?", [(i,) for i in expired])
        s.start()
        return s, docs, live, [gone["id"], *expired]

    def report(self, s, paste_id, client):
        res = s.request("POST", f"/api/v1/pastes/{paste_id}/report",
                        body=json.dumps({"reason": "spam", "note": f"from {client}"}),
                        headers={"Content-Type": "application/json", "X-Forwarded-For": client})
        self.assertIn(res.status, (200, 201, 202), res)

    def meta_doc(self, s, paste_id):
        """The paste's metadata as an operator sees it (the admin view: withheld ones too, with
        the text) and as the API shows it (views left, parent), without what names the server."""
        res = s.admin_request("GET", f"/admin/pastes/{paste_id}")
        self.assertStatus(res, 200)
        doc = res.json()
        if doc["moderation"] == "taken_down":
            # Its body's removal is owed (the outbox), done sooner or later on either side.
            doc.pop("content")
        public = s.get(f"/api/v1/pastes/{paste_id}")
        doc["public_status"] = public.status
        if public.status == 200:
            doc.update({"public_" + k: v for k, v in public.json().items() if "url" not in k})
        return doc

    def migrate(self, src, dst, *extra, env=None, timeout=300):
        res = run_sluice(["admin", "migrate-store", "--from", src, "--to", dst, *extra],
                         env=dict(S3_ENV, **(env or {})), timeout=timeout)
        lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
        summary = json.loads(lines[-1]) if lines else None
        return res, summary

    def assertReadsBack(self, source_docs, live, dead, target):
        for paste_id in live:
            self.assertEqual(self.meta_doc(target, paste_id), source_docs[paste_id], paste_id)
        for paste_id in dead:
            self.assertStatus(target.get(f"/raw/{paste_id}"), 404)

    # ---- the tests ----------------------------------------------------------------------------
    def test_every_kind_of_paste_moves_to_postgres_and_s3_and_reads_back_identically(self):
        s3 = S3rver()
        self.addCleanup(s3.stop)
        src, docs, live, dead = self.source()
        raw = {i: src.get(f"/raw/{i}").body for i in live if src.get(f"/raw/{i}").status == 200}
        url = self.database()
        from_file = self.settings("from", data_dir=src.data_dir)
        to_file = self.settings("to", data_dir=os.path.join(self.root, "target"), meta=url,
                                blob=f"s3://{BUCKET}", s3_endpoint=s3.endpoint)
        # While the source still serves: its SQLite store is read beside the server (WAL).
        res, summary = self.migrate(from_file, to_file, "--rate", "0")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertEqual(summary["moved"], len(live), summary)
        self.assertEqual(summary["differences"], 0, summary)
        self.assertEqual(summary["blocked_contents_added"], 1, summary)
        # The deleted one, and the expired ones the source's sweep has not purged yet.
        self.assertEqual(summary["not_moved_deleted"], 1, summary)
        self.assertLessEqual(summary["not_moved_expired"], 5, summary)
        self.assertIn("pastes/s", res.stderr)
        # A second run finds everything there: nothing is copied twice.
        again, summary = self.migrate(from_file, to_file, "--rate", "0")
        self.assertEqual(again.returncode, 0, again.stdout + again.stderr)
        self.assertEqual((summary["moved"], summary["already_there"]), (0, len(live)), summary)
        transparency = src.get("/transparency?format=json").json()["months"]
        src.stop()
        target = self.server(["--meta", url, "--blob", f"s3://{BUCKET}", "--s3-endpoint",
                              s3.endpoint, *RELAXED], env=S3_ENV)
        # The transparency report moved with its counters, once however many runs: the target's
        # own counts of what it was given (blocks, the digest) are not added to them.
        self.assertEqual(target.get("/transparency?format=json").json()["months"], transparency)
        self.assertReadsBack(docs, live, dead, target)
        for paste_id, body in raw.items():
            self.assertEqual(target.get(f"/raw/{paste_id}").body, body, paste_id)
        self.assertStatus(target.get(f"/raw/{self.kinds['withheld']}"), 451)
        self.assertStatus(target.get(f"/raw/{self.kinds['taken']}"), 451)
        # The takedown's digest moved with the content blocklist: the same text stays refused.
        self.assertJsonError(target.create("taken down"), 451, "blocked_content")
        reports = target.admin_request("GET", "/admin/reports").json()["pastes"]
        self.assertEqual(sorted(p["id"] for p in reports),
                         sorted([self.kinds["reported"], self.kinds["withheld"]]), reports)
        self.assertEqual(sorted(p["reports"] for p in reports), [1, 3], reports)
        # Views spent at the source stay spent: 5 - 2 claimed, then 3 more and no more.
        counted = self.kinds["counted"]
        for _ in range(3):
            self.assertStatus(target.request("POST", f"/api/v1/pastes/{counted}/claim", body=b""),
                              200)
        self.assertStatus(target.request("POST", f"/api/v1/pastes/{counted}/claim", body=b""), 404)
        # The delete token's hash moved with its paste.
        paste_id, token = self.token
        self.assertStatus(target.delete(paste_id, token="not-the-token"), 404)
        self.assertStatus(target.delete(paste_id, token=token), 204)
        self.assertIn("203.0.113.0/24", self.sql(url, "SELECT prefix FROM blocks"))

    def sql(self, url, query):
        return subprocess.run(["psql", url, "-tAc", query], check=True, capture_output=True,
                              text=True, timeout=30).stdout.strip()

    def test_a_copy_killed_midway_resumes_with_nothing_lost_and_nothing_twice(self):
        src, docs, live, dead = self.source()
        src.stop()
        url = self.database()
        shared = os.path.join(self.root, "shared")
        from_file = self.settings("from", data_dir=src.data_dir)
        to_file = self.settings("to", data_dir=shared, meta=url)
        cmd = [sluice_bin(), "admin", "migrate-store", "--from", from_file, "--to", to_file,
               "--rate", "20", "--page", "10"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=clean_env(None))
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        state = to_file + ".migrate-state"

        def moved():
            try:
                with open(state) as f:
                    return json.load(f)["moved"]
            except (OSError, ValueError):
                return 0
        wait_until(lambda: moved() >= 30 or proc.poll() is not None, timeout=60,
                   message="a few pages copied")
        if proc.poll() is not None:
            self.fail(f"the copy ended before it could be killed: {proc.communicate()}")
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        # Paced at 20 pastes/s, the copy of 210 cannot be near its end after 30.
        before = int(self.sql(url, "SELECT count(*) FROM pastes"))
        self.assertLess(before, len(live), "killed before the end")
        res, summary = self.migrate(from_file, to_file, "--rate", "0")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertIn("resuming after", res.stderr)
        self.assertEqual(summary["differences"], 0, summary)
        self.assertEqual(summary["verified"], len(live), summary)
        self.assertEqual(int(self.sql(url, "SELECT count(*) FROM pastes")), len(live))
        # Resumed after the cursor: only the pastes of the page the kill cut short were there
        # already; none of the pages saved before it was walked again.
        self.assertLessEqual(summary["already_there"], 10, summary)
        self.assertEqual(sorted(self.sql(url, "SELECT id FROM pastes").split()), sorted(live))
        target = self.server(["--meta", url, "--data-dir", shared, *RELAXED])
        self.assertReadsBack(docs, live, dead, target)

    def test_the_windows_pass_copies_only_what_changed_and_verifies_it(self):
        src, docs, live, dead = self.source(plain=40)
        url = self.database()
        shared = os.path.join(self.root, "shared")
        from_file = self.settings("from", data_dir=src.data_dir)
        to_file = self.settings("to", data_dir=shared, meta=url)
        res, summary = self.migrate(from_file, to_file, "--rate", "0", "--jobs", "8")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertEqual((summary["moved"], summary["differences"]), (len(live), 0), summary)
        # What changes at the source after the first pass: new pastes, a delete, a view spent,
        # a report, a takedown.
        new = [src.create_ok(f"made after the first pass {i}")["id"] for i in range(5)]
        paste_id, token = self.token
        self.assertStatus(src.delete(paste_id, token=token), 204)
        counted = self.kinds["counted"]
        self.assertStatus(src.request("POST", f"/api/v1/pastes/{counted}/claim", body=b""), 200)
        self.report(src, self.kinds["first"], "198.19.40.1")
        taken = self.kinds["fork"]
        self.assertStatus(src.admin_request("POST", f"/admin/pastes/{taken}/takedown",
                                            body="{}"), 200)
        self.assertEqual(self.admin_read_only(src, "on").returncode, 0)
        res, summary = self.migrate(from_file, to_file, "--changed", "--rate", "0")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertEqual(summary["differences"], 0, summary)
        self.assertEqual(summary["moved"], len(new), summary)
        # The new ones, the deleted one, the counted one and the taken-down one; the rest alike.
        self.assertEqual(summary["changed"], len(new) + 3, summary)
        self.assertEqual(summary["unchanged"], len(live) - 3, summary)
        # The changed ones were verified as copied; the unchanged ones' bodies were not read.
        self.assertEqual(summary["verified"], len(new) + 2, summary)
        whole, summary = self.migrate(from_file, to_file, "--verify-only", "--rate", "0")
        self.assertEqual(whole.returncode, 0, whole.stdout + whole.stderr)
        self.assertEqual(summary["differences"], 0, summary)
        src.stop()
        target = self.server(["--meta", url, "--data-dir", shared, *RELAXED])
        for i in new:
            self.assertStatus(target.get(f"/raw/{i}"), 200)
        self.assertStatus(target.get(f"/raw/{paste_id}"), 404)
        self.assertStatus(target.get(f"/raw/{taken}"), 451)
        self.assertEqual(self.sql(url, f"SELECT views_left FROM pastes WHERE id = '{counted}'"),
                         "2")
        reports = target.admin_request("GET", "/admin/reports").json()["pastes"]
        self.assertIn(self.kinds["first"], [p["id"] for p in reports])

    def notice(self, s, reference, pastes):
        body = {"sender": "abuse@hoster.example", "reference": reference, "category": "phishing",
                "pastes": pastes, "deadline": "2d"}
        res = s.admin_request("POST", "/admin/notices", body=json.dumps(body), headers=JSON)
        self.assertStatus(res, 201)
        return res.json()["notice"]

    def dismiss(self, s, paste_id):
        self.assertStatus(s.admin_request("POST", f"/admin/pastes/{paste_id}/dismiss",
                                          body=json.dumps({"note": "not phishing"}),
                                          headers=JSON), 200)

    def open_notices(self, s):
        """The review page's notice rows, without what depends on the time they are read."""
        notices = s.admin_request("GET", "/admin/notices").json()["notices"]
        for n in notices:
            for key in ("id", "waiting_seconds", "seconds_left"):
                n.pop(key)
        return notices

    def test_abuse_notices_move_open_and_closed_and_close_on_the_new_store(self):
        src = self.server()
        a, b, c, d = (src.create_ok(f"named by a notice {i}")["id"] for i in range(4))
        self.notice(src, "CASE-1", [a, b])
        self.dismiss(src, b)  # CASE-1 waits on a alone
        self.notice(src, "CASE-2", [c])
        self.dismiss(src, c)  # CASE-2 closed
        self.notice(src, "CASE-3", [d])
        url = self.database()
        shared = os.path.join(self.root, "shared")
        from_file = self.settings("from", data_dir=src.data_dir)
        to_file = self.settings("to", data_dir=shared, meta=url)
        res, summary = self.migrate(from_file, to_file, "--dry-run")
        self.assertEqual(summary["notices"], 3, summary)
        res, summary = self.migrate(from_file, to_file, "--rate", "0")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertEqual((summary["notices_added"], summary["differences"]), (3, 0), summary)
        # Acted on at the source after the first pass: the next pass closes it on the target
        # too; nothing is stored twice.
        self.dismiss(src, d)
        res, summary = self.migrate(from_file, to_file, "--rate", "0")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertEqual((summary["notices_added"], summary["notice_pastes_closed"],
                          summary["differences"]), (0, 1, 0), summary)
        # The verification names a notice missing on the target, and one different there.
        self.sql(url, "DELETE FROM notice_pastes WHERE notice_id = "
                      "(SELECT id FROM notices WHERE reference = 'CASE-2')")
        self.sql(url, "DELETE FROM notices WHERE reference = 'CASE-2'")
        self.sql(url, "UPDATE notices SET category = 'spam' WHERE reference = 'CASE-1'")
        res, summary = self.migrate(from_file, to_file, "--verify-only", "--rate", "0")
        self.assertEqual(res.returncode, 1, res.stdout + res.stderr)
        named = sorted(ln for ln in res.stdout.splitlines() if ln.startswith("difference:"))
        self.assertEqual(named, [
            "difference: notice CASE-1 from abuse@hoster.example: category: phishing on the "
            "source, spam on the target",
            "difference: notice CASE-2 from abuse@hoster.example: missing on the target"])
        self.sql(url, "UPDATE notices SET category = 'phishing' WHERE reference = 'CASE-1'")
        res, summary = self.migrate(from_file, to_file, "--rate", "0")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertEqual((summary["notices_added"], summary["differences"]), (1, 0), summary)
        waiting = self.open_notices(src)
        self.assertEqual([n["reference"] for n in waiting], ["CASE-1"])
        src.stop()

        target = self.server(["--meta", url, "--data-dir", shared, *RELAXED])
        # The same row on the review page: its arrival (the takedown clock), deadline and pastes.
        self.assertEqual(self.open_notices(target), waiting)
        self.assertEqual([(p["id"], p["open"]) for p in waiting[0]["pastes"]],
                         [(a, True), (b, False)])
        self.assertJsonError(target.get(f"/raw/{a}"), 451, "withheld_notice")
        for restored in (b, c, d):
            self.assertStatus(target.get(f"/raw/{restored}"), 200)
        self.dismiss(target, a)
        self.assertEqual(self.open_notices(target), [])
        self.assertStatus(target.get(f"/raw/{a}"), 200)

    def admin_read_only(self, s, what):
        return run_sluice(["admin", "--admin", f"http://127.0.0.1:{s.admin_port}", "--token-file",
                           s.admin_token_file, "read-only", what])

    def test_a_body_damaged_on_disk_is_named_and_not_copied(self):
        src, docs, live, dead = self.source(plain=20)
        src.stop()
        damaged = live[20]  # the first large paste: a file under blobs/
        path = src.blob_path(damaged)
        with open(path, "r+b") as f:
            f.seek(100)
            f.write(b"#")
        url = self.database()
        from_file = self.settings("from", data_dir=src.data_dir)
        to_file = self.settings("to", data_dir=os.path.join(self.root, "shared"), meta=url)
        res, summary = self.migrate(from_file, to_file, "--rate", "0")
        self.assertEqual(res.returncode, 1, res.stdout + res.stderr)
        named = [ln for ln in res.stdout.splitlines() if ln.startswith("difference:")]
        self.assertTrue(any(damaged in ln and "damaged" in ln for ln in named), res.stdout)
        self.assertTrue(all(damaged in ln for ln in named), named)
        self.assertEqual(self.sql(url, f"SELECT count(*) FROM pastes WHERE id = '{damaged}'"), "0")
        self.assertEqual(summary["moved"], len(live) - 1, summary)

    def test_a_dry_run_reports_what_would_move_and_writes_nothing(self):
        src, docs, live, dead = self.source(plain=30)
        url = self.database()
        from_file = self.settings("from", data_dir=src.data_dir)
        to_file = self.settings("to", data_dir=os.path.join(self.root, "shared"), meta=url)
        res, summary = self.migrate(from_file, to_file, "--dry-run")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertEqual(summary["would_move"], len(live), summary)
        self.assertEqual(summary["not_moved_deleted"], 1, summary)
        self.assertEqual(self.sql(url, "SELECT count(*) FROM pastes"), "0")
        self.assertFalse(os.path.exists(to_file + ".migrate-state"))


    def test_an_embedded_target_that_a_server_holds_is_refused(self):
        src = self.server()
        src.create_ok("one paste")
        busy = self.server()
        from_file = self.settings("from", data_dir=src.data_dir)
        to_file = self.settings("to", data_dir=busy.data_dir)
        res, summary = self.migrate(from_file, to_file, "--rate", "0")
        self.assertEqual(res.returncode, 1, res.stdout + res.stderr)
        self.assertIn("in use by another sluice process", res.stderr)
        self.assertIsNone(summary)
        # Into a free data dir, embedded to embedded, it moves.
        res, summary = self.migrate(from_file, self.settings(
            "free", data_dir=os.path.join(self.root, "free")), "--rate", "0")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertEqual(summary["moved"], 1, summary)

if __name__ == "__main__":
    unittest.main()
