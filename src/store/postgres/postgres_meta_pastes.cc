// PgMetaStore's statements on a paste's row (postgres_meta_store.h): insert, get, mark deleted and
// the burn-after-reading claim.
#include "pg_rows.h"
#include "postgres_meta_store.h"

namespace sluice::store::pg {

awaitable<Status> PgMetaStore::Insert(PasteMeta meta, admission::Deadline deadline) {
  std::string hash(reinterpret_cast<const char*>(meta.token_hash.data()), meta.token_hash.size());
  // An empty bytea stands for "no checksum" (NULL): a text parameter cannot carry NULL here.
  std::string digest;
  if (meta.body_sha256) {
    digest.assign(reinterpret_cast<const char*>(meta.body_sha256->data()),
                  meta.body_sha256->size());
  }
  // No creator network is '' (NULL), as no checksum is an empty bytea.
  std::string network =
      meta.creator_network ? std::to_string(static_cast<int64_t>(*meta.creator_network)) : "";
  // One statement, so the row and its live bytes commit together, and with them the end of the
  // row's reservation (ReserveStorage): its bytes move from reserved to live in one commit.
  // Only a create that reserved pays for that delete.
#define SLUICE_INSERT_ROW                                                                       \
  "added AS (INSERT INTO pastes (id, created_at, expires_at, size_bytes, token_hash, deleted, " \
  "body_sha256, burn, creator_network, encrypted, views_left, parent) VALUES ($1, $2, $3, $4, " \
  "$5, false, NULLIF($6::bytea, ''::bytea), $7::boolean, NULLIF($8, '')::bigint, $9::boolean, " \
  "$10::integer, NULLIF($11, '')) "                                                             \
  "RETURNING id, size_bytes) "                                                                  \
  "UPDATE storage_usage u SET live_bytes = u.live_bytes + a.size_bytes FROM added a "           \
  "WHERE u.slot = " SLUICE_USAGE_SLOT("a.id")
  static constexpr const char* kInsert = "WITH " SLUICE_INSERT_ROW;
  static constexpr const char* kInsertTakingReservation =
      "WITH taken AS (DELETE FROM storage_reservations WHERE id = $1), " SLUICE_INSERT_ROW;
#undef SLUICE_INSERT_ROW
  return Command(PostgresPurpose::kWrite, deadline,
                 HoldsReservation(meta.id) ? kInsertTakingReservation : kInsert,
                 {P(meta.id.view()), P(meta.created_at), P(meta.expires_at),
                  P(static_cast<int64_t>(meta.size_bytes)), Param{std::move(hash), true},
                  Param{std::move(digest), true}, P(meta.burn ? "true" : "false"),
                  Param{std::move(network), false}, P(meta.encrypted ? "true" : "false"),
                  P(static_cast<int64_t>(meta.burn ? meta.views_left : 1)),
                  P(meta.parent ? meta.parent->view() : std::string_view())},
                 nullptr, LostAnswer::kOutcomeUnknown);
}

awaitable<Result<PasteMeta>> PgMetaStore::Get(PasteId id, admission::Deadline deadline) {
  return Query<PasteMeta>(PostgresPurpose::kRead, deadline,
                          "SELECT " SLUICE_ROW_COLUMNS " FROM pastes WHERE id = $1", {P(id.view())},
                          [id](const PGresult* r) -> Result<PasteMeta> {
                            if (PQntuples(r) == 0)
                              return MakeError(ErrorCode::kNotFound, "no such paste", "not_found");
                            return RowFrom(id, r);
                          });
}

awaitable<Status> PgMetaStore::MarkDeleted(PasteId id, int64_t now, admission::Deadline deadline) {
  // One statement, so one implicit transaction: the tombstone and its outbox entry commit
  // together. A concurrent second delete waits on the row lock, then re-checks `NOT deleted` and
  // finds nothing to mark, so the body is owed once. `present` reads the snapshot from before the
  // update, which is enough to tell a tombstone from no row.
  return Command(
      PostgresPurpose::kWrite, deadline,
      "WITH marked AS (UPDATE pastes SET deleted = true WHERE id = $1 AND NOT deleted "
      "RETURNING id, size_bytes), "
      "queued AS (INSERT INTO outbox (paste_id, kind, attempts, enqueued_at, next_attempt_at) "
      "SELECT id, 'delete_body', 0, $2, $2 FROM marked RETURNING seq), "
      "counted AS (UPDATE storage_usage u SET live_bytes = u.live_bytes - m.size_bytes "
      "FROM marked m WHERE u.slot = " SLUICE_USAGE_SLOT("m.id") ") "
      "SELECT (SELECT count(*) FROM queued), EXISTS (SELECT 1 FROM pastes WHERE id = $1)",
      {P(id.view()), P(now)}, [](const PGresult* r) -> Result<std::monostate> {
        if (Int(r, 0, 0) > 0 || Text(r, 0, 1) == "t") return std::monostate{};
        return MakeError(ErrorCode::kNotFound, "no such paste", "not_found");
      });
}

awaitable<Result<PasteMeta>> PgMetaStore::Claim(PasteId id, int64_t now,
                                                admission::Deadline deadline) {
  // One statement, so one transaction: the view taken and, with the last one, the tombstone,
  // its outbox entry and the live bytes commit together. Concurrent claims (from any process)
  // queue on the row lock; under READ COMMITTED each later one re-evaluates its WHERE and SET
  // against the row the earlier one committed, so N views go to exactly N claims, and a claim
  // after the last finds the tombstone and updates nothing. The final SELECT reads the
  // statement's snapshot (the row before any of this: its other columns do not change), except
  // views_left, which only the UPDATE's RETURNING knows: the count after this claim. A
  // withheld or taken-down row is never claimed; a SetModeration that commits first is seen by
  // the same re-check.
  return Query<PasteMeta>(
      PostgresPurpose::kWrite, deadline,
      "WITH claimed AS (UPDATE pastes SET views_left = views_left - 1, "
      "deleted = (views_left <= 1) WHERE id = $1 AND burn AND NOT deleted AND moderation = 0 "
      "AND expires_at > $2 AND views_left >= 1 RETURNING id, size_bytes, deleted, views_left), "
      "queued AS (INSERT INTO outbox (paste_id, kind, attempts, enqueued_at, next_attempt_at) "
      "SELECT id, 'delete_body', 0, $2, $2 FROM claimed WHERE deleted), "
      "counted AS (UPDATE storage_usage u SET live_bytes = u.live_bytes - c.size_bytes "
      "FROM claimed c WHERE c.deleted AND u.slot = " SLUICE_USAGE_SLOT("c.id") ") "
      "SELECT " SLUICE_ROW_COLUMNS_BEFORE_VIEWS ", (SELECT c.views_left + 1 FROM claimed c), "
      "parent FROM pastes WHERE id = $1 AND EXISTS (SELECT 1 FROM claimed)",
      {P(id.view()), P(now)}, [id](const PGresult* r) -> Result<PasteMeta> {
        if (PQntuples(r) == 0)
          return MakeError(ErrorCode::kNotFound, "no such paste to claim", "not_found");
        return RowFrom(id, r);
      });
}

}  // namespace sluice::store::pg
