// libFuzzer target: request validation. The first byte picks a request kind, the rest are that
// request's protobuf bytes; the request goes through the rpc layer's conversion (convert.h)
// into the real Domain on an in-memory SQLite store — the same path a gRPC call takes after
// authentication — and the authorization header parser gets the raw text too.
//
// Invariants: a malformed request is refused with a status whose code a caller can act on
// (never INTERNAL, which would mean the server broke, and never a crash); the store stays
// consistent (PRAGMA-free check: every job of a study is counted by CountJobs).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/logging.h"
#include "google/protobuf/stubs/logging.h"
#include "medprof/v1/service.pb.h"
#include "server/domain/domain.h"
#include "server/rpc/auth.h"
#include "server/rpc/convert.h"
#include "server/store/sqlite_store.h"

namespace {

using medprof::server::CallContext;

struct World {
  std::unique_ptr<medprof::server::SqliteStore> store;
  std::unique_ptr<medprof::server::Domain> domain;
  std::unique_ptr<medprof::server::rpc::Authenticator> auth;
  std::string agent_id;
};

World& TheWorld() {
  static World* w = [] {
    auto* world = new World;
    medprof::server::SqliteStoreOptions so;
    so.path = ":memory:";
    world->store = std::move(medprof::server::SqliteStore::Open(so)).value();
    world->domain = std::move(medprof::server::Domain::Create(world->store.get(), medprof::Clock::Real(),
                                                               medprof::server::DomainOptions()))
                        .value();
    world->auth = std::make_unique<medprof::server::rpc::Authenticator>(medprof::server::rpc::AuthMode::kTokens,
                                                                        &world->domain->tokens());
    medprof::server::TokenGrant g;
    g.role = medprof::server::Role::kSubmit;
    g.project = "lab-a";
    (void)world->domain->tokens().Create(g);
    medprof::server::RegisterAgentRequest r;
    r.protocol_version = 1;
    r.agent_name = "fuzz-node";
    medprof::server::DeviceRecord cpu;
    cpu.index = -1;
    cpu.kind = "cpu";
    r.devices.push_back(cpu);
    world->agent_id = world->domain->agents().Register(CallContext::Background(), r)->agent_id;
    return world;
  }();
  return *w;
}

void Check(const absl::Status& s) {
  // INTERNAL / UNKNOWN from a request would be a server bug; DATA_LOSS too.
  if (s.code() == absl::StatusCode::kInternal || s.code() == absl::StatusCode::kUnknown ||
      s.code() == absl::StatusCode::kDataLoss) {
    std::fprintf(stderr, "request refused with %s\n", s.ToString().c_str());
    std::abort();
  }
}

template <typename Proto>
bool Parse(const uint8_t* data, size_t size, Proto* p) {
  return p->ParseFromArray(data, static_cast<int>(size));
}

}  // namespace

// Quiet: protobuf's complaints about invalid UTF-8 and the domain's info lines are expected.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  medprof::logging::Init("request_fuzzer", medprof::LogLevel::kOff);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  World& w = TheWorld();
  namespace v1 = medprof::v1;
  using medprof::server::rpc::FromProto;
  const CallContext ctx = CallContext::Background();
  const uint8_t kind = data[0];
  ++data;
  --size;
  switch (kind % 10) {
    case 0: {
      v1::SubmitStudyRequest r;
      if (Parse(data, size, &r)) Check(w.domain->studies().SubmitStudy(ctx, FromProto(r)).status());
      break;
    }
    case 1: {
      v1::RegisterRequest r;
      if (Parse(data, size, &r)) Check(w.domain->agents().Register(ctx, FromProto(r)).status());
      break;
    }
    case 2: {
      v1::HeartbeatRequest r;
      if (!Parse(data, size, &r)) break;
      if (r.agent_id().empty()) r.set_agent_id(w.agent_id);
      Check(w.domain->scheduler().Heartbeat(ctx, FromProto(r)).status());
      break;
    }
    case 3: {
      v1::AcquireJobRequest r;
      if (!Parse(data, size, &r)) break;
      r.set_wait_ms(0);  // no long-poll inside a fuzzer
      if (r.agent_id().empty()) r.set_agent_id(w.agent_id);
      Check(w.domain->scheduler().AcquireJob(ctx, FromProto(r)).status());
      break;
    }
    case 4: {
      v1::ResultChunk c;
      if (!Parse(data, size, &c)) break;
      if (c.agent_id().empty()) c.set_agent_id(w.agent_id);
      std::vector<medprof::server::ResultChunk> chunks = {FromProto(c)};
      Check(w.domain->ingestor().Ingest(ctx, chunks).status());
      break;
    }
    case 5: {
      v1::FinishRunRequest r;
      if (!Parse(data, size, &r)) break;
      if (r.agent_id().empty()) r.set_agent_id(w.agent_id);
      Check(w.domain->scheduler().FinishRun(ctx, FromProto(r)).status());
      break;
    }
    case 6: {
      v1::ListStudiesRequest r;
      if (Parse(data, size, &r)) Check(w.domain->studies().ListStudies(ctx, FromProto(r)).status());
      break;
    }
    case 7: {
      v1::ListRunsRequest r;
      if (Parse(data, size, &r)) Check(w.domain->studies().ListRuns(ctx, FromProto(r)).status());
      break;
    }
    case 8: {
      v1::CancelStudyRequest r;
      if (Parse(data, size, &r)) {
        Check(w.domain->studies().CancelStudy(ctx, r.study_id(), r.reason()).status());
        Check(w.domain->studies().GetStudy(ctx, r.study_id()).status());
        Check(w.domain->studies().GetRun(ctx, r.reason()).status());
      }
      break;
    }
    case 9: {
      const std::string header(reinterpret_cast<const char*>(data), size);
      Check(w.auth->AuthenticateHeader(header, "SubmitStudy").status());
      break;
    }
  }
  return 0;
}
