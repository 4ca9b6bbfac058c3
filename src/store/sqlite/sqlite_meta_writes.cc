// SqliteMetaStore's writes of a paste (sqlite_meta_store.h): insert, claim, delete, the outbox and
// the purge, each applied on the committer thread inside its own savepoint (Commit).
#include <span>

#include "bodies_table.h"
#include "sqlite_meta_store.h"

namespace sluice::store::sqlite {

awaitable<Result<PasteMeta>> SqliteMetaStore::Claim(PasteId id, int64_t now, admission::Deadline) {
  auto claimed = std::make_shared<std::optional<PasteMeta>>();
  // Built outside the co_await: g++ 12 mishandles non-trivial temporaries inside one.
  auto submitting = committer_->Submit(ClaimOp{id, now, claimed});
  Status done = co_await std::move(submitting);
  if (!done.ok()) co_return done.error();
  if (!*claimed) co_return NoSuchPaste();
  co_return std::move(**claimed);
}

Status SqliteMetaStore::Apply(Db& db, const InsertOp& op) {
  // The embedded statement timeout (docs/overload.md, "Retries, breakers, timeouts"): an insert
  // whose caller already gave up (and answered 500) must not publish the paste afterwards.
  if (op.deadline.Expired(SystemClock::Instance())) {
    Error e = MakeError(ErrorCode::kDeadlineExceeded, "insert abandoned before it ran",
                        "deadline_exceeded");
    e.never_sent = true;  // surely not written (MetaStore::Insert)
    return e;
  }
  try {
    // The body in the row (migration 22): one page holds both for a later read.
    Statement& s = db.Prepare(
        "INSERT INTO pastes (id, created_at, expires_at, size_bytes, token_hash, deleted, "
        "body_sha256, burn, creator_network, encrypted, views_left, parent, body, body_codec) "
        "VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?)");
    const PasteMeta& m = op.meta;
    s.Bind(1, m.id.view()).Bind(2, m.created_at).Bind(3, m.expires_at);
    s.Bind(4, static_cast<int64_t>(m.size_bytes))
        .Bind(5, std::span<const unsigned char>(m.token_hash));
    // Left unbound, a column is NULL (Prepare clears the bindings).
    if (m.body_sha256) s.Bind(6, std::span<const unsigned char>(*m.body_sha256));
    s.Bind(7, int64_t{m.burn ? 1 : 0});
    if (m.creator_network) s.Bind(8, static_cast<int64_t>(*m.creator_network));
    s.Bind(9, int64_t{m.encrypted ? 1 : 0});
    s.Bind(10, static_cast<int64_t>(m.burn ? m.views_left : 1));
    if (m.parent) s.Bind(11, m.parent->view());
    if (op.body.bytes) {
      s.BindUnowned(12, *op.body.bytes).Bind(13, static_cast<int64_t>(op.body.codec));
    }
    if (Status inserted = Done(db, s, "insert"); !inserted.ok()) return inserted;
    return CountLive(db, static_cast<int64_t>(m.size_bytes));
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kUnavailable, e.what(), "storage_unavailable");
  }
}

Status SqliteMetaStore::Apply(Db& db, const BodyPutOp& op) {
  if (op.deadline.Expired(SystemClock::Instance())) {
    // Abandoned by its caller while queued: writing it now would only make an orphan.
    return MakeError(ErrorCode::kDeadlineExceeded, "write abandoned before it ran",
                     "deadline_exceeded");
  }
  return sqlite::WriteBodyRow(db, op.id, *op.body, op.written_at, &StorageError);
}

// The row stays (a tombstone, until purged) without its body: in the row since migration 22, by
// number in `inline_bodies` before, by id in `bodies` before that or when written apart.
Status SqliteMetaStore::Apply(Db& db, const BodyDeleteOp& op) {
  for (const PasteId& id : op.ids) {
    Statement& in_row = db.Prepare(
        "UPDATE pastes SET body = NULL, body_codec = NULL WHERE id = ? AND body IS NOT NULL");
    in_row.Bind(1, id.view());
    if (Status s = Done(db, in_row, "delete body"); !s.ok()) return s;
    // A create writes its body in one place: one found in the row is the only one (and the
    // outbox's deletes are background work on the one writer, so the lookups it skips count).
    if (sqlite3_changes(db.raw()) > 0) continue;
    Statement& number = db.Prepare("SELECT body_n FROM pastes WHERE id = ? AND body_n IS NOT NULL");
    number.Bind(1, id.view());
    const int found = number.Step();
    if (found == SQLITE_ROW) {
      const int64_t n = number.Int(0);
      number.Reset();
      if (Status s = DeleteInlineBody(db, n); !s.ok()) return s;
      Statement& forget = db.Prepare("UPDATE pastes SET body_n = NULL WHERE id = ?");
      forget.Bind(1, id.view());
      if (Status s = Done(db, forget, "delete body"); !s.ok()) return s;
    } else if (found != SQLITE_DONE) {
      return StorageError(db, "delete body");
    }
    if (Status s = sqlite::DeleteBodyRow(db, id, &StorageError); !s.ok()) return s;
  }
  return Ok();
}

Status SqliteMetaStore::DeleteInlineBody(Db& db, int64_t n) {
  Statement& s = db.Prepare("DELETE FROM inline_bodies WHERE n = ?");
  s.Bind(1, n);
  return Done(db, s, "delete body");
}

// Adds `delta` to the live bytes, inside the op's savepoint (and to the op's share of the
// batch's change, for the ledger).
Status SqliteMetaStore::CountLive(Db& db, int64_t delta) {
  if (delta == 0) return Ok();
  Statement& count =
      db.Prepare("UPDATE storage_usage SET live_bytes = live_bytes + ? WHERE slot = 0");
  count.Bind(1, delta);
  Status counted = Done(db, count, "storage usage");
  if (counted.ok()) op_live_delta_ += delta;
  return counted;
}

Status SqliteMetaStore::Enqueue(Db& db, const PasteId& id, int64_t now) {
  Statement& enqueue = db.Prepare(
      "INSERT INTO outbox (paste_id, kind, attempts, enqueued_at, next_attempt_at) "
      "VALUES (?, 'delete_body', 0, ?, ?)");
  enqueue.Bind(1, id.view()).Bind(2, now).Bind(3, now);
  return Done(db, enqueue, "enqueue");
}

// One writer runs every op, so the UPDATE's condition is the claim: each op takes one view of a
// live row, the one that takes the last marks it deleted (the SET's right-hand sides read the
// row before the update), and every later one finds it marked and changes nothing. A withheld
// or taken-down row is never claimed: moderation answers 451 for it, and burning it would
// destroy what the operator is reviewing.
Status SqliteMetaStore::Apply(Db& db, const ClaimOp& op) {
  try {
    Statement& mark = db.Prepare(
        "UPDATE pastes SET views_left = views_left - 1, deleted = (views_left <= 1) "
        "WHERE id = ? AND burn = 1 AND deleted = 0 AND moderation = 0 AND expires_at > ? AND "
        "views_left >= 1 RETURNING " SLUICE_ROW_COLUMNS);
    mark.Bind(1, op.id.view()).Bind(2, op.now);
    const int rc = mark.Step();
    if (rc == SQLITE_DONE) return Ok();  // nothing to claim: *op.claimed stays empty
    if (rc != SQLITE_ROW) return StorageError(db, "claim");
    PasteMeta before = RowToMeta(op.id, mark);
    // RETURNING shows the row after the update.
    const bool last = before.deleted;
    before.deleted = false;
    ++before.views_left;
    mark.Reset();
    if (!last) {
      *op.claimed = std::move(before);
      return Ok();
    }
    if (Status s = Enqueue(db, op.id, op.now); !s.ok()) return s;
    if (Status s = CountLive(db, -static_cast<int64_t>(before.size_bytes)); !s.ok()) return s;
    *op.claimed = std::move(before);
    return Ok();
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kUnavailable, e.what(), "storage_unavailable");
  }
}

Status SqliteMetaStore::Apply(Db& db, const MarkDeletedOp& op) {
  try {
    Statement& mark = db.Prepare(
        "UPDATE pastes SET deleted = 1 WHERE id = ? AND deleted = 0 RETURNING size_bytes");
    mark.Bind(1, op.id.view());
    const int rc = mark.Step();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return StorageError(db, "mark deleted");
    const int64_t freed = rc == SQLITE_ROW ? mark.Int(0) : 0;
    mark.Reset();
    if (rc == SQLITE_DONE) {
      Statement& exists = db.Prepare("SELECT 1 FROM pastes WHERE id = ?");
      exists.Bind(1, op.id.view());
      return exists.Step() == SQLITE_ROW ? Ok()  // already a tombstone: deleting twice is success
                                         : Status(NoSuchPaste());
    }
    if (Status s = Enqueue(db, op.id, op.now); !s.ok()) return s;
    return CountLive(db, -freed);
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kUnavailable, e.what(), "storage_unavailable");
  }
}

Status SqliteMetaStore::Apply(Db& db, const FinishOutboxOp& op) {
  Statement& s = db.Prepare("DELETE FROM outbox WHERE seq = ?");
  s.Bind(1, op.seq);
  return Done(db, s, "finish outbox");
}

Status SqliteMetaStore::Apply(Db& db, const RetryOutboxOp& op) {
  Statement& s =
      db.Prepare("UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ? WHERE seq = ?");
  s.Bind(1, op.next_attempt_at).Bind(2, op.seq);
  return Done(db, s, "retry outbox");
}

Status SqliteMetaStore::Apply(Db& db, const PurgeOp& op) {
  // A purged tombstone was counted out when it was marked; an expired live row is counted out
  // now. Its body goes with it, in the row or (written before migration 22) by its number:
  // nothing else could ever find it again.
  Statement& row = db.Prepare(
      "DELETE FROM pastes WHERE id = ? RETURNING CASE WHEN deleted = 0 THEN size_bytes ELSE 0 "
      "END, body_n");
  Statement& owed = db.Prepare("DELETE FROM outbox WHERE paste_id = ?");
  for (const PasteId& id : op.ids) {
    // Its open reports need no review any more: closed as made, so that report_retention
    // dates them from then (PurgeReports), and out of the queue.
    if (Status s = CloseReports(db, id, std::nullopt); !s.ok()) return s;
    // And it is out of the notices naming it: gone before the operator acted, it waits for
    // nothing (the takedown clock's kind="notice" stops counting it).
    if (Status s = CloseNoticeRows(db, id, nullptr); !s.ok()) return s;
    row.Reset();
    row.Bind(1, id.view());
    const int rc = row.Step();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return StorageError(db, "purge");
    const int64_t freed = rc == SQLITE_ROW ? row.Int(0) : 0;
    const std::optional<int64_t> body_n = rc == SQLITE_ROW ? row.OptionalInt(1) : std::nullopt;
    row.Reset();
    if (body_n) {
      if (Status s = DeleteInlineBody(db, *body_n); !s.ok()) return s;
    }
    if (Status s = CountLive(db, -freed); !s.ok()) return s;
    owed.Reset();
    owed.Bind(1, id.view());
    if (Status s = Done(db, owed, "purge outbox"); !s.ok()) return s;
  }
  return Ok();
}

}  // namespace sluice::store::sqlite
