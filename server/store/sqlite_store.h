// SqliteStore: the Store on one SQLite file (or ":memory:" for tests).
//
// Open() sets WAL journaling (a file DB; an in-memory DB has no WAL), the chosen synchronous
// level (NORMAL by default: durable across process crashes; FULL: also across power loss),
// a busy timeout and foreign keys, then applies the numbered migrations (migrations.h) at
// start-up. It refuses (FAILED_PRECONDITION, naming the file) a database it could open but not
// write: a read-only or immutable file, a -wal or -shm file it cannot write or create. Each
// Write() is one BEGIN IMMEDIATE ... COMMIT transaction; every statement is a cached prepared
// statement. Errors of SQLite calls carry a code and a cause fit for clients, never SQL
// (sqlite_db.h: SqliteError).
//
// Owns its connection. Thread-safe: one mutex serializes transactions (one connection; the
// server's load — tens of agents, results in batches — is far below what that carries).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "server/store/store.h"

namespace medprof::server {

class Db;

enum class Synchronous { kNormal, kFull };

struct SqliteStoreOptions {
  // Database file, created when missing (its directory must exist); ":memory:" for a private
  // in-memory database. Required.
  std::string path;
  // PRAGMA synchronous: kNormal (default) or kFull.
  Synchronous synchronous = Synchronous::kNormal;
  // How long a statement waits for a lock held by another process, in ms (default 5000).
  int busy_timeout_ms = 5000;
  // Schema version to migrate to; 0 (default) = the newest. Tests set an older one to build a
  // database as an older release would have left it.
  int schema_version = 0;
};

class SqliteStore : public Store {
 public:
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const SqliteStoreOptions& options);
  ~SqliteStore() override;

  absl::Status Write(absl::FunctionRef<absl::Status(StoreTx&)> fn) override;
  absl::Status Read(absl::FunctionRef<absl::Status(StoreTx&)> fn) override;
  int schema_version() const override { return schema_version_; }

  // "wal" for a file database, "memory" for ":memory:".
  const std::string& journal_mode() const { return journal_mode_; }

 private:
  SqliteStore(std::unique_ptr<Db> db, int schema_version, std::string journal_mode);
  absl::Status Transact(bool write, absl::FunctionRef<absl::Status(StoreTx&)> fn);

  std::mutex mu_;
  std::unique_ptr<Db> db_;
  const int schema_version_;
  const std::string journal_mode_;
};

// Parses "normal" | "full" (case-insensitive).
absl::StatusOr<Synchronous> ParseSynchronous(std::string_view text);

}  // namespace medprof::server
