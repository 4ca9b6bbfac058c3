#include "sqlite_db.h"

#include <stdexcept>

namespace sluice::store::sqlite {

std::unique_ptr<Db> Db::Open(const std::filesystem::path& path) {
  sqlite3* raw = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path.c_str(), &raw, flags, nullptr) != SQLITE_OK) {
    std::string message = raw ? sqlite3_errmsg(raw) : "out of memory";
    sqlite3_close(raw);
    throw std::runtime_error("cannot open " + path.string() + ": " + message);
  }
  return std::unique_ptr<Db>(new Db(raw));
}

Db::~Db() {
  statements_.clear();  // finalize before close, or close fails with SQLITE_BUSY
  sqlite3_close(db_);
}

void Db::Exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    throw std::runtime_error(std::string("sqlite: ") + message);
  }
}

int Db::TryExec(const char* sql) { return sqlite3_exec(db_, sql, nullptr, nullptr, nullptr); }

Statement& Db::Prepare(const char* sql) {
  auto it = statements_.find(sql);
  if (it == statements_.end()) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK) {
      throw std::runtime_error(std::string("sqlite prepare: ") + sqlite3_errmsg(db_));
    }
    it = statements_.emplace(sql, std::make_unique<Statement>(stmt)).first;
  }
  it->second->Reset();
  return *it->second;
}

}  // namespace sluice::store::sqlite
