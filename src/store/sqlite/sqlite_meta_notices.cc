// SqliteMetaStore's notices (sqlite_meta_store.h; docs/moderation.md, "Notices"): each withholds
// the pastes it names in its own op (one savepoint of the committer's batch), unique by sender and
// reference.
#include <fmt/format.h>

#include "sluice/asio/completion.h"
#include "sqlite_meta_store.h"

namespace sluice::store::sqlite {

awaitable<Result<NoticeOutcome>> SqliteMetaStore::AddNotice(Notice notice, int64_t max_notices,
                                                            admission::Deadline) {
  auto outcome = std::make_shared<NoticeOutcome>();
  auto submitting = committer_->Submit(AddNoticeOp{std::move(notice), max_notices, outcome});
  const Status s = co_await std::move(submitting);
  if (!s.ok()) co_return s.error();
  co_return *outcome;
}

awaitable<Result<std::vector<Notice>>> SqliteMetaStore::CloseNotices(PasteId id, int64_t at,
                                                                     admission::Deadline) {
  auto closed = std::make_shared<std::vector<Notice>>();
  auto submitting = committer_->Submit(CloseNoticesOp{id, at, closed});
  const Status s = co_await std::move(submitting);
  if (!s.ok()) co_return s.error();
  co_return std::move(*closed);
}

Result<Notice> SqliteMetaStore::ReadNotice(Db& db, int64_t id, bool with_pastes) {
  Statement& s = db.Prepare(
      "SELECT sender, reference, category, deadline_at, received_at, open_pastes FROM notices "
      "WHERE id = ?");
  s.Bind(1, id);
  const int rc = s.Step();
  if (rc == SQLITE_DONE) {
    s.Reset();
    return MakeError(ErrorCode::kNotFound, "no such notice", "not_found");
  }
  if (rc != SQLITE_ROW) return StorageError(db, "notice");
  Notice n;
  n.id = id;
  n.sender = std::string(s.Text(0));
  n.reference = std::string(s.Text(1));
  n.category = std::string(s.Text(2));
  if (s.Int(3) != 0) n.deadline_at = s.Int(3);
  n.received_at = s.Int(4);
  n.open_pastes = s.Int(5);
  s.Reset();
  if (!with_pastes) return n;
  // In the order the notice named them (rowid order).
  Statement& p = db.Prepare(
      "SELECT paste_id, outcome, open FROM notice_pastes WHERE notice_id = ? ORDER BY rowid");
  p.Bind(1, id);
  int prc;
  while ((prc = p.Step()) == SQLITE_ROW) {
    n.pastes.push_back(NoticePaste{std::string(p.Text(0)), std::string(p.Text(1)), p.Int(2) != 0});
  }
  p.Reset();
  if (prc != SQLITE_DONE) return StorageError(db, "notice pastes");
  return n;
}

awaitable<Result<std::vector<Notice>>> SqliteMetaStore::OpenNotices(size_t limit,
                                                                    admission::Deadline deadline) {
  return asio_glue::RunBlocking(
      moderation_pool(), [this, limit, deadline]() -> Result<std::vector<Notice>> {
        return readers_.Read(deadline, [&](Db& db) -> Result<std::vector<Notice>> {
          // A range of the partial index of open notices by arrival: a page costs its length.
          Statement& s = db.Prepare(
              "SELECT id FROM notices WHERE open_pastes > 0 ORDER BY received_at, id LIMIT ?");
          s.Bind(1, static_cast<int64_t>(limit));
          return ReadNotices(db, s, "open notices");
        });
      });
}

awaitable<Result<std::vector<Notice>>> SqliteMetaStore::Notices(int64_t after_id, size_t limit,
                                                                admission::Deadline deadline) {
  return asio_glue::RunBlocking(
      moderation_pool(), [this, after_id, limit, deadline]() -> Result<std::vector<Notice>> {
        return readers_.Read(deadline, [&](Db& db) -> Result<std::vector<Notice>> {
          // A range of the primary key: a page costs its length.
          Statement& s = db.Prepare("SELECT id FROM notices WHERE id > ? ORDER BY id LIMIT ?");
          s.Bind(1, after_id).Bind(2, static_cast<int64_t>(limit));
          return ReadNotices(db, s, "notices");
        });
      });
}

Result<std::vector<Notice>> SqliteMetaStore::ReadNotices(Db& db, Statement& ids,
                                                         std::string_view what) {
  std::vector<int64_t> listed;
  int rc;
  while ((rc = ids.Step()) == SQLITE_ROW) listed.push_back(ids.Int(0));
  ids.Reset();
  if (rc != SQLITE_DONE) return StorageError(db, what);
  std::vector<Notice> out;
  for (int64_t id : listed) {
    Result<Notice> n = ReadNotice(db, id, true);
    if (!n.ok()) return n.error();
    out.push_back(std::move(*n));
  }
  return out;
}

awaitable<Result<bool>> SqliteMetaStore::ImportNotice(Notice notice, int64_t max_notices,
                                                      admission::Deadline) {
  auto stored = std::make_shared<bool>(false);
  auto submitting = committer_->Submit(ImportNoticeOp{std::move(notice), max_notices, stored});
  const Status s = co_await std::move(submitting);
  if (!s.ok()) co_return s.error();
  co_return *stored;
}

Status SqliteMetaStore::Apply(Db& db, const AddNoticeOp& op) {
  NoticeOutcome& out = *op.outcome;
  out.notice = op.notice;
  Notice& n = out.notice;
  Result<int64_t> existing = FindNotice(db, n.sender, n.reference);
  if (!existing.ok()) return existing.error();
  if (*existing != 0) {
    Result<Notice> stored = ReadNotice(db, *existing, true);
    if (!stored.ok()) return stored.error();
    out = NoticeOutcome{false, true, std::move(*stored)};
    return Ok();
  }
  int64_t withheld = 0;
  for (NoticePaste& p : n.pastes) {
    Statement& row = db.Prepare("SELECT moderation, deleted, expires_at FROM pastes WHERE id = ?");
    row.Bind(1, p.paste);
    const int rc = row.Step();
    const bool found = rc == SQLITE_ROW;
    const int64_t moderation = found ? row.Int(0) : 0;
    const bool deleted = found && row.Int(1) != 0;
    const int64_t expires_at = found ? row.Int(2) : 0;
    row.Reset();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return StorageError(db, "notice paste");
    if (moderation == static_cast<int64_t>(Moderation::kTakenDown)) {
      p.outcome = std::string(kNoticeTakenDown);
    } else if (!found || deleted || expires_at <= n.received_at) {
      p.outcome = std::string(kNoticeNotFound);
    } else {
      p.outcome = std::string(kNoticeWithheld);
      p.open = true;
      ++withheld;
    }
  }
  n.open_pastes = withheld;
  if (withheld == 0) return Ok();  // nothing stored: out.stored stays false
  if (Status s = MakeRoomForNotice(db, op.max_notices); !s.ok()) return s;
  if (Status s = InsertNoticeRows(db, n); !s.ok()) return s;
  for (const NoticePaste& p : n.pastes) {
    if (!p.open) continue;
    // The paste's state and its edge purge in the notice's own transaction, as a withholding's.
    Statement& mark = db.Prepare(
        "UPDATE pastes SET moderation = ?, moderation_reason = ?, moderated_at = ? WHERE id = ?");
    mark.Bind(1, static_cast<int64_t>(Moderation::kWithheldNotice))
        .Bind(2, fmt::format("notice {} from {}", n.reference, n.sender))
        .Bind(3, n.received_at)
        .Bind(4, p.paste);
    if (Status s = Done(db, mark, "withhold by notice"); !s.ok()) return s;
    Statement& enqueue = db.Prepare(
        "INSERT INTO outbox (paste_id, kind, attempts, enqueued_at, next_attempt_at) "
        "VALUES (?, 'purge_edge', 0, ?, ?)");
    enqueue.Bind(1, p.paste).Bind(2, n.received_at).Bind(3, n.received_at);
    if (Status s = Done(db, enqueue, "enqueue purge"); !s.ok()) return s;
  }
  out.created = true;
  out.stored = true;
  return Ok();
}

// A copy of another store's notice: its pastes' state came with their rows, so nothing is
// withheld or enqueued here.
Status SqliteMetaStore::Apply(Db& db, const ImportNoticeOp& op) {
  Result<int64_t> existing = FindNotice(db, op.notice.sender, op.notice.reference);
  if (!existing.ok()) return existing.error();
  if (*existing != 0) return Ok();  // *op.stored stays false
  if (Status s = MakeRoomForNotice(db, op.max_notices); !s.ok()) return s;
  Notice n = op.notice;
  if (Status s = InsertNoticeRows(db, n); !s.ok()) return s;
  *op.stored = true;
  return Ok();
}

Result<int64_t> SqliteMetaStore::FindNotice(Db& db, const std::string& sender,
                                            const std::string& reference) {
  Statement& find = db.Prepare("SELECT id FROM notices WHERE sender = ? AND reference = ?");
  find.Bind(1, sender).Bind(2, reference);
  const int rc = find.Step();
  const int64_t id = rc == SQLITE_ROW ? find.Int(0) : 0;
  find.Reset();
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return StorageError(db, "notice");
  return id;
}

Status SqliteMetaStore::MakeRoomForNotice(Db& db, int64_t max_notices) {
  Statement& count = db.Prepare("SELECT count(*) FROM notices");
  if (count.Step() != SQLITE_ROW) return StorageError(db, "notices");
  const int64_t stored = count.Int(0);
  count.Reset();
  if (stored < max_notices) return Ok();
  // Room from the oldest closed notices (migration 20's partial index), in the new notice's
  // transaction: one, or as many as a lowered max_notices needs. Refused only when too few
  // stored notices are closed, that is, when they still wait on the operator.
  const int64_t needed = stored - max_notices + 1;
  Statement& oldest =
      db.Prepare("SELECT id FROM notices WHERE open_pastes = 0 ORDER BY id LIMIT ?");
  oldest.Bind(1, needed);
  std::vector<int64_t> closed;
  int rc;
  while ((rc = oldest.Step()) == SQLITE_ROW) closed.push_back(oldest.Int(0));
  oldest.Reset();
  if (rc != SQLITE_DONE) return StorageError(db, "closed notices");
  if (static_cast<int64_t>(closed.size()) < needed) return NoticesFull(max_notices);
  for (int64_t id : closed) {
    for (const char* sql :
         {"DELETE FROM notice_pastes WHERE notice_id = ?", "DELETE FROM notices WHERE id = ?"}) {
      Statement& drop = db.Prepare(sql);
      drop.Bind(1, id);
      if (Status s = Done(db, drop, "make room for a notice"); !s.ok()) return s;
    }
  }
  return Ok();
}

Status SqliteMetaStore::InsertNoticeRows(Db& db, Notice& n) {
  Statement& insert = db.Prepare(
      "INSERT INTO notices (sender, reference, category, deadline_at, received_at, open_pastes) "
      "VALUES (?, ?, ?, ?, ?, ?)");
  insert.Bind(1, n.sender).Bind(2, n.reference).Bind(3, n.category);
  insert.Bind(4, n.deadline_at.value_or(0)).Bind(5, n.received_at).Bind(6, n.open_pastes);
  if (Status s = Done(db, insert, "add notice"); !s.ok()) return s;
  n.id = sqlite3_last_insert_rowid(db.raw());
  for (const NoticePaste& p : n.pastes) {
    Statement& named = db.Prepare(
        "INSERT OR IGNORE INTO notice_pastes (notice_id, paste_id, outcome, open) "
        "VALUES (?, ?, ?, ?)");
    named.Bind(1, n.id).Bind(2, p.paste).Bind(3, p.outcome).Bind(4, int64_t{p.open ? 1 : 0});
    if (Status s = Done(db, named, "notice paste"); !s.ok()) return s;
  }
  return Ok();
}

Status SqliteMetaStore::Apply(Db& db, const CloseNoticesOp& op) {
  return CloseNoticeRows(db, op.id, op.closed.get());
}

Status SqliteMetaStore::CloseNoticeRows(Db& db, const PasteId& paste, std::vector<Notice>* closed) {
  // The partial index of open rows by paste: the notices still waiting on this paste.
  Statement& find =
      db.Prepare("SELECT notice_id FROM notice_pastes WHERE paste_id = ? AND open = 1");
  find.Bind(1, paste.view());
  std::vector<int64_t> ids;
  int rc;
  while ((rc = find.Step()) == SQLITE_ROW) ids.push_back(find.Int(0));
  find.Reset();
  if (rc != SQLITE_DONE) return StorageError(db, "notices of a paste");
  for (int64_t id : ids) {
    if (closed != nullptr) {
      Result<Notice> n = ReadNotice(db, id, false);
      if (!n.ok()) return n.error();
      closed->push_back(std::move(*n));
    }
    Statement& close = db.Prepare(
        "UPDATE notice_pastes SET open = 0 WHERE notice_id = ? AND paste_id = ? AND open = 1");
    close.Bind(1, id).Bind(2, paste.view());
    if (Status s = Done(db, close, "close notice paste"); !s.ok()) return s;
    Statement& count = db.Prepare("UPDATE notices SET open_pastes = open_pastes - 1 WHERE id = ?");
    count.Bind(1, id);
    if (Status s = Done(db, count, "close notice"); !s.ok()) return s;
  }
  return Ok();
}

}  // namespace sluice::store::sqlite
