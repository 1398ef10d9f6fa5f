// libFuzzer target: configuration parsing. The first byte picks the parser, the rest is its
// text: a job's WorkloadConfig as JSON (what `medprof submit --config` and the stored job
// configs hold), a target selector, the server's --listen / --synchronous / --auth values, and
// the domain options. Each must refuse bad text with INVALID_ARGUMENT (never crash), and what
// it accepts must hold its documented ranges.
#include <google/protobuf/util/json_util.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/selector.h"
#include "common/workload_config.h"
#include "medprof/v1/workload.pb.h"
#include "server/domain/types.h"
#include "server/rpc/auth.h"
#include "server/rpc/grpc_server.h"
#include "server/store/sqlite_store.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckRefusal(const absl::Status& s) {
  Check(s.ok() || s.code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0: {
      medprof::v1::WorkloadConfig c;
      google::protobuf::util::JsonParseOptions opts;
      opts.ignore_unknown_fields = false;
      if (!google::protobuf::util::JsonStringToMessage(text, &c, opts).ok()) return 0;
      medprof::config::ApplyDefaults(&c);
      const absl::Status s = medprof::config::Validate(c);
      CheckRefusal(s);
      if (s.ok()) {
        Check(c.volume() >= 8 && c.volume() <= 512);
        (void)medprof::config::VolumeDims(c);
        (void)medprof::config::EffectiveFlags(c);
      }
      break;
    }
    case 1: {
      auto sel = medprof::selector::Parse(text);
      CheckRefusal(sel.status());
      if (sel.ok()) {
        // What it prints parses back to the same selector.
        auto again = medprof::selector::Parse(sel->ToString());
        Check(again.ok() && again->ToString() == sel->ToString());
      }
      break;
    }
    case 2: {
      auto a = medprof::server::rpc::ParseListenAddress(text);
      CheckRefusal(a.status());
      if (a.ok()) Check(a->port >= 0 && a->port <= 65535 && !a->host.empty());
      medprof::server::rpc::GrpcServerOptions o;
      o.listen = text;
      const absl::Status s = medprof::server::rpc::GrpcServer::CheckOptions(o);
      Check(s.ok() || s.code() == absl::StatusCode::kInvalidArgument ||
            s.code() == absl::StatusCode::kFailedPrecondition);
      // Plaintext is accepted only on loopback.
      if (s.ok()) Check(medprof::server::rpc::IsLoopback(a->host));
      break;
    }
    case 3:
      CheckRefusal(medprof::server::ParseSynchronous(text).status());
      CheckRefusal(medprof::server::rpc::ParseAuthMode(text).status());
      break;
    case 4: {
      // Eight bytes per option.
      medprof::server::DomainOptions o;
      int64_t v[4] = {0, 0, 0, 0};
      std::memcpy(v, text.data(), std::min(text.size(), sizeof(v)));
      o.lease_ttl_ms = v[0];
      o.heartbeat_interval_ms = v[1];
      o.max_attempts_default = static_cast<int>(v[2]);
      o.max_wait_ms = v[3];
      CheckRefusal(o.Validate());
      break;
    }
    case 5: {
      auto phase = medprof::config::ParsePhase(text);
      CheckRefusal(phase.status());
      auto preset = medprof::config::PresetFor(text);
      CheckRefusal(preset.status());
      break;
    }
  }
  return 0;
}
