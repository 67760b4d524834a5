// Build without CUDA: no device-side policy kernels (see gpu_device_policy_kernels.cu).
#include "splitkv/tuner/device_policy_kernels.hpp"

namespace splitkv::tuner {

void register_device_policy_kernels(KernelRegistry&, const DevicePolicies&) {}

int enqueue_fa3_dynamic_prepare(const std::int32_t*, int, const Fa3DynamicInputs&, int, int, std::int32_t*, void*) {
  return 801;  // cudaErrorNotSupported
}

}  // namespace splitkv::tuner
