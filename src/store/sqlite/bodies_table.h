// The table of paste bodies kept by id, the same in meta.db (bodies from before migration 8, and
// bodies written apart from their row: sqlite_meta_store.h) and in bodies.db
// (sqlite_blob_store.cc): one place for its statements. Each function runs on the thread that
// owns `db` (a committer for writes, a reader for reads) and names a failure with the calling
// store's own error.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/result.h"
#include "sluice/store/blob_store.h"
#include "sqlite_db.h"

namespace sluice::store::sqlite {

/// The calling store's error for a failed statement, naming what was being done.
using BodyTableError = Error (*)(Db& db, std::string_view what);

inline Status WriteBodyRow(Db& db, const PasteId& id, const std::string& body, int64_t written_at,
                           BodyTableError fail) {
  Statement& s =
      db.Prepare("INSERT OR REPLACE INTO bodies (id, written_at, body) VALUES (?, ?, ?)");
  s.Bind(1, id.view())
      .Bind(2, written_at)
      .Bind(3, std::span(reinterpret_cast<const unsigned char*>(body.data()), body.size()));
  return s.Step() == SQLITE_DONE ? Ok() : Status(fail(db, "write body"));
}

/// Deleting a body that is not there succeeds: deletes are retried by the outbox.
inline Status DeleteBodyRow(Db& db, const PasteId& id, BodyTableError fail) {
  Statement& s = db.Prepare("DELETE FROM bodies WHERE id = ?");
  s.Bind(1, id.view());
  return s.Step() == SQLITE_DONE ? Ok() : Status(fail(db, "delete body"));
}

/// The body stored under `id`, NotFound if none.
inline Result<std::string> ReadBodyRow(Db& db, const PasteId& id, BodyTableError fail) {
  Statement& s = db.Prepare("SELECT body FROM bodies WHERE id = ?");
  s.Bind(1, id.view());
  const int rc = s.Step();
  if (rc == SQLITE_ROW) {
    const auto blob = s.Blob(0);
    return std::string(reinterpret_cast<const char*>(blob.data()), blob.size());
  }
  if (rc == SQLITE_DONE) return MakeError(ErrorCode::kNotFound, "no such body", "not_found");
  return fail(db, "get body");
}

/// Up to `limit` bodies with ids after `after`, in id order, dated when they were written.
inline Result<std::vector<BlobInfo>> ListBodyRows(Db& db, std::string_view after, size_t limit,
                                                  BodyTableError fail) {
  Statement& s = db.Prepare("SELECT id, written_at FROM bodies WHERE id > ? ORDER BY id LIMIT ?");
  s.Bind(1, after).Bind(2, static_cast<int64_t>(limit));
  std::vector<BlobInfo> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    // A row under an id that is not one (written by hand) is not a body of this store.
    if (auto id = PasteId::Parse(s.Text(0))) out.push_back(BlobInfo{*id, s.Int(1)});
  }
  if (rc != SQLITE_DONE) return fail(db, "list bodies");
  return out;
}

}  // namespace sluice::store::sqlite
