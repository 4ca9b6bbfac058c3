// PgMetaStore's moderation (postgres_meta_store.h; docs/moderation.md). Every call is on the
// moderation pool, whose few connections and statement timeout are its own (a report flood cannot
// take a connection that creates or reads need), except the retention sweep, which is the cleanup
// pool's. A report and a review are one function each (migration 8), so a report costs one round
// trip and a bounded number of index lookups.
#include <fmt/format.h>

#include <limits>

#include "pg_rows.h"
#include "postgres_meta_store.h"

namespace sluice::store::pg {

awaitable<Result<ReportOutcome>> PgMetaStore::AddReport(AbuseReport report, ReportPolicy policy,
                                                        admission::Deadline deadline) {
  const int64_t reason_bit = ReportReasonBit(report.reason);
  return Query<ReportOutcome>(
      PostgresPurpose::kModeration, deadline,
      "SELECT r.*, CASE WHEN r.o_withheld THEN sluice_tally($14, $15, $16, 1) END "
      "FROM sluice_add_report($1, $2, $3, $4, $5, $6::boolean, $7, $8, $9, $10, "
      "$11::boolean, $12, $13) AS r",
      {P(report.id.view()), P(report.network), P(report.reason), P(report.note), P(report.at),
       P(report.from_creator ? "true" : "false"), P(reason_bit), P(policy.hide_threshold),
       P(policy.withholds_per_network), P(policy.max_open_reports),
       P(policy.may_withhold ? "true" : "false"), P(kWithholdWindowSeconds), P(kSpareVoters),
       P(TransparencyMonth(report.at)), P(kTallyWithhold), P(kWithholdVotes)},
      [](const PGresult* r) -> Result<ReportOutcome> {
        if (PQntuples(r) == 0 || !Bool(r, 0, 0)) {
          return MakeError(ErrorCode::kNotFound, "no such paste", "not_found");
        }
        ReportOutcome out;
        out.counted = Bool(r, 0, 1);
        out.stored = Bool(r, 0, 2);
        out.vote = Bool(r, 0, 3);
        out.open_reports = Int(r, 0, 4);
        out.votes = Int(r, 0, 5);
        out.withheld = Bool(r, 0, 6);
        out.withhold_deferred = Bool(r, 0, 7);
        out.kept = Bool(r, 0, 8);
        for (std::string_view left = Text(r, 0, 9); !left.empty();) {
          const size_t comma = std::min(left.find(','), left.size());
          out.charged.emplace_back(left.substr(0, comma));
          left.remove_prefix(std::min(comma + 1, left.size()));
        }
        return out;
      });
}

namespace {

Param DigestParam(const BodyDigest& d) {
  return Param{std::string(reinterpret_cast<const char*>(d.data()), d.size()), true};
}

// A PostgreSQL array literal of `items`, each quoted (so any text is one element).
template <typename Items, typename Field>
Param ArrayParam(const Items& items, Field field) {
  std::string out = "{";
  for (const auto& item : items) {
    if (out.size() > 1) out += ',';
    out += '"';
    const std::string value = field(item);  // a temporary in the loop's head would not live
    for (char c : value) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return P(out);
}

// The four arrays of sluice_tally_each: months, kinds, labels and counts.
void AppendTallyParams(const std::vector<TransparencyCount>& counts, std::vector<Param>& params) {
  params.push_back(ArrayParam(counts, [](const TransparencyCount& c) { return c.month; }));
  params.push_back(ArrayParam(counts, [](const TransparencyCount& c) { return c.kind; }));
  params.push_back(ArrayParam(counts, [](const TransparencyCount& c) { return c.label; }));
  params.push_back(
      ArrayParam(counts, [](const TransparencyCount& c) { return std::to_string(c.count); }));
}

// The bounds of the time-to-action buckets, for sluice_tally_time.
Param BoundsParam() {
  static const std::string bounds = [] {
    std::string out = "{";
    for (int64_t b : kTimeToActionBounds) {
      if (out.size() > 1) out += ',';
      out += std::to_string(b);
    }
    return out + "}";
  }();
  return P(bounds);
}

}  // namespace

awaitable<Result<ModerationOutcome>> PgMetaStore::SetModeration(PasteId id, ModerationChange change,
                                                                admission::Deadline deadline) {
  // The queue row's arrival is read by the outer statement, whose snapshot is taken before
  // sluice_set_moderation runs and removes the row: the entry as the change found it.
  const auto outcome = [](const PGresult* r) -> Result<ModerationOutcome> {
    if (PQntuples(r) == 0 || !Bool(r, 0, 0)) {
      return MakeError(ErrorCode::kNotFound, "no such paste", "not_found");
    }
    ModerationOutcome out;
    if (!PQgetisnull(r, 0, 1)) out.queued_since = Int(r, 0, 1);
    return out;
  };
  // One statement, so one transaction: the change's counters, and its time to action when it
  // takes the paste out of the queue (a review: anything but a withholding), count if and only
  // if the change commits. The function in FROM runs first; CASE calls the others only after it
  // found the row.
  std::vector<Param> params{
      P(id.view()),
      P(static_cast<int64_t>(change.state)),
      P(change.reason),
      P(change.at),
      P(change.keep ? "true" : "false"),
      P(TransparencyMonth(change.at)),
      BoundsParam(),
      P(change.state != Moderation::kWithheld ? "true" : "false"),
  };
  AppendTallyParams(change.tally, params);
  static constexpr const char* kSetModeration =
      "SELECT ok, (SELECT q.first_at FROM report_queue q WHERE q.paste_id = $1), "
      "CASE WHEN ok AND $8::boolean THEN (SELECT sluice_tally_time($6, $4 - q.first_at, "
      "$7::bigint[]) FROM report_queue q WHERE q.paste_id = $1) END, "
      "CASE WHEN ok THEN sluice_tally_each($9::text[], $10::text[], $11::text[], $12::bigint[]) "
      "END FROM sluice_set_moderation($1, $2::smallint, $3, $4, $5::boolean) AS ok";
  // The same, and the digest blocked (and counted, when it was not there) if and only if the
  // takedown commits.
  static constexpr const char* kSetModerationBlocking =
      "SELECT ok, (SELECT q.first_at FROM report_queue q WHERE q.paste_id = $1), "
      "CASE WHEN ok AND $8::boolean THEN (SELECT sluice_tally_time($6, $4 - q.first_at, "
      "$7::bigint[]) FROM report_queue q WHERE q.paste_id = $1) END, "
      "CASE WHEN ok THEN sluice_tally_each($9::text[], $10::text[], $11::text[], $12::bigint[]) "
      "END, CASE WHEN ok THEN (SELECT CASE WHEN o = 1 THEN sluice_tally($6, 'block', 'content', "
      "1) END FROM sluice_block_content($13::bytea, $14, $15, $16, $17) AS o) END "
      "FROM sluice_set_moderation($1, $2::smallint, $3, $4, $5::boolean) AS ok";
  if (change.state == Moderation::kTakenDown && change.block_content) {
    const BlockedContent& b = *change.block_content;
    params.insert(params.end(), {DigestParam(b.sha256), P(b.added_at), P(b.source), P(b.reason),
                                 P(change.max_blocked_contents)});
    return Query<ModerationOutcome>(PostgresPurpose::kModeration, deadline, kSetModerationBlocking,
                                    std::move(params), outcome);
  }
  return Query<ModerationOutcome>(PostgresPurpose::kModeration, deadline, kSetModeration,
                                  std::move(params), outcome);
}

awaitable<Result<size_t>> PgMetaStore::PurgeReports(int64_t closed_before, int64_t now,
                                                    size_t limit, admission::Deadline deadline) {
  // One batch of at most `limit` rows per statement, so one sweep never holds many row locks;
  // both walk an index from its old end.
  return Query<size_t>(
      PostgresPurpose::kCleanup, deadline,
      "WITH doomed AS (SELECT paste_id, network FROM paste_reports WHERE NOT open "
      "AND closed_at <= $1 LIMIT $3), "
      "gone AS (DELETE FROM paste_reports r USING doomed d WHERE r.paste_id = d.paste_id "
      "AND r.network = d.network RETURNING 1), "
      "old AS (SELECT network, at, paste_id FROM withhold_charges WHERE at <= $2 "
      "LIMIT GREATEST($3 - (SELECT count(*) FROM doomed), 0)), "
      "expired AS (DELETE FROM withhold_charges w USING old o WHERE w.network = o.network "
      "AND w.at = o.at AND w.paste_id = o.paste_id RETURNING 1) "
      "SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM expired)",
      {P(closed_before), P(now - kWithholdWindowSeconds), P(static_cast<int64_t>(limit))},
      [](const PGresult* r) -> Result<size_t> {
        if (PQntuples(r) == 0) return size_t{0};
        return static_cast<size_t>(std::max<int64_t>(0, Int(r, 0, 0)));
      });
}

awaitable<Result<ReportPage>> PgMetaStore::OpenReports(std::optional<ReportCursor> after,
                                                       size_t limit, admission::Deadline deadline) {
  // One range of the queue's index and a row lookup per paste listed; no cursor starts above
  // every id ('~' sorts after base62 in the "C" collation of the queue's ids).
  return Query<ReportPage>(
      PostgresPurpose::kModeration, deadline,
      "SELECT q.paste_id, q.reports, q.notes, q.votes, q.reasons, q.latest_at, q.latest_note, "
      "COALESCE(p.moderation, 0), COALESCE(p.review_keep, false), q.first_at "
      "FROM report_queue q LEFT JOIN pastes p ON p.id = q.paste_id "
      "WHERE (q.latest_at, q.paste_id) < ($1::bigint, $2::text) "
      "ORDER BY q.latest_at DESC, q.paste_id DESC LIMIT $3",
      {P(after ? after->latest_at : std::numeric_limits<int64_t>::max()),
       P(after ? after->id.view() : std::string_view("~")), P(static_cast<int64_t>(limit) + 1)},
      [limit](const PGresult* r) -> Result<ReportPage> {
        ReportPage page;
        for (int i = 0; i < PQntuples(r); ++i) {
          auto id = PasteId::Parse(Text(r, i, 0));
          if (!id) continue;
          if (page.pastes.size() == limit) {
            page.next = ReportCursor{page.pastes.back().latest_at, page.pastes.back().id};
            break;
          }
          ReportSummary s{*id};
          s.reports = Int(r, i, 1);
          s.networks = Int(r, i, 2);
          s.votes = Int(r, i, 3);
          s.reasons = ReportReasonNames(Int(r, i, 4));
          s.latest_at = Int(r, i, 5);
          s.latest_note = std::string(Text(r, i, 6));
          s.moderation = ModerationOf(Int(r, i, 7));
          s.keep = Bool(r, i, 8);
          s.first_at = Int(r, i, 9);
          page.pastes.push_back(std::move(s));
        }
        return page;
      });
}

awaitable<Result<ReportCounts>> PgMetaStore::CountReports(admission::Deadline deadline) {
  // min() over an indexed column is one probe of the index's first entry
  // (report_queue_by_arrival).
  return Query<ReportCounts>(
      PostgresPurpose::kModeration, deadline,
      "SELECT c.pending, c.open_reports, (SELECT min(q.first_at) FROM report_queue q) "
      "FROM report_counts c WHERE c.slot = 0",
      {}, [](const PGresult* r) -> Result<ReportCounts> {
        if (PQntuples(r) == 0) return ReportCounts{};
        ReportCounts counts{Int(r, 0, 0), Int(r, 0, 1)};
        if (!PQgetisnull(r, 0, 2)) counts.oldest_at = Int(r, 0, 2);
        return counts;
      });
}

awaitable<Status> PgMetaStore::AddBlock(ClientBlock block, admission::Deadline deadline) {
  return Command(PostgresPurpose::kModeration, deadline,
                 "WITH b AS (INSERT INTO blocks (prefix, reason, created_at, until) "
                 "VALUES ($1, $2, $3, $4) RETURNING 1) "
                 "SELECT sluice_tally($5, $6, $7, 1) FROM b",
                 {P(block.prefix), P(block.reason), P(block.created_at), P(block.until),
                  P(TransparencyMonth(block.created_at)), P(kTallyBlock), P(kBlockNetwork)});
}

awaitable<Status> PgMetaStore::AddTransparency(std::vector<TransparencyCount> counts,
                                               admission::Deadline deadline) {
  std::vector<Param> params;
  AppendTallyParams(counts, params);
  return Command(PostgresPurpose::kModeration, deadline,
                 "SELECT sluice_tally_each($1::text[], $2::text[], $3::text[], $4::bigint[])",
                 std::move(params));
}

awaitable<Result<std::vector<TransparencyCount>>> PgMetaStore::TransparencyCounts(
    std::string first_month, size_t limit, admission::Deadline deadline) {
  // A range of the primary key from its newest end.
  return Query<std::vector<TransparencyCount>>(
      PostgresPurpose::kModeration, deadline,
      "SELECT month, kind, label, n FROM transparency_counts WHERE month >= $1 "
      "ORDER BY month DESC, kind, label LIMIT $2",
      {P(first_month), P(static_cast<int64_t>(limit))},
      [](const PGresult* r) -> Result<std::vector<TransparencyCount>> {
        std::vector<TransparencyCount> out;
        for (int i = 0; i < PQntuples(r); ++i) {
          out.push_back(TransparencyCount{std::string(Text(r, i, 0)), std::string(Text(r, i, 1)),
                                          std::string(Text(r, i, 2)), Int(r, i, 3)});
        }
        return out;
      });
}

awaitable<Result<std::vector<AbuseReport>>> PgMetaStore::ReportsOf(PasteId id,
                                                                   admission::Deadline deadline) {
  return Query<std::vector<AbuseReport>>(
      PostgresPurpose::kModeration, deadline,
      "SELECT network, reason, note, created_at, vote FROM paste_reports "
      "WHERE paste_id = $1 AND open ORDER BY network",
      {P(id.view())}, [id](const PGresult* r) -> Result<std::vector<AbuseReport>> {
        std::vector<AbuseReport> out;
        for (int i = 0; i < PQntuples(r); ++i) {
          out.push_back(AbuseReport{id, std::string(Text(r, i, 0)), std::string(Text(r, i, 1)),
                                    std::string(Text(r, i, 2)), Int(r, i, 3), !Bool(r, i, 4)});
        }
        return out;
      });
}

awaitable<Result<std::vector<ClientBlock>>> PgMetaStore::ActiveBlocks(
    int64_t now, admission::Deadline deadline) {
  return Query<std::vector<ClientBlock>>(
      PostgresPurpose::kModeration, deadline,
      "SELECT prefix, reason, created_at, until FROM blocks WHERE until > $1 ORDER BY seq",
      {P(now)}, [](const PGresult* r) -> Result<std::vector<ClientBlock>> {
        std::vector<ClientBlock> out;
        for (int i = 0; i < PQntuples(r); ++i) {
          out.push_back(ClientBlock{std::string(Text(r, i, 0)), std::string(Text(r, i, 1)),
                                    Int(r, i, 2), Int(r, i, 3)});
        }
        return out;
      });
}

awaitable<Status> PgMetaStore::AddAudit(AuditEntry entry, admission::Deadline deadline) {
  return Command(PostgresPurpose::kModeration, deadline,
                 "INSERT INTO audit (at, action, target, detail) VALUES ($1, $2, $3, $4)",
                 {P(entry.at), P(entry.action), P(entry.target), P(entry.detail)});
}

awaitable<Result<std::vector<AuditEntry>>> PgMetaStore::AuditTrail(size_t limit,
                                                                   admission::Deadline deadline) {
  return Query<std::vector<AuditEntry>>(
      PostgresPurpose::kModeration, deadline,
      "SELECT at, action, target, detail FROM audit ORDER BY seq DESC LIMIT $1",
      {P(static_cast<int64_t>(limit))}, [](const PGresult* r) -> Result<std::vector<AuditEntry>> {
        std::vector<AuditEntry> out;
        for (int i = 0; i < PQntuples(r); ++i) {
          out.push_back(AuditEntry{Int(r, i, 0), std::string(Text(r, i, 1)),
                                   std::string(Text(r, i, 2)), std::string(Text(r, i, 3))});
        }
        return out;
      });
}

awaitable<Result<bool>> PgMetaStore::BlockContent(BlockedContent entry, int64_t max_entries,
                                                  admission::Deadline deadline) {
  // Counted in the same statement when added (1).
  return Query<bool>(PostgresPurpose::kModeration, deadline,
                     "SELECT o, CASE WHEN o = 1 THEN sluice_tally($6, $7, $8, 1) END "
                     "FROM sluice_block_content($1::bytea, $2, $3, $4, $5) AS o",
                     {DigestParam(entry.sha256), P(entry.added_at), P(entry.source),
                      P(entry.reason), P(max_entries), P(TransparencyMonth(entry.added_at)),
                      P(kTallyBlock), P(kBlockContent)},
                     [max_entries](const PGresult* r) -> Result<bool> {
                       const int64_t outcome = PQntuples(r) > 0 ? Int(r, 0, 0) : -1;
                       if (outcome == 2) {
                         return MakeError(ErrorCode::kInsufficientStorage,
                                          fmt::format("the content blocklist holds "
                                                      "max_blocked_contents ({}) entries",
                                                      max_entries),
                                          std::string(kBlockedContentsFull));
                       }
                       return outcome == 1;
                     });
}

awaitable<Result<bool>> PgMetaStore::UnblockContent(BodyDigest sha256,
                                                    admission::Deadline deadline) {
  // The delete and the counts in one statement; a concurrent delete of the same digest waits for
  // the row and then finds nothing, so the counts move once.
  return Query<bool>(
      PostgresPurpose::kModeration, deadline,
      "WITH gone AS (DELETE FROM blocked_contents WHERE sha256 = $1::bytea RETURNING 1), "
      "bumped AS (UPDATE blocked_contents_state SET version = version + 1, "
      "entries = entries - (SELECT count(*) FROM gone) "
      "WHERE slot = 0 AND EXISTS (SELECT 1 FROM gone) RETURNING 1) "
      "SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM bumped)",
      {DigestParam(sha256)},
      [](const PGresult* r) -> Result<bool> { return PQntuples(r) > 0 && Int(r, 0, 0) > 0; });
}

awaitable<Result<BlockedContentPage>> PgMetaStore::BlockedContents(std::optional<BodyDigest> after,
                                                                   size_t limit,
                                                                   admission::Deadline deadline) {
  // A range of the primary key; an empty bytea sorts below every digest.
  return Query<BlockedContentPage>(
      PostgresPurpose::kModeration, deadline,
      "SELECT sha256, added_at, source, reason FROM blocked_contents WHERE sha256 > $1::bytea "
      "ORDER BY sha256 LIMIT $2",
      {after ? DigestParam(*after) : Param{std::string(), true},
       P(static_cast<int64_t>(limit) + 1)},
      [limit](const PGresult* r) -> Result<BlockedContentPage> {
        BlockedContentPage page;
        for (int i = 0; i < PQntuples(r); ++i) {
          if (Text(r, i, 0).size() != 2 + 2 * BodyDigest().size()) continue;
          if (page.entries.size() == limit) {
            page.next = page.entries.back().sha256;
            break;
          }
          page.entries.push_back(BlockedContent{Hash(Text(r, i, 0)), Int(r, i, 1),
                                                std::string(Text(r, i, 2)),
                                                std::string(Text(r, i, 3))});
        }
        return page;
      });
}

awaitable<Result<BlockedContentsState>> PgMetaStore::BlockedContentsVersion(
    admission::Deadline deadline) {
  return Query<BlockedContentsState>(
      PostgresPurpose::kModeration, deadline,
      "SELECT version, entries FROM blocked_contents_state WHERE slot = 0", {},
      [](const PGresult* r) -> Result<BlockedContentsState> {
        if (PQntuples(r) == 0) return BlockedContentsState{};
        return BlockedContentsState{Int(r, 0, 0), Int(r, 0, 1)};
      });
}

awaitable<Status> PgMetaStore::AddCreatorToken(CreatorToken token, int64_t max_live, int64_t now,
                                               admission::Deadline deadline) {
  const CreatorToken& t = token;
  return Command(
      PostgresPurpose::kModeration, deadline,
      "SELECT sluice_add_creator_token($1, $2, $3::bytea, $4, $5, $6, $7, $8, $9, $10, $11)",
      {P(t.id), P(t.label), DigestParam(t.secret_sha256), P(t.rate_milli), P(t.burst),
       P(t.bytes_rate), P(t.bytes_burst), P(t.expires_at), P(t.created_at), P(max_live), P(now)},
      [max_live](const PGresult* r) -> Result<std::monostate> {
        if (PQntuples(r) > 0 && Int(r, 0, 0) == 2) {
          return MakeError(
              ErrorCode::kInsufficientStorage,
              fmt::format("the store holds max_creator_tokens ({}) live creator tokens", max_live),
              std::string(kCreatorTokensFull));
        }
        return std::monostate{};
      });
}

awaitable<Result<bool>> PgMetaStore::RevokeCreatorToken(std::string id, int64_t now,
                                                        admission::Deadline deadline) {
  // The revoke and the version in one statement; a concurrent revoke of the same token waits for
  // the row and then finds it revoked, so the version moves once.
  return Query<bool>(
      PostgresPurpose::kModeration, deadline,
      "WITH hit AS (UPDATE creator_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at = 0 "
      "RETURNING 1), "
      "bumped AS (UPDATE creator_tokens_state SET version = version + 1 "
      "WHERE slot = 0 AND EXISTS (SELECT 1 FROM hit) RETURNING 1) "
      "SELECT (SELECT count(*) FROM hit), (SELECT count(*) FROM bumped), "
      "(SELECT count(*) FROM creator_tokens WHERE id = $1)",
      {P(id), P(now)}, [](const PGresult* r) -> Result<bool> {
        if (PQntuples(r) == 0 || Int(r, 0, 2) == 0) {
          return MakeError(ErrorCode::kNotFound, "no such creator token", "not_found");
        }
        return Int(r, 0, 0) > 0;
      });
}

awaitable<Result<CreatorTokenList>> PgMetaStore::CreatorTokens(admission::Deadline deadline) {
  // One statement, one snapshot: the version and the rows agree. A LEFT JOIN keeps the version
  // when there is no token.
  return Query<CreatorTokenList>(
      PostgresPurpose::kModeration, deadline,
      "SELECT s.version, t.id, t.label, t.secret_sha256, t.rate_milli, t.burst, t.bytes_rate, "
      "t.bytes_burst, t.expires_at, t.created_at, t.revoked_at "
      "FROM creator_tokens_state s LEFT JOIN creator_tokens t ON true WHERE s.slot = 0 "
      "ORDER BY t.id",
      {}, [](const PGresult* r) -> Result<CreatorTokenList> {
        CreatorTokenList list;
        for (int i = 0; i < PQntuples(r); ++i) {
          list.version = Int(r, i, 0);
          if (PQgetisnull(r, i, 1)) continue;
          if (Text(r, i, 3).size() != 2 + 2 * TokenHash().size()) continue;
          CreatorToken t;
          t.id = std::string(Text(r, i, 1));
          t.label = std::string(Text(r, i, 2));
          t.secret_sha256 = Hash(Text(r, i, 3));
          t.rate_milli = Int(r, i, 4);
          t.burst = Int(r, i, 5);
          t.bytes_rate = Int(r, i, 6);
          t.bytes_burst = Int(r, i, 7);
          t.expires_at = Int(r, i, 8);
          t.created_at = Int(r, i, 9);
          t.revoked_at = Int(r, i, 10);
          list.tokens.push_back(std::move(t));
        }
        return list;
      });
}

awaitable<Result<int64_t>> PgMetaStore::CreatorTokensVersion(admission::Deadline deadline) {
  return Query<int64_t>(PostgresPurpose::kModeration, deadline,
                        "SELECT version FROM creator_tokens_state WHERE slot = 0", {},
                        [](const PGresult* r) -> Result<int64_t> {
                          return PQntuples(r) == 0 ? int64_t{0} : Int(r, 0, 0);
                        });
}

}  // namespace sluice::store::pg
