// A deliberately simple second decode kernel: one CTA per (split, batch, *query* head), CUDA
// cores only, so a GQA group re-reads its kv head once per query head. It exists to prove the
// tuner is kernel-agnostic (it is registered and swept beside the main kernel) and as the
// "unpacked GQA" baseline that shows what packing the group into one CTA is worth. It writes the
// same partial layout as the main kernel, so the same combine kernel finishes it.
#pragma once

#include <cuda_runtime.h>

#include "splitkv/kernels/decode_split_kv.cuh"

namespace splitkv::kernels {

template <typename Element, int kHeadDim, bool kPaged>
__global__ void __launch_bounds__(kThreadsPerCta) decode_unpacked_gqa_kernel(const DecodeKernelArgs args) {
  using Mma = TensorCore<Element>;
  constexpr int kPerLane = kHeadDim / 32;
  wait_for_prerequisite_grids();
  allow_dependent_grids_to_launch();

  const int split = blockIdx.y;  // the slow axis, as in decode_split_kv_kernel
  const int batch_index = blockIdx.x / args.num_heads;
  const int head = blockIdx.x % args.num_heads;
  const int kv_head = head / args.group_size;
  const int seqlen = clamped_length(args, batch_index);
  const int splits = splits_of_sequence(args, batch_index, 0);  // fixed or explicit counts only
  const SplitRange range = split_range(seqlen, splits, split);
  const bool writes_final_output = active_splits(seqlen, splits) <= 1;
  if (range.begin >= range.end && !(split == 0 && seqlen == 0)) return;

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int64_t head_row = static_cast<int64_t>(batch_index) * args.num_heads + head;
  const Element* q = static_cast<const Element*>(args.q) + head_row * kHeadDim;
  float query[kPerLane];
  float output[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    query[i] = static_cast<float>(q[lane + 32 * i]) * args.scale_log2;
    output[i] = 0.f;
  }
  float running_max = -INFINITY;
  float running_sum = 0.f;
  for (int token = range.begin + warp; token < range.end; token += kWarpsPerCta) {
    const int64_t offset = token_row_offset<kPaged, kHeadDim>(args, batch_index, kv_head, token);
    const Element* k = static_cast<const Element*>(args.k) + offset;
    const Element* v = static_cast<const Element*>(args.v) + offset;
    float score = 0.f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) score += query[i] * static_cast<float>(k[lane + 32 * i]);
#pragma unroll
    for (int delta = 16; delta > 0; delta /= 2) score += __shfl_xor_sync(0xffffffffu, score, delta);
    const float new_max = fmaxf(running_max, score);
    const float rescale = exp2f(running_max - new_max);
    const float p = exp2f(score - new_max);
    running_sum = running_sum * rescale + p;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) output[i] = output[i] * rescale + p * static_cast<float>(v[lane + 32 * i]);
    running_max = new_max;
  }

  __shared__ float warp_max[kWarpsPerCta];
  __shared__ float warp_sum[kWarpsPerCta];
  __shared__ float warp_output[kWarpsPerCta][kHeadDim];
  if (lane == 0) {
    warp_max[warp] = running_max;
    warp_sum[warp] = running_sum;
  }
  __syncthreads();
  float cta_max = -INFINITY;
  for (int w = 0; w < kWarpsPerCta; ++w) cta_max = fmaxf(cta_max, warp_max[w]);
  const float safe_max = cta_max == -INFINITY ? 0.f : cta_max;
  float cta_sum = 0.f;
  for (int w = 0; w < kWarpsPerCta; ++w) cta_sum += warp_sum[w] * exp2f(warp_max[w] - safe_max);
  const float weight = cta_sum > 0.f ? exp2f(running_max - safe_max) / cta_sum : 0.f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) warp_output[warp][lane + 32 * i] = output[i] * weight;
  __syncthreads();
  for (int column = threadIdx.x; column < kHeadDim; column += kThreadsPerCta) {
    float sum = 0.f;
    for (int w = 0; w < kWarpsPerCta; ++w) sum += warp_output[w][column];
    if (writes_final_output) {
      static_cast<Element*>(args.out)[head_row * kHeadDim + column] = Mma::from_float(sum);
    } else {
      args.partial_out[(head_row * args.num_splits + split) * kHeadDim + column] = sum;
    }
  }
  if (threadIdx.x == 0) {
    const float lse = cta_sum > 0.f ? (safe_max + log2f(cta_sum)) * 0.69314718055994531f : -INFINITY;
    if (writes_final_output) {
      if (args.lse != nullptr) args.lse[head_row] = lse;
    } else {
      args.partial_lse[head_row * args.num_splits + split] = lse;
    }
  }
}

}  // namespace splitkv::kernels
