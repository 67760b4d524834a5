// Linked instead of the CUDA implementation when the build has no CUDA or no kernels:
// every GPU entry point reports that plainly rather than failing to link.
#include "splitkv/tuner/gpu_sweep.hpp"

namespace splitkv::tuner {

GpuSweepResult run_gpu_sweep(const GpuSweepRequest&) {
  GpuSweepResult result;
  result.error = kNoCudaMessage;
  return result;
}

DeviceListing list_gpu_devices() {
  DeviceListing listing;
  listing.error = kNoCudaMessage;
  return listing;
}

void register_gpu_kernels(KernelRegistry&) {}

bool built_with_cuda() { return false; }

}  // namespace splitkv::tuner
