// Merging one (sequence, query head) row's split partials into its output: each split's
// normalized fp32 partial is weighted by exp(lse_split - lse_max) and the sum renormalized.
// One warp per row; each lane owns 2-column slices of the row, so every warp-wide read of one
// split's row is one contiguous run. Used by the combine kernel and by the split kernel's last
// CTA of a (sequence, kv head) when it merges in place.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "splitkv/kernels/mma_sm80.cuh"

namespace splitkv::kernels {

// All loads of a pass are issued before any of them is used: the LSEs (the same word in every
// lane) and the partial rows of up to kSplitsPerPass splits, so a row with that many live splits
// waits for one memory round trip, not one per unrolled group of splits (kernels/NOTES.md, v8).
// Loads bypass L1 (__ldcg): in the in-place merge other SMs wrote the partials during this kernel.
template <typename Element, int kHeadDim, int kSplitsPerPass>
__device__ __forceinline__ void merge_partial_row(const float* lse_row, const float* partial_row, int live,
                                                  Element* out_row, float* lse_out) {
  using Mma = TensorCore<Element>;
  constexpr int kColumnsPerLane = kHeadDim / 32;
  static_assert(kColumnsPerLane % 2 == 0, "lanes read float2 or wider");
  const int lane = threadIdx.x % 32;
  float pass_lse[kSplitsPerPass];
  float2 pass_value[kSplitsPerPass][kColumnsPerLane / 2];
  auto load_pass = [&](int first_split) {
#pragma unroll
    for (int i = 0; i < kSplitsPerPass; ++i) {
      const int s = first_split + i;
      pass_lse[i] = s < live ? __ldcg(lse_row + s) : -INFINITY;
#pragma unroll
      for (int c = 0; c < kColumnsPerLane / 2; ++c)
        pass_value[i][c] = s < live ? __ldcg(reinterpret_cast<const float2*>(partial_row + s * kHeadDim + c * 64 + lane * 2))
                                    : make_float2(0.f, 0.f);
    }
  };
  load_pass(0);
  // The maximum LSE is known before any weight is formed, so no running rescale is needed.
  float lse_max = -INFINITY;
#pragma unroll
  for (int i = 0; i < kSplitsPerPass; ++i) lse_max = fmaxf(lse_max, pass_lse[i]);
  if (live > kSplitsPerPass) {
    float rest_max = -INFINITY;
    for (int s = kSplitsPerPass + lane; s < live; s += 32) rest_max = fmaxf(rest_max, __ldcg(lse_row + s));
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      rest_max = fmaxf(rest_max, __shfl_xor_sync(0xffffffffu, rest_max, offset));
    lse_max = fmaxf(lse_max, rest_max);
  }

  float weight_sum = 0.f;
  float accumulated[kColumnsPerLane];
#pragma unroll
  for (int c = 0; c < kColumnsPerLane; ++c) accumulated[c] = 0.f;
  for (int first_split = 0;;) {
#pragma unroll
    for (int i = 0; i < kSplitsPerPass; ++i) {
      const float weight = __expf(pass_lse[i] - lse_max);  // 0 past the live splits
      weight_sum += weight;
#pragma unroll
      for (int c = 0; c < kColumnsPerLane / 2; ++c) {
        accumulated[2 * c] += weight * pass_value[i][c].x;
        accumulated[2 * c + 1] += weight * pass_value[i][c].y;
      }
    }
    first_split += kSplitsPerPass;
    if (first_split >= live) break;
    load_pass(first_split);
  }

  const float inverse_sum = 1.f / weight_sum;
#pragma unroll
  for (int c = 0; c < kColumnsPerLane / 2; ++c) {
    const uint32_t packed = Mma::pack(accumulated[2 * c] * inverse_sum, accumulated[2 * c + 1] * inverse_sum);
    *reinterpret_cast<uint32_t*>(out_row + c * 64 + lane * 2) = packed;
  }
  if (lane == 0 && lse_out != nullptr) *lse_out = lse_max + __logf(weight_sum);
}

}  // namespace splitkv::kernels
