#include "agent/profiler/launch_signature.h"

#include "common/kernel_aggregate.h"

namespace medprof::profiler {

std::string LaunchSignature::Id() const {
  const int32_t g[3] = {grid[0], grid[1], grid[2]};
  const int32_t b[3] = {block[0], block[1], block[2]};
  return aggregate::SignatureId(kernel, op, phase, shapes, g, b, dynamic_shared_bytes);
}

}  // namespace medprof::profiler
