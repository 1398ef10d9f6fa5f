// proto <-> domain conversion for medprof-server's gRPC services, and the CallContext of a call.
//
// Requests become domain structs field by field (no validation here: the domain checks ranges
// and names the field); domain answers become response messages. Enums map by name, and an
// out-of-range enum number maps to the domain's kUnspecified (which the domain refuses where
// it matters).
//
// Pure functions except MakeCallContext, which reads the live grpc::ServerContext. Thread-safe.
#pragma once

#include <grpcpp/server_context.h>

#include "medprof/v1/service.pb.h"
#include "server/domain/call_context.h"
#include "server/domain/types.h"

namespace medprof::server::rpc {

// Peer, TLS client identity (x509 common name, when mutual TLS authenticated the caller),
// deadline (converted to the steady clock) and a cancellation probe.
CallContext MakeCallContext(const grpc::ServerContext* context);

// ---- enums
v1::JobState ToProto(JobState s);
JobState FromProto(v1::JobState s);
v1::RunState ToProto(RunState s);
RunState FromProto(v1::RunState s);
v1::StudyState ToProto(StudyState s);

// ---- agents
v1::Device ToProto(const DeviceRecord& d);
DeviceRecord FromProto(const v1::Device& d);
RegisterAgentRequest FromProto(const v1::RegisterRequest& r);
v1::RegisterResponse ToProto(const RegisterAgentResult& r);
v1::Agent ToProto(const AgentView& a);

// ---- scheduling
HeartbeatRequest FromProto(const v1::HeartbeatRequest& r);
v1::HeartbeatResponse ToProto(const HeartbeatResult& r);
AcquireJobRequest FromProto(const v1::AcquireJobRequest& r);
v1::Assignment ToProto(const Assignment& a);
ResultChunk FromProto(const v1::ResultChunk& c);
ResultChunk FromProto(v1::ResultChunk&& c);
v1::UploadAck ToProto(const CommittedThrough& c);
FinishRunRequest FromProto(const v1::FinishRunRequest& r);

// ---- studies and runs
SubmitStudyRequest FromProto(const v1::SubmitStudyRequest& r);
v1::SubmitStudyResponse ToProto(const SubmitStudyResult& r);
v1::Job ToProto(const JobView& j);
v1::Study ToProto(const StudyView& s);
ListStudiesRequest FromProto(const v1::ListStudiesRequest& r);
v1::ListStudiesResponse ToProto(const ListStudiesResult& r);
v1::StudyEvent ToProto(const StudyEvent& e);
ListRunsRequest FromProto(const v1::ListRunsRequest& r);
v1::Run ToProto(const RunView& r);
v1::StepTiming ToProto(const StepRow& s);
v1::OpStat ToProto(const OpRow& o);
v1::KernelStat ToProto(const KernelRow& k);
v1::MetricValue ToProto(const MetricRow& m);

// ---- queries (implemented in query_convert.cc)
CompareRequest FromProto(const v1::CompareRequest& r);
v1::CompareResponse ToProto(const CompareResult& r);
KernelsRequest FromProto(const v1::ListKernelsRequest& r);
v1::ListKernelsResponse ToProto(const KernelsResult& r);
DiffRequest FromProto(const v1::DiffRunsRequest& r);
v1::DiffRunsResponse ToProto(const DiffResult& r);
v1::GetTimelineResponse ToProto(const TimelineResult& r);

}  // namespace medprof::server::rpc
