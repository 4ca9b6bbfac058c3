// Schema migrations of the PostgreSQL store. Blocking libpq on purpose: they run at start-up and
// from `sluice migrate`, before any event loop exists.
#include <fmt/format.h>
#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <iterator>
#include <memory>

#include "pg_connection.h"
#include "sluice/store/postgres.h"

namespace sluice::store {
namespace {

// Applied once each, in order, each in its own transaction. Never edit one that has shipped: add
// the next. Same rows and meaning as the SQLite store's schema (src/store/sqlite).
constexpr const char* kMigrations[] = {
    // 1: pastes, their tombstones, and the outbox of body removals owed after a delete.
    R"sql(
    CREATE TABLE pastes (
      id text PRIMARY KEY,
      created_at bigint NOT NULL,
      expires_at bigint NOT NULL,
      size_bytes bigint NOT NULL,
      token_hash bytea NOT NULL,
      deleted boolean NOT NULL DEFAULT false
    );
    CREATE INDEX pastes_by_expiry ON pastes (expires_at);
    CREATE TABLE outbox (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      paste_id text NOT NULL,
      kind text NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      enqueued_at bigint NOT NULL,
      next_attempt_at bigint NOT NULL
    );
    CREATE INDEX outbox_by_due ON outbox (next_attempt_at);
    CREATE INDEX outbox_by_paste ON outbox (paste_id);
    )sql",
    // 2: the SHA-256 of each body, recorded at create and checked on every read. Rows from before
    // have none (NULL) and are checked by size alone. Adding a nullable column rewrites nothing.
    R"sql(
    ALTER TABLE pastes ADD COLUMN IF NOT EXISTS body_sha256 bytea;
    )sql",
    // 3: moderation (docs/moderation.md): a paste's state with its reason and time, abuse
    // reports (one per client key and paste), blocked clients and the audit trail.
    R"sql(
    ALTER TABLE pastes ADD COLUMN IF NOT EXISTS moderation smallint NOT NULL DEFAULT 0;
    ALTER TABLE pastes ADD COLUMN IF NOT EXISTS moderation_reason text;
    ALTER TABLE pastes ADD COLUMN IF NOT EXISTS moderated_at bigint;
    CREATE TABLE IF NOT EXISTS reports (
      paste_id text NOT NULL,
      client_key text NOT NULL,
      reason text NOT NULL,
      note text NOT NULL,
      created_at bigint NOT NULL,
      open boolean NOT NULL DEFAULT true,
      PRIMARY KEY (paste_id, client_key)
    );
    CREATE INDEX IF NOT EXISTS reports_open ON reports (created_at) WHERE open;
    CREATE TABLE IF NOT EXISTS blocks (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      prefix text NOT NULL,
      reason text NOT NULL,
      created_at bigint NOT NULL,
      until bigint NOT NULL
    );
    CREATE TABLE IF NOT EXISTS audit (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      at bigint NOT NULL,
      action text NOT NULL,
      target text NOT NULL,
      detail text NOT NULL
    );
    )sql",
    // 4: burn after reading (MetaStore::Claim). A constant default rewrites nothing.
    R"sql(
    ALTER TABLE pastes ADD COLUMN IF NOT EXISTS burn boolean NOT NULL DEFAULT false;
    )sql",
    // 5: storage_usage, the live bytes (MetaStore::LiveBytes), kept by every statement that adds
    // or removes a live row, in sixteen slots chosen by the id's last character: one counter row
    // would serialise every insert of every process on its row lock; sixteen spread them, and a
    // read sums sixteen rows.
    R"sql(
    CREATE TABLE IF NOT EXISTS storage_usage (
      slot smallint PRIMARY KEY,
      live_bytes bigint NOT NULL
    );
    INSERT INTO storage_usage (slot, live_bytes)
      SELECT s, 0 FROM generate_series(0, 15) AS s ON CONFLICT (slot) DO NOTHING;
    UPDATE storage_usage
      SET live_bytes = (SELECT COALESCE(SUM(size_bytes), 0) FROM pastes WHERE NOT deleted)
      WHERE slot = 0;
    )sql",
    // 6: when a report was closed by its review, so handled reports can be deleted after
    // report_retention (MetaStore::PurgeReports). Reports closed before this step take their
    // paste's last review time, or their own when the paste is gone. A nullable column rewrites
    // nothing.
    R"sql(
    ALTER TABLE reports ADD COLUMN IF NOT EXISTS closed_at bigint;
    UPDATE reports r SET closed_at = COALESCE(
        (SELECT p.moderated_at FROM pastes p WHERE p.id = r.paste_id), r.created_at)
      WHERE NOT r.open AND r.closed_at IS NULL;
    CREATE INDEX IF NOT EXISTS reports_closed ON reports (closed_at) WHERE NOT open;
    )sql",
    // 7: storage reservations (MetaStore::ReserveStorage): the bytes each admitted create holds
    // against the quota until its insert takes them as live (in the insert's statement), it gives
    // them back, or its expiry passes (a crashed process's; bounded by the body's time to arrive
    // plus the create's budget). sluice_reserve_storage decides one under a transaction-scoped
    // advisory lock, so reservations from every process queue on it and each one's sums, read by
    // a statement that starts after the lock is held, see every reservation granted before it;
    // inserts, deletes and purges never take the lock, and only move bytes from reserved to live
    // or free them. The table holds at most the creates in flight across the tier plus what
    // crashed processes left until it expires, so the sums are bounded by the create slots, not
    // by the data. A reservation needs no flush before its answer (synchronous_commit off for its
    // transaction alone): lost in a crash of the server, it only lets the creates then in flight
    // insert unreserved, once, and meanwhile it holds the lock for microseconds, not for a flush
    // (or a synchronous standby's round trip). Self-contained: it names only storage_usage.
    R"sql(
    CREATE TABLE IF NOT EXISTS storage_reservations (
      id text PRIMARY KEY,
      bytes bigint NOT NULL,
      expires_at bigint NOT NULL
    );
    CREATE INDEX IF NOT EXISTS storage_reservations_by_expiry
      ON storage_reservations (expires_at);
    CREATE OR REPLACE FUNCTION sluice_reserve_storage(
        p_id text, p_bytes bigint, p_quota bigint, p_now bigint, p_expires_at bigint,
        OUT granted boolean, OUT in_use bigint)
      LANGUAGE plpgsql VOLATILE AS $fn$
    BEGIN
      -- "sluiceQ" in ASCII; the migrations take "sluice".
      PERFORM pg_advisory_xact_lock(32488873856820561);
      PERFORM set_config('synchronous_commit', 'off', true);
      DELETE FROM storage_reservations WHERE expires_at <= p_now;
      -- One statement, one snapshot: an insert that commits meanwhile moves its bytes from one
      -- sum to the other, never out of both.
      SELECT (SELECT COALESCE(SUM(live_bytes), 0) FROM storage_usage)
           + (SELECT COALESCE(SUM(bytes), 0) FROM storage_reservations)
        INTO in_use;
      granted := in_use + p_bytes <= p_quota;
      IF granted THEN
        INSERT INTO storage_reservations (id, bytes, expires_at)
          VALUES (p_id, p_bytes, p_expires_at);
      END IF;
    END
    $fn$;
    )sql",
    // 8: moderation at a bounded cost per report, as the SQLite store's migration 10 says
    // (src/store/sqlite/sqlite_meta_store.cc; docs/moderation.md): reports once per network and
    // paste, a queue row per reported paste, the queue's counts in one row, the creator's network
    // (packed, admission::PackNetwork) and the review's "keep" on the paste, and the withholding
    // charges of each network. A report, a review and a purge are each one function, so every
    // one takes its locks in one order (the paste's rows, then the counts row) and no two of them
    // deadlock. The queue's ids compare bytewise (COLLATE "C"), as the other stores order them.
    // The reports stored so far move over, counted by the network of their key (IPv4 /24, IPv6
    // /48); reports of pastes already purged are closed.
    R"sql(
    ALTER TABLE pastes ADD COLUMN IF NOT EXISTS creator_network bigint;
    ALTER TABLE pastes ADD COLUMN IF NOT EXISTS review_keep boolean NOT NULL DEFAULT false;
    CREATE TABLE IF NOT EXISTS paste_reports (
      paste_id text NOT NULL,
      network text NOT NULL,
      reason text NOT NULL,
      note text NOT NULL,
      created_at bigint NOT NULL,
      open boolean NOT NULL,
      vote boolean NOT NULL,
      closed_at bigint,
      PRIMARY KEY (paste_id, network)
    );
    CREATE INDEX IF NOT EXISTS paste_reports_closed ON paste_reports (closed_at) WHERE NOT open;
    CREATE INDEX IF NOT EXISTS paste_reports_votes ON paste_reports (paste_id, network)
      WHERE open AND vote;
    CREATE TABLE IF NOT EXISTS report_queue (
      paste_id text COLLATE "C" PRIMARY KEY,
      reports bigint NOT NULL,
      notes bigint NOT NULL,
      votes bigint NOT NULL,
      reasons bigint NOT NULL,
      latest_at bigint NOT NULL,
      latest_note text NOT NULL
    );
    CREATE INDEX IF NOT EXISTS report_queue_by_latest
      ON report_queue (latest_at DESC, paste_id DESC);
    CREATE TABLE IF NOT EXISTS report_counts (
      slot smallint PRIMARY KEY,
      pending bigint NOT NULL,
      open_reports bigint NOT NULL
    );
    CREATE TABLE IF NOT EXISTS withhold_charges (
      network text NOT NULL,
      at bigint NOT NULL,
      paste_id text NOT NULL,
      PRIMARY KEY (network, at, paste_id)
    );
    CREATE INDEX IF NOT EXISTS withhold_charges_by_age ON withhold_charges (at);

    CREATE FUNCTION sluice_migrated_network(key text) RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $fn$
    BEGIN
      IF family(key::inet) = 4 THEN
        RETURN host(network(set_masklen(key::inet, 24))) || '/24';
      END IF;
      RETURN host(network(set_masklen(key::inet, 48))) || '/48';
    EXCEPTION WHEN others THEN
      RETURN key;  -- not an address (a Unix socket peer): its own network
    END $fn$;
    INSERT INTO paste_reports (paste_id, network, reason, note, created_at, open, vote, closed_at)
      SELECT DISTINCT ON (r.paste_id, n.network) r.paste_id, n.network, r.reason, r.note,
             r.created_at, r.open AND p.id IS NOT NULL, r.open AND p.id IS NOT NULL,
             CASE WHEN NOT r.open THEN r.closed_at WHEN p.id IS NULL THEN r.created_at END
      FROM reports r LEFT JOIN pastes p ON p.id = r.paste_id
      CROSS JOIN LATERAL (SELECT sluice_migrated_network(r.client_key) AS network) n
      ORDER BY r.paste_id, n.network, r.open DESC, r.created_at DESC
      ON CONFLICT DO NOTHING;
    DROP FUNCTION sluice_migrated_network(text);
    INSERT INTO report_queue (paste_id, reports, notes, votes, reasons, latest_at, latest_note)
      SELECT paste_id, count(*), count(*), count(*) FILTER (WHERE vote),
             bit_or(CASE reason WHEN 'spam' THEN 1 WHEN 'malware' THEN 2 WHEN 'illegal' THEN 4
                    WHEN 'personal_data' THEN 8 ELSE 16 END),
             max(created_at), (array_agg(note ORDER BY created_at DESC))[1]
      FROM paste_reports WHERE open GROUP BY paste_id
      ON CONFLICT DO NOTHING;
    INSERT INTO report_counts (slot, pending, open_reports)
      SELECT 0, (SELECT count(*) FROM report_queue),
             (SELECT count(*) FROM paste_reports WHERE open)
      ON CONFLICT (slot) DO NOTHING;
    DROP TABLE reports;

    -- A report (MetaStore::AddReport): one row out, o_found false when there is no paste.
    CREATE OR REPLACE FUNCTION sluice_add_report(
        p_paste text, p_network text, p_reason text, p_note text, p_at bigint,
        p_from_creator boolean, p_reason_bit bigint, p_threshold bigint, p_per_network bigint,
        p_max_open bigint, p_may_withhold boolean, p_window bigint, p_spare bigint)
      RETURNS TABLE (o_found boolean, o_counted boolean, o_stored boolean, o_vote boolean,
                     o_reports bigint, o_votes bigint, o_withheld boolean, o_deferred boolean,
                     o_kept boolean, o_charged text)
      LANGUAGE plpgsql AS $fn$
    DECLARE
      v_moderation smallint;
      v_open bigint;
      v_queued boolean;
      v_charges bigint;
      v_network text;
      v_chosen text[] := '{}';
      v_spent bigint := 0;
    BEGIN
      o_found := true; o_counted := false; o_stored := false; o_vote := false;
      o_reports := 0; o_votes := 0; o_withheld := false; o_deferred := false; o_charged := '';
      SELECT p.moderation, p.review_keep INTO v_moderation, o_kept
        FROM pastes p WHERE p.id = p_paste FOR NO KEY UPDATE;
      IF NOT FOUND THEN
        o_found := false; o_kept := false;
        RETURN NEXT; RETURN;
      END IF;
      SELECT c.open_reports INTO v_open FROM report_counts c WHERE c.slot = 0 FOR UPDATE;
      SELECT q.reports, q.votes INTO o_reports, o_votes
        FROM report_queue q WHERE q.paste_id = p_paste;
      v_queued := FOUND;
      IF NOT v_queued THEN o_reports := 0; o_votes := 0; END IF;
      o_stored := COALESCE(v_open, 0) < p_max_open;
      IF o_stored THEN
        SELECT count(*) INTO v_charges FROM withhold_charges w
          WHERE w.network = p_network AND w.at > p_at - p_window;
        o_vote := NOT p_from_creator AND v_charges < p_per_network;
        INSERT INTO paste_reports (paste_id, network, reason, note, created_at, open, vote)
          VALUES (p_paste, p_network, p_reason, p_note, p_at, true, o_vote)
          ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
          o_vote := false;
          RETURN NEXT; RETURN;
        END IF;
        UPDATE report_counts c SET open_reports = c.open_reports + 1 WHERE c.slot = 0;
      END IF;
      o_counted := true;
      INSERT INTO report_queue AS q
          (paste_id, reports, notes, votes, reasons, latest_at, latest_note)
        VALUES (p_paste, 1, o_stored::int, o_vote::int, p_reason_bit, p_at,
                CASE WHEN o_stored THEN p_note ELSE '' END)
        ON CONFLICT (paste_id) DO UPDATE SET reports = q.reports + 1,
          notes = q.notes + EXCLUDED.notes, votes = q.votes + EXCLUDED.votes,
          reasons = q.reasons | EXCLUDED.reasons,
          latest_at = GREATEST(q.latest_at, EXCLUDED.latest_at),
          latest_note = CASE WHEN EXCLUDED.notes = 1 AND EXCLUDED.latest_at >= q.latest_at
                             THEN EXCLUDED.latest_note ELSE q.latest_note END
        RETURNING q.reports, q.votes INTO o_reports, o_votes;
      IF NOT v_queued THEN
        UPDATE report_counts c SET pending = c.pending + 1 WHERE c.slot = 0;
      END IF;
      IF p_threshold <= 0 OR v_moderation <> 0 OR o_kept OR o_votes < p_threshold THEN
        RETURN NEXT; RETURN;
      END IF;
      IF NOT p_may_withhold THEN
        o_deferred := true;
        RETURN NEXT; RETURN;
      END IF;
      FOR v_network IN SELECT r.network FROM paste_reports r
          WHERE r.paste_id = p_paste AND r.open AND r.vote
          ORDER BY r.network COLLATE "C" LIMIT p_threshold + p_spare LOOP
        EXIT WHEN cardinality(v_chosen) >= p_threshold;
        SELECT count(*) INTO v_charges FROM withhold_charges w
          WHERE w.network = v_network AND w.at > p_at - p_window;
        IF v_charges < p_per_network THEN
          v_chosen := v_chosen || v_network;
        ELSE
          UPDATE paste_reports r SET vote = false
            WHERE r.paste_id = p_paste AND r.network = v_network;
          v_spent := v_spent + 1;
        END IF;
      END LOOP;
      IF v_spent > 0 THEN
        UPDATE report_queue q SET votes = q.votes - v_spent WHERE q.paste_id = p_paste;
        o_votes := o_votes - v_spent;
      END IF;
      IF cardinality(v_chosen) >= p_threshold THEN
        INSERT INTO withhold_charges (network, at, paste_id)
          SELECT unnest(v_chosen), p_at, p_paste ON CONFLICT DO NOTHING;
        UPDATE pastes p SET moderation = 1,
            moderation_reason = 'reported from ' || cardinality(v_chosen) || ' networks',
            moderated_at = p_at
          WHERE p.id = p_paste;
        INSERT INTO outbox (paste_id, kind, attempts, enqueued_at, next_attempt_at)
          VALUES (p_paste, 'purge_edge', 0, p_at, p_at);
        o_withheld := true;
        o_charged := array_to_string(v_chosen, ',');
      END IF;
      RETURN NEXT;
    END $fn$;

    -- The pastes' open reports closed (at p_at; NULL: each as it was made) and their queue rows
    -- gone, with the counts: after a review, and when their rows are purged. Their pastes' rows
    -- are locked already, so the counts row is locked last, as by a report.
    CREATE OR REPLACE FUNCTION sluice_close_reports(p_ids text[], p_at bigint) RETURNS void
      LANGUAGE plpgsql AS $fn$
    DECLARE
      v_closed bigint;
      v_dequeued bigint;
    BEGIN
      UPDATE paste_reports r SET open = false, closed_at = COALESCE(p_at, r.created_at)
        WHERE r.paste_id = ANY (p_ids) AND r.open;
      GET DIAGNOSTICS v_closed = ROW_COUNT;
      DELETE FROM report_queue q WHERE q.paste_id = ANY (p_ids);
      GET DIAGNOSTICS v_dequeued = ROW_COUNT;
      IF v_closed > 0 OR v_dequeued > 0 THEN
        UPDATE report_counts c SET pending = c.pending - v_dequeued,
            open_reports = c.open_reports - v_closed
          WHERE c.slot = 0;
      END IF;
    END $fn$;

    -- A change of state (MetaStore::SetModeration): false when there is no paste.
    CREATE OR REPLACE FUNCTION sluice_set_moderation(
        p_paste text, p_state smallint, p_reason text, p_at bigint, p_keep boolean)
      RETURNS boolean LANGUAGE plpgsql AS $fn$
    BEGIN
      UPDATE pastes p SET moderation = p_state, moderation_reason = p_reason, moderated_at = p_at,
          review_keep = CASE WHEN p_state = 0 THEN p_keep ELSE p.review_keep END
        WHERE p.id = p_paste;
      IF NOT FOUND THEN RETURN false; END IF;
      IF p_state = 1 THEN
        INSERT INTO outbox (paste_id, kind, attempts, enqueued_at, next_attempt_at)
          VALUES (p_paste, 'purge_edge', 0, p_at, p_at);
        RETURN true;
      END IF;
      PERFORM sluice_close_reports(ARRAY[p_paste], p_at);
      RETURN true;
    END $fn$;

    -- The removal of expired and deleted rows (MetaStore::Purge): their outbox entries, their
    -- live bytes (a purged tombstone was counted out when it was marked), their open reports
    -- (closed as made) and their queue rows.
    CREATE OR REPLACE FUNCTION sluice_purge_pastes(p_ids text[]) RETURNS void
      LANGUAGE plpgsql AS $fn$
    BEGIN
      DELETE FROM outbox o WHERE o.paste_id = ANY (p_ids);
      WITH gone AS (DELETE FROM pastes p WHERE p.id = ANY (p_ids)
                    RETURNING p.id, p.size_bytes, p.deleted)
      UPDATE storage_usage u SET live_bytes = u.live_bytes - g.bytes
        FROM (SELECT ascii(right(id, 1)) % 16 AS slot, SUM(size_bytes) AS bytes
              FROM gone WHERE NOT deleted GROUP BY 1) g
        WHERE u.slot = g.slot;
      PERFORM sluice_close_reports(p_ids, NULL);
    END $fn$;
    )sql",
    // 9: end-to-end encrypted pastes (docs/encryption.md), as the SQLite store's migration 11. A
    // constant default rewrites nothing.
    R"sql(
    ALTER TABLE pastes ADD COLUMN IF NOT EXISTS encrypted boolean NOT NULL DEFAULT false;
    )sql",
    // 10: expiry after N views (MetaStore::Claim), as the SQLite store's migration 12 says. A
    // constant default rewrites nothing.
    R"sql(
    ALTER TABLE pastes ADD COLUMN IF NOT EXISTS views_left integer NOT NULL DEFAULT 1;
    )sql",
    // 11: the paste a fork was made from (PasteMeta::parent), as the SQLite store's migration 13.
    R"sql(
    ALTER TABLE pastes ADD COLUMN IF NOT EXISTS parent text;
    )sql",
    // 12: the leases under which one process of a fleet runs each background job
    // (MetaStore::HoldLease): its holder, and until when (Unix seconds, the server's clock).
    R"sql(
    CREATE TABLE IF NOT EXISTS leases (
      name text PRIMARY KEY,
      holder text NOT NULL,
      until bigint NOT NULL
    );
    )sql",
    // 13: the content blocklist, as the SQLite store's migration 15 says. sluice_block_content
    // takes the counts row's lock first, so concurrent adds from several processes are ordered
    // and max_blocked_contents holds across them; it answers 0 (there already), 1 (added) or 2
    // (the list is full).
    R"sql(
    CREATE TABLE IF NOT EXISTS blocked_contents (
      sha256 bytea PRIMARY KEY,
      added_at bigint NOT NULL,
      source text NOT NULL,
      reason text NOT NULL
    );
    CREATE TABLE IF NOT EXISTS blocked_contents_state (
      slot smallint PRIMARY KEY,
      version bigint NOT NULL,
      entries bigint NOT NULL
    );
    INSERT INTO blocked_contents_state (slot, version, entries) VALUES (0, 0, 0)
      ON CONFLICT (slot) DO NOTHING;
    CREATE OR REPLACE FUNCTION sluice_block_content(p_sha256 bytea, p_at bigint, p_source text,
                                                    p_reason text, p_max bigint)
    RETURNS smallint LANGUAGE plpgsql AS $$
    DECLARE
      n bigint;
    BEGIN
      SELECT entries INTO n FROM blocked_contents_state WHERE slot = 0 FOR UPDATE;
      IF EXISTS (SELECT 1 FROM blocked_contents WHERE sha256 = p_sha256) THEN
        RETURN 0;
      END IF;
      IF n >= p_max THEN
        RETURN 2;
      END IF;
      INSERT INTO blocked_contents (sha256, added_at, source, reason)
        VALUES (p_sha256, p_at, p_source, p_reason);
      UPDATE blocked_contents_state SET version = version + 1, entries = entries + 1
        WHERE slot = 0;
      RETURN 1;
    END $$;
    )sql",
    // 14: the takedown clock, as the SQLite store's migration 16 says: each queue entry's
    // arrival, indexed. A trigger dates a new entry by its first report (the row's latest_at when
    // it is inserted), so sluice_add_report stays as migration 8 made it: a conflict's update
    // never touches first_at.
    R"sql(
    ALTER TABLE report_queue ADD COLUMN IF NOT EXISTS first_at bigint;
    UPDATE report_queue q SET first_at = COALESCE((SELECT min(r.created_at) FROM paste_reports r
        WHERE r.paste_id = q.paste_id AND r.open), q.latest_at)
      WHERE q.first_at IS NULL;
    CREATE OR REPLACE FUNCTION sluice_queue_arrival() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      NEW.first_at := COALESCE(NEW.first_at, NEW.latest_at);
      RETURN NEW;
    END $fn$;
    DROP TRIGGER IF EXISTS report_queue_arrival ON report_queue;
    CREATE TRIGGER report_queue_arrival BEFORE INSERT ON report_queue
      FOR EACH ROW EXECUTE FUNCTION sluice_queue_arrival();
    ALTER TABLE report_queue ALTER COLUMN first_at SET NOT NULL;
    CREATE INDEX IF NOT EXISTS report_queue_by_arrival ON report_queue (first_at);
    )sql",
    // 15: creator tokens, as the SQLite store's migration 17 says.
    // sluice_add_creator_token takes the state row's lock first, so concurrent adds from several
    // processes are ordered and max_creator_tokens holds across them; it answers 1 (added) or 2
    // (the store holds the maximum of live tokens).
    R"sql(
    CREATE TABLE IF NOT EXISTS creator_tokens (
      id text PRIMARY KEY,
      label text NOT NULL,
      secret_sha256 bytea NOT NULL UNIQUE,
      rate_milli bigint NOT NULL,
      burst bigint NOT NULL,
      bytes_rate bigint NOT NULL,
      bytes_burst bigint NOT NULL,
      expires_at bigint NOT NULL,
      created_at bigint NOT NULL,
      revoked_at bigint NOT NULL
    );
    CREATE TABLE IF NOT EXISTS creator_tokens_state (
      slot smallint PRIMARY KEY,
      version bigint NOT NULL
    );
    INSERT INTO creator_tokens_state (slot, version) VALUES (0, 0) ON CONFLICT (slot) DO NOTHING;
    CREATE OR REPLACE FUNCTION sluice_add_creator_token(
        p_id text, p_label text, p_sha256 bytea, p_rate_milli bigint, p_burst bigint,
        p_bytes_rate bigint, p_bytes_burst bigint, p_expires_at bigint, p_created_at bigint,
        p_max bigint, p_now bigint)
    RETURNS smallint LANGUAGE plpgsql AS $$
    DECLARE
      n bigint;
    BEGIN
      PERFORM 1 FROM creator_tokens_state WHERE slot = 0 FOR UPDATE;
      SELECT count(*) INTO n FROM creator_tokens
        WHERE revoked_at = 0 AND (expires_at = 0 OR expires_at > p_now);
      IF n >= p_max THEN
        RETURN 2;
      END IF;
      INSERT INTO creator_tokens (id, label, secret_sha256, rate_milli, burst, bytes_rate,
                                  bytes_burst, expires_at, created_at, revoked_at)
        VALUES (p_id, p_label, p_sha256, p_rate_milli, p_burst, p_bytes_rate, p_bytes_burst,
                p_expires_at, p_created_at, 0);
      UPDATE creator_tokens_state SET version = version + 1 WHERE slot = 0;
      RETURN 1;
    END $$;
    )sql",
    // 16: the transparency report's counters, as the SQLite store's migration 18 says. Each
    // function adds in the statement of the action it counts (postgres_meta_moderation.cc), so the
    // count commits with the action or not at all. sluice_tally_each adds its rows in key order,
    // so two statements that bump the same counters lock them in the same order.
    R"sql(
    CREATE TABLE IF NOT EXISTS transparency_counts (
      month text COLLATE "C" NOT NULL,
      kind text COLLATE "C" NOT NULL,
      label text COLLATE "C" NOT NULL,
      n bigint NOT NULL,
      PRIMARY KEY (month, kind, label)
    );
    CREATE OR REPLACE FUNCTION sluice_tally(p_month text, p_kind text, p_label text, p_n bigint)
    RETURNS integer LANGUAGE sql AS $$
      INSERT INTO transparency_counts (month, kind, label, n) VALUES (p_month, p_kind, p_label, p_n)
        ON CONFLICT (month, kind, label) DO UPDATE SET n = transparency_counts.n + excluded.n;
      SELECT 1;
    $$;
    CREATE OR REPLACE FUNCTION sluice_tally_each(p_months text[], p_kinds text[],
                                                 p_labels text[], p_ns bigint[])
    RETURNS integer LANGUAGE sql AS $$
      INSERT INTO transparency_counts (month, kind, label, n)
        SELECT m, k, l, sum(n) FROM unnest(p_months, p_kinds, p_labels, p_ns) AS t(m, k, l, n)
          WHERE n <> 0 GROUP BY m, k, l ORDER BY m, k, l
        ON CONFLICT (month, kind, label) DO UPDATE SET n = transparency_counts.n + excluded.n;
      SELECT 1;
    $$;
    -- The label of a time to action: the first of the bounds (ascending) that holds it, or inf.
    CREATE OR REPLACE FUNCTION sluice_tally_time(p_month text, p_seconds bigint, p_bounds bigint[])
    RETURNS integer LANGUAGE sql AS $$
      SELECT sluice_tally(p_month, 'time_to_action',
                          COALESCE((SELECT min(b)::text FROM unnest(p_bounds) AS b
                                    WHERE b >= p_seconds), 'inf'), 1);
    $$;
    )sql",
    // 17: notices, as the SQLite store's migration 19 says. sluice_add_notice takes a
    // transaction-scoped advisory lock first, so concurrent notices from several processes are
    // ordered (notices are rare) and max_notices holds across them; it classifies each named
    // paste, then stores the notice and withholds its pastes in the one transaction, and answers
    // o_status 0 (stored now), 1 (the sender's reference was stored: o_id is it), 2 (no paste
    // could be withheld: nothing stored) or 3 (the store holds max_notices), with the outcomes.
    R"sql(
    CREATE TABLE IF NOT EXISTS notices (
      id bigserial PRIMARY KEY,
      sender text NOT NULL,
      reference text NOT NULL,
      category text NOT NULL,
      deadline_at bigint NOT NULL,
      received_at bigint NOT NULL,
      open_pastes bigint NOT NULL,
      UNIQUE (sender, reference)
    );
    CREATE INDEX IF NOT EXISTS notices_open_by_arrival ON notices (received_at, id)
      WHERE open_pastes > 0;
    CREATE TABLE IF NOT EXISTS notice_pastes (
      notice_id bigint NOT NULL,
      paste_id text NOT NULL,
      ord int NOT NULL,
      outcome text NOT NULL,
      open boolean NOT NULL,
      PRIMARY KEY (notice_id, paste_id)
    );
    CREATE INDEX IF NOT EXISTS notice_pastes_open_by_paste ON notice_pastes (paste_id)
      WHERE open;
    CREATE OR REPLACE FUNCTION sluice_add_notice(
        p_sender text, p_reference text, p_category text, p_deadline_at bigint, p_at bigint,
        p_pastes text[], p_max bigint)
    RETURNS TABLE (o_status smallint, o_id bigint, o_outcomes text) LANGUAGE plpgsql AS $$
    DECLARE
      v_outcomes text[] := '{}';
      v_withheld bigint := 0;
      v_mod smallint;
      v_deleted boolean;
      v_expires bigint;
      v_id bigint;
      i int;
    BEGIN
      PERFORM pg_advisory_xact_lock(126879289336678);
      SELECT n.id INTO v_id FROM notices n WHERE n.sender = p_sender AND n.reference = p_reference;
      IF FOUND THEN
        RETURN QUERY SELECT 1::smallint, v_id, ''::text;
        RETURN;
      END IF;
      FOR i IN 1 .. coalesce(array_length(p_pastes, 1), 0) LOOP
        v_mod := NULL;
        SELECT p.moderation, p.deleted, p.expires_at INTO v_mod, v_deleted, v_expires
          FROM pastes p WHERE p.id = p_pastes[i] FOR UPDATE;
        IF v_mod IS NOT NULL AND v_mod = 2 THEN
          v_outcomes := v_outcomes || 'taken_down'::text;
        ELSIF v_mod IS NULL OR v_deleted OR v_expires <= p_at THEN
          v_outcomes := v_outcomes || 'not_found'::text;
        ELSE
          v_outcomes := v_outcomes || 'withheld'::text;
          v_withheld := v_withheld + 1;
        END IF;
      END LOOP;
      IF v_withheld = 0 THEN
        RETURN QUERY SELECT 2::smallint, 0::bigint, array_to_string(v_outcomes, ',');
        RETURN;
      END IF;
      IF (SELECT count(*) FROM notices) >= p_max THEN
        RETURN QUERY SELECT 3::smallint, 0::bigint, array_to_string(v_outcomes, ',');
        RETURN;
      END IF;
      INSERT INTO notices (sender, reference, category, deadline_at, received_at, open_pastes)
        VALUES (p_sender, p_reference, p_category, p_deadline_at, p_at, v_withheld)
        RETURNING id INTO v_id;
      FOR i IN 1 .. array_length(p_pastes, 1) LOOP
        INSERT INTO notice_pastes (notice_id, paste_id, ord, outcome, open)
          VALUES (v_id, p_pastes[i], i, v_outcomes[i], v_outcomes[i] = 'withheld')
          ON CONFLICT DO NOTHING;
        IF v_outcomes[i] = 'withheld' THEN
          UPDATE pastes SET moderation = 3,
              moderation_reason = 'notice ' || p_reference || ' from ' || p_sender,
              moderated_at = p_at
            WHERE id = p_pastes[i];
          INSERT INTO outbox (paste_id, kind, attempts, enqueued_at, next_attempt_at)
            VALUES (p_pastes[i], 'purge_edge', 0, p_at, p_at);
        END IF;
      END LOOP;
      RETURN QUERY SELECT 0::smallint, v_id, array_to_string(v_outcomes, ',');
    END $$;
    )sql",
    // 18: a purged paste (expired, or deleted and swept before the operator acted) closes its
    // rows in the notices naming it, as the SQLite and memory stores do in MetaStore::Purge, so
    // the takedown clock's kind="notice" waits on nothing that is gone. PgMetaStore::Purge calls
    // it in the statement that calls sluice_purge_pastes (one transaction).
    R"sql(
    CREATE OR REPLACE FUNCTION sluice_close_purged_notices(p_ids text[]) RETURNS void
      LANGUAGE sql AS $fn$
      WITH closed AS (UPDATE notice_pastes SET open = false
                      WHERE paste_id = ANY (p_ids) AND open RETURNING notice_id)
      UPDATE notices n SET open_pastes = n.open_pastes - c.k
        FROM (SELECT notice_id, count(*) AS k FROM closed GROUP BY notice_id) c
        WHERE n.id = c.notice_id;
    $fn$;
    )sql",
    // 19: the closed notices in arrival order, and sluice_make_room_for_notices, which deletes the
    // oldest closed notices a store holding p_max needs to take one more, under
    // sluice_add_notice's lock, and answers whether it could (as the SQLite store's migration 20
    // and MetaStore::AddNotice say). PgMetaStore::AddNotice calls it when sluice_add_notice
    // answers 3, then asks again: sluice_add_notice is not restated here.
    R"sql(
    CREATE INDEX IF NOT EXISTS notices_closed ON notices (id) WHERE open_pastes = 0;
    CREATE OR REPLACE FUNCTION sluice_make_room_for_notices(p_max bigint) RETURNS boolean
      LANGUAGE plpgsql AS $fn$
    DECLARE
      v_needed bigint;
      v_ids bigint[];
    BEGIN
      PERFORM pg_advisory_xact_lock(126879289336678);
      v_needed := (SELECT count(*) FROM notices) - p_max + 1;
      IF v_needed <= 0 THEN
        RETURN true;
      END IF;
      v_ids := ARRAY(SELECT id FROM notices WHERE open_pastes = 0 ORDER BY id LIMIT v_needed);
      IF coalesce(array_length(v_ids, 1), 0) < v_needed THEN
        RETURN false;
      END IF;
      DELETE FROM notice_pastes WHERE notice_id = ANY (v_ids);
      DELETE FROM notices WHERE id = ANY (v_ids);
      RETURN true;
    END $fn$;
    )sql",
    // 20: sluice_import_notice stores another store's notice as it is (MetaStore::ImportNotice,
    // for `sluice admin migrate-store`): under sluice_add_notice's lock, so concurrent notices
    // keep p_max, in one transaction with the room it makes. It withholds and enqueues nothing
    // (the pastes' state came with their rows) and answers 0 (stored now), 1 (the sender's
    // reference was stored: nothing changed) or 3 (the store holds p_max, too few closed).
    R"sql(
    CREATE OR REPLACE FUNCTION sluice_import_notice(
        p_sender text, p_reference text, p_category text, p_deadline_at bigint, p_at bigint,
        p_open_pastes bigint, p_pastes text[], p_outcomes text[], p_open boolean[], p_max bigint)
    RETURNS smallint LANGUAGE plpgsql AS $fn$
    DECLARE
      v_id bigint;
    BEGIN
      PERFORM pg_advisory_xact_lock(126879289336678);
      IF EXISTS (SELECT 1 FROM notices n WHERE n.sender = p_sender
                 AND n.reference = p_reference) THEN
        RETURN 1;
      END IF;
      IF NOT sluice_make_room_for_notices(p_max) THEN
        RETURN 3;
      END IF;
      INSERT INTO notices (sender, reference, category, deadline_at, received_at, open_pastes)
        VALUES (p_sender, p_reference, p_category, p_deadline_at, p_at, p_open_pastes)
        RETURNING id INTO v_id;
      INSERT INTO notice_pastes (notice_id, paste_id, ord, outcome, open)
        SELECT v_id, named.paste_id, named.ord, named.outcome, named.is_open
          FROM unnest(p_pastes, p_outcomes, p_open) WITH ORDINALITY
            AS named (paste_id, outcome, is_open, ord)
        ON CONFLICT DO NOTHING;
      RETURN 0;
    END $fn$;
    )sql",
};

// One key for every sluice process migrating this database: "sluice" in ASCII.
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(126879289336677)";

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};

std::string Trimmed(const char* message) {
  std::string s = message ? message : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Runs `sql` (several statements allowed); returns its result or the server's message.
Result<pg::PgResult> Run(PGconn* conn, const char* sql) {
  pg::PgResult r(PQexec(conn, sql));
  const ExecStatusType status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return r;
  return MakeError(ErrorCode::kInternal,
                   fmt::format("postgres migration: {}: {}", sql,
                               Trimmed(r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn))),
                   "migration_failed");
}

}  // namespace

int PostgresSchemaVersion() { return static_cast<int>(std::size(kMigrations)); }

Status MigratePostgres(const std::string& url, int* applied) {
  if (applied) *applied = 0;
  const char* keywords[] = {"dbname", "application_name", "connect_timeout", nullptr};
  const char* values[] = {url.c_str(), "sluice-migrate", "10", nullptr};
  std::unique_ptr<PGconn, ConnDeleter> conn(PQconnectdbParams(keywords, values, 1));
  if (!conn || PQstatus(conn.get()) != CONNECTION_OK) {
    return pg::RefusedError(conn ? Trimmed(PQerrorMessage(conn.get())) : "out of memory");
  }
  const int known = PostgresSchemaVersion();
  for (;;) {
    // Under the lock, read the version and apply the next step, all in one transaction: a process
    // that waited for the lock sees the steps another one committed, and skips them.
    auto step = [&]() -> Result<bool> {
      for (const char* sql :
           // SET LOCAL (quiet IF NOT EXISTS) ends with the transaction: behind pgbouncer in
           // transaction mode a session SET would stay on a server connection other clients get.
           {"BEGIN", "SET LOCAL client_min_messages = warning", kMigrationLock,
            "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, "
            "applied_at timestamptz NOT NULL DEFAULT now())"}) {
        if (auto r = Run(conn.get(), sql); !r.ok()) return r.error();
      }
      auto current = Run(conn.get(), "SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
      if (!current.ok()) return current.error();
      const int version = std::atoi(PQgetvalue(current->get(), 0, 0));
      if (version > known) {
        return MakeError(ErrorCode::kInternal,
                         fmt::format("metadata schema version {} is newer than this binary knows "
                                     "({}); upgrade the binary",
                                     version, known),
                         "schema_too_new");
      }
      if (version == known) {
        if (auto r = Run(conn.get(), "COMMIT"); !r.ok()) return r.error();
        return false;
      }
      if (auto r = Run(conn.get(), kMigrations[version]); !r.ok()) return r.error();
      const std::string stamp =
          fmt::format("INSERT INTO schema_migrations (version) VALUES ({})", version + 1);
      if (auto r = Run(conn.get(), stamp.c_str()); !r.ok()) return r.error();
      if (auto r = Run(conn.get(), "COMMIT"); !r.ok()) return r.error();
      spdlog::info("postgres metadata schema migrated to version {}", version + 1);
      return true;
    };
    Result<bool> more = step();
    if (!more.ok()) {
      pg::PgResult(PQexec(conn.get(), "ROLLBACK"));
      if (PQstatus(conn.get()) != CONNECTION_OK) {
        Error e = more.error();
        e.code = ErrorCode::kUnavailable;
        return e;
      }
      return more.error();
    }
    if (!*more) return Ok();
    if (applied) ++*applied;
  }
}

}  // namespace sluice::store
