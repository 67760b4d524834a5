// splitkv's own kernels as a KernelUnderTest, open to device-side split policies: a
// LaunchCustomizer edits the DecodeParams of every launch and may enqueue a small prepare
// kernel before it, on the same buffers and under the same CUDA-graph protocol as the fixed
// split counts. For such kernels the sweep's num_splits is the graph's cap (grid upper bound).
// CUDA builds only (tuner/src/gpu_kernel_adapters.cu); include from .cu files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "splitkv/decode_attention.hpp"
#include "splitkv/tuner/kernel_under_test.hpp"

namespace splitkv::tuner {

class LaunchCustomizer {
 public:
  virtual ~LaunchCustomizer() = default;
  // Once per shape, after the buffers exist. `lengths` are the real lengths behind
  // params.cache_seqlens (host copy); params.num_splits is the widest cap of the shape.
  // May allocate device memory (device_upload), freed in release().
  virtual KernelOutcome prepare(const SweepPoint& shape, const std::vector<std::int32_t>& lengths,
                                const DecodeParams& params) = 0;
  // Before every decode launch: params.num_splits arrives as the cap; edit params and enqueue
  // any prepare work on `stream` (a cudaStream_t). No host synchronisation.
  virtual KernelOutcome before_launch(DecodeParams& params, void* stream) = 0;
  virtual void release() = 0;
};

std::unique_ptr<KernelUnderTest> make_splitkv_kernel(std::string name, DecodeKernel kernel,
                                                     std::unique_ptr<LaunchCustomizer> customizer = nullptr);

// cudaMalloc + copy of `host`; out of memory reads as oom. *pointer is null on failure.
KernelOutcome device_upload(void** pointer, const std::vector<std::int32_t>& host);
// ok for cudaSuccess, else launch_failed with the described error (`error` is a cudaError_t).
KernelOutcome cuda_outcome(int error);

}  // namespace splitkv::tuner
