// Thin RAII wrappers over the SQLite C API, private to server/store/.
//
// Db owns one sqlite3 connection and a cache of prepared statements (finalized before the
// connection closes). Statement wraps one sqlite3_stmt; ScopedStatement is the handle Prepare()
// returns: it resets the statement and clears its bindings when it goes out of scope, so a
// cached statement never holds a read cursor open. Every SQLite call goes through
// MEDPROF_SQLITE_CALL (or SqliteError), which keeps the call text and sqlite3_errmsg.
//
// Not thread-safe: SqliteStore serializes access with its own mutex.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace medprof::server {

// The status for a failed SQLite call, fit to reach a client: code mapped from the SQLite
// result code (BUSY/LOCKED/READONLY/CANTOPEN/PERM/IOERR -> UNAVAILABLE, CONSTRAINT ->
// ALREADY_EXISTS, FULL/NOMEM -> RESOURCE_EXHAUSTED, else INTERNAL), message "database: <the
// cause in words> (SQLite code N)" — never the statement. The call text and sqlite3_errmsg go
// to the server log ("store" logger; debug for CONSTRAINT, which callers may expect).
absl::Status SqliteError(sqlite3* db, int rc, std::string_view call);

// Runs `call` (an expression returning an SQLite result code) and returns the mapped status
// from the enclosing function unless it is SQLITE_OK.
#define MEDPROF_SQLITE_CALL(db, call)                                                \
  do {                                                                               \
    const int medprof_sqlite_rc_ = (call);                                           \
    if (medprof_sqlite_rc_ != SQLITE_OK) {                                           \
      return ::medprof::server::SqliteError((db), medprof_sqlite_rc_, #call);        \
    }                                                                                \
  } while (false)

class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt, std::string sql) : db_(db), stmt_(stmt), sql_(std::move(sql)) {}
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // 1-based parameter indexes, as in SQLite.
  absl::Status Bind(int i, int64_t v);
  absl::Status Bind(int i, int v) { return Bind(i, static_cast<int64_t>(v)); }
  // Stored as a signed 64-bit integer (values above INT64_MAX wrap; medprof's never do).
  absl::Status Bind(int i, uint64_t v) { return Bind(i, static_cast<int64_t>(v)); }
  absl::Status Bind(int i, bool v) { return Bind(i, static_cast<int64_t>(v ? 1 : 0)); }
  absl::Status Bind(int i, double v);
  absl::Status Bind(int i, std::string_view v);
  absl::Status Bind(int i, const std::string& v) { return Bind(i, std::string_view(v)); }
  absl::Status Bind(int i, const char* v) { return Bind(i, std::string_view(v)); }

  // Binds parameters 1..N in order.
  template <typename... A>
  absl::Status BindAll(const A&... args) {
    int i = 0;
    absl::Status s;
    ((s.ok() ? (s = Bind(++i, args), 0) : 0), ...);
    return s;
  }

  // Advances the statement; true when a row is available, false when done.
  absl::StatusOr<bool> Step();
  // Steps until done (for statements that return no rows).
  absl::Status Run();

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string Text(int col) const;
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  bool read_only() const { return sqlite3_stmt_readonly(stmt_) != 0; }

  void Reset();
  const std::string& sql() const { return sql_; }
  bool in_use = false;  // held by a ScopedStatement

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  std::string sql_;
};

// Borrowed, cached statement; resets it on destruction.
class ScopedStatement {
 public:
  explicit ScopedStatement(Statement* s) : s_(s) { s_->in_use = true; }
  ScopedStatement(ScopedStatement&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  ScopedStatement& operator=(ScopedStatement&&) = delete;
  ScopedStatement(const ScopedStatement&) = delete;
  ~ScopedStatement() {
    if (s_ != nullptr) {
      s_->Reset();
      s_->in_use = false;
    }
  }
  Statement* operator->() const { return s_; }
  Statement& operator*() const { return *s_; }

 private:
  Statement* s_;
};

class Db {
 public:
  // Opens (creating when missing) the database at `path`; ":memory:" for a private in-memory DB.
  static absl::StatusOr<std::unique_ptr<Db>> Open(const std::string& path);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // A cached prepared statement for `sql`. While `write_allowed` is false, statements that
  // would write are refused with INTERNAL (Store::Read transactions).
  absl::StatusOr<ScopedStatement> Prepare(std::string_view sql);
  // Prepares and runs each statement of a script in turn (migrations, pragmas, BEGIN/COMMIT).
  absl::Status ExecScript(std::string_view script);

  int64_t LastInsertRowid() const { return sqlite3_last_insert_rowid(db_); }
  int Changes() const { return sqlite3_changes(db_); }
  sqlite3* handle() const { return db_; }
  bool write_allowed = true;

 private:
  explicit Db(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  std::unordered_map<std::string, std::unique_ptr<Statement>> cache_;
};

}  // namespace medprof::server
