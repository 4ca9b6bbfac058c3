// A minimal RAII layer over the SQLite C API: one connection with its prepared statements cached.
// Not thread-safe: one thread uses a connection at a time.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

namespace sluice::store::sqlite {

/// A prepared statement, reset before each use by Db::Prepare.
class Statement {
 public:
  explicit Statement(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int index, int64_t value) {
    sqlite3_bind_int64(stmt_, index, value);
    return *this;
  }
  Statement& Bind(int index, std::string_view text) {
    sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& Bind(int index, std::span<const unsigned char> blob) {
    sqlite3_bind_blob(stmt_, index, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
    return *this;
  }
  /// Returns SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(stmt_); }

  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  std::string_view Text(int column) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
    return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
             : std::string_view();
  }
  std::span<const unsigned char> Blob(int column) const {
    const auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(stmt_, column));
    return {p, static_cast<size_t>(sqlite3_column_bytes(stmt_, column))};
  }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

 private:
  sqlite3_stmt* stmt_;
};

/// One open connection. Throws std::runtime_error from Open and Exec only (start-up paths).
class Db {
 public:
  static std::unique_ptr<Db> Open(const std::filesystem::path& path);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  /// Runs statements that return no rows; throws on failure (schema and pragmas at start-up).
  void Exec(const char* sql);
  /// Runs a statement that returns no rows; returns the SQLite result code.
  int TryExec(const char* sql);
  /// Returns the cached statement for `sql`, reset and with bindings cleared.
  Statement& Prepare(const char* sql);
  /// Resets every cached statement. A statement left mid-result keeps its read transaction, and in
  /// WAL mode that pins the connection to an old snapshot: the next query would miss newer commits.
  void ResetAll() {
    for (auto& [sql, stmt] : statements_) stmt->Reset();
  }
  std::string LastError() const { return sqlite3_errmsg(db_); }
  sqlite3* raw() { return db_; }

 private:
  explicit Db(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  std::unordered_map<const char*, std::unique_ptr<Statement>> statements_;
};

}  // namespace sluice::store::sqlite
