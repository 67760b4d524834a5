// Build without FlashInfer's headers (or without CUDA): no FlashInfer kernels, and the reason
// the configure gave (tuner/flashinfer.cmake), so a GPU test can skip with it.
#include "splitkv/tuner/flashinfer_kernel.hpp"

#ifndef SPLITKV_FLASHINFER_SKIP_REASON
#define SPLITKV_FLASHINFER_SKIP_REASON "not configured"
#endif

namespace splitkv::tuner {

std::string flashinfer_unavailable_reason() {
  return std::string("this build has no FlashInfer kernels (") + SPLITKV_FLASHINFER_SKIP_REASON + ")";
}

void register_flashinfer_kernels(KernelRegistry&) {}

std::unique_ptr<FlashinferDecodeKernel> make_flashinfer_kernel(bool) { return nullptr; }

}  // namespace splitkv::tuner
