// LaunchSignature: what tells one kind of kernel launch from another — the kernel, its launch
// configuration (grid, block, dynamic shared memory) and the LibTorch op (with its phase and input
// shapes) that launched it. One kernel name and grid can serve several problem sizes in a step;
// their signatures differ by the op's shapes. The trace layer aggregates launches per signature
// (kernel_aggregator.h) and the metrics layer profiles chosen signatures (launch_picker.h): both
// build the key the same way from what they see (a trace record, or a launch callback).
//
// Id(): 12 hex digits of a 64-bit FNV-1a hash of every field, stable across runs and machines.
// Plain value type; thread-compatible.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <tuple>

namespace medprof::profiler {

struct LaunchSignature {
  std::string kernel;  // demangled name
  std::string op;
  std::string phase;
  std::string shapes;
  std::array<int32_t, 3> grid = {0, 0, 0};
  std::array<int32_t, 3> block = {0, 0, 0};
  int32_t dynamic_shared_bytes = 0;

  std::string Id() const;
  auto Tie() const { return std::tie(kernel, op, phase, shapes, grid, block, dynamic_shared_bytes); }
  bool operator<(const LaunchSignature& o) const { return Tie() < o.Tie(); }
  bool operator==(const LaunchSignature& o) const { return Tie() == o.Tie(); }
};

}  // namespace medprof::profiler
