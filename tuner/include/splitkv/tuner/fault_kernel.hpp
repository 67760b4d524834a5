// The test-only "fault_injection" kernel (tuner/src/gpu_fault_kernel.cu): which fault a sweep
// point gets, and whether the kernel is registered at all. Host-only, so CPU tests check it.
#pragma once

#include <cstdlib>
#include <cstring>

namespace splitkv::tuner {

inline constexpr const char* kFaultKernelName = "fault_injection";
inline constexpr const char* kFaultKernelEnv = "SPLITKV_ENABLE_FAULT_KERNEL";

enum class InjectedFault {
  none,            // ordinary point: trivial real work, timed
  oom,             // batch 3: prepare() asks for twice the device memory
  launch_failure,  // batch 5: launch() with 2048 threads per block (not sticky)
  sticky,          // batch 7: launch() stores through an invalid pointer (cudaErrorIllegalAddress)
};

inline InjectedFault injected_fault_for_batch(int batch) {
  switch (batch) {
    case 3: return InjectedFault::oom;
    case 5: return InjectedFault::launch_failure;
    case 7: return InjectedFault::sticky;
    default: return InjectedFault::none;
  }
}

// Registered only when SPLITKV_ENABLE_FAULT_KERNEL=1 exactly.
inline bool fault_kernel_enabled() {
  const char* value = std::getenv(kFaultKernelEnv);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

}  // namespace splitkv::tuner
