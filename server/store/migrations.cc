#include "server/store/migrations.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace medprof::server {
namespace {

// Version 1: the job queue — agents, studies, jobs, runs and the study event log.
constexpr char kV1[] = R"sql(
CREATE TABLE agents (
  agent_id            TEXT PRIMARY KEY,
  name                TEXT NOT NULL UNIQUE,
  host                TEXT NOT NULL DEFAULT '',
  version             TEXT NOT NULL DEFAULT '',
  max_concurrent_jobs INTEGER NOT NULL DEFAULT 1,
  draining            INTEGER NOT NULL DEFAULT 0,
  registered_unix_ms  INTEGER NOT NULL,
  last_seen_unix_ms   INTEGER NOT NULL
);
CREATE TABLE agent_devices (
  agent_id            TEXT NOT NULL REFERENCES agents(agent_id) ON DELETE CASCADE,
  position            INTEGER NOT NULL,
  device_index        INTEGER NOT NULL,
  kind                TEXT NOT NULL,
  name                TEXT NOT NULL DEFAULT '',
  uuid                TEXT NOT NULL DEFAULT '',
  compute_capability  TEXT NOT NULL DEFAULT '',
  memory_bytes        INTEGER NOT NULL DEFAULT 0,
  driver_version      TEXT NOT NULL DEFAULT '',
  cuda_driver_version TEXT NOT NULL DEFAULT '',
  mig_enabled         INTEGER NOT NULL DEFAULT 0,
  ecc_enabled         INTEGER NOT NULL DEFAULT 0,
  counters_admin_only INTEGER NOT NULL DEFAULT 0,
  sm_count            INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (agent_id, position)
);
CREATE TABLE agent_labels (
  agent_id TEXT NOT NULL REFERENCES agents(agent_id) ON DELETE CASCADE,
  key      TEXT NOT NULL,
  value    TEXT NOT NULL,
  PRIMARY KEY (agent_id, key)
);
CREATE TABLE studies (
  seq              INTEGER PRIMARY KEY AUTOINCREMENT,
  study_id         TEXT NOT NULL UNIQUE,
  name             TEXT NOT NULL DEFAULT '',
  project          TEXT NOT NULL DEFAULT '',
  created_unix_ms  INTEGER NOT NULL,
  cancelled        INTEGER NOT NULL DEFAULT 0,
  cancel_reason    TEXT NOT NULL DEFAULT '',
  finished_unix_ms INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE jobs (
  seq             INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id          TEXT NOT NULL UNIQUE,
  study_id        TEXT NOT NULL REFERENCES studies(study_id),
  preset          TEXT NOT NULL,
  target          TEXT NOT NULL DEFAULT '',
  repeat          INTEGER NOT NULL,
  state           TEXT NOT NULL,
  attempts        INTEGER NOT NULL DEFAULT 0,
  max_attempts    INTEGER NOT NULL,
  timeout_s       INTEGER NOT NULL,
  error           TEXT NOT NULL DEFAULT '',
  config_json     TEXT NOT NULL,
  current_run_id  TEXT NOT NULL DEFAULT '',
  progress_json   TEXT NOT NULL DEFAULT '',
  created_unix_ms INTEGER NOT NULL,
  updated_unix_ms INTEGER NOT NULL
);
CREATE INDEX jobs_by_study ON jobs(study_id, seq);
CREATE INDEX jobs_by_state ON jobs(state, seq);
CREATE TABLE runs (
  seq                   INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id                TEXT NOT NULL UNIQUE,
  job_id                TEXT NOT NULL REFERENCES jobs(job_id),
  study_id              TEXT NOT NULL,
  agent_id              TEXT NOT NULL,
  attempt               INTEGER NOT NULL,
  device_index          INTEGER NOT NULL,
  state                 TEXT NOT NULL,
  lease_expires_unix_ms INTEGER NOT NULL,
  started_unix_ms       INTEGER NOT NULL,
  finished_unix_ms      INTEGER NOT NULL DEFAULT 0,
  error                 TEXT NOT NULL DEFAULT '',
  stderr_tail           TEXT NOT NULL DEFAULT '',
  exit_code             INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_job ON runs(job_id, seq);
CREATE INDEX runs_by_study ON runs(study_id, seq);
CREATE INDEX runs_by_agent ON runs(agent_id, state);
CREATE INDEX runs_by_lease ON runs(state, lease_expires_unix_ms);
CREATE TABLE events (
  event_id       INTEGER PRIMARY KEY AUTOINCREMENT,
  study_id       TEXT NOT NULL,
  job_id         TEXT NOT NULL DEFAULT '',
  run_id         TEXT NOT NULL DEFAULT '',
  job_state      TEXT NOT NULL DEFAULT '',
  progress_json  TEXT NOT NULL DEFAULT '',
  message        TEXT NOT NULL DEFAULT '',
  unix_ms        INTEGER NOT NULL,
  study_finished INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX events_by_study ON events(study_id, event_id);
)sql";

// Version 2: result storage — the run's worker-reported columns, the uploaded-chunk ledger
// that makes uploads idempotent, and the per-run step/op/kernel/metric rows.
constexpr char kV2[] = R"sql(
ALTER TABLE runs ADD COLUMN error_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN effective_json TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN environment_json TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN summary_json TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN gpu_name TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN backend TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN parameters INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN worker_started_unix_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN kernels_dropped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN chunks_through INTEGER NOT NULL DEFAULT 0;
CREATE TABLE run_chunks (
  run_id           TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  seq              INTEGER NOT NULL,
  kind             TEXT NOT NULL,
  received_unix_ms INTEGER NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE run_steps (
  run_id        TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  phase         INTEGER NOT NULL,
  step          INTEGER NOT NULL,
  wall_ns       INTEGER NOT NULL,
  device_ns     INTEGER NOT NULL,
  loss          REAL NOT NULL,
  phase_ns_json TEXT NOT NULL DEFAULT ''
);
CREATE INDEX run_steps_by_run ON run_steps(run_id);
CREATE TABLE run_ops (
  run_id   TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  name     TEXT NOT NULL,
  phase    TEXT NOT NULL,
  category TEXT NOT NULL,
  count    INTEGER NOT NULL,
  total_ns INTEGER NOT NULL,
  self_ns  INTEGER NOT NULL
);
CREATE INDEX run_ops_by_run ON run_ops(run_id);
CREATE TABLE run_kernels (
  run_id                TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  name                  TEXT NOT NULL,
  op                    TEXT NOT NULL,
  phase                 TEXT NOT NULL,
  category              TEXT NOT NULL,
  count                 INTEGER NOT NULL,
  total_ns              INTEGER NOT NULL,
  min_ns                INTEGER NOT NULL,
  max_ns                INTEGER NOT NULL,
  grid                  TEXT NOT NULL DEFAULT '',
  block                 TEXT NOT NULL DEFAULT '',
  registers             INTEGER NOT NULL DEFAULT 0,
  shared_bytes          INTEGER NOT NULL DEFAULT 0,
  theoretical_occupancy REAL NOT NULL DEFAULT 0
);
CREATE INDEX run_kernels_by_run ON run_kernels(run_id);
CREATE TABLE run_metrics (
  run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  scope  TEXT NOT NULL,
  name   TEXT NOT NULL,
  value  REAL NOT NULL,
  unit   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX run_metrics_by_run ON run_metrics(run_id);
)sql";

// Version 3: query results — the derived layer's kernel findings, the bounded raw timeline and
// the PM-sampling utilization timeline (each stored as protobuf JSON, one row per worker
// message, `part` in upload order), and an index of runs by state.
constexpr char kV3[] = R"sql(
CREATE TABLE run_findings (
  run_id   TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  kernel   TEXT NOT NULL,
  op       TEXT NOT NULL,
  phase    TEXT NOT NULL,
  category TEXT NOT NULL,
  share    REAL NOT NULL,
  speedup  REAL NOT NULL,
  priority REAL NOT NULL,
  rule     TEXT NOT NULL,
  finding  TEXT NOT NULL
);
CREATE INDEX run_findings_by_run ON run_findings(run_id);
CREATE TABLE run_timelines (
  run_id    TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  kind      TEXT NOT NULL CHECK (kind IN ('timeline', 'utilization')),
  part      INTEGER NOT NULL,
  events    INTEGER NOT NULL,
  body_json TEXT NOT NULL,
  PRIMARY KEY (run_id, kind, part)
) WITHOUT ROWID;
CREATE INDEX runs_by_state ON runs(state, seq);
)sql";

absl::StatusOr<int> CurrentVersion(Db& db) {
  MEDPROF_RETURN_IF_ERROR(db.ExecScript(
      "CREATE TABLE IF NOT EXISTS schema_version ("
      " version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_unix_ms INTEGER NOT NULL)"));
  MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db.Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version"));
  MEDPROF_ASSIGN_OR_RETURN(bool row, st->Step());
  return row ? static_cast<int>(st->Int(0)) : 0;
}

absl::Status Apply(Db& db, const Migration& m, int64_t now_unix_ms) {
  MEDPROF_RETURN_IF_ERROR(db.ExecScript("BEGIN IMMEDIATE"));
  absl::Status s = db.ExecScript(m.sql);
  if (s.ok()) {
    auto st = db.Prepare("INSERT INTO schema_version (version, description, applied_unix_ms) VALUES (?1, ?2, ?3)");
    s = st.ok() ? st.value()->BindAll(m.version, m.description, now_unix_ms) : st.status();
    if (s.ok()) s = st.value()->Run();
  }
  if (s.ok()) s = db.ExecScript("COMMIT");
  if (!s.ok()) {
    (void)db.ExecScript("ROLLBACK");  // the migration's own error is the one to report
    return Annotate(s, absl::StrCat("applying schema migration ", m.version, " (", m.description, ")"));
  }
  return absl::OkStatus();
}

// Version 4: bearer tokens. Only a salted hash of each secret is kept (see server/domain/tokens.h).
constexpr char kV4[] = R"sql(
CREATE TABLE tokens (
  seq             INTEGER PRIMARY KEY AUTOINCREMENT,
  token_id        TEXT NOT NULL UNIQUE,
  salt            TEXT NOT NULL,
  hash            TEXT NOT NULL,
  role            TEXT NOT NULL CHECK (role IN ('admin', 'submit', 'read', 'agent')),
  project         TEXT NOT NULL,
  agent_name      TEXT NOT NULL DEFAULT '',
  note            TEXT NOT NULL DEFAULT '',
  created_unix_ms INTEGER NOT NULL,
  revoked_unix_ms INTEGER NOT NULL DEFAULT 0
);
)sql";

// Version 5: bytes of worker records stored per run (the result_bytes_per_run limit).
constexpr char kV5[] = R"sql(
ALTER TABLE runs ADD COLUMN result_bytes INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 6: launch signatures per kernel (kernel + launch configuration + op + input shapes).
constexpr char kV6[] = R"sql(
CREATE TABLE run_kernel_signatures (
  run_id               TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  id                   TEXT NOT NULL,
  kernel               TEXT NOT NULL,
  op                   TEXT NOT NULL,
  phase                TEXT NOT NULL,
  shapes               TEXT NOT NULL,
  grid                 TEXT NOT NULL,
  block                TEXT NOT NULL,
  dynamic_shared_bytes INTEGER NOT NULL,
  count                INTEGER NOT NULL,
  total_ns             INTEGER NOT NULL,
  min_ns               INTEGER NOT NULL,
  max_ns               INTEGER NOT NULL,
  steps                INTEGER NOT NULL
);
CREATE INDEX run_kernel_signatures_by_run ON run_kernel_signatures(run_id);
)sql";

// Version 7: studies.revision, which changes whenever something compare reads of the study's
// succeeded runs changes (server/domain/compare_cache.h serves a cached comparison only at the
// revision it was computed at). Triggers keep it, so that no write path can forget it: a run
// that is, was or becomes succeeded (inserted, updated, deleted), a job whose preset or study
// changes, and any step, op, kernel, metric or finding row of a succeeded run. Rows written to a
// running run bump nothing (compare ignores the run until it succeeds, and that update bumps).
constexpr char kV7[] = R"sql(
ALTER TABLE studies ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
CREATE TRIGGER runs_revise_insert AFTER INSERT ON runs WHEN NEW.state = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = NEW.study_id; END;
CREATE TRIGGER runs_revise_update AFTER UPDATE ON runs WHEN OLD.state = 'succeeded' OR NEW.state = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id IN (OLD.study_id, NEW.study_id); END;
CREATE TRIGGER runs_revise_delete AFTER DELETE ON runs WHEN OLD.state = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = OLD.study_id; END;
CREATE TRIGGER jobs_revise_update AFTER UPDATE ON jobs
  WHEN OLD.preset IS NOT NEW.preset OR OLD.study_id IS NOT NEW.study_id OR OLD.job_id IS NOT NEW.job_id
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id IN (OLD.study_id, NEW.study_id); END;
CREATE TRIGGER run_steps_revise_insert AFTER INSERT ON run_steps
  WHEN (SELECT state FROM runs WHERE run_id = NEW.run_id) = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = (SELECT study_id FROM runs WHERE run_id = NEW.run_id); END;
CREATE TRIGGER run_steps_revise_update AFTER UPDATE ON run_steps
  WHEN (SELECT state FROM runs WHERE run_id = NEW.run_id) = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = (SELECT study_id FROM runs WHERE run_id = NEW.run_id); END;
CREATE TRIGGER run_steps_revise_delete AFTER DELETE ON run_steps
  WHEN (SELECT state FROM runs WHERE run_id = OLD.run_id) = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = (SELECT study_id FROM runs WHERE run_id = OLD.run_id); END;
CREATE TRIGGER run_ops_revise_insert AFTER INSERT ON run_ops
  WHEN (SELECT state FROM runs WHERE run_id = NEW.run_id) = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = (SELECT study_id FROM runs WHERE run_id = NEW.run_id); END;
CREATE TRIGGER run_ops_revise_update AFTER UPDATE ON run_ops
  WHEN (SELECT state FROM runs WHERE run_id = NEW.run_id) = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = (SELECT study_id FROM runs WHERE run_id = NEW.run_id); END;
CREATE TRIGGER run_ops_revise_delete AFTER DELETE ON run_ops
  WHEN (SELECT state FROM runs WHERE run_id = OLD.run_id) = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = (SELECT study_id FROM runs WHERE run_id = OLD.run_id); END;
CREATE TRIGGER run_kernels_revise_insert AFTER INSERT ON run_kernels
  WHEN (SELECT state FROM runs WHERE run_id = NEW.run_id) = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = (SELECT study_id FROM runs WHERE run_id = NEW.run_id); END;
CREATE TRIGGER run_kernels_revise_update AFTER UPDATE ON run_kernels
  WHEN (SELECT state FROM runs WHERE run_id = NEW.run_id) = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = (SELECT study_id FROM runs WHERE run_id = NEW.run_id); END;
CREATE TRIGGER run_kernels_revise_delete AFTER DELETE ON run_kernels
  WHEN (SELECT state FROM runs WHERE run_id = OLD.run_id) = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = (SELECT study_id FROM runs WHERE run_id = OLD.run_id); END;
CREATE TRIGGER run_metrics_revise_insert AFTER INSERT ON run_metrics
  WHEN (SELECT state FROM runs WHERE run_id = NEW.run_id) = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = (SELECT study_id FROM runs WHERE run_id = NEW.run_id); END;
CREATE TRIGGER run_metrics_revise_update AFTER UPDATE ON run_metrics
  WHEN (SELECT state FROM runs WHERE run_id = NEW.run_id) = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = (SELECT study_id FROM runs WHERE run_id = NEW.run_id); END;
CREATE TRIGGER run_metrics_revise_delete AFTER DELETE ON run_metrics
  WHEN (SELECT state FROM runs WHERE run_id = OLD.run_id) = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = (SELECT study_id FROM runs WHERE run_id = OLD.run_id); END;
CREATE TRIGGER run_findings_revise_insert AFTER INSERT ON run_findings
  WHEN (SELECT state FROM runs WHERE run_id = NEW.run_id) = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = (SELECT study_id FROM runs WHERE run_id = NEW.run_id); END;
CREATE TRIGGER run_findings_revise_update AFTER UPDATE ON run_findings
  WHEN (SELECT state FROM runs WHERE run_id = NEW.run_id) = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = (SELECT study_id FROM runs WHERE run_id = NEW.run_id); END;
CREATE TRIGGER run_findings_revise_delete AFTER DELETE ON run_findings
  WHEN (SELECT state FROM runs WHERE run_id = OLD.run_id) = 'succeeded'
  BEGIN UPDATE studies SET revision = revision + 1 WHERE study_id = (SELECT study_id FROM runs WHERE run_id = OLD.run_id); END;
)sql";

// Version 8: user models (issue 21). The files live in a blob directory next to the database,
// named by their SHA-256 (common/blob_dir.h); a row per (project, model) says who may use it.
constexpr char kV8[] = R"sql(
CREATE TABLE models (
  project         TEXT NOT NULL,
  sha256          TEXT NOT NULL,
  file_name       TEXT NOT NULL,
  size_bytes      INTEGER NOT NULL,
  uploader        TEXT NOT NULL DEFAULT '',
  created_unix_ms INTEGER NOT NULL,
  PRIMARY KEY (project, sha256)
);
CREATE INDEX models_by_sha256 ON models(sha256);
)sql";

}  // namespace

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> migrations = {
      {1, "job queue: agents, studies, jobs, runs, events", kV1},
      {2, "result storage: run results, upload ledger, steps, ops, kernels, metrics", kV2},
      {3, "query results: kernel findings, raw and utilization timelines", kV3},
      {4, "bearer tokens: salted hashes, role, project, agent binding", kV4},
      {5, "bytes of worker records stored per run", kV5},
      {6, "launch signatures per kernel", kV6},
      {7, "study revision: bumped by triggers on every change compare can see", kV7},
      {8, "user models: a row per project and content hash (files in a blob directory)", kV8},
  };
  return migrations;
}

int LatestSchemaVersion() { return Migrations().back().version; }

absl::StatusOr<int> Migrate(Db& db, int target_version, int64_t now_unix_ms) {
  const int latest = LatestSchemaVersion();
  if (target_version == 0) target_version = latest;
  if (target_version < 0 || target_version > latest) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema version ", target_version, " is out of range (allowed 1..", latest, ")"));
  }
  MEDPROF_ASSIGN_OR_RETURN(int current, CurrentVersion(db));
  if (current > latest) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the database is at schema version ", current, " but this medprof-server knows versions up to ", latest,
        ": run a newer medprof-server (or restore a backup made by this version)"));
  }
  if (current > target_version) {
    return absl::FailedPreconditionError(absl::StrCat("the database is at schema version ", current,
                                                      ", above the requested version ", target_version,
                                                      " (there are no down-migrations)"));
  }
  for (const Migration& m : Migrations()) {
    if (m.version <= current || m.version > target_version) continue;
    MEDPROF_RETURN_IF_ERROR(Apply(db, m, now_unix_ms));
    current = m.version;
  }
  return current;
}

}  // namespace medprof::server
