// Merges the normalized fp32 partial outputs of a sequence's live splits, weighting each by
// exp(lse_split - lse_total). One warp per (batch, query head) row.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "splitkv/kernels/decode_split_kv.cuh"

namespace splitkv::kernels {

inline constexpr int kCombineRowsPerCta = 4;
static_assert(kCombineRowsPerCta * 32 == kThreadsPerCta, "batch_auto_split_count reduces over kThreadsPerCta threads");

template <typename Element, int kHeadDim, bool kAuto>
__global__ void __launch_bounds__(kCombineRowsPerCta * 32)
    combine_splits_kernel(const DecodeKernelArgs args, int total_rows, const AutoTableArgument<kAuto> auto_table) {
  using Mma = TensorCore<Element>;
  constexpr int kColumnsPerLane = kHeadDim / 32;
  static_assert(kColumnsPerLane % 2 == 0, "lanes read float2 or wider");
  allow_dependent_grids_to_launch();

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  // The lengths are inputs of the split kernel, not its outputs, so they (and the auto count
  // derived from them) can be read while it still runs: off the critical path.
  const int batch_auto_splits = batch_auto_split_count(args, auto_table);  // block-wide, before any exit
  const int64_t head_row = static_cast<int64_t>(blockIdx.x) * kCombineRowsPerCta + warp;
  if (head_row >= total_rows) return;
  const int batch_index = static_cast<int>(head_row / args.num_heads);
  const int seqlen = clamped_length(args, batch_index);
  const int live = active_splits(seqlen, splits_of_sequence(args, batch_index, batch_auto_splits));
  if (live <= 1) return;  // the split kernel wrote this row's final output itself
  wait_for_prerequisite_grids();  // the split kernel's partials are complete and visible after this

  // One pass with a running maximum, so each split's LSE and output are loaded together instead
  // of a first pass over the LSEs followed by a second over the outputs.
  const float* lse_row = args.partial_lse + head_row * args.num_splits;
  const float* partial = args.partial_out + head_row * args.num_splits * kHeadDim;
  float running_max = -INFINITY;
  float weight_sum = 0.f;
  float accumulated[kColumnsPerLane];
#pragma unroll
  for (int c = 0; c < kColumnsPerLane; ++c) accumulated[c] = 0.f;
#pragma unroll 4
  for (int s = 0; s < live; ++s) {
    const float lse = lse_row[s];
    // Lane owns columns [lane*2 + 64*i, +2) so each warp-wide read is one contiguous 256-byte run.
    float2 value[kColumnsPerLane / 2];
#pragma unroll
    for (int i = 0; i < kColumnsPerLane / 2; ++i)
      value[i] = *reinterpret_cast<const float2*>(partial + s * kHeadDim + i * 64 + lane * 2);
    const float new_max = fmaxf(running_max, lse);
    const float rescale = __expf(running_max - new_max);  // 0 on the first split
    const float weight = __expf(lse - new_max);
    weight_sum = weight_sum * rescale + weight;
#pragma unroll
    for (int i = 0; i < kColumnsPerLane / 2; ++i) {
      accumulated[2 * i] = accumulated[2 * i] * rescale + weight * value[i].x;
      accumulated[2 * i + 1] = accumulated[2 * i + 1] * rescale + weight * value[i].y;
    }
    running_max = new_max;
  }

  const float inverse_sum = 1.f / weight_sum;
  Element* destination = static_cast<Element*>(args.out) + head_row * kHeadDim;
#pragma unroll
  for (int i = 0; i < kColumnsPerLane / 2; ++i) {
    const uint32_t packed = Mma::pack(accumulated[2 * i] * inverse_sum, accumulated[2 * i + 1] * inverse_sum);
    *reinterpret_cast<uint32_t*>(destination + i * 64 + lane * 2) = packed;
  }
  if (lane == 0 && args.lse != nullptr) args.lse[head_row] = running_max + __logf(weight_sum);
}

}  // namespace splitkv::kernels
