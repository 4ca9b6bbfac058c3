"""Every statement the embedded metadata store prepares runs from an index: none scans a table that
grows with the data (pastes, bodies, reports, the outbox). SQLite's own planner is asked, on a
data dir that the server has just created and migrated, about each statement as it appears in
src/store/sqlite/sqlite_meta_*.cc, so a new statement is held to this without being listed.
A purge's outbox delete scanned the whole outbox per row until migration 14. Since migration 21
the pastes are a rowid table in creation order, and every statement that names a paste by its
random id finds it through the unique index pastes_by_id.
"""

import glob
import os
import pathlib
import re
import shutil
import sqlite3
import tempfile
import unittest

from sluice_harness import SluiceTestCase

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
SOURCES = sorted(glob.glob(os.path.join(REPO, "src/store/sqlite/sqlite_meta_*.cc")))
# Tables whose size does not grow with what strangers send: a scan of them is bounded.
BOUNDED = {
    "blocks",          # written by the operator only (POST /admin/blocks)
    "storage_usage",   # one row
    "schema_version",  # one row a migration
    "audit",           # read newest first with a LIMIT: SQLite walks the rowid from its end
    "creator_tokens",  # written by the operator only (POST /admin/tokens), read whole by design
    "notices",         # written by the operator only (POST /admin/notices), max_notices at most
}


def prepared_statements():
    """The SQL of every db.Prepare(...) call: adjacent string literals joined, and the row
    columns macro standing in for its list."""
    source = "".join(pathlib.Path(path).read_text() for path in SOURCES)
    source = source.replace('" SLUICE_ROW_COLUMNS "', " * ")
    for call in re.finditer(r'Prepare\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\)', source):
        yield "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', call.group(1)))


def parameters(sql):
    numbered = [int(n) for n in re.findall(r"\?(\d+)", sql)]
    return [None] * (max(numbered) if numbered else sql.count("?"))


def plan_steps(db, sql):
    return [row[3] for row in db.execute("EXPLAIN QUERY PLAN " + sql, parameters(sql)).fetchall()]


def scans(db, statements):
    """(statement, step) for each step of a plan that reads a whole table that grows."""
    found = []
    for sql in statements:
        for step in plan_steps(db, sql):
            match = re.match(r"SCAN (\w+)", step)
            if match and match.group(1) not in BOUNDED:
                found.append((sql, step))
    return found


class QueryPlanTest(SluiceTestCase):
    def test_no_statement_scans_a_table_that_grows(self):
        s = self.server()
        s.stop()
        statements = list(prepared_statements())
        self.assertGreater(len(statements), 40, "the statements were not found in the source")
        db = sqlite3.connect(f"file:{s.db_path}?mode=ro", uri=True)
        self.assertEqual(scans(db, statements), [], "statements that read a whole table")

    def test_a_paste_named_by_its_id_is_found_through_the_id_index(self):
        """Migration 21: the rows in creation order, the random id a unique index. Every
        statement that looks a paste up by its id (a read, a claim, a delete, a purge, a report)
        probes pastes_by_id, not the table's own key."""
        s = self.server()
        s.stop()
        db = sqlite3.connect(f"file:{s.db_path}?mode=ro", uri=True)
        by_id = [(sql, step) for sql in prepared_statements() for step in plan_steps(db, sql)
                 if re.match(r"SEARCH (pastes|p)\b.*\(id=\?\)", step)]
        self.assertGreater(len(by_id), 8, "the lookups by id were not found")
        elsewhere = [(sql, step) for sql, step in by_id if "INDEX pastes_by_id (id=?)" not in step]
        self.assertEqual(elsewhere, [], "lookups by id that do not use pastes_by_id")

    def test_the_checker_sees_a_lookup_that_lost_the_id_index(self):
        """The scan check above fails if the id index goes: a paste's read becomes a scan of
        every row."""
        s = self.server()
        s.stop()
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "meta.db")
            shutil.copy(s.db_path, copy)
            db = sqlite3.connect(copy)
            db.execute("DROP INDEX pastes_by_id")
            found = scans(db, list(prepared_statements()))
            db.close()
        self.assertIn("SELECT * FROM pastes WHERE id = ?", [" ".join(sql.split()) for sql, _ in found])

    def test_the_oldest_open_arrival_is_one_index_probe(self):
        """The takedown clock's read (docs/moderation.md): MIN over the queue's arrival. SQLite
        plans a MIN without an index on its column as "SEARCH ... USING PRIMARY KEY" while it
        reads every row, which the test above cannot tell from a probe; with the index it reads
        the index's first entry."""
        s = self.server()
        s.stop()
        statements = [sql for sql in prepared_statements() if "MIN(first_at)" in sql]
        self.assertEqual(len(statements), 1, "the oldest arrival's statement was not found")
        db = sqlite3.connect(f"file:{s.db_path}?mode=ro", uri=True)
        plan = db.execute("EXPLAIN QUERY PLAN " + statements[0]).fetchall()
        self.assertEqual([row[3] for row in plan],
                         ["SEARCH report_queue USING COVERING INDEX report_queue_by_arrival"])

    def test_the_checker_sees_a_scan(self):
        """The test above can fail: a statement without an index is reported."""
        s = self.server()
        s.stop()
        db = sqlite3.connect(f"file:{s.db_path}?mode=ro", uri=True)
        plan = db.execute("EXPLAIN QUERY PLAN SELECT id FROM pastes WHERE size_bytes = ?",
                          [None]).fetchall()
        self.assertTrue(any(row[3].startswith("SCAN pastes") for row in plan), plan)


if __name__ == "__main__":
    unittest.main()
