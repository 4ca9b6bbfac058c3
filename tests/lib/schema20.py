"""The embedded store's pastes table as schema 20 left it (before migration 21 put the rows in
creation order, src/store/sqlite/sqlite_meta_schema.cc), and as schema 21 left it (before
migration 22 put small bodies in their rows): what the upgrade tests
(tests/integration/test_data_dir_upgrade.py) and the upgrade's benchmark (bench/ordered_upgrade.py)
turn a store back into, so that the new binary meets a true old layout."""

# The pastes table as schema 20 left it, as sqlite_master holds it in a store made by main at
# fee57b7: keyed by the random id (WITHOUT ROWID), with the columns of migrations 2-13 appended
# by ALTER TABLE.
SCHEMA_20_PASTES = """CREATE TABLE pastes (
      id TEXT PRIMARY KEY,
      created_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      size_bytes INTEGER NOT NULL,
      token_hash BLOB NOT NULL,
      deleted INTEGER NOT NULL DEFAULT 0
    , body_sha256 BLOB, moderation INTEGER NOT NULL DEFAULT 0, moderation_reason TEXT, \
moderated_at INTEGER, burn INTEGER NOT NULL DEFAULT 0, body_n INTEGER, creator_network INTEGER, \
review_keep INTEGER NOT NULL DEFAULT 0, encrypted INTEGER NOT NULL DEFAULT 0, views_left INTEGER \
NOT NULL DEFAULT 1, parent TEXT) WITHOUT ROWID"""
COLUMNS = ("id, created_at, expires_at, size_bytes, token_hash, deleted, body_sha256, moderation, "
           "moderation_reason, moderated_at, burn, body_n, creator_network, review_keep, "
           "encrypted, views_left, parent")


def to_schema_21_script():
    """SQL that puts the bodies of meta.db's rows (schema 22) back in inline_bodies, each found
    by its row's new body_n, numbered after every body number used so far in creation order, and
    drops what migration 22 added: schema 21's layout, whose bodies were all written apart from
    their rows."""
    return """
        BEGIN;
        CREATE TEMP TABLE moved (r INTEGER PRIMARY KEY, n INTEGER NOT NULL);
        INSERT INTO moved (r, n)
          SELECT rowid, MAX((SELECT COALESCE(MAX(n), 0) FROM inline_bodies),
                            (SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence
                             WHERE name = 'inline_bodies'))
                        + ROW_NUMBER() OVER (ORDER BY rowid)
          FROM pastes WHERE body IS NOT NULL;
        INSERT INTO inline_bodies (n, written_at, body, codec)
          SELECT m.n, p.created_at, p.body, p.body_codec FROM moved m JOIN pastes p ON p.rowid = m.r;
        UPDATE pastes SET body_n = (SELECT n FROM moved WHERE moved.r = pastes.rowid)
          WHERE body IS NOT NULL;
        DROP TABLE moved;
        DROP INDEX pastes_bodied_outside;
        ALTER TABLE pastes DROP COLUMN body_codec;
        ALTER TABLE pastes DROP COLUMN body;
        DELETE FROM schema_version WHERE version > 21;
        COMMIT;"""


def to_schema_20_script(order_by="rowid"):
    """SQL that rewrites meta.db's pastes table (schema 21 or later: see to_schema_21_script) in
    schema 20's layout, its rows unchanged, inserted in `order_by` order: in creation order, each
    row goes to a random leaf of the id's b-tree, as a live store's creates put it there."""
    return f"""
        BEGIN;
        ALTER TABLE pastes RENAME TO pastes_ordered;
        {SCHEMA_20_PASTES};
        INSERT INTO pastes ({COLUMNS}) SELECT {COLUMNS} FROM pastes_ordered ORDER BY {order_by};
        DROP TABLE pastes_ordered;
        CREATE INDEX pastes_by_expiry ON pastes (expires_at, body_n);
        DELETE FROM schema_version WHERE version > 20;
        COMMIT;"""
