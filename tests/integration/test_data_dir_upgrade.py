"""An embedded data dir from before small bodies moved into meta.db (docs/architecture.md,
"Durability"): its bodies.db is still read and deleted from, and never written again; new pastes'
bodies go into their rows in meta.db. A meta.db from before the pastes were in creation order
(schema 20, keyed by the random id): migration 21 moves every row, unchanged, and a kill -9 in the
middle of the move loses nothing. And a meta.db from before bodies were in their rows (schema 21,
bodies in inline_bodies): migration 22 moves none, they are read, deleted and purged where they
are, and new ones go into their rows.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_data_dir_upgrade
"""

import hashlib
import os
import random
import sqlite3
import subprocess
import time
import unittest

from schema20 import COLUMNS, SCHEMA_20_PASTES, to_schema_20_script, to_schema_21_script
from sluice_harness import SluiceTestCase, clean_env, decode_stored_body, wait_until

OLD = "written when small bodies had a file of their own ✓\n".encode() * 20
NEW = b"written beside its row\n" * 20


def bodies_in(path):
    """{id: body} of a database's bodies table and, in meta.db, of the bodies its rows point at
    and hold."""
    conn = sqlite3.connect(path, timeout=10)
    try:
        found = {r[0]: bytes(r[1]) for r in conn.execute("SELECT id, body FROM bodies")}
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'inline_bodies'").fetchone():
            found.update({r[0]: decode_stored_body(r[1], r[2]) for r in conn.execute(
                "SELECT p.id, b.body, b.codec FROM pastes p JOIN inline_bodies b "
                "ON b.n = p.body_n")})
        if any(r[1] == "body" for r in conn.execute("PRAGMA table_info(pastes)")):
            found.update({r[0]: decode_stored_body(r[1], r[2]) for r in conn.execute(
                "SELECT id, body, body_codec FROM pastes WHERE body IS NOT NULL")})
        return found
    finally:
        conn.close()


def in_rows(s):
    """{id: where} of meta.db's pastes that hold a body: "row" (migration 22) or "apart"
    (inline_bodies, by body_n)."""
    if not any(r[1] == "body" for r in s.query("PRAGMA table_info(pastes)")):
        return {r[0]: "apart" for r in s.query("SELECT id FROM pastes WHERE body_n IS NOT NULL")}
    return {r[0]: r[1] for r in s.query(
        "SELECT id, CASE WHEN body IS NOT NULL THEN 'row' ELSE 'apart' END FROM pastes "
        "WHERE body IS NOT NULL OR body_n IS NOT NULL")}


def to_schema_21(s):
    """Puts a stopped server's meta.db back in schema 21's layout: each body apart from its row."""
    conn = sqlite3.connect(s.db_path, isolation_level=None)
    try:
        conn.executescript(to_schema_21_script())
    finally:
        conn.close()


BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def to_schema_20(s, extra_rows=0):
    """Puts a stopped server's meta.db of schema 21 (to_schema_21) back in schema 20's layout,
    its rows unchanged, with
    `extra_rows` more rows of random ids (a big store, without its bodies: only the migration
    reads them)."""
    conn = sqlite3.connect(s.db_path)
    try:
        conn.executescript(to_schema_20_script())
        rng = random.Random(48)
        now = int(time.time())
        batch = []
        for i in range(extra_rows):
            batch.append(("".join(rng.choices(BASE62, k=12)), now - extra_rows + i,
                          now + 86400 * 30, 100 + i % 5000, rng.randbytes(32),
                          rng.randbytes(32), i % 7 == 0, 1 + i % 3))
            if len(batch) == 50_000 or i == extra_rows - 1:
                conn.executemany(
                    "INSERT OR IGNORE INTO pastes (id, created_at, expires_at, size_bytes, "
                    "token_hash, body_sha256, burn, views_left) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    batch)
                conn.commit()
                batch = []
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'pastes'").fetchone()[0]
        assert sql == SCHEMA_20_PASTES, sql
    finally:
        conn.close()


def rows_of(s):
    """Every row of pastes, every column, ordered by id."""
    conn = sqlite3.connect(s.db_path)
    try:
        return conn.execute(f"SELECT {COLUMNS} FROM pastes ORDER BY id").fetchall()
    finally:
        conn.close()


def digest_of(rows):
    h = hashlib.sha256()
    for row in rows:
        h.update(repr(row).encode())
    return h.hexdigest(), len(rows)


def layout_of(s):
    """"rowid" or "without rowid", the unique indexes of pastes (the id's), and the version."""
    conn = sqlite3.connect(s.db_path)
    try:
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'pastes'").fetchone()[0]
        unique = [r[1] for r in conn.execute("PRAGMA index_list(pastes)") if r[2] == 1]
        version = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
        return ("without rowid" if "WITHOUT ROWID" in sql.upper() else "rowid", unique, version)
    finally:
        conn.close()


class DataDirUpgradeTest(SluiceTestCase):
    def test_a_bodies_db_from_before_is_read_and_emptied_never_written(self):
        s = self.server(["--cache-bytes", "0"])
        old = s.create_ok(OLD)
        s.stop()
        # The layout before: the body a row of bodies.db, none beside the row in meta.db.
        legacy = s.legacy_bodies_db_path
        conn = sqlite3.connect(legacy)
        conn.execute("CREATE TABLE bodies (id TEXT PRIMARY KEY, written_at INTEGER NOT NULL, "
                     "body BLOB NOT NULL)")
        conn.execute("INSERT INTO bodies VALUES (?, 100, ?)", (old["id"], OLD))
        conn.commit()
        conn.close()
        to_schema_21(s)
        s.execute("DELETE FROM inline_bodies WHERE n = (SELECT body_n FROM pastes WHERE id = ?)",
                  (old["id"],))
        s.execute("UPDATE pastes SET body_n = NULL WHERE id = ?", (old["id"],))
        self.assertNotIn(old["id"], bodies_in(s.db_path))

        s.start()
        res = s.get(f"/raw/{old['id']}")
        self.assertStatus(res, 200)
        self.assertEqual(res.body, OLD)

        new = s.create_ok(NEW)
        self.assertEqual(bodies_in(s.db_path)[new["id"]], NEW)
        self.assertEqual(set(bodies_in(legacy)), {old["id"]})
        self.assertEqual(s.get(f"/raw/{new['id']}").body, NEW)

        # A delete reaches the old body where it is (the outbox, then the janitor).
        self.assertStatus(s.delete(old["id"], old["delete_token"]), 204)
        wait_until(lambda: not bodies_in(legacy), timeout=30,
                   message="the deleted paste's body gone from bodies.db")
        self.assertEqual(bodies_in(s.db_path)[new["id"]], NEW)
        self.assertTrue(os.path.exists(legacy))

    def test_bodies_stored_before_compression_are_read_as_they_are(self):
        """Schema 9 added the form a body is stored in (include/sluice/store/body_codec.h); the
        bodies of a meta.db from before are the bytes as received, and new ones are compressed."""
        s = self.server(["--cache-bytes", "0"])
        old = s.create_ok(OLD)
        s.stop()
        to_schema_21(s)
        # The layout of schema 8: no codec column, the body as received.
        s.execute("UPDATE inline_bodies SET body = ?, codec = 0 "
                  "WHERE n = (SELECT body_n FROM pastes WHERE id = ?)", (OLD, old["id"]))
        s.execute("ALTER TABLE inline_bodies DROP COLUMN codec")
        # Schema 10's moderation undone too (migrations run from the highest recorded version
        # on): reports one row per client key again, two of them from one IPv4 /24.
        for table in ("paste_reports", "report_queue", "report_counts", "withhold_charges"):
            s.execute(f"DROP TABLE {table}")
        # And schema 11's encrypted flag (docs/encryption.md) and schema 12's and 13's columns
        # (max_views, a fork's parent), which migrate again.
        for column in ("creator_network", "review_keep", "encrypted", "views_left", "parent"):
            s.execute(f"ALTER TABLE pastes DROP COLUMN {column}")
        # And schema 14's index of the outbox by paste, schema 15's content blocklist, 17's
        # creator tokens, 18's transparency counters and 19's notices, with 20's index of the closed
        # ones (16's arrival column went with report_queue above).
        s.execute("DROP INDEX outbox_by_paste")
        for table in ("blocked_contents", "blocked_contents_state", "creator_tokens",
                      "creator_tokens_state", "transparency_counts", "notices", "notice_pastes"):
            s.execute(f"DROP TABLE {table}")
        s.execute("CREATE TABLE reports (paste_id TEXT NOT NULL, client_key TEXT NOT NULL, "
                  "reason TEXT NOT NULL, note TEXT NOT NULL, created_at INTEGER NOT NULL, "
                  "open INTEGER NOT NULL DEFAULT 1, closed_at INTEGER, "
                  "PRIMARY KEY (paste_id, client_key)) WITHOUT ROWID")
        for key, note in (("203.0.113.7", "first"), ("203.0.113.9", "same /24"),
                          ("198.51.100.1", "newest")):
            s.execute("INSERT INTO reports VALUES (?, ?, 'spam', ?, ?, 1, NULL)",
                      (old["id"], key, note, 100 + len(note)))
        s.execute("DELETE FROM schema_version WHERE version > 8")

        s.start()
        res = s.get(f"/raw/{old['id']}")
        self.assertStatus(res, 200)
        self.assertEqual(res.body, OLD)
        queued = s.admin_request("GET", "/admin/reports?limit=10").json()["pastes"]
        self.assertEqual([(p["id"], p["networks"]) for p in queued], [(old["id"], 2)])
        new = s.create_ok(NEW)
        self.assertEqual(s.get(f"/raw/{new['id']}").body, NEW)
        forms = dict((r[0], (r[1], r[2])) for r in s.query(
            "SELECT p.id, b.codec, length(b.body) FROM pastes p JOIN inline_bodies b "
            "ON b.n = p.body_n"))
        self.assertEqual(forms[old["id"]], (0, len(OLD)))
        (codec, stored), = s.query("SELECT body_codec, length(body) FROM pastes WHERE id = ?",
                                   (new["id"],))
        self.assertEqual(codec, 1)
        self.assertLess(stored, len(NEW) // 2)
        # The content blocklist of the upgraded file takes a takedown's digest.
        self.assertStatus(s.admin_request("POST", f"/admin/pastes/{new['id']}/takedown",
                                          body="{}"), 200)
        self.assertJsonError(s.create(NEW), 451, "blocked_content")


    def test_bodies_apart_from_their_rows_stay_there_and_new_ones_go_into_rows(self):
        """Migration 22 (src/store/sqlite/sqlite_meta_schema.cc) on a schema-21 store: every row
        is unchanged and every body stays in inline_bodies, where it is read, deleted (the
        outbox) and purged with its expired row; a new paste's body is in its row; and the
        backup's index of the rows bodied outside meta.db holds exactly the live file-bodied
        ones, those from before included."""
        s = self.server(["--cache-bytes", "0", "--inline-body-bytes", "4096"])
        kept, deleted, expiring = (s.create_ok(f"{name}\n".encode() * 40)
                                   for name in ("kept", "deleted", "expiring"))
        file_body = b"".join(f"line {i} of a file\n".encode() for i in range(600))
        self.assertGreater(len(file_body), 4096)
        in_file = s.create_ok(file_body)
        s.stop()
        to_schema_21(s)
        self.assertEqual(in_rows(s), {d["id"]: "apart" for d in (kept, deleted, expiring)})
        s.execute("UPDATE pastes SET expires_at = ? WHERE id = ?",
                  (int(time.time()) - 10, expiring["id"]))
        before = [r for r in rows_of(s) if r[0] != expiring["id"]]

        s.start()
        self.assertRegex(s.log(), r"migrated to version 22 in [\d.]+ s")
        self.assertEqual(layout_of(s), ("rowid", ["pastes_by_id"], 22))
        self.assertEqual([r for r in rows_of(s) if r[0] != expiring["id"]], before)
        for doc, name in ((kept, "kept"), (deleted, "deleted")):
            self.assertEqual(s.get(f"/raw/{doc['id']}").body, f"{name}\n".encode() * 40)
        self.assertEqual(s.get(f"/raw/{in_file['id']}").body, file_body)
        new = s.create_ok(b"written into its row\n" * 10)
        self.assertEqual(in_rows(s)[new["id"]], "row")
        self.assertEqual(s.query("SELECT body_n FROM pastes WHERE id = ?", (new["id"],)),
                         [(None,)])
        self.assertEqual(s.get(f"/raw/{new['id']}").body, b"written into its row\n" * 10)

        for doc in (deleted, new):
            self.assertStatus(s.delete(doc["id"], doc["delete_token"]), 204)
        wait_until(lambda: set(in_rows(s)) == {kept["id"]}, timeout=30,
                   message="deleted bodies gone from their rows and inline_bodies, the expired "
                           "paste purged with its body")
        self.assertEqual(s.query("SELECT count(*) FROM inline_bodies"), [(1,)])
        self.assertEqual(s.unreferenced_inline_bodies(), 0)
        for doc in (deleted, new, expiring):
            self.assertIn(s.get(f"/raw/{doc['id']}").status, (404, 410), doc["id"])
        self.assertEqual(s.query(
            "SELECT id FROM pastes INDEXED BY pastes_bodied_outside "
            "WHERE deleted = 0 AND body IS NULL AND body_n IS NULL"), [(in_file["id"],)])

    def test_a_store_keyed_by_the_random_id_moves_to_creation_order_unchanged(self):
        """Migration 21 (src/store/sqlite/sqlite_meta_schema.cc): every row of a schema-20 store,
        every column, is the same after it; each old link answers with its body, a delete token
        from before still deletes, a count of views goes on where it was; the rows are in the
        order they were created, found by a unique index on the id, and a new one comes last."""
        s = self.server(["--cache-bytes", "0"])
        made = []
        for i in range(12):
            body = f"paste {i} from before the move\n".encode() * (i + 1)
            made.append((s.create_ok(body), body))
        counted = s.request("POST", "/api/v1/pastes?max_views=3", body=b"three views").json()
        claim = f"/api/v1/pastes/{counted['id']}/claim"
        self.assertStatus(s.request("POST", claim, body=b""), 200)  # two views left
        gone, _ = made[3]
        self.assertStatus(s.delete(gone["id"], gone["delete_token"]), 204)
        # Its body's removal (the outbox, then the janitor) done before the snapshot, not after.
        # The body is in its row since schema 22 (body_n was never set), so the wait is for both.
        wait_until(lambda: s.query("SELECT body IS NULL AND body_n IS NULL FROM pastes WHERE id = ?",
                                   (gone["id"],)) == [(1,)],
                   timeout=30, message="the deleted paste's body gone")
        s.stop()
        to_schema_21(s)
        before = rows_of(s)
        to_schema_20(s)
        self.assertEqual(layout_of(s), ("without rowid", ["sqlite_autoindex_pastes_1"], 20))
        self.assertEqual(rows_of(s), before)

        s.start()
        self.assertIn(f"migration 21 puts {len(before)} pastes in creation order", s.log())
        self.assertEqual(layout_of(s), ("rowid", ["pastes_by_id"], 22))
        self.assertEqual(rows_of(s), before)
        order = [r[0] for r in s.query("SELECT id FROM pastes WHERE deleted = 0 ORDER BY rowid")]
        self.assertEqual(order, [d["id"] for d, _ in made if d is not gone] + [counted["id"]])
        for doc, body in made:
            res = s.get(f"/raw/{doc['id']}")
            if doc is gone:
                self.assertIn(res.status, (404, 410), doc["id"])
                continue
            self.assertStatus(res, 200)
            self.assertEqual(res.body, body)
            self.assertEqual(s.get(f"/api/v1/pastes/{doc['id']}").json()["size"], len(body))
        self.assertStatus(s.request("POST", claim, body=b""), 200)
        self.assertEqual(s.query("SELECT views_left FROM pastes WHERE id = ?", (counted["id"],)),
                         [(1,)])
        old, _ = made[0]
        self.assertStatus(s.delete(old["id"], old["delete_token"]), 204)
        new = s.create_ok(b"after the move")
        self.assertEqual(s.query("SELECT id FROM pastes ORDER BY rowid DESC LIMIT 1"),
                         [(new["id"],)])

    def test_a_kill_during_the_move_leaves_the_store_whole_and_the_next_start_finishes(self):
        """Migration 21 is one transaction: kill -9 while it copies a store big enough to take
        a moment, and the file is schema 20 with every row as it was; the next start moves it."""
        s = self.server(["--cache-bytes", "0"])
        made = [(s.create_ok(f"survives the kill {i}\n".encode()), i) for i in range(5)]
        s.stop()
        to_schema_21(s)
        to_schema_20(s, extra_rows=MOVE_ROWS)
        before = digest_of(rows_of(s))
        self.assertEqual(before[1], MOVE_ROWS + 5)

        with open(s.log_path, "ab") as log:
            log.write(b"===== start to be killed during migration 21\n")
            offset = log.tell()
            proc = subprocess.Popen(s.command(), stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=clean_env(s.env))
        wal = s.db_path + "-wal"
        try:
            wait_until(lambda: "migration 21 puts" in s._log_from(offset), timeout=60,
                       message="migration 21 started")
            # In the middle of the copy: the new table's pages are going into the WAL.
            wait_until(lambda: os.path.exists(wal) and os.path.getsize(wal) > KILL_AT_WAL_BYTES,
                       timeout=60, interval=0.01, message="migration 21 writing")
        finally:
            proc.kill()
            proc.wait()
        killed_log = s._log_from(offset)
        self.assertNotIn("migrated to version 21", killed_log, "killed too late: it had finished")
        self.assertNotIn("listening on", killed_log)
        self.assertEqual(layout_of(s), ("without rowid", ["sqlite_autoindex_pastes_1"], 20))
        self.assertEqual(digest_of(rows_of(s)), before)

        s.start()
        self.assertRegex(s.log(), r"migrated to version 21 in [\d.]+ s")
        self.assertEqual(layout_of(s), ("rowid", ["pastes_by_id"], 22))
        self.assertEqual(digest_of(rows_of(s)), before)
        for doc, i in made:
            self.assertEqual(s.get(f"/raw/{doc['id']}").body, f"survives the kill {i}\n".encode())


# A store whose migration 21 takes a moment (2.4 s here, at 7 s per million:
# bench/results/ordered-layout.md) and writes about 80 MB of WAL, killed when it has written 8 MiB.
MOVE_ROWS = 400_000
KILL_AT_WAL_BYTES = 8 << 20


if __name__ == "__main__":
    unittest.main()
