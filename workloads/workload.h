// The Workload interface: what medprof profiles, as the profiler and the worker see it.
//
// A workload runs warm-up and measured steps of one phase and reports every step, and every
// named sub-phase inside it, to a PhaseObserver — the hook the profiler implements. The profiler
// (agent/profiler) knows workloads only through this header; it never includes an
// implementation's. Implementations live in their own folders (workloads/meddpm: Med-DDPM) and
// the worker picks one per job (agent/worker/workload_factory.h).
//
// Adding an implementation (e.g. a TorchScript user model): derive from Workload, report steps
// and sub-phases through the observer exactly as below, and register a creator for the job's
// kind in agent/worker/workload_factory.cc. Nothing in agent/profiler changes.
//
// Ownership: the caller owns the observer and keeps it alive during Run()/RunExtraSteps(); it
// may be null. A Workload is not thread-safe: use it from one thread, which is also the thread
// every observer call comes from.
//
// Errors: methods return a Status and never throw (out of memory -> RESOURCE_EXHAUSTED with
// "out of memory" in the message, bad configuration -> INVALID_ARGUMENT naming the field,
// CUDA requested but absent -> FAILED_PRECONDITION, other runtime errors -> INTERNAL).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace medprof::workload {

// One step as the workload timed it.
struct StepReport {
  int index = 0;  // 0-based among warm-up steps (measured=false) or measured steps
  bool measured = false;
  int64_t wall_ns = 0;                      // host wall time, after a device synchronize on GPU
  int64_t device_ns = 0;                    // CUDA-event time (0 on CPU)
  double loss = 0.0;                        // training loss; 0 otherwise
  std::map<std::string, int64_t> phase_ns;  // per named sub-phase, e.g. fwd, bwd, optim
};

// The profiler's view of a running workload. Calls come from the thread that called Run().
class PhaseObserver {
 public:
  virtual ~PhaseObserver() = default;
  // Bracket every step (warm-up and measured).
  virtual void OnStepBegin(int index, bool measured) {}
  virtual void OnStepEnd(const StepReport& report) {}
  // Bracket named sub-phases inside a step. Med-DDPM's: "fwd", "bwd", "optim", "sample_step".
  virtual void OnPhaseBegin(std::string_view name) {}
  virtual void OnPhaseEnd(std::string_view name) {}
};

// What the framework reports after the workload applied its math and layout flags (read back,
// not echoed). A workload without a flag leaves it false.
struct EffectiveFlags {
  bool tf32_cudnn = false;
  bool tf32_matmul = false;
  bool channels_last = false;
  bool bf16 = false;
  bool fused = false;  // medprof's own fused kernels in use
  bool cudnn_benchmark = false;
  std::string device;         // "cpu" or "cuda:0"
  std::string torch_version;  // e.g. "1.13.0"
  std::string cudnn_version;  // "" on CPU builds
  std::string note;           // e.g. "opt3: bf16 unavailable on this GPU, using TF32"
};

class Workload {
 public:
  virtual ~Workload() = default;

  virtual int64_t ParameterCount() const = 0;
  virtual const EffectiveFlags& flags() const = 0;
  // Runs the configured warm-up and measured steps of the configured phase.
  virtual absl::Status Run(PhaseObserver* observer) = 0;
  // Runs `count` (1..100000) more steps of the phase after Run(), for the profiler's extra
  // passes (trace-overhead steps, sampling windows, metric replays). They are reported with
  // measured=false and indices counting on from the last step; training keeps training.
  virtual absl::Status RunExtraSteps(int count, PhaseObserver* observer) = 0;
  // Peak device memory (GPU) or peak RSS (CPU) seen so far, bytes.
  virtual uint64_t PeakMemoryBytes() const = 0;
};

}  // namespace medprof::workload
