// Domain: medprof-server's business rules in one object — agents, scheduling, result
// ingestion, studies and queries — over a Store and a Clock, with no gRPC type in sight.
//
// main() builds one and hands its services to the rpc layer; tests build one on a
// SqliteStore(":memory:") with a FakeClock. The Store and the Clock must outlive it.
// Shutdown() wakes every long-poll and watch so they return promptly (the server then drains).
//
// Thread-safe.
#pragma once

#include "absl/status/statusor.h"
#include "server/domain/access.h"
#include "server/domain/agent_registry.h"
#include "server/domain/core.h"
#include "server/domain/model_library.h"
#include "server/domain/query_engine.h"
#include "server/domain/result_ingest.h"
#include "server/domain/run_upload.h"
#include "server/domain/run_import.h"
#include "server/domain/scheduler.h"
#include "server/domain/study_service.h"
#include "server/domain/tokens.h"

namespace medprof::server {

class Domain {
 public:
  // INVALID_ARGUMENT when an option is out of range; opens options.model_dir (created when
  // missing) when set.
  static absl::StatusOr<std::unique_ptr<Domain>> Create(Store* store, const Clock* clock, DomainOptions options);

  AgentRegistry& agents() { return agents_; }
  Scheduler& scheduler() { return scheduler_; }
  ResultIngestor& ingestor() { return ingestor_; }
  StudyService& studies() { return studies_; }
  QueryEngine& queries() { return queries_; }
  RunImporter& importer() { return importer_; }
  RunUploader& uploader() { return uploader_; }
  AccessControl& access() { return access_; }
  TokenService& tokens() { return tokens_; }
  ModelLibrary& models() { return models_; }
  const DomainOptions& options() const { return core_.options; }
  // Monitoring: ingested rows and query latencies go to `sink` (null = none); it must outlive
  // the Domain. Call before serving.
  void set_metrics_sink(MetricsSink* sink) { core_.metrics.store(sink); }

  void Shutdown();

 private:
  Domain(Store& store, const Clock& clock, DomainOptions options, std::unique_ptr<BlobDir> model_blobs)
      : core_(store, clock, options), agents_(core_), scheduler_(core_), ingestor_(core_), studies_(core_),
        queries_(core_), access_(core_), tokens_(store, clock), importer_(core_),
        uploader_(core_, ingestor_), model_blobs_(std::move(model_blobs)), models_(core_, model_blobs_.get()) {}

  DomainCore core_;
  AgentRegistry agents_;
  Scheduler scheduler_;
  ResultIngestor ingestor_;
  StudyService studies_;
  QueryEngine queries_;
  AccessControl access_;
  TokenService tokens_;
  RunImporter importer_;
  RunUploader uploader_;
  std::unique_ptr<BlobDir> model_blobs_;  // null without DomainOptions::model_dir
  ModelLibrary models_;
};

}  // namespace medprof::server
