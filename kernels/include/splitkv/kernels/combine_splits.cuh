// Merges the normalized fp32 partial outputs of a sequence's live splits, weighting each by
// exp(lse_split - lse_total). One warp per (batch, query head) row; each lane owns 2-column
// slices of the row, so every warp-wide read of one split's row is one contiguous run.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "splitkv/kernels/decode_split_kv.cuh"

namespace splitkv::kernels {

inline constexpr int kCombineRowsPerCta = 4;

template <typename Element, int kHeadDim, bool kAuto>
__global__ void __launch_bounds__(kCombineRowsPerCta * 32)
    combine_splits_kernel(const DecodeKernelArgs args, int total_rows, const AutoTableArgument<kAuto> auto_table) {
  using Mma = TensorCore<Element>;
  constexpr int kColumnsPerLane = kHeadDim / 32;
  static_assert(kColumnsPerLane % 2 == 0, "lanes read float2 or wider");
  // 64 registers of partials in flight per lane at every head size: 16 splits at d = 128.
  constexpr int kSplitsPerPass = 64 / kColumnsPerLane;
  allow_dependent_grids_to_launch();

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  // The lengths are inputs of the split kernel, not its outputs, so they (and the auto count
  // derived from them) can be read while it still runs: off the critical path.
  const int batch_auto_splits = batch_auto_split_count<kCombineRowsPerCta * 32>(args, auto_table);  // block-wide, before any exit
  const int64_t head_row = static_cast<int64_t>(blockIdx.x) * kCombineRowsPerCta + warp;
  if (head_row >= total_rows) return;
  const int batch_index = static_cast<int>(head_row / args.num_heads);
  const int seqlen = clamped_length(args, batch_index);
  const int splits = splits_of_sequence(args, batch_index, batch_auto_splits);
  const int live = active_splits(seqlen, splits);
  if (live <= 1) return;  // the split kernel wrote this row's final output itself
  const int64_t split_stride = partial_split_stride<kAuto>(args, splits);

  // One merge of the row. `real` false is a dry run of the same instructions with no split live
  // and nothing stored: the auto combine runs it before its wait, so the instructions it needs once
  // the partials are ready are in the SM's cache (the persistent kernel beside it evicts them: after
  // the wait 2.5 us against 0.7 for the fixed combine, B4 L4096).
  auto merge = [&](bool real) {
    const int merged = real ? live : 0;
    if (real) {
      wait_for_prerequisite_grids();  // the split kernel's partials are complete and visible after this
    }

    // All loads of a pass are issued before any of them is used: the LSEs (the same word in every
    // lane) and the partial rows of up to kSplitsPerPass splits, so a call with that many live
    // splits waits for one memory round trip after the split kernel, not one per unrolled group of
    // splits. The maximum LSE is known before any weight is formed.
    const float* lse_row = args.partial_lse + head_row * split_stride;
    const float* partial = args.partial_out + head_row * split_stride * kHeadDim;
    float pass_lse[kSplitsPerPass];
    float2 pass_value[kSplitsPerPass][kColumnsPerLane / 2];
    auto load_pass = [&](int first_split) {
#pragma unroll
      for (int i = 0; i < kSplitsPerPass; ++i) {
        const int s = first_split + i;
        pass_lse[i] = s < merged ? lse_row[s] : -INFINITY;
#pragma unroll
        for (int c = 0; c < kColumnsPerLane / 2; ++c)
          pass_value[i][c] = s < merged ? *reinterpret_cast<const float2*>(partial + s * kHeadDim + c * 64 + lane * 2)
                                      : make_float2(0.f, 0.f);
      }
    };
    load_pass(0);
    float lse_max = -INFINITY;
#pragma unroll
    for (int i = 0; i < kSplitsPerPass; ++i) lse_max = fmaxf(lse_max, pass_lse[i]);
    if (merged > kSplitsPerPass) {
      float rest_max = -INFINITY;
      for (int s = kSplitsPerPass + lane; s < merged; s += 32) rest_max = fmaxf(rest_max, lse_row[s]);
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
      if (first_split >= merged) break;
      load_pass(first_split);
    }

    if (!real) return;
    const float inverse_sum = 1.f / weight_sum;
    Element* destination = static_cast<Element*>(args.out) + head_row * kHeadDim;
#pragma unroll
    for (int i = 0; i < kColumnsPerLane / 2; ++i) {
      const uint32_t packed = Mma::pack(accumulated[2 * i] * inverse_sum, accumulated[2 * i + 1] * inverse_sum);
      *reinterpret_cast<uint32_t*>(destination + i * 64 + lane * 2) = packed;
    }
    if (lane == 0 && args.lse != nullptr) args.lse[head_row] = lse_max + __logf(weight_sum);
  };
  if constexpr (kAuto) {
    // One loop over a run-time trip count keeps one copy of the merge, so the dry pass fetches the
    // very instructions the real one runs.
#pragma unroll 1
    for (int pass = 0; pass < 2; ++pass) merge(pass == 1);
  } else {
    merge(true);
  }
}

}  // namespace splitkv::kernels
