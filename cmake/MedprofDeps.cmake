# Finds every dependency the selected components need, and fails loudly (with the package
# to install) when one is missing. Sets MEDPROF_HAVE_CUDA and MEDPROF_TORCH_HAS_CUDA.

macro(medprof_require pkg hint)
  find_package(${pkg} ${ARGN})
  if(NOT ${pkg}_FOUND)
    message(FATAL_ERROR "medprof: ${pkg} not found; install it with scripts/install-deps.sh (Debian package: ${hint})")
  endif()
endmacro()

medprof_require(Protobuf "libprotobuf-dev protobuf-compiler")
medprof_require(fmt "libfmt-dev" CONFIG)
medprof_require(spdlog "libspdlog-dev" CONFIG)
medprof_require(absl "libabsl-dev" CONFIG)
medprof_require(nlohmann_json "nlohmann-json3-dev" CONFIG)
medprof_require(CLI11 "libcli11-dev" CONFIG)

if(MEDPROF_BUILD_GRPC)
  medprof_require(gRPC "libgrpc++-dev protobuf-compiler-grpc" CONFIG)
endif()
if(MEDPROF_BUILD_SERVER)
  medprof_require(SQLite3 "libsqlite3-dev")
  medprof_require(prometheus-cpp "prometheus-cpp-dev" CONFIG)
endif()
find_package(Threads REQUIRED)

# CUDA / CUPTI: compiled and linked whenever the toolkit is present, GPU or not.
set(MEDPROF_HAVE_CUDA OFF)
if(NOT MEDPROF_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND TARGET CUDA::cupti)
    set(MEDPROF_HAVE_CUDA ON)
  elseif(MEDPROF_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MEDPROF_WITH_CUDA=ON but no CUDA toolkit with CUPTI was found (set CUDAToolkit_ROOT)")
  endif()
endif()
if(MEDPROF_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    if(CUDAToolkit_VERSION VERSION_GREATER_EQUAL 13.0)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)   # CUDA 13 dropped Volta
    else()
      set(CMAKE_CUDA_ARCHITECTURES 70 80 90)
    endif()
  endif()
  if(NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
endif()

set(MEDPROF_TORCH_HAS_CUDA OFF)
if(MEDPROF_WITH_TORCH AND MEDPROF_BUILD_WORKER)
  medprof_require(Torch "libtorch-dev (or -DTorch_DIR=<PyTorch cmake prefix>/Torch)")
  # PyTorch 2.x wheels ship their own fmt headers (v11/v12) on torch's include path, ahead of the
  # system's; code that sees them must not link against the system libfmt (v9). Header-only
  # mode keeps every fmt call in such translation units self-contained. (Debian's LibTorch
  # uses the system fmt, where this is harmless.)
  if(EXISTS "${TORCH_INSTALL_PREFIX}/include/fmt/format.h" AND NOT TORCH_INSTALL_PREFIX MATCHES "^/usr/?$")
    set_property(TARGET torch APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY)
  endif()
  if(TARGET torch_cuda OR TARGET c10_cuda)
    set(MEDPROF_TORCH_HAS_CUDA ON)
  endif()
endif()

if(MEDPROF_BUILD_TESTS)
  medprof_require(GTest "libgtest-dev libgmock-dev" CONFIG)
endif()
