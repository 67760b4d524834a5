// Build without CUDA: no device-side policy kernels (see device_policy_kernels.cu).
#include "splitkv/heuristics/device_policy_kernels.hpp"

#include "splitkv/tuner/gpu_sweep.hpp"

namespace splitkv::heuristics {

void register_device_policy_kernels(tuner::KernelRegistry&) {}

void register_all_kernels(tuner::KernelRegistry& registry) { tuner::register_gpu_kernels(registry); }

}  // namespace splitkv::heuristics
