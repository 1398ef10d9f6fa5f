#include "server/store/sqlite_db.h"

#include "absl/strings/str_cat.h"

namespace medprof::server {
namespace {

absl::StatusCode CodeFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CONSTRAINT:
      return absl::StatusCode::kAlreadyExists;
    case SQLITE_FULL:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_NOTADB:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
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
  return absl::Status(CodeFor(rc), absl::StrCat("sqlite: ", absl::string_view(call.data(), call.size()),
                                                " failed: ", msg, " (code ", rc, ")"));
}

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

absl::StatusOr<std::unique_ptr<Db>> Db::Open(const std::string& path) {
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
    return absl::InternalError(absl::StrCat("statement already in use (nested use of one query): ", Abbrev(sql)));
  }
  if (!write_allowed && !st->read_only()) {
    return absl::InternalError(absl::StrCat("write inside a read transaction: ", Abbrev(sql)));
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
