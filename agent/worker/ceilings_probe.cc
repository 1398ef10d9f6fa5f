#include "agent/worker/ceilings_probe.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/worker/ceilings_cache.h"
#include "agent/worker/gpu_clocks.h"
#include "common/chip_datasheet.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status.h"

#if MEDPROF_HAVE_CUDA
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#if MEDPROF_TORCH_HAS_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "agent/profiler/cuda_call.h"
#include "agent/worker/bandwidth_kernels.h"
#endif

namespace medprof::worker {

#if MEDPROF_HAVE_CUDA
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr int kL2Rounds = 1000, kL2Threads = 512, kL2BlocksPerSm = 4;

// Best (shortest) of `reps` timings of `body` in seconds, with CUDA events around each.
absl::StatusOr<double> BestSeconds(int reps, const std::function<absl::Status()>& body) {
  cudaEvent_t begin = nullptr, end = nullptr;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUDA_CALL(cudaEventCreate(&begin)));
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUDA_CALL(cudaEventCreate(&end)));
  double best = 0;
  absl::Status status = body();  // warm-up: cuBLAS handle and heuristics, first touch of the pages
  for (int i = 0; i < reps && status.ok(); ++i) {
    status = MEDPROF_CUDA_CALL(cudaEventRecord(begin));
    if (status.ok()) status = body();
    if (status.ok()) status = MEDPROF_CUDA_CALL(cudaEventRecord(end));
    if (status.ok()) status = MEDPROF_CUDA_CALL(cudaEventSynchronize(end));
    float ms = 0;
    if (status.ok()) status = MEDPROF_CUDA_CALL(cudaEventElapsedTime(&ms, begin, end));
    if (status.ok() && ms > 0 && (best == 0 || ms * 1e-3 < best)) best = ms * 1e-3;
  }
  (void)cudaEventDestroy(begin);
  (void)cudaEventDestroy(end);
  MEDPROF_RETURN_IF_ERROR(status);
  if (best <= 0) return absl::InternalError("ceilings: no positive timing");
  return best;
}

// A ceiling of `rate` per second, measured as `method`.
v1::Ceiling Measured(const std::string& name, double rate, const std::string& method) {
  v1::Ceiling c;
  c.set_name(name);
  c.set_measured(rate);
  c.set_method(method);
  return c;
}

// at::mm on the default stream (the one the events record on). LibTorch errors end here.
absl::StatusOr<v1::Ceiling> Gemm(const std::string& name, at::ScalarType dtype, bool tf32, int device) {
  const bool tf32_before = at::globalContext().allowTF32CuBLAS();
  at::globalContext().setAllowTF32CuBLAS(tf32);
  absl::StatusOr<double> seconds;
  try {
    const auto options = at::TensorOptions().device(at::kCUDA, device).dtype(dtype);
    const at::Tensor a = at::randn({kGemmN, kGemmN}, options), b = at::randn({kGemmN, kGemmN}, options);
    at::Tensor c = at::empty({kGemmN, kGemmN}, options);
    seconds = BestSeconds(kGemmReps, [&] {
      at::mm_out(c, a, b);
      return absl::OkStatus();
    });
  } catch (const c10::Error& e) {
    seconds = absl::InternalError(absl::StrCat("ceilings: at::mm ", name, ": ", e.what_without_backtrace()));
  }
  at::globalContext().setAllowTF32CuBLAS(tf32_before);
  MEDPROF_RETURN_IF_ERROR(seconds.status());
  const double n = kGemmN;
  return Measured(name, 2 * n * n * n / *seconds,
                  absl::StrFormat("at::mm %dx%d %s%s, best of %d", kGemmN, kGemmN, at::toString(dtype),
                                  dtype == at::kFloat ? (tf32 ? " TF32 on" : " TF32 off") : "", kGemmReps));
}

// Two device buffers of `bytes` each, freed at scope end.
class DeviceBuffers {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceBuffers>> Allocate(size_t bytes) {
    auto d = std::unique_ptr<DeviceBuffers>(new DeviceBuffers());
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUDA_CALL(cudaMalloc(&d->a_, bytes)));
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUDA_CALL(cudaMalloc(&d->b_, bytes)));
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUDA_CALL(cudaMemset(d->a_, 0, bytes)));
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUDA_CALL(cudaMemset(d->b_, 0, bytes)));
    return d;
  }
  ~DeviceBuffers() {
    if (a_ != nullptr) (void)cudaFree(a_);
    if (b_ != nullptr) (void)cudaFree(b_);
  }
  void* a() const { return a_; }
  void* b() const { return b_; }

 private:
  DeviceBuffers() = default;
  void* a_ = nullptr;
  void* b_ = nullptr;
};

absl::StatusOr<v1::Ceiling> DramCopy(size_t l2_bytes) {
  const size_t bytes = std::max<size_t>(8 * l2_bytes, 256 * (1 << 20));
  MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffers> buf, DeviceBuffers::Allocate(bytes));
  MEDPROF_ASSIGN_OR_RETURN(const double seconds, BestSeconds(kCopyReps, [&] {
                             return MEDPROF_CUDA_CALL(cudaMemcpyAsync(buf->b(), buf->a(), bytes, cudaMemcpyDeviceToDevice));
                           }));
  return Measured("dram", 2.0 * bytes / seconds,
                  absl::StrFormat("cudaMemcpyAsync device-to-device %.0f MiB (8x L2), read+write bytes, best of %d",
                                  bytes / kMiB, kCopyReps));
}

// The roofline's L2 bytes are what SMs read from L2 (docs/metrics.md), so the roof is a read rate:
// an L2-resident buffer of L2/2 read kL2Rounds times. (A read+write copy measured less than the
// reads of Med-DDPM's TF32 convolutions on an H100: 6.2 TB/s against 8.5.)
absl::StatusOr<v1::Ceiling> L2Read(size_t l2_bytes, int sm_count) {
  const size_t n = l2_bytes / 2 / 16;  // float4 in half the L2
  const size_t threads = static_cast<size_t>(kL2BlocksPerSm) * sm_count * kL2Threads;
  if (n == 0 || n < threads / 4) {  // the buffer beside it is the kernel's sink: a float per thread
    return absl::FailedPreconditionError(absl::StrFormat(
        "ceilings: an L2 of %d bytes is too small for the L2 read kernel (%d threads)", l2_bytes, threads));
  }
  MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffers> buf, DeviceBuffers::Allocate(n * 16));
  MEDPROF_ASSIGN_OR_RETURN(const double seconds, BestSeconds(kCopyReps, [&] {
                             return MEDPROF_CUDA_CALL(LaunchL2Read(buf->a(), n, kL2Rounds, buf->b(),
                                                                   kL2BlocksPerSm * sm_count, kL2Threads, 0));
                           }));
  return Measured("l2", 16.0 * n * kL2Rounds / seconds,
                  absl::StrFormat("L2-resident read, 1 buffer of %.1f MiB (L2/2), ld.global.cg, %d rounds, read "
                                  "bytes, best of %d",
                                  n * 16 / kMiB, kL2Rounds, kCopyReps));
}

}  // namespace

absl::StatusOr<v1::Ceilings> MeasureCeilings(int device) {
  int l2 = 0, sms = 0;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUDA_CALL(cudaSetDevice(device)));
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUDA_CALL(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device)));
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUDA_CALL(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)));
  v1::Ceilings out;
  MEDPROF_ASSIGN_OR_RETURN(*out.add_ceilings(), DramCopy(static_cast<size_t>(l2)));
  MEDPROF_ASSIGN_OR_RETURN(*out.add_ceilings(), L2Read(static_cast<size_t>(l2), sms));
  MEDPROF_ASSIGN_OR_RETURN(*out.add_ceilings(), Gemm("fp32", at::kFloat, false, device));
  MEDPROF_ASSIGN_OR_RETURN(*out.add_ceilings(), Gemm("tensor_tf32", at::kFloat, true, device));
  MEDPROF_ASSIGN_OR_RETURN(*out.add_ceilings(), Gemm("tensor_bf16", at::kBFloat16, false, device));
#if MEDPROF_TORCH_HAS_CUDA
  // The GEMMs' blocks go back to the driver and the peak restarts: the run's memory is its own.
  c10::cuda::CUDACachingAllocator::emptyCache();
  c10::cuda::CUDACachingAllocator::resetPeakStats(device);
#endif
  return out;
}

#else

absl::StatusOr<v1::Ceilings> MeasureCeilings(int) {
  return absl::UnimplementedError("ceilings: this worker was built without CUDA");
}

#endif

namespace {

const Logger kLog("worker");

// What the ceilings are keyed on in the cache; the clocks are the maxima (see ceilings_cache.h).
CeilingsKey KeyOf(const profiler::GpuInfo& gpu) {
  CeilingsKey key;
  key.gpu_uuid = gpu.uuid;
  key.driver_version = gpu.cuda_driver_version;  // without NVML: the CUDA version the driver supports
  absl::StatusOr<GpuClocks> clocks = SampleGpuClocks(gpu.uuid);
  if (clocks.ok()) {
    if (!clocks->driver_version.empty()) key.driver_version = clocks->driver_version;
    key.sm_clock_mhz = clocks->sm_clock_max_mhz;
    key.mem_clock_mhz = clocks->mem_clock_max_mhz;
    key.power_limit_w = clocks->power_limit_w;
  }
  return key;
}

void LogCeilings(const v1::Ceilings& c, const std::string& why) {
  std::string each;
  for (const v1::Ceiling& x : c.ceilings()) {
    if (x.measured() > 0) absl::StrAppendFormat(&each, " %s %.3g", x.name(), x.measured());
  }
  if (c.from_cache()) {
    kLog.Info("roofline ceilings from the node's cache:{}", each);
  } else {
    kLog.Info("roofline ceilings measured in {} ms ({}):{}", c.measure_ms(), why, each);
  }
}

}  // namespace

v1::Ceilings NodeCeilings(bool on_gpu, const profiler::GpuInfo& gpu, const std::string& cache_dir) {
  v1::Ceilings out;
  if (!on_gpu) {
    out.set_note("CPU backend: no ceilings (the roofline is for GPUs)");
    return out;
  }
  const CeilingsKey key = KeyOf(gpu);
  const CeilingsMeasurement measure = [&] { return MeasureCeilings(gpu.index); };
  std::string why;
  absl::StatusOr<v1::Ceilings> got;
  if (cache_dir.empty()) {
    const int64_t begin = MonotonicNs();
    got = measure();
    why = "no cache: MEDPROF_CACHE_DIR is not set (the agent sets it)";
    if (got.ok()) {
      got->set_measure_ms((MonotonicNs() - begin) / 1'000'000);
      got->set_driver_version(key.driver_version);
      got->set_sm_clock_mhz(key.sm_clock_mhz);
      got->set_mem_clock_mhz(key.mem_clock_mhz);
      got->set_power_limit_w(key.power_limit_w);
    }
  } else {
    got = CeilingsCache(cache_dir).GetOrMeasure(key, measure, &why);
  }
  if (got.ok()) {
    out = *std::move(got);
    if (cache_dir.empty()) out.set_note(why);
    LogCeilings(out, why);
  } else {
    kLog.Warn("roofline ceilings not measured: {}", got.status().ToString());
    out.set_note(absl::StrCat("not measured: ", got.status().message()));
  }
  if (!roofline::FillDatasheet(gpu.name, &out)) {
    absl::StrAppend(out.mutable_note(), out.note().empty() ? "" : "; ", "no datasheet for ", gpu.name);
  }
  return out;
}

}  // namespace medprof::worker
