// SqliteMetaStore's moderation (sqlite_meta_store.h; docs/moderation.md): reports and the
// withholding they may cause, operators' changes, blocks and the audit trail.
#include <fmt/format.h>

#include <limits>

#include "sluice/asio/completion.h"
#include "sqlite_meta_store.h"

namespace sluice::store::sqlite {

awaitable<Result<ReportOutcome>> SqliteMetaStore::AddReport(AbuseReport report, ReportPolicy policy,
                                                            admission::Deadline) {
  auto outcome = std::make_shared<ReportOutcome>();
  auto submitting = committer_->Submit(AddReportOp{std::move(report), policy, outcome});
  const Status s = co_await std::move(submitting);
  if (!s.ok()) co_return s.error();
  co_return *outcome;
}

awaitable<Result<ModerationOutcome>> SqliteMetaStore::SetModeration(PasteId id,
                                                                    ModerationChange change,
                                                                    admission::Deadline) {
  auto outcome = std::make_shared<ModerationOutcome>();
  auto submitting = committer_->Submit(SetModerationOp{id, std::move(change), outcome});
  const Status s = co_await std::move(submitting);
  if (!s.ok()) co_return s.error();
  co_return *outcome;
}

awaitable<Result<size_t>> SqliteMetaStore::PurgeReports(int64_t closed_before, int64_t now,
                                                        size_t limit, admission::Deadline) {
  auto deleted = std::make_shared<size_t>(0);
  // Built outside the co_await: g++ 12 mishandles non-trivial temporaries inside one.
  auto submitting = committer_->Submit(PurgeReportsOp{closed_before, now, limit, deleted});
  const Status s = co_await std::move(submitting);
  if (!s.ok()) co_return s.error();
  co_return *deleted;
}

awaitable<Result<ReportPage>> SqliteMetaStore::OpenReports(std::optional<ReportCursor> after,
                                                           size_t limit,
                                                           admission::Deadline deadline) {
  return asio_glue::RunBlocking(
      moderation_pool(), [this, after, limit, deadline]() -> Result<ReportPage> {
        return readers_.Read(deadline, [&](Db& db) -> Result<ReportPage> {
          // One range of the queue's index, a row lookup per paste listed: the cost of a page
          // is its length, however long the queue. The index is descending in both columns
          // (ties by id, descending) so that the cursor is one row-value comparison the index
          // serves, here and in PostgreSQL. No cursor starts above every id (base62 is
          // below '~').
          Statement& s = db.Prepare(
              "SELECT q.paste_id, q.reports, q.notes, q.votes, q.reasons, q.latest_at, "
              "q.latest_note, COALESCE(p.moderation, 0), COALESCE(p.review_keep, 0), q.first_at "
              "FROM report_queue q LEFT JOIN pastes p ON p.id = q.paste_id "
              "WHERE (q.latest_at, q.paste_id) < (?, ?) "
              "ORDER BY q.latest_at DESC, q.paste_id DESC LIMIT ?");
          s.Bind(1, after ? after->latest_at : std::numeric_limits<int64_t>::max());
          s.Bind(2, after ? after->id.view() : std::string_view("~"));
          s.Bind(3, static_cast<int64_t>(limit) + 1);
          ReportPage page;
          int rc;
          while ((rc = s.Step()) == SQLITE_ROW) {
            auto id = PasteId::Parse(s.Text(0));
            if (!id) continue;  // unreachable: only parsed ids are ever written
            if (page.pastes.size() == limit) {
              page.next = ReportCursor{page.pastes.back().latest_at, page.pastes.back().id};
              break;
            }
            ReportSummary r{*id};
            r.reports = s.Int(1);
            r.networks = s.Int(2);
            r.votes = s.Int(3);
            r.reasons = ReportReasonNames(s.Int(4));
            r.latest_at = s.Int(5);
            r.latest_note = std::string(s.Text(6));
            r.moderation = ModerationOf(s.Int(7));
            r.keep = s.Int(8) != 0;
            r.first_at = s.Int(9);
            page.pastes.push_back(std::move(r));
          }
          if (rc != SQLITE_DONE && rc != SQLITE_ROW) return StorageError(db, "open reports");
          return page;
        });
      });
}

awaitable<Result<ReportCounts>> SqliteMetaStore::CountReports(admission::Deadline deadline) {
  return asio_glue::RunBlocking(moderation_pool(), [this, deadline]() -> Result<ReportCounts> {
    return readers_.Read(deadline, [&](Db& db) -> Result<ReportCounts> {
      ReportCounts counts;
      if (Status read = ReadCounts(db, counts); !read.ok()) return read.error();
      return counts;
    });
  });
}

awaitable<Result<std::vector<AbuseReport>>> SqliteMetaStore::ReportsOf(
    PasteId id, admission::Deadline deadline) {
  return asio_glue::RunBlocking(
      moderation_pool(), [this, id, deadline]() -> Result<std::vector<AbuseReport>> {
        return readers_.Read(deadline, [&](Db& db) -> Result<std::vector<AbuseReport>> {
          // A range of the primary key (paste_id, network).
          Statement& s = db.Prepare(
              "SELECT network, reason, note, created_at, vote FROM paste_reports "
              "WHERE paste_id = ? AND open = 1 ORDER BY network");
          s.Bind(1, id.view());
          std::vector<AbuseReport> out;
          int rc;
          while ((rc = s.Step()) == SQLITE_ROW) {
            out.push_back(AbuseReport{id, std::string(s.Text(0)), std::string(s.Text(1)),
                                      std::string(s.Text(2)), s.Int(3), s.Int(4) == 0});
          }
          if (rc != SQLITE_DONE) return StorageError(db, "reports of a paste");
          return out;
        });
      });
}

awaitable<Result<std::vector<ClientBlock>>> SqliteMetaStore::ActiveBlocks(
    int64_t now, admission::Deadline deadline) {
  return asio_glue::RunBlocking(
      moderation_pool(), [this, now, deadline]() -> Result<std::vector<ClientBlock>> {
        return readers_.Read(deadline, [&](Db& db) -> Result<std::vector<ClientBlock>> {
          Statement& s = db.Prepare(
              "SELECT prefix, reason, created_at, until FROM blocks WHERE until > ? "
              "ORDER BY seq");
          s.Bind(1, now);
          std::vector<ClientBlock> out;
          int rc;
          while ((rc = s.Step()) == SQLITE_ROW) {
            out.push_back(
                ClientBlock{std::string(s.Text(0)), std::string(s.Text(1)), s.Int(2), s.Int(3)});
          }
          if (rc != SQLITE_DONE) return StorageError(db, "blocks");
          return out;
        });
      });
}

awaitable<Result<std::vector<AuditEntry>>> SqliteMetaStore::AuditTrail(
    size_t limit, admission::Deadline deadline) {
  return asio_glue::RunBlocking(
      moderation_pool(), [this, limit, deadline]() -> Result<std::vector<AuditEntry>> {
        return readers_.Read(deadline, [&](Db& db) -> Result<std::vector<AuditEntry>> {
          Statement& s =
              db.Prepare("SELECT at, action, target, detail FROM audit ORDER BY seq DESC LIMIT ?");
          s.Bind(1, static_cast<int64_t>(limit));
          std::vector<AuditEntry> out;
          int rc;
          while ((rc = s.Step()) == SQLITE_ROW) {
            out.push_back(AuditEntry{s.Int(0), std::string(s.Text(1)), std::string(s.Text(2)),
                                     std::string(s.Text(3))});
          }
          if (rc != SQLITE_DONE) return StorageError(db, "audit");
          return out;
        });
      });
}

// A report: a bounded number of index lookups whatever is stored (the paste's row, the counts
// row, its network's row and charges, the queue row), plus, when it withholds, the paste's
// voters up to threshold + kSpareVoters and their charges.
Status SqliteMetaStore::Apply(Db& db, const AddReportOp& op) {
  const AbuseReport& r = op.report;
  const ReportPolicy& policy = op.policy;
  ReportOutcome& out = *op.outcome;
  Statement& paste = db.Prepare("SELECT moderation, review_keep FROM pastes WHERE id = ?");
  paste.Bind(1, r.id.view());
  const int found = paste.Step();
  if (found == SQLITE_DONE) return NoSuchPaste();
  if (found != SQLITE_ROW) return StorageError(db, "report");
  const int64_t moderation = paste.Int(0);
  out.kept = paste.Int(1) != 0;
  paste.Reset();
  ReportCounts counts;
  if (Status s = ReadCounts(db, counts); !s.ok()) return s;
  Statement& queued = db.Prepare("SELECT reports, votes FROM report_queue WHERE paste_id = ?");
  queued.Bind(1, r.id.view());
  const int in_queue = queued.Step();
  if (in_queue != SQLITE_ROW && in_queue != SQLITE_DONE) return StorageError(db, "report");
  if (in_queue == SQLITE_ROW) {
    out.open_reports = queued.Int(0);
    out.votes = queued.Int(1);
  }
  queued.Reset();

  out.stored = counts.open_reports < policy.max_open_reports;
  if (out.stored) {
    int64_t charged = 0;
    if (Status s = CountCharges(db, r.network, r.at, charged); !s.ok()) return s;
    out.vote = !r.from_creator && charged < policy.withholds_per_network;
    Statement& insert = db.Prepare(
        "INSERT OR IGNORE INTO paste_reports (paste_id, network, reason, note, created_at, "
        "open, vote) VALUES (?, ?, ?, ?, ?, 1, ?)");
    insert.Bind(1, r.id.view()).Bind(2, r.network).Bind(3, r.reason).Bind(4, r.note);
    insert.Bind(5, r.at).Bind(6, int64_t{out.vote ? 1 : 0});
    if (Status s = Done(db, insert, "report"); !s.ok()) return s;
    if (sqlite3_changes(db.raw()) == 0) {
      out.vote = false;  // reported by this network already: nothing changes
      return Ok();
    }
    if (Status s = AddToCounts(db, 0, 1); !s.ok()) return s;
  }
  out.counted = true;
  // first_at is the entry's arrival (the takedown clock): the time of the report that queued it;
  // later reports leave it (PostgreSQL's trigger sets it on insert only, the same rule).
  Statement& upsert = db.Prepare(
      "INSERT INTO report_queue (paste_id, reports, notes, votes, reasons, latest_at, "
      "latest_note, first_at) VALUES (?, 1, ?, ?, ?, ?, ?, ?) ON CONFLICT (paste_id) DO UPDATE "
      "SET reports = reports + 1, notes = notes + excluded.notes, votes = votes + excluded.votes, "
      "reasons = reasons | excluded.reasons, latest_at = MAX(latest_at, excluded.latest_at), "
      "latest_note = CASE WHEN excluded.notes = 1 AND excluded.latest_at >= latest_at "
      "THEN excluded.latest_note ELSE latest_note END RETURNING reports, votes");
  upsert.Bind(1, r.id.view()).Bind(2, int64_t{out.stored ? 1 : 0});
  upsert.Bind(3, int64_t{out.vote ? 1 : 0}).Bind(4, ReportReasonBit(r.reason)).Bind(5, r.at);
  upsert.Bind(6, out.stored ? std::string_view(r.note) : std::string_view(""));
  upsert.Bind(7, r.at);
  if (upsert.Step() != SQLITE_ROW) return StorageError(db, "report queue");
  out.open_reports = upsert.Int(0);
  out.votes = upsert.Int(1);
  upsert.Reset();
  if (in_queue == SQLITE_DONE) {
    if (Status s = AddToCounts(db, 1, 0); !s.ok()) return s;
  }
  if (policy.hide_threshold <= 0 || moderation != static_cast<int64_t>(Moderation::kNone) ||
      out.kept || out.votes < policy.hide_threshold) {
    return Ok();
  }
  if (!policy.may_withhold) {
    out.withhold_deferred = true;
    return Ok();
  }
  return Withhold(db, r, policy, out);
}

// The paste has enough votes: withholds it if `threshold` of its voters still have withholding
// budget, charging them; voters found without budget stop voting, so no later report examines
// them again.
Status SqliteMetaStore::Withhold(Db& db, const AbuseReport& r, const ReportPolicy& policy,
                                 ReportOutcome& out) {
  Statement& voters = db.Prepare(
      "SELECT network FROM paste_reports WHERE paste_id = ? AND open = 1 AND vote = 1 LIMIT ?");
  voters.Bind(1, r.id.view()).Bind(2, policy.hide_threshold + kSpareVoters);
  std::vector<std::string> candidates;
  int rc;
  while ((rc = voters.Step()) == SQLITE_ROW) candidates.emplace_back(voters.Text(0));
  if (rc != SQLITE_DONE) return StorageError(db, "voters");
  voters.Reset();
  std::vector<std::string> chosen;
  int64_t spent = 0;
  for (std::string& network : candidates) {
    if (static_cast<int64_t>(chosen.size()) >= policy.hide_threshold) break;
    int64_t charged = 0;
    if (Status s = CountCharges(db, network, r.at, charged); !s.ok()) return s;
    if (charged < policy.withholds_per_network) {
      chosen.push_back(std::move(network));
      continue;
    }
    Statement& unvote =
        db.Prepare("UPDATE paste_reports SET vote = 0 WHERE paste_id = ? AND network = ?");
    unvote.Bind(1, r.id.view()).Bind(2, network);
    if (Status s = Done(db, unvote, "voters"); !s.ok()) return s;
    ++spent;
  }
  if (spent > 0) {
    Statement& recount = db.Prepare("UPDATE report_queue SET votes = votes - ? WHERE paste_id = ?");
    recount.Bind(1, spent).Bind(2, r.id.view());
    if (Status s = Done(db, recount, "voters"); !s.ok()) return s;
    out.votes -= spent;
  }
  if (static_cast<int64_t>(chosen.size()) < policy.hide_threshold) return Ok();
  Statement& charge =
      db.Prepare("INSERT OR IGNORE INTO withhold_charges (network, at, paste_id) VALUES (?, ?, ?)");
  for (const std::string& network : chosen) {
    charge.Reset();
    charge.Bind(1, network).Bind(2, r.at).Bind(3, r.id.view());
    if (Status s = Done(db, charge, "charge"); !s.ok()) return s;
  }
  const SetModerationOp withhold{
      r.id, ModerationChange{Moderation::kWithheld,
                             fmt::format("reported from {} networks", chosen.size()), r.at}};
  if (Status s = Apply(db, withhold); !s.ok()) return s;
  if (Status s = Tally(db, r.at, kTallyWithhold, kWithholdVotes); !s.ok()) return s;
  out.withheld = true;
  out.charged = std::move(chosen);
  return Ok();
}

Status SqliteMetaStore::CountCharges(Db& db, std::string_view network, int64_t now,
                                     int64_t& charged) {
  Statement& s = db.Prepare("SELECT COUNT(*) FROM withhold_charges WHERE network = ? AND at > ?");
  s.Bind(1, network).Bind(2, now - kWithholdWindowSeconds);
  if (s.Step() != SQLITE_ROW) return StorageError(db, "charges");
  charged = s.Int(0);
  s.Reset();
  return Ok();
}

Status SqliteMetaStore::ReadCounts(Db& db, ReportCounts& counts) {
  Statement& s = db.Prepare("SELECT pending, open_reports FROM report_counts WHERE slot = 0");
  const int rc = s.Step();
  if (rc == SQLITE_ROW) counts = ReportCounts{s.Int(0), s.Int(1)};
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return StorageError(db, "report counts");
  s.Reset();
  // MIN over an indexed column is one probe of the index's first entry (report_queue_by_arrival).
  Statement& oldest = db.Prepare("SELECT MIN(first_at) FROM report_queue");
  if (oldest.Step() != SQLITE_ROW) return StorageError(db, "report queue arrival");
  counts.oldest_at = oldest.OptionalInt(0);
  oldest.Reset();
  return Ok();
}

Status SqliteMetaStore::AddToCounts(Db& db, int64_t pending, int64_t open_reports) {
  if (pending == 0 && open_reports == 0) return Ok();
  Statement& s = db.Prepare(
      "UPDATE report_counts SET pending = pending + ?, open_reports = open_reports + ? "
      "WHERE slot = 0");
  s.Bind(1, pending).Bind(2, open_reports);
  return Done(db, s, "report counts");
}

// Closes the paste's open reports (at `at`; those of a purged paste at their own time) and
// takes it out of the queue. Its reports' rows stay until PurgeReports: a network that reported
// it cannot report it again.
Status SqliteMetaStore::CloseReports(Db& db, const PasteId& id, std::optional<int64_t> at,
                                     std::optional<int64_t>* queued_since) {
  Statement& close = db.Prepare(
      "UPDATE paste_reports SET open = 0, closed_at = COALESCE(?, created_at) "
      "WHERE paste_id = ? AND open = 1");
  if (at) close.Bind(1, *at);
  close.Bind(2, id.view());
  if (Status s = Done(db, close, "close reports"); !s.ok()) return s;
  const int64_t closed = sqlite3_changes(db.raw());
  Statement& dequeue = db.Prepare("DELETE FROM report_queue WHERE paste_id = ? RETURNING first_at");
  dequeue.Bind(1, id.view());
  int64_t dequeued = 0;
  int rc;
  while ((rc = dequeue.Step()) == SQLITE_ROW) {
    ++dequeued;
    if (queued_since != nullptr) *queued_since = dequeue.Int(0);
  }
  dequeue.Reset();
  if (rc != SQLITE_DONE) return StorageError(db, "close reports");
  return AddToCounts(db, -dequeued, -closed);
}

Status SqliteMetaStore::Apply(Db& db, const SetModerationOp& op) {
  const ModerationChange& c = op.change;
  Statement& mark = db.Prepare(
      "UPDATE pastes SET moderation = ?1, moderation_reason = ?2, moderated_at = ?3, "
      "review_keep = CASE WHEN ?1 = 0 THEN ?4 ELSE review_keep END WHERE id = ?5");
  mark.Bind(1, static_cast<int64_t>(c.state)).Bind(2, c.reason).Bind(3, c.at);
  mark.Bind(4, int64_t{c.keep ? 1 : 0}).Bind(5, op.id.view());
  if (Status s = Done(db, mark, "moderate"); !s.ok()) return s;
  if (sqlite3_changes(db.raw()) == 0) return NoSuchPaste();
  if (c.state == Moderation::kTakenDown && c.block_content) {
    // In the takedown's own transaction: a takedown that commits refuses its bytes from then on.
    bool added = false;
    bool full = false;
    if (Status s = InsertBlockedContent(db, *c.block_content, c.max_blocked_contents, added, full);
        !s.ok()) {
      return s;
    }
    if (added) {
      if (Status s = Tally(db, c.at, kTallyBlock, kBlockContent); !s.ok()) return s;
    }
  }
  for (const TransparencyCount& count : c.tally) {
    if (Status s = Tally(db, count); !s.ok()) return s;
  }
  if (c.state == Moderation::kWithheld) {
    Statement& enqueue = db.Prepare(
        "INSERT INTO outbox (paste_id, kind, attempts, enqueued_at, next_attempt_at) "
        "VALUES (?, 'purge_edge', 0, ?, ?)");
    enqueue.Bind(1, op.id.view()).Bind(2, c.at).Bind(3, c.at);
    return Done(db, enqueue, "enqueue purge");
  }
  std::optional<int64_t> queued_since;
  if (Status s = CloseReports(db, op.id, c.at, &queued_since); !s.ok()) return s;
  if (op.outcome) op.outcome->queued_since = queued_since;
  if (!queued_since) return Ok();
  return Tally(db, c.at, kTallyTimeToAction, TimeToActionBucket(c.at - *queued_since));
}

// One batch of at most `limit` rows, so the sweep never holds the writer for long: the
// committer's other ops (creates) wait behind it. Both deletes walk an index from its old end.
Status SqliteMetaStore::Apply(Db& db, const PurgeReportsOp& op) {
  Statement& reports = db.Prepare(
      "DELETE FROM paste_reports WHERE (paste_id, network) IN (SELECT paste_id, network "
      "FROM paste_reports WHERE open = 0 AND closed_at <= ? LIMIT ?)");
  reports.Bind(1, op.closed_before).Bind(2, static_cast<int64_t>(op.limit));
  if (Status done = Done(db, reports, "purge reports"); !done.ok()) return done;
  size_t deleted = static_cast<size_t>(sqlite3_changes(db.raw()));
  if (deleted < op.limit) {
    Statement& charges = db.Prepare(
        "DELETE FROM withhold_charges WHERE (network, at, paste_id) IN (SELECT network, at, "
        "paste_id FROM withhold_charges WHERE at <= ? LIMIT ?)");
    charges.Bind(1, op.now - kWithholdWindowSeconds)
        .Bind(2, static_cast<int64_t>(op.limit - deleted));
    if (Status done = Done(db, charges, "purge charges"); !done.ok()) return done;
    deleted += static_cast<size_t>(sqlite3_changes(db.raw()));
  }
  *op.deleted = deleted;
  return Ok();
}

Status SqliteMetaStore::Apply(Db& db, const AddBlockOp& op) {
  Statement& s =
      db.Prepare("INSERT INTO blocks (prefix, reason, created_at, until) VALUES (?, ?, ?, ?)");
  s.Bind(1, op.block.prefix).Bind(2, op.block.reason).Bind(3, op.block.created_at);
  s.Bind(4, op.block.until);
  if (Status done = Done(db, s, "block"); !done.ok()) return done;
  return Tally(db, op.block.created_at, kTallyBlock, kBlockNetwork);
}

Status SqliteMetaStore::Tally(Db& db, const TransparencyCount& count) {
  if (count.count == 0) return Ok();
  Statement& s = db.Prepare(
      "INSERT INTO transparency_counts (month, kind, label, n) VALUES (?, ?, ?, ?) "
      "ON CONFLICT (month, kind, label) DO UPDATE SET n = n + excluded.n");
  s.Bind(1, count.month).Bind(2, count.kind).Bind(3, count.label).Bind(4, count.count);
  return Done(db, s, "transparency");
}

Status SqliteMetaStore::Tally(Db& db, int64_t at, std::string_view kind, std::string_view label) {
  return Tally(db,
               TransparencyCount{TransparencyMonth(at), std::string(kind), std::string(label), 1});
}

Status SqliteMetaStore::Apply(Db& db, const AddTransparencyOp& op) {
  for (const TransparencyCount& count : op.counts) {
    if (Status s = Tally(db, count); !s.ok()) return s;
  }
  return Ok();
}

awaitable<Result<std::vector<TransparencyCount>>> SqliteMetaStore::TransparencyCounts(
    std::string first_month, size_t limit, admission::Deadline deadline) {
  return asio_glue::RunBlocking(
      moderation_pool(),
      [this, first_month = std::move(first_month), limit,
       deadline]() -> Result<std::vector<TransparencyCount>> {
        return readers_.Read(deadline, [&](Db& db) -> Result<std::vector<TransparencyCount>> {
          // A range of the primary key from its newest end.
          Statement& s = db.Prepare(
              "SELECT month, kind, label, n FROM transparency_counts WHERE month >= ? "
              "ORDER BY month DESC, kind, label LIMIT ?");
          s.Bind(1, first_month).Bind(2, static_cast<int64_t>(limit));
          std::vector<TransparencyCount> out;
          int rc;
          while ((rc = s.Step()) == SQLITE_ROW) {
            out.push_back(TransparencyCount{std::string(s.Text(0)), std::string(s.Text(1)),
                                            std::string(s.Text(2)), s.Int(3)});
          }
          if (rc != SQLITE_DONE) return StorageError(db, "transparency counts");
          return out;
        });
      });
}

Status SqliteMetaStore::Apply(Db& db, const AddAuditOp& op) {
  Statement& s = db.Prepare("INSERT INTO audit (at, action, target, detail) VALUES (?, ?, ?, ?)");
  s.Bind(1, op.entry.at).Bind(2, op.entry.action).Bind(3, op.entry.target);
  s.Bind(4, op.entry.detail);
  return Done(db, s, "audit");
}

awaitable<Result<bool>> SqliteMetaStore::BlockContent(BlockedContent entry, int64_t max_entries,
                                                      admission::Deadline) {
  auto added = std::make_shared<bool>(false);
  auto submitting = committer_->Submit(BlockContentOp{std::move(entry), max_entries, added});
  const Status s = co_await std::move(submitting);
  if (!s.ok()) co_return s.error();
  co_return *added;
}

awaitable<Result<bool>> SqliteMetaStore::UnblockContent(BodyDigest sha256, admission::Deadline) {
  auto removed = std::make_shared<bool>(false);
  auto submitting = committer_->Submit(UnblockContentOp{sha256, removed});
  const Status s = co_await std::move(submitting);
  if (!s.ok()) co_return s.error();
  co_return *removed;
}

awaitable<Result<BlockedContentPage>> SqliteMetaStore::BlockedContents(
    std::optional<BodyDigest> after, size_t limit, admission::Deadline deadline) {
  return asio_glue::RunBlocking(
      moderation_pool(), [this, after, limit, deadline]() -> Result<BlockedContentPage> {
        return readers_.Read(deadline, [&](Db& db) -> Result<BlockedContentPage> {
          // A range of the primary key: a page costs its length however long the list. An empty
          // blob sorts below every digest.
          Statement& s = db.Prepare(
              "SELECT sha256, added_at, source, reason FROM blocked_contents WHERE sha256 > ? "
              "ORDER BY sha256 LIMIT ?");
          const BodyDigest none{};
          s.Bind(1, after ? std::span<const unsigned char>(*after)
                          : std::span<const unsigned char>(none.data(), 0));
          s.Bind(2, static_cast<int64_t>(limit) + 1);
          BlockedContentPage page;
          int rc;
          while ((rc = s.Step()) == SQLITE_ROW) {
            const auto blob = s.Blob(0);
            if (blob.size() != BodyDigest{}.size()) continue;  // only digests are ever written
            if (page.entries.size() == limit) {
              page.next = page.entries.back().sha256;
              break;
            }
            BlockedContent e;
            std::copy(blob.begin(), blob.end(), e.sha256.begin());
            e.added_at = s.Int(1);
            e.source = std::string(s.Text(2));
            e.reason = std::string(s.Text(3));
            page.entries.push_back(std::move(e));
          }
          if (rc != SQLITE_DONE && rc != SQLITE_ROW) return StorageError(db, "blocked contents");
          return page;
        });
      });
}

awaitable<Result<BlockedContentsState>> SqliteMetaStore::BlockedContentsVersion(
    admission::Deadline deadline) {
  return asio_glue::RunBlocking(
      moderation_pool(), [this, deadline]() -> Result<BlockedContentsState> {
        return readers_.Read(deadline, [&](Db& db) -> Result<BlockedContentsState> {
          Statement& s =
              db.Prepare("SELECT version, entries FROM blocked_contents_state WHERE slot = 0");
          const int rc = s.Step();
          BlockedContentsState state;
          if (rc == SQLITE_ROW) state = BlockedContentsState{s.Int(0), s.Int(1)};
          if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
            return StorageError(db, "blocked contents version");
          }
          s.Reset();
          return state;
        });
      });
}

Status SqliteMetaStore::InsertBlockedContent(Db& db, const BlockedContent& entry,
                                             int64_t max_entries, bool& added, bool& full) {
  Statement& count = db.Prepare("SELECT entries FROM blocked_contents_state WHERE slot = 0");
  if (count.Step() != SQLITE_ROW) return StorageError(db, "blocked contents state");
  const int64_t entries = count.Int(0);
  count.Reset();
  Statement& present = db.Prepare("SELECT 1 FROM blocked_contents WHERE sha256 = ?");
  present.Bind(1, std::span<const unsigned char>(entry.sha256));
  const int rc = present.Step();
  present.Reset();
  if (rc == SQLITE_ROW) return Ok();
  if (rc != SQLITE_DONE) return StorageError(db, "blocked contents");
  if (entries >= max_entries) {
    full = true;
    return Ok();
  }
  Statement& insert = db.Prepare(
      "INSERT INTO blocked_contents (sha256, added_at, source, reason) VALUES (?, ?, ?, ?)");
  insert.Bind(1, std::span<const unsigned char>(entry.sha256)).Bind(2, entry.added_at);
  insert.Bind(3, entry.source).Bind(4, entry.reason);
  if (Status s = Done(db, insert, "block content"); !s.ok()) return s;
  Statement& bump = db.Prepare(
      "UPDATE blocked_contents_state SET version = version + 1, entries = entries + 1 "
      "WHERE slot = 0");
  if (Status s = Done(db, bump, "blocked contents state"); !s.ok()) return s;
  added = true;
  return Ok();
}

Status SqliteMetaStore::Apply(Db& db, const BlockContentOp& op) {
  bool full = false;
  if (Status s = InsertBlockedContent(db, op.entry, op.max_entries, *op.added, full); !s.ok()) {
    return s;
  }
  if (*op.added) {
    if (Status s = Tally(db, op.entry.added_at, kTallyBlock, kBlockContent); !s.ok()) return s;
  }
  if (full) {
    return MakeError(ErrorCode::kInsufficientStorage,
                     fmt::format("the content blocklist holds max_blocked_contents ({}) entries",
                                 op.max_entries),
                     std::string(kBlockedContentsFull));
  }
  return Ok();
}

Status SqliteMetaStore::Apply(Db& db, const UnblockContentOp& op) {
  Statement& remove = db.Prepare("DELETE FROM blocked_contents WHERE sha256 = ?");
  remove.Bind(1, std::span<const unsigned char>(op.sha256));
  if (Status s = Done(db, remove, "unblock content"); !s.ok()) return s;
  if (sqlite3_changes(db.raw()) == 0) return Ok();
  Statement& bump = db.Prepare(
      "UPDATE blocked_contents_state SET version = version + 1, entries = entries - 1 "
      "WHERE slot = 0");
  if (Status s = Done(db, bump, "blocked contents state"); !s.ok()) return s;
  *op.removed = true;
  return Ok();
}

awaitable<Result<bool>> SqliteMetaStore::RevokeCreatorToken(std::string id, int64_t now,
                                                            admission::Deadline) {
  auto revoked = std::make_shared<bool>(false);
  auto submitting = committer_->Submit(RevokeCreatorTokenOp{std::move(id), now, revoked});
  const Status s = co_await std::move(submitting);
  if (!s.ok()) co_return s.error();
  co_return *revoked;
}

awaitable<Result<CreatorTokenList>> SqliteMetaStore::CreatorTokens(admission::Deadline deadline) {
  return asio_glue::RunBlocking(moderation_pool(), [this, deadline]() -> Result<CreatorTokenList> {
    return readers_.Read(deadline, [&](Db& db) -> Result<CreatorTokenList> {
      // The version before the rows: a change between the two leaves rows newer than the
      // version, which the next poll reads again; the other order could miss one.
      CreatorTokenList list;
      Statement& version = db.Prepare("SELECT version FROM creator_tokens_state WHERE slot = 0");
      if (version.Step() == SQLITE_ROW) list.version = version.Int(0);
      version.Reset();
      Statement& s = db.Prepare(
          "SELECT id, label, secret_sha256, rate_milli, burst, bytes_rate, bytes_burst, "
          "expires_at, created_at, revoked_at FROM creator_tokens ORDER BY id");
      int rc;
      while ((rc = s.Step()) == SQLITE_ROW) {
        CreatorToken t;
        t.id = std::string(s.Text(0));
        t.label = std::string(s.Text(1));
        const auto blob = s.Blob(2);
        if (blob.size() != t.secret_sha256.size()) continue;  // only digests are ever written
        std::copy(blob.begin(), blob.end(), t.secret_sha256.begin());
        t.rate_milli = s.Int(3);
        t.burst = s.Int(4);
        t.bytes_rate = s.Int(5);
        t.bytes_burst = s.Int(6);
        t.expires_at = s.Int(7);
        t.created_at = s.Int(8);
        t.revoked_at = s.Int(9);
        list.tokens.push_back(std::move(t));
      }
      if (rc != SQLITE_DONE) return StorageError(db, "creator tokens");
      return list;
    });
  });
}

awaitable<Result<int64_t>> SqliteMetaStore::CreatorTokensVersion(admission::Deadline deadline) {
  return asio_glue::RunBlocking(moderation_pool(), [this, deadline]() -> Result<int64_t> {
    return readers_.Read(deadline, [&](Db& db) -> Result<int64_t> {
      Statement& s = db.Prepare("SELECT version FROM creator_tokens_state WHERE slot = 0");
      const int rc = s.Step();
      const int64_t version = rc == SQLITE_ROW ? s.Int(0) : 0;
      s.Reset();
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) return StorageError(db, "creator tokens version");
      return version;
    });
  });
}

Status SqliteMetaStore::Apply(Db& db, const AddCreatorTokenOp& op) {
  // The count and the insert in one transaction (the writer's), so max_live holds however many
  // processes add at once.
  Statement& count = db.Prepare(
      "SELECT count(*) FROM creator_tokens WHERE revoked_at = 0 AND "
      "(expires_at = 0 OR expires_at > ?)");
  count.Bind(1, op.now);
  if (count.Step() != SQLITE_ROW) return StorageError(db, "creator tokens");
  const int64_t live = count.Int(0);
  count.Reset();
  if (live >= op.max_live) {
    return MakeError(
        ErrorCode::kInsufficientStorage,
        fmt::format("the store holds max_creator_tokens ({}) live creator tokens", op.max_live),
        std::string(kCreatorTokensFull));
  }
  const CreatorToken& t = op.token;
  Statement& insert = db.Prepare(
      "INSERT INTO creator_tokens (id, label, secret_sha256, rate_milli, burst, bytes_rate, "
      "bytes_burst, expires_at, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)");
  insert.Bind(1, t.id).Bind(2, t.label).Bind(3, std::span<const unsigned char>(t.secret_sha256));
  insert.Bind(4, t.rate_milli).Bind(5, t.burst).Bind(6, t.bytes_rate).Bind(7, t.bytes_burst);
  insert.Bind(8, t.expires_at).Bind(9, t.created_at);
  if (Status s = Done(db, insert, "add creator token"); !s.ok()) return s;
  Statement& bump =
      db.Prepare("UPDATE creator_tokens_state SET version = version + 1 WHERE slot = 0");
  return Done(db, bump, "creator tokens state");
}

Status SqliteMetaStore::Apply(Db& db, const RevokeCreatorTokenOp& op) {
  Statement& find = db.Prepare("SELECT revoked_at FROM creator_tokens WHERE id = ?");
  find.Bind(1, op.id);
  const int rc = find.Step();
  const int64_t revoked_at = rc == SQLITE_ROW ? find.Int(0) : 0;
  find.Reset();
  if (rc == SQLITE_DONE)
    return MakeError(ErrorCode::kNotFound, "no such creator token", "not_found");
  if (rc != SQLITE_ROW) return StorageError(db, "creator tokens");
  if (revoked_at != 0) return Ok();
  Statement& revoke = db.Prepare("UPDATE creator_tokens SET revoked_at = ? WHERE id = ?");
  revoke.Bind(1, op.now).Bind(2, op.id);
  if (Status s = Done(db, revoke, "revoke creator token"); !s.ok()) return s;
  Statement& bump =
      db.Prepare("UPDATE creator_tokens_state SET version = version + 1 WHERE slot = 0");
  if (Status s = Done(db, bump, "creator tokens state"); !s.ok()) return s;
  *op.revoked = true;
  return Ok();
}

}  // namespace sluice::store::sqlite
