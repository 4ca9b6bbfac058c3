// Reading PostgreSQL's answers and writing its parameters, for the PostgreSQL MetaStore's files
// (postgres_meta_store.h): the text format throughout, bytea as "\x" and hex digits. Private to
// sluice_store_postgres.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "pg_connection.h"
#include "sluice/store/meta_store.h"

namespace sluice::store::pg {

inline int64_t Int(const PGresult* r, int row, int col) {
  return std::strtoll(PQgetvalue(r, row, col), nullptr, 10);
}

inline std::string_view Text(const PGresult* r, int row, int col) {
  return {PQgetvalue(r, row, col), static_cast<size_t>(PQgetlength(r, row, col))};
}

inline TokenHash Hash(std::string_view hex) {
  TokenHash out{};
  if (hex.starts_with("\\x")) hex.remove_prefix(2);
  auto nibble = [](char c) -> unsigned {
    if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<unsigned>(c - 'A' + 10);
    return 0;
  };
  for (size_t i = 0; i < out.size() && 2 * i + 1 < hex.size(); ++i) {
    out[i] = static_cast<unsigned char>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  }
  return out;
}

inline Moderation ModerationOf(int64_t v) {
  return v >= 0 && v <= kMaxModeration ? static_cast<Moderation>(v) : Moderation::kNone;
}

inline Param P(int64_t v) { return Param{std::to_string(v), false}; }
inline Param P(std::string_view v) { return Param{std::string(v), false}; }

// Ids are base62, so a Postgres array literal needs no quoting.
inline Param IdArray(const std::vector<PasteId>& ids) {
  std::string s = "{";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += ids[i].view();
  }
  s += '}';
  return Param{std::move(s), false};
}

// The columns every row read selects, in the order RowFrom parses (the claim's own select puts
// its own views_left in place of the eleventh, then the parent).
#define SLUICE_ROW_COLUMNS_BEFORE_VIEWS                                                      \
  "created_at, expires_at, size_bytes, token_hash, deleted, body_sha256, burn, moderation, " \
  "creator_network, encrypted"
#define SLUICE_ROW_COLUMNS SLUICE_ROW_COLUMNS_BEFORE_VIEWS ", views_left, parent"

// `row` is the answer's row to read (ListPastes reads many).
inline PasteMeta RowFrom(const PasteId& id, const PGresult* r, int row = 0) {
  PasteMeta m{id,
              Int(r, row, 0),
              Int(r, row, 1),
              static_cast<uint64_t>(Int(r, row, 2)),
              Hash(Text(r, row, 3)),
              Text(r, row, 4) == "t",
              std::nullopt};
  // NULL on rows from before checksums ("\\x" and 64 hex digits otherwise).
  if (!PQgetisnull(r, row, 5) && Text(r, row, 5).size() == 2 + 2 * BodyDigest().size()) {
    m.body_sha256 = Hash(Text(r, row, 5));
  }
  m.burn = Text(r, row, 6) == "t";
  m.moderation = ModerationOf(Int(r, row, 7));
  if (!PQgetisnull(r, row, 8)) m.creator_network = static_cast<uint64_t>(Int(r, row, 8));
  m.encrypted = Text(r, row, 9) == "t";
  m.views_left = static_cast<uint32_t>(std::clamp<int64_t>(Int(r, row, 10), 0, UINT32_MAX));
  if (!PQgetisnull(r, row, 11)) m.parent = PasteId::Parse(Text(r, row, 11));
  return m;
}

inline bool Bool(const PGresult* r, int row, int col) { return Text(r, row, col) == "t"; }

// The storage_usage slot of a row (src/store/postgres/postgres_migrate.cc): its id's last
// character, spread over sixteen counter rows.
#define SLUICE_USAGE_SLOT(id) "ascii(right(" id ", 1)) % 16"

}  // namespace sluice::store::pg
