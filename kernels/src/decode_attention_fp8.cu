// The fp8 (e4m3) caches' kernels: the packed split kernels (fixed counts and auto, grid and
// persistent) for bf16 and fp16 queries. The combine is the bf16/fp16 one (its partials are fp32)
// and is instantiated here again only as the same template the other file uses.
#include "decode_launch.cuh"

namespace splitkv::detail {

Status dispatch_fp8_cache(const DecodeParams& params, const kernels::DecodeKernelArgs& args, DecodeKernel kernel,
                          cudaStream_t stream) {
  return params.dtype == DType::bf16 ? dispatch_head_dim<__nv_bfloat16, true>(params, args, kernel, stream)
                                     : dispatch_head_dim<__half, true>(params, args, kernel, stream);
}

}  // namespace splitkv::detail
