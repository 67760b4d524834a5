// Host API of the split-KV decode attention kernels. Every function returns a Status and
// never aborts; the message of the last failure on this thread is kept for callers.
#pragma once

#include <cstddef>
#include <string>

#include <cuda_runtime_api.h>

#include "splitkv/decode_params.hpp"

namespace splitkv {

// Checks shapes, supported sizes and pointers without touching the GPU. On failure the
// message names the field and the reason.
Status validate(const DecodeParams& params, std::string* message);

// Bytes of fp32 partial outputs and LSEs the combine needs for params.num_splits.
std::size_t decode_workspace_bytes(const DecodeParams& params);

// The kernels behind decode_attention. packed_gqa is the product kernel; unpacked_gqa is a
// simple CUDA-core kernel, one CTA per query head, kept as a baseline and as a second
// implementation for the kernel-agnostic tuner. num_splits = auto (per_sequence_splits with
// auto_splits) runs on packed_gqa only; unpacked_gqa answers Status::unsupported for it.
enum class DecodeKernel : int { packed_gqa = 0, unpacked_gqa = 1 };

// Split kernel, then (num_splits > 1) the combine, on `stream`. Enqueues only: no host
// synchronisation, so the pair can be captured in a CUDA graph.
Status decode_attention(const DecodeParams& params, cudaStream_t stream);
Status decode_attention(const DecodeParams& params, DecodeKernel kernel, cudaStream_t stream);

// Message of the last non-ok Status returned on this thread.
const char* last_error_message();

}  // namespace splitkv
