// FlashAttention 3's per-sequence dynamic split rule (flash_prepare_scheduler.cu, re-implemented
// from the published algorithm; DESIGN §1), shared verbatim by the host baseline
// (heuristics/src/baseline_policies.cpp) and the device prepare kernel of the fa3_dynamic sweep
// kernel (gpu_device_policy_kernels.cu), so the two cannot disagree. Here, below both, because
// the device side is the tuner's and the tuner may not include the heuristics.
#pragma once

#include <math.h>

#include "splitkv/split_partition.hpp"

namespace splitkv::tuner {

// What FA3's prepare kernel needs from the host: its kBlockN, m blocks, static bound on the
// capacity, and whether it plans dynamically at all (heuristics::fa3_dynamic_inputs fills it).
struct Fa3DynamicInputs {
  int block_n;
  int m_blocks;
  int static_splits;
  bool dynamic;
};

// blocks_per_sm = ceil(1.1 * total_blocks * kv_heads / SMs) in float arithmetic, as FA3 does;
// total_blocks = sum over the batch of m_blocks * n_blocks(length).
SPLITKV_HOST_DEVICE int fa3_blocks_per_sm(long long total_blocks, int num_kv_heads, int num_sms) {
  const float per_sm = float(total_blocks) * 1.1f * float(num_kv_heads) / float(num_sms > 0 ? num_sms : 1);
  const int blocks = int(ceilf(per_sm));
  return blocks > 1 ? blocks : 1;
}

// One sequence's split count: clamp(ceil(n_blocks / blocks_per_sm), 1, static_splits).
SPLITKV_HOST_DEVICE int fa3_sequence_splits(int n_blocks, int blocks_per_sm, int static_splits) {
  const int splits = ceil_div(n_blocks, blocks_per_sm > 0 ? blocks_per_sm : 1);
  const int capped = splits < static_splits ? splits : static_splits;
  return capped > 1 ? capped : 1;
}

}  // namespace splitkv::tuner
