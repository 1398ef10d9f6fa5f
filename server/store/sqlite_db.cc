#include "server/store/sqlite_db.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace medprof::server {
namespace {

const Logger kLog("store");

absl::StatusCode CodeFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_IOERR:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CONSTRAINT:
      return absl::StatusCode::kAlreadyExists;
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return absl::StatusCode::kResourceExhausted;
    default:  // CORRUPT, NOTADB, ERROR (SQL logic), MISUSE, ...
      return absl::StatusCode::kInternal;
  }
}

// The cause in words a client may read: never the statement (that goes to the server log).
std::string CauseFor(sqlite3* db, int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "the database is locked by another process (try again later)";
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_IOERR:
      return absl::StrCat("the server cannot write its database: ", sqlite3_errstr(rc));
    case SQLITE_CONSTRAINT:  // "UNIQUE constraint failed: studies.study_id": names, no statement
      return db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    case SQLITE_FULL:
      return "the database or its disk is full";
    case SQLITE_NOMEM:
      return "the server is out of memory";
    default:
      return absl::StrCat("internal database error: ", sqlite3_errstr(rc), " (details in the server log)");
  }
}

// The first line of a statement, shortened, for error messages.
std::string Abbrev(std::string_view sql) {
  std::string s(sql.substr(0, 120));
  for (char& c : s) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  return sql.size() > 120 ? s + "..." : s;
}

}  // namespace

absl::Status SqliteError(sqlite3* db, int rc, std::string_view call) {
  const char* msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const std::string detail =
      absl::StrCat("sqlite: ", absl::string_view(call.data(), call.size()), " failed: ", msg, " (code ", rc, ")");
  if ((rc & 0xff) == SQLITE_CONSTRAINT) {
    kLog.Debug("{}", detail);  // expected by callers that detect duplicates
  } else {
    kLog.Warn("{}", detail);
  }
  return absl::Status(CodeFor(rc), absl::StrCat("database: ", CauseFor(db, rc), " (SQLite code ", rc, ")"));
}

namespace {

// Programming errors in the store: the statement to the log, INTERNAL without it to the caller.
absl::Status StoreBug(const char* what, std::string_view sql) {
  kLog.Error("{}: {}", what, Abbrev(sql));
  return absl::InternalError(absl::StrCat("internal database error: ", what, " (details in the server log)"));
}

}  // namespace

absl::Status Statement::Bind(int i, int64_t v) {
  MEDPROF_SQLITE_CALL(db_, sqlite3_bind_int64(stmt_, i, v));
  return absl::OkStatus();
}

absl::Status Statement::Bind(int i, double v) {
  MEDPROF_SQLITE_CALL(db_, sqlite3_bind_double(stmt_, i, v));
  return absl::OkStatus();
}

absl::Status Statement::Bind(int i, std::string_view v) {
  MEDPROF_SQLITE_CALL(db_, sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  return absl::OkStatus();
}

absl::StatusOr<bool> Statement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, rc, absl::StrCat("sqlite3_step(", Abbrev(sql_), ")"));
}

absl::Status Statement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

std::string Statement::Text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  if (p == nullptr) return std::string();
  return std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

void Statement::Reset() {
  sqlite3_reset(stmt_);  // returns the last step's error, already reported by Step()
  sqlite3_clear_bindings(stmt_);
}

namespace {

// Process-wide SQLite settings, applied once before the first connection. Memory statistics off:
// with them every sqlite3_malloc and sqlite3_free of every connection takes one global mutex, and
// a thread preempted while holding it stalls all the others — 20 busy readers made the writer wait
// on it for tens of ms (perf sched: the ingest thread slept in sqlite3Malloc's mutex). Nothing here
// reads the statistics (sqlite3_memory_used, soft heap limits).
void ConfigureSqliteOnce() {
  static const int rc = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  static bool logged = false;
  if (rc != SQLITE_OK && !logged) {
    logged = true;  // SQLITE_MISUSE: something in this process initialized SQLite first
    kLog.Warn("sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0): {} (SQLite code {}): memory statistics stay on, and "
              "with them a global lock every connection takes to allocate",
              sqlite3_errstr(rc), rc);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Db>> Db::Open(const std::string& path) {
  ConfigureSqliteOnce();
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = SqliteError(raw, rc, absl::StrCat("sqlite3_open_v2(", path, ")"));
    sqlite3_close(raw);
    return s;
  }
  sqlite3_extended_result_codes(raw, 1);
  return std::unique_ptr<Db>(new Db(raw));
}

Db::~Db() {
  cache_.clear();  // finalize every statement before closing
  sqlite3_close(db_);
}

absl::StatusOr<ScopedStatement> Db::Prepare(std::string_view sql) {
  auto it = cache_.find(std::string(sql));
  if (it == cache_.end()) {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                                      &stmt, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db_, rc, absl::StrCat("sqlite3_prepare_v3(", Abbrev(sql), ")"));
    it = cache_.emplace(std::string(sql), std::make_unique<Statement>(db_, stmt, std::string(sql))).first;
  }
  Statement* st = it->second.get();
  if (st->in_use) {
    return StoreBug("statement already in use (nested use of one query)", sql);
  }
  if (!write_allowed && !st->read_only()) {
    return StoreBug("write inside a read transaction", sql);
  }
  return ScopedStatement(st);
}

absl::Status Db::ExecScript(std::string_view script) {
  const char* p = script.data();
  const char* end = script.data() + script.size();
  while (p < end) {
    sqlite3_stmt* raw = nullptr;
    const char* tail = nullptr;
    const int rc = sqlite3_prepare_v2(db_, p, static_cast<int>(end - p), &raw, &tail);
    if (rc != SQLITE_OK) {
      return SqliteError(db_, rc, absl::StrCat("sqlite3_prepare_v2(", Abbrev(std::string_view(p, end - p)), ")"));
    }
    if (raw == nullptr) break;  // only whitespace or comments left
    Statement st(db_, raw, std::string(p, tail));
    absl::Status s = st.Run();
    if (!s.ok()) return s;
    p = tail;
  }
  return absl::OkStatus();
}

}  // namespace medprof::server
