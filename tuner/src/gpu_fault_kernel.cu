// "fault_injection": a KernelUnderTest that does real (trivial) GPU work and injects the
// faults a real sweep can meet, so the runner's handling of each one can be checked on a GPU
// (tests/gpu/fault_cases.sh, RELIABILITY.md section 6). Registered only when the
// environment holds SPLITKV_ENABLE_FAULT_KERNEL=1; users never see it.
//
// The sweep point's batch chooses the fault (every other batch is an ordinary point):
//
//   batch 3  prepare() asks cudaMalloc for twice the device's memory: must be recorded as
//            status `oom` with the CUDA message, and the sweep must go on.
//   batch 5  launch() launches with 2048 threads per block (the limit is 1024), a launch
//            error that does not poison the context: must be recorded as `launch_failed`
//            with the CUDA message, and the sweep must go on.
//   batch 7  launch() enqueues a kernel that stores through an invalid device pointer: the
//            replay fails with the sticky cudaErrorIllegalAddress, which must stop the sweep
//            (exit 1, sidecar state `aborted`) with every earlier row kept and a resume hint.
//
// The work itself: each call scales one buffer set (batch x heads x head_dim floats) into an
// output, so an ordinary point yields a real, small time.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "splitkv/tuner/fault_kernel.hpp"
#include "splitkv/tuner/gpu_sweep.hpp"
#include "splitkv/tuner/graph_timer.hpp"

namespace splitkv::tuner {
namespace {

constexpr int kThreads = 256;

__global__ void scale_kernel(const float* __restrict__ in, float* __restrict__ out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    out[i] = 0.5f * in[i] + 1.0f;
}

// Stores through `bad`, an address no allocation covers: cudaErrorIllegalAddress.
__global__ void illegal_store_kernel(float* bad) { bad[threadIdx.x] = 1.0f; }

class FaultInjectionKernel final : public KernelUnderTest {
 public:
  ~FaultInjectionKernel() override { release(); }

  std::string name() const override { return kFaultKernelName; }

  bool supports(const SweepPoint&, std::string*) const override { return true; }

  KernelOutcome prepare(const SweepPoint& shape, int copies) override {
    release();
    fault_ = injected_fault_for_batch(shape.batch);
    if (fault_ == InjectedFault::oom) {
      cudaDeviceProp properties{};
      int device = 0;
      cudaGetDevice(&device);
      cudaGetDeviceProperties(&properties, device);
      const std::size_t bytes = 2 * properties.totalGlobalMem;
      void* impossible = nullptr;
      const cudaError_t error = cudaMalloc(&impossible, bytes);
      if (error == cudaSuccess) {  // cannot happen on a real device; keep the sweep honest anyway
        cudaFree(impossible);
        return KernelOutcome::failure(PointStatus::invalid, "fault injection: cudaMalloc of twice the device "
                                                            "memory succeeded");
      }
      cudaGetLastError();  // allocation failures are not sticky
      return KernelOutcome::failure(
          error == cudaErrorMemoryAllocation ? PointStatus::oom : PointStatus::launch_failed,
          "fault injection: cudaMalloc(" + std::to_string(bytes) + " bytes): " + describe_cuda_error(error));
    }
    elements_ = static_cast<std::int64_t>(shape.batch) * shape.num_heads * shape.head_dim;
    copies_ = copies;
    const std::size_t bytes = static_cast<std::size_t>(elements_) * sizeof(float);
    for (void** p : {&in_, &out_}) {
      const cudaError_t error = cudaMalloc(p, bytes * (p == &in_ ? copies : 1));
      if (error != cudaSuccess) {
        cudaGetLastError();
        return KernelOutcome::failure(error == cudaErrorMemoryAllocation ? PointStatus::oom : PointStatus::launch_failed,
                                      "cudaMalloc: " + describe_cuda_error(error));
      }
    }
    const cudaError_t error = cudaMemset(in_, 0, bytes * copies);
    if (error != cudaSuccess)
      return KernelOutcome::failure(PointStatus::launch_failed, "cudaMemset: " + describe_cuda_error(error));
    return KernelOutcome::success();
  }

  KernelOutcome launch(int copy_index, int /*num_splits*/, void* stream) override {
    const auto s = static_cast<cudaStream_t>(stream);
    if (fault_ == InjectedFault::launch_failure) {
      scale_kernel<<<1, 2048, 0, s>>>(static_cast<const float*>(in_), static_cast<float*>(out_), elements_);
      const cudaError_t error = cudaGetLastError();
      return KernelOutcome::failure(PointStatus::launch_failed,
                                    "fault injection: launch with 2048 threads per block: " +
                                        describe_cuda_error(error));
    }
    if (fault_ == InjectedFault::sticky) {
      // Far past any allocation, and aligned, so the fault is an illegal address and not a
      // misaligned one.
      illegal_store_kernel<<<1, 32, 0, s>>>(reinterpret_cast<float*>(std::uintptr_t{1} << 47));
    } else {
      const int blocks = static_cast<int>(std::min<std::int64_t>((elements_ + kThreads - 1) / kThreads, 1024));
      scale_kernel<<<blocks, kThreads, 0, s>>>(static_cast<const float*>(in_) + (copy_index % copies_) * elements_,
                                              static_cast<float*>(out_), elements_);
    }
    const cudaError_t error = cudaGetLastError();
    if (error == cudaSuccess) return KernelOutcome::success();
    return KernelOutcome::failure(PointStatus::launch_failed, describe_cuda_error(error));
  }

  void release() override {
    for (void** p : {&in_, &out_}) {
      cudaFree(*p);
      *p = nullptr;
    }
  }

 private:
  InjectedFault fault_ = InjectedFault::none;
  std::int64_t elements_ = 0;
  int copies_ = 1;
  void* in_ = nullptr;
  void* out_ = nullptr;
};

}  // namespace

void register_fault_kernel_if_enabled(KernelRegistry& registry) {
  if (!fault_kernel_enabled()) return;
  registry.add(kFaultKernelName,
               "test only (SPLITKV_ENABLE_FAULT_KERNEL=1): trivial scale kernel; batch 3 out of memory, "
               "batch 5 launch failure, batch 7 illegal address (sticky)",
               [] { return std::make_unique<FaultInjectionKernel>(); });
}

}  // namespace splitkv::tuner
