// What the worker knows about the machine it runs on, for RunStarted.environment: host name,
// CPU model, LibTorch intra-op threads, CUDA_VISIBLE_DEVICES, Slurm job/partition, worker
// version. GPU and CUPTI facts come from the profiler (Profiler::DescribeEnvironment), flags
// from the workload (EffectiveFlags). Thread-safe.
#pragma once

#include "medprof/v1/workload.pb.h"

namespace medprof::worker {

void FillHostEnvironment(v1::Environment* env);

// LibTorch's intra-op thread count now (at::get_num_threads()).
int TorchThreads();

}  // namespace medprof::worker
