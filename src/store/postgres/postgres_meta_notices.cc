// PgMetaStore's notices (postgres_meta_store.h; docs/moderation.md, "Notices"), on the moderation
// pool. A notice is one function call (migration 16): classified, stored and its pastes withheld
// in one transaction, then read back.
#include <fmt/format.h>

#include "pg_rows.h"
#include "postgres_meta_store.h"

namespace sluice::store::pg {
namespace {

// A notice's columns in the order kNoticeColumns lists them; its pastes as
// "ID:OUTCOME:OPEN,..." in the order the notice named them.
constexpr const char* kNoticeColumns =
    "n.id, n.sender, n.reference, n.category, n.deadline_at, n.received_at, n.open_pastes, "
    "(SELECT string_agg(np.paste_id || ':' || np.outcome || ':' || (CASE WHEN np.open THEN '1' "
    "ELSE '0' END), ',' ORDER BY np.ord) FROM notice_pastes np WHERE np.notice_id = n.id)";

std::vector<std::string_view> Split(std::string_view text, char by) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const size_t at = std::min(text.find(by), text.size());
    out.push_back(text.substr(0, at));
    text.remove_prefix(std::min(at + 1, text.size()));
  }
  return out;
}

Notice NoticeRow(const PGresult* r, int row) {
  Notice n;
  n.id = Int(r, row, 0);
  n.sender = std::string(Text(r, row, 1));
  n.reference = std::string(Text(r, row, 2));
  n.category = std::string(Text(r, row, 3));
  if (Int(r, row, 4) != 0) n.deadline_at = Int(r, row, 4);
  n.received_at = Int(r, row, 5);
  n.open_pastes = Int(r, row, 6);
  if (PQnfields(r) > 7 && !PQgetisnull(r, row, 7)) {
    for (std::string_view item : Split(Text(r, row, 7), ',')) {
      const std::vector<std::string_view> parts = Split(item, ':');
      if (parts.size() != 3) continue;  // only ids, outcome names and 0/1 are ever written
      n.pastes.push_back(
          NoticePaste{std::string(parts[0]), std::string(parts[1]), parts[2] == "1"});
    }
  }
  return n;
}

Result<std::vector<Notice>> NoticeRows(const PGresult* r) {
  std::vector<Notice> out;
  for (int i = 0; i < PQntuples(r); ++i) out.push_back(NoticeRow(r, i));
  return out;
}

// An array literal of `items`, each quoted, so any text goes through as it is.
Param TextArray(const std::vector<std::string_view>& items) {
  std::string literal = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) literal += ',';
    literal += '"';
    for (char c : items[i]) {
      if (c == '"' || c == '\\') literal += '\\';
      literal += c;
    }
    literal += '"';
  }
  literal += '}';
  return Param{std::move(literal), false};
}

}  // namespace

awaitable<Result<NoticeOutcome>> PgMetaStore::AddNotice(Notice notice, int64_t max_notices,
                                                        admission::Deadline deadline) {
  std::string pastes = "{";  // ids are base62: an array literal needs no quoting
  for (size_t i = 0; i < notice.pastes.size(); ++i) {
    if (i > 0) pastes += ',';
    pastes += notice.pastes[i].paste;
  }
  pastes += '}';
  struct Added {
    int64_t status = 0;
    int64_t id = 0;
    std::string outcomes;
  };
  Result<Added> added = Added{};
  // A full store makes room from its oldest closed notices (migration 19) and is asked once more.
  for (bool room_made = false;;) {
    auto adding = Query<Added>(
        PostgresPurpose::kModeration, deadline,
        "SELECT o_status, o_id, o_outcomes FROM sluice_add_notice($1, $2, $3, $4, $5, $6::text[], "
        "$7)",
        {P(notice.sender), P(notice.reference), P(notice.category),
         P(notice.deadline_at.value_or(0)), P(notice.received_at), P(pastes), P(max_notices)},
        [](const PGresult* r) -> Result<Added> {
          if (PQntuples(r) == 0) {
            return MakeError(ErrorCode::kInternal, "sluice_add_notice returned no row", "internal");
          }
          return Added{Int(r, 0, 0), Int(r, 0, 1), std::string(Text(r, 0, 2))};
        });
    added = co_await std::move(adding);
    if (!added.ok()) co_return added.error();
    if (added->status != 3) break;
    if (room_made) co_return NoticesFull(max_notices);
    auto making_room = Query<bool>(
        PostgresPurpose::kModeration, deadline, "SELECT sluice_make_room_for_notices($1)",
        {P(max_notices)}, [](const PGresult* r) -> Result<bool> {
          if (PQntuples(r) == 0) {
            return MakeError(ErrorCode::kInternal, "sluice_make_room_for_notices returned no row",
                             "internal");
          }
          return std::string_view(Text(r, 0, 0)) == "t";
        });
    Result<bool> made = co_await std::move(making_room);
    if (!made.ok()) co_return made.error();
    if (!*made) co_return NoticesFull(max_notices);
    room_made = true;
  }
  if (added->status == 2) {
    const std::vector<std::string_view> outcomes = Split(added->outcomes, ',');
    for (size_t i = 0; i < notice.pastes.size() && i < outcomes.size(); ++i) {
      notice.pastes[i].outcome = std::string(outcomes[i]);
    }
    co_return NoticeOutcome{false, false, std::move(notice)};
  }
  // Query keeps the statement's text by pointer until it is done: a static one.
  static const std::string by_id =
      fmt::format("SELECT {} FROM notices n WHERE n.id = $1", kNoticeColumns);
  auto reading = Query<std::vector<Notice>>(PostgresPurpose::kModeration, deadline, by_id.c_str(),
                                            {P(added->id)}, NoticeRows);
  Result<std::vector<Notice>> stored = co_await std::move(reading);
  if (!stored.ok()) co_return stored.error();
  if (stored->empty()) {
    co_return MakeError(ErrorCode::kUnavailable, "the notice just stored was not found",
                        "store_unavailable");
  }
  co_return NoticeOutcome{added->status == 0, true, std::move(stored->front())};
}

awaitable<Result<std::vector<Notice>>> PgMetaStore::Notices(int64_t after_id, size_t limit,
                                                            admission::Deadline deadline) {
  // A range of the primary key: a page costs its length.
  static const std::string sql = fmt::format(
      "SELECT {} FROM notices n WHERE n.id > $1 ORDER BY n.id LIMIT $2", kNoticeColumns);
  return Query<std::vector<Notice>>(PostgresPurpose::kModeration, deadline, sql.c_str(),
                                    {P(after_id), P(static_cast<int64_t>(limit))}, NoticeRows);
}

awaitable<Result<bool>> PgMetaStore::ImportNotice(Notice notice, int64_t max_notices,
                                                  admission::Deadline deadline) {
  std::vector<std::string_view> pastes, outcomes, open_flags;
  for (const NoticePaste& p : notice.pastes) {
    pastes.push_back(p.paste);
    outcomes.push_back(p.outcome);
    open_flags.push_back(p.open ? "t" : "f");
  }
  // One call, one transaction (migration 20): the lock, the room and the rows.
  auto importing = Query<int64_t>(
      PostgresPurpose::kModeration, deadline,
      "SELECT sluice_import_notice($1, $2, $3, $4, $5, $6, $7::text[], $8::text[], "
      "$9::boolean[], $10)",
      {P(notice.sender), P(notice.reference), P(notice.category), P(notice.deadline_at.value_or(0)),
       P(notice.received_at), P(notice.open_pastes), TextArray(pastes), TextArray(outcomes),
       TextArray(open_flags), P(max_notices)},
      [](const PGresult* r) -> Result<int64_t> {
        if (PQntuples(r) == 0) {
          return MakeError(ErrorCode::kInternal, "sluice_import_notice returned no row",
                           "internal");
        }
        return Int(r, 0, 0);
      });
  Result<int64_t> status = co_await std::move(importing);
  if (!status.ok()) co_return status.error();
  if (*status == 3) co_return NoticesFull(max_notices);
  co_return *status == 0;
}

awaitable<Result<std::vector<Notice>>> PgMetaStore::OpenNotices(size_t limit,
                                                                admission::Deadline deadline) {
  // A range of the partial index of open notices by arrival: a page costs its length.
  static const std::string sql = fmt::format(
      "SELECT {} FROM notices n WHERE n.open_pastes > 0 ORDER BY n.received_at, n.id LIMIT $1",
      kNoticeColumns);
  return Query<std::vector<Notice>>(PostgresPurpose::kModeration, deadline, sql.c_str(),
                                    {P(static_cast<int64_t>(limit))}, NoticeRows);
}

awaitable<Result<std::vector<Notice>>> PgMetaStore::CloseNotices(PasteId id, int64_t,
                                                                 admission::Deadline deadline) {
  // One statement: the paste's open rows closed, each notice's count moved once (a paste is named
  // once per notice), the notices returned as they were.
  return Query<std::vector<Notice>>(
      PostgresPurpose::kModeration, deadline,
      "WITH closed AS (UPDATE notice_pastes SET open = false WHERE paste_id = $1 AND open "
      "RETURNING notice_id) "
      "UPDATE notices n SET open_pastes = n.open_pastes - 1 FROM closed c WHERE n.id = c.notice_id "
      "RETURNING n.id, n.sender, n.reference, n.category, n.deadline_at, n.received_at, "
      "n.open_pastes + 1",
      {P(id.view())}, NoticeRows);
}

}  // namespace sluice::store::pg
