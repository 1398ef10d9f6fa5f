// Every difference between the LibTorch versions medprof builds against — Debian 12's 1.13
// (CPU only) and PyTorch 2.x's libtorch with CUDA — in one place. Nothing else in the workload
// tests TORCH_VERSION_*.
//
//   autocast   1.13: at::autocast::set_enabled / set_cpu_enabled + set_autocast_{gpu,cpu}_dtype
//              2.4+: at::autocast::set_autocast_enabled(device, on) + set_autocast_dtype(device, t)
//   TF32       both: Context::setAllowTF32CuDNN / setAllowTF32CuBLAS (2.9+ also has a
//              per-backend precision API; the boolean setters still drive it)
//   zero_grad  1.13 zeroes gradients in place, 2.x sets them to none: we reset them ourselves
//              (ResetGrads) so both behave like the peer's zero_grad(set_to_none=True)
//   OOM        c10::OutOfMemoryError exists in both; messages also checked ("out of memory")
//
// Header-only; functions touch LibTorch's process-global state (call from one thread).
#pragma once

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <string>
#include <vector>

#define MEDPROF_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace medprof::ddpm::compat {

inline std::string TorchVersion() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

// cuDNN version as "9.19.0", or "" when LibTorch has no cuDNN (CPU builds).
inline std::string CudnnVersion() {
  if (!at::globalContext().hasCuDNN()) return "";
  const long v = at::globalContext().versionCuDNN();
  // cuDNN >= 9 encodes major*10000 + minor*100 + patch; 8.x major*1000 + minor*100 + patch.
  const long major = v >= 90000 ? v / 10000 : v / 1000;
  const long minor = v >= 90000 ? (v % 10000) / 100 : (v % 1000) / 100;
  const long patch = v % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

// TF32 for cuDNN convolutions and cuBLAS matmuls, explicitly on or off (LibTorch's default
// for cuDNN is on). Process-global.
inline void SetTf32(bool on) {
  at::globalContext().setAllowTF32CuDNN(on);
  at::globalContext().setAllowTF32CuBLAS(on);
}
inline bool Tf32CuDNN() { return at::globalContext().allowTF32CuDNN(); }
inline bool Tf32CuBLAS() { return at::globalContext().allowTF32CuBLAS(); }
inline void SetCudnnBenchmark(bool on) { at::globalContext().setBenchmarkCuDNN(on); }
inline bool CudnnBenchmark() { return at::globalContext().benchmarkCuDNN(); }

// Autocast on `device` (CPU or CUDA) with `dtype` for the guard's lifetime; restores the
// previous state and clears the cast cache (the cached low-precision weights must not outlive
// an optimizer step) when it ends. A disabled guard does nothing.
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device, bool enabled, at::ScalarType dtype)
      : device_(device), enabled_(enabled) {
    if (!enabled_) return;
    prev_enabled_ = IsEnabled(device_);
    prev_dtype_ = Dtype(device_);
    Set(device_, true, dtype);
  }
  ~AutocastGuard() {
    if (!enabled_) return;
    Set(device_, prev_enabled_, prev_dtype_);
    at::autocast::clear_cache();
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

  static bool IsEnabled(c10::DeviceType device) {
#if MEDPROF_TORCH_AT_LEAST(2, 4)
    return at::autocast::is_autocast_enabled(device);
#else
    return device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
  }

 private:
  static at::ScalarType Dtype(c10::DeviceType device) {
#if MEDPROF_TORCH_AT_LEAST(2, 4)
    return at::autocast::get_autocast_dtype(device);
#else
    return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                           : at::autocast::get_autocast_cpu_dtype();
#endif
  }
  static void Set(c10::DeviceType device, bool enabled, at::ScalarType dtype) {
#if MEDPROF_TORCH_AT_LEAST(2, 4)
    at::autocast::set_autocast_dtype(device, dtype);
    at::autocast::set_autocast_enabled(device, enabled);
#else
    if (device == c10::DeviceType::CUDA) {
      at::autocast::set_autocast_gpu_dtype(dtype);
      at::autocast::set_enabled(enabled);
    } else {
      at::autocast::set_autocast_cpu_dtype(dtype);
      at::autocast::set_cpu_enabled(enabled);
    }
#endif
  }

  c10::DeviceType device_;
  bool enabled_;
  bool prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::kFloat;
};

// Sets every gradient to none (undefined), like zero_grad(set_to_none=True) in PyTorch.
inline void ResetGrads(const std::vector<at::Tensor>& params) {
  for (const at::Tensor& p : params) {
    p.mutable_grad().reset();  // a const method returning the gradient slot, both versions
  }
}

// The message of a LibTorch exception without the C++ backtrace.
inline std::string ErrorMessage(const c10::Error& e) { return e.what_without_backtrace(); }

inline bool IsOutOfMemory(const std::string& message) {
  return message.find("out of memory") != std::string::npos ||
         message.find("Out of memory") != std::string::npos ||
         message.find("can't allocate memory") != std::string::npos ||
         message.find("not enough memory") != std::string::npos;
}

}  // namespace medprof::ddpm::compat
