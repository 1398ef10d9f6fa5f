// The numbered schema migrations of medprof-server's SQLite database.
//
// Migration N turns a database at schema version N-1 into version N. Migrate() applies every
// migration above the database's version in order, each in its own transaction together with
// its row in `schema_version`, so a crash mid-way leaves the database at a whole version.
// Migrations are append-only: a released migration is never edited, a change is a new one.
//
// Private to server/store/. Not thread-safe (runs on the Db before it is shared).
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "server/store/sqlite_db.h"

namespace medprof::server {

struct Migration {
  int version;
  const char* description;
  const char* sql;
};

// Every migration, ascending by version (1, 2, ...).
const std::vector<Migration>& Migrations();
// The newest schema version this build knows.
int LatestSchemaVersion();

// Brings the database to `target_version` (0 = latest). Returns the resulting version.
// FAILED_PRECONDITION when the database is newer than this build (names both versions) or
// when target_version is below the database's version (there are no down-migrations).
absl::StatusOr<int> Migrate(Db& db, int target_version, int64_t now_unix_ms);

}  // namespace medprof::server
