"""An embedded data dir from before small bodies moved into meta.db (docs/architecture.md,
"Durability"): its bodies.db is still read and deleted from, and never written again; new pastes'
bodies go beside their rows in meta.db, in the row's transaction.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_data_dir_upgrade
"""

import os
import sqlite3
import unittest

from sluice_harness import SluiceTestCase, decode_stored_body, wait_until

OLD = "written when small bodies had a file of their own ✓\n".encode() * 20
NEW = b"written beside its row\n" * 20


def bodies_in(path):
    """{id: body} of a database's bodies table and, in meta.db, of the bodies its rows point at."""
    conn = sqlite3.connect(path, timeout=10)
    try:
        found = {r[0]: bytes(r[1]) for r in conn.execute("SELECT id, body FROM bodies")}
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'inline_bodies'").fetchone():
            found.update({r[0]: decode_stored_body(r[1], r[2]) for r in conn.execute(
                "SELECT p.id, b.body, b.codec FROM pastes p JOIN inline_bodies b "
                "ON b.n = p.body_n")})
        return found
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
        self.assertEqual(forms[new["id"]][0], 1)
        self.assertLess(forms[new["id"]][1], len(NEW) // 2)
        # The content blocklist of the upgraded file takes a takedown's digest.
        self.assertStatus(s.admin_request("POST", f"/admin/pastes/{new['id']}/takedown",
                                          body="{}"), 200)
        self.assertJsonError(s.create(NEW), 451, "blocked_content")


if __name__ == "__main__":
    unittest.main()
