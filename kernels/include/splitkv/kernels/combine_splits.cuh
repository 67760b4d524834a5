// The combine kernel: merges the partials of every (sequence, query head) row with more than one
// live split, one warp per row, after the split kernel (programmatic dependent launch). Runs when
// the split kernel cannot merge in place: no merge semaphores given, or the unpacked-GQA kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "splitkv/kernels/decode_split_kv.cuh"
#include "splitkv/kernels/merge_partials.cuh"

namespace splitkv::kernels {

inline constexpr int kCombineRowsPerCta = 4;
static_assert(kCombineRowsPerCta * 32 == kThreadsPerCta, "batch_auto_split_count reduces over kThreadsPerCta threads");

template <typename Element, int kHeadDim, bool kAuto>
__global__ void __launch_bounds__(kCombineRowsPerCta * 32)
    combine_splits_kernel(const DecodeKernelArgs args, int total_rows, const AutoTableArgument<kAuto> auto_table) {
  // 64 registers of partials in flight per lane at every head size: 16 splits at d = 128.
  constexpr int kSplitsPerPass = 64 / (kHeadDim / 32);
  allow_dependent_grids_to_launch();

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

  merge_partial_row<Element, kHeadDim, kSplitsPerPass>(
      args.partial_lse + head_row * args.num_splits, args.partial_out + head_row * args.num_splits * kHeadDim, live,
      static_cast<Element*>(args.out) + head_row * kHeadDim, args.lse != nullptr ? args.lse + head_row : nullptr);
}

}  // namespace splitkv::kernels
