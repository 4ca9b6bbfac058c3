"""Every statement the embedded metadata store prepares runs from an index: none scans a table that
grows with the data (pastes, bodies, reports, the outbox). SQLite's own planner is asked, on a
data dir that the server has just created and migrated, about each statement as it appears in
src/store/sqlite/sqlite_meta_*.cc, so a new statement is held to this without being listed.
A purge's outbox delete scanned the whole outbox per row until migration 14.
"""

import glob
import os
import re
import sqlite3
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
    source = "".join(open(path).read() for path in SOURCES)
    source = source.replace('" SLUICE_ROW_COLUMNS "', " * ")
    for call in re.finditer(r'Prepare\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\)', source):
        yield "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', call.group(1)))


def parameters(sql):
    numbered = [int(n) for n in re.findall(r"\?(\d+)", sql)]
    return [None] * (max(numbered) if numbered else sql.count("?"))


class QueryPlanTest(SluiceTestCase):
    def test_no_statement_scans_a_table_that_grows(self):
        s = self.server()
        s.stop()
        statements = list(prepared_statements())
        self.assertGreater(len(statements), 40, "the statements were not found in the source")
        db = sqlite3.connect(f"file:{s.db_path}?mode=ro", uri=True)
        scans = []
        for sql in statements:
            plan = db.execute("EXPLAIN QUERY PLAN " + sql, parameters(sql)).fetchall()
            for step in (row[3] for row in plan):
                match = re.match(r"SCAN (\w+)", step)
                if match and match.group(1) not in BOUNDED:
                    scans.append((sql, step))
        self.assertEqual(scans, [], "statements that read a whole table")

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
