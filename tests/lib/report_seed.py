"""Open abuse reports written straight into a stopped server's meta.db, for tests and benchmarks
that need a store already holding thousands of them (tests/integration/test_report_flood.py,
bench/report_flood.py). Through the API they would take minutes: the report buckets are there to
make them slow.

Each seeded paste (ids "seed" and 8 digits, no body, expiring in a week) has one open report from
a network of its own (10.0.0.0/24, 10.0.1.0/24, ...), so the review queue holds `count` pastes.
Both schemas are known: the review queue of migration 10 (src/store/sqlite/sqlite_meta_schema.cc),
and the `reports` table of the binaries before it, so a benchmark can seed the old binary too.
"""
import sqlite3
import time


def seed_network(i):
    """The i-th seeded network, and a client key in it."""
    a, b, c = 10 + (i >> 16), (i >> 8) & 255, i & 255
    return f"{a}.{b}.{c}.0/24", f"{a}.{b}.{c}.1"


def seed_open_reports(db_path, count, now=None):
    """Adds `count` reported pastes to the metadata database at `db_path` (the server stopped, its
    schema migrated). Returns the ids."""
    now = int(now or time.time())
    db = sqlite3.connect(db_path)
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        queued = "report_queue" in tables
        ids = [f"seed{i:08d}" for i in range(count)]
        with db:
            db.executemany(
                "INSERT INTO pastes (id, created_at, expires_at, size_bytes, token_hash, deleted)"
                " VALUES (?, ?, ?, 0, zeroblob(32), 0)",
                ((pid, now - 3600, now + 7 * 86400) for pid in ids))
            if queued:
                db.executemany(
                    "INSERT INTO paste_reports (paste_id, network, reason, note, created_at, open,"
                    " vote) VALUES (?, ?, 'spam', 'seeded', ?, 1, 1)",
                    ((pid, seed_network(i)[0], now - count + i) for i, pid in enumerate(ids)))
                db.executemany(
                    "INSERT INTO report_queue (paste_id, reports, notes, votes, reasons, latest_at,"
                    " latest_note) VALUES (?, 1, 1, 1, 1, ?, 'seeded')",
                    ((pid, now - count + i) for i, pid in enumerate(ids)))
                db.execute("UPDATE report_counts SET pending = pending + ?, "
                           "open_reports = open_reports + ? WHERE slot = 0", (count, count))
            else:
                db.executemany(
                    "INSERT INTO reports (paste_id, client_key, reason, note, created_at, open)"
                    " VALUES (?, ?, 'spam', 'seeded', ?, 1)",
                    ((pid, seed_network(i)[1], now - count + i) for i, pid in enumerate(ids)))
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return ids
    finally:
        db.close()
