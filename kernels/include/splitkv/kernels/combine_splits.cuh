// Merges the normalized fp32 partial outputs of a sequence's live splits, weighting each by
// exp(lse_split - lse_total). One warp per (batch, query head) row.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "splitkv/kernels/decode_split_kv.cuh"

namespace splitkv::kernels {

inline constexpr int kCombineRowsPerCta = 4;

template <typename Element, int kHeadDim>
__global__ void __launch_bounds__(kCombineRowsPerCta * 32)
    combine_splits_kernel(const DecodeKernelArgs args, int total_rows) {
  using Mma = TensorCore<Element>;
  constexpr int kColumnsPerLane = kHeadDim / 32;
  static_assert(kColumnsPerLane % 2 == 0, "lanes read float2 or wider");
  __shared__ float split_weight[kCombineRowsPerCta][kMaxSplits];

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int64_t head_row = static_cast<int64_t>(blockIdx.x) * kCombineRowsPerCta + warp;
  if (head_row >= total_rows) return;
  const int batch_index = static_cast<int>(head_row / args.num_heads);
  const int seqlen = min(max(args.cache_seqlens[batch_index], 0), args.cache_capacity);
  const int live = active_splits(seqlen, args.num_splits);
  if (live <= 1) return;  // the split kernel wrote this row's final output itself

  const float* lse_row = args.partial_lse + head_row * args.num_splits;
  float max_lse = -INFINITY;
  for (int s = lane; s < live; s += 32) max_lse = fmaxf(max_lse, lse_row[s]);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    max_lse = fmaxf(max_lse, __shfl_xor_sync(0xffffffffu, max_lse, offset));
  float sum = 0.f;
  for (int s = lane; s < live; s += 32) {
    const float w = __expf(lse_row[s] - max_lse);
    split_weight[warp][s] = w;
    sum += w;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  __syncwarp();

  const float inverse_sum = 1.f / sum;
  float accumulated[kColumnsPerLane];
#pragma unroll
  for (int c = 0; c < kColumnsPerLane; ++c) accumulated[c] = 0.f;
  // Lane owns columns [lane*2 + 64*i, +2) so each warp-wide read is one contiguous 256-byte run.
  const float* partial = args.partial_out + head_row * args.num_splits * kHeadDim;
  for (int s = 0; s < live; ++s) {
    const float w = split_weight[warp][s];
#pragma unroll
    for (int i = 0; i < kColumnsPerLane / 2; ++i) {
      const float2 value = *reinterpret_cast<const float2*>(partial + s * kHeadDim + i * 64 + lane * 2);
      accumulated[2 * i] += w * value.x;
      accumulated[2 * i + 1] += w * value.y;
    }
  }
  Element* destination = static_cast<Element*>(args.out) + head_row * kHeadDim;
#pragma unroll
  for (int i = 0; i < kColumnsPerLane / 2; ++i) {
    const uint32_t packed = Mma::pack(accumulated[2 * i] * inverse_sum, accumulated[2 * i + 1] * inverse_sum);
    *reinterpret_cast<uint32_t*>(destination + i * 64 + lane * 2) = packed;
  }
  if (lane == 0 && args.lse != nullptr) args.lse[head_row] = max_lse + __logf(sum);
}

}  // namespace splitkv::kernels
