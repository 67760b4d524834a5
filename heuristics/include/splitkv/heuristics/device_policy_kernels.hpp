// Device-side split policies as sweepable kernels (issue #7). Each is splitkv's packed-GQA
// kernel on the tuner's buffers (tuner::make_splitkv_kernel) with a per-sequence schedule;
// the sweep's num_splits is the CUDA-graph cap (the grid's upper bound), not a split count:
//   splitkv_auto     per_sequence_splits with splits_by_length from NumSplitsPolicy (the
//                    compiled-in table for this GPU), grid min(cap, per_sequence_grid_bound)
//   fa3_dynamic      FlashAttention 3's dynamic rule computed on the device by a prepare
//                    kernel (fa3_dynamic_rule.hpp) into splits_per_sequence; grid = FA3's
//                    static bound on the capacity, capped
//   flashinfer_plan  FlashInfer's plan on the host with the exact lengths, uploaded once
//                    into splits_per_sequence; grid = its largest count, capped
// None is in the default kernel list; `splitkv sweep --kernel splitkv_auto,...` selects them.
#pragma once

#include "splitkv/tuner/kernel_under_test.hpp"

namespace splitkv::heuristics {

// Adds the three kernels; nothing in a build without CUDA.
void register_device_policy_kernels(tuner::KernelRegistry& registry);

// Every kernel this build can time: the tuner's (register_gpu_kernels) plus the above.
void register_all_kernels(tuner::KernelRegistry& registry);

}  // namespace splitkv::heuristics
