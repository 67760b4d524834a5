// Build without CUDA: no device-side policy kernels (see device_policy_kernels.cu).
#include "splitkv/heuristics/device_policy_kernels.hpp"

#include "splitkv/tuner/gpu_sweep.hpp"

namespace splitkv::heuristics {

void register_device_policy_kernels(tuner::KernelRegistry&) {}

int enqueue_fa3_dynamic_prepare(const std::int32_t*, int, const Fa3DynamicInputs&, int, int, std::int32_t*, void*) {
  return 801;  // cudaErrorNotSupported
}

void register_all_kernels(tuner::KernelRegistry& registry) { tuner::register_gpu_kernels(registry); }

}  // namespace splitkv::heuristics
