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
// Connections: one writer, and for a file database a pool of reader connections (WAL lets
// readers run beside the writer and each other, each on its own snapshot). Write() runs on the
// writer under one mutex, so writes are serialized; Read() takes an idle reader (opening one,
// up to max_readers, when none is idle; waiting when all are busy), so a read never queues
// behind a write or a long read on another connection. A ":memory:" database is private to
// one connection: there every transaction runs on the writer under its mutex.
//
// Checkpoints (copying the WAL back into the database file) run on a background thread with
// its own connection, once a second, instead of inside whichever commit crossed SQLite's
// automatic threshold: a commit then costs its own pages only, also while readers run.
//
// Owns its connections and the checkpoint thread (stopped by the destructor). Thread-safe.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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
  // Reader connections at most (1..64; default 32: above the gRPC threads that read at once on
  // a busy server, so a short read does not wait for a connection held by long ones). Opened on
  // demand, kept open.
  int max_readers = 32;
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
  // Reader connections opened so far (tests, benchmarks).
  int readers_opened() const;

 private:
  SqliteStore(std::unique_ptr<Db> db, int schema_version, std::string journal_mode, SqliteStoreOptions options);
  absl::StatusOr<std::unique_ptr<Db>> TakeReader();
  void ReturnReader(std::unique_ptr<Db> reader);

  const SqliteStoreOptions options_;
  std::mutex mu_;  // the writer
  std::unique_ptr<Db> db_;
  const int schema_version_;
  const std::string journal_mode_;

  mutable std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<std::unique_ptr<Db>> idle_readers_;
  int readers_open_ = 0;

  void CheckpointLoop();
  std::mutex checkpoint_mu_;
  std::condition_variable checkpoint_cv_;
  bool stop_ = false;
  std::thread checkpointer_;
};

// Parses "normal" | "full" (case-insensitive).
absl::StatusOr<Synchronous> ParseSynchronous(std::string_view text);

}  // namespace medprof::server
