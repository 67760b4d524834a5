// Device-side split policies as sweepable kernels (issue #7). Each is splitkv's packed-GQA
// kernel on the tuner's buffers (tuner::make_splitkv_kernel) with a per-sequence schedule;
// the sweep's num_splits is the CUDA-graph cap (the grid's upper bound), not a split count:
//   splitkv_auto     num_splits = auto with the AutoSplitsTable of NumSplitsPolicy (the
//                    compiled-in table for this GPU), bound min(cap, auto_grid_bound)
//   fa3_dynamic      FlashAttention 3's dynamic rule computed on the device by a prepare
//                    kernel (fa3_dynamic_rule.hpp) into splits_per_sequence; grid = FA3's
//                    static bound on the capacity, capped
//   flashinfer_plan  FlashInfer's plan on the host with the exact lengths, uploaded once
//                    into splits_per_sequence; grid = its largest count, capped
// None is in the default kernel list; `splitkv sweep --kernel splitkv_auto,...` selects them.
#pragma once

#include <cstdint>

#include "splitkv/heuristics/baseline_policies.hpp"
#include "splitkv/tuner/kernel_under_test.hpp"

namespace splitkv::heuristics {

// Adds the three kernels; nothing in a build without CUDA.
void register_device_policy_kernels(tuner::KernelRegistry& registry);

// Enqueues fa3_dynamic's prepare kernel on `stream` (a cudaStream_t): per-sequence split
// counts from device lengths into `device_splits` [batch], by fa3_dynamic_rule.hpp. Returns the
// launch's cudaError_t as an int (cudaErrorNotSupported, 801, in a build without CUDA). What
// fa3_dynamic enqueues before every decode launch; public so a GPU test can compare it with
// fa3_dynamic_splits_per_sequence on the host.
int enqueue_fa3_dynamic_prepare(const std::int32_t* device_lengths, int batch, const Fa3DynamicInputs& inputs,
                                int num_kv_heads, int num_sms, std::int32_t* device_splits, void* stream);

// Every kernel this build can time: the tuner's (register_gpu_kernels) plus the above.
void register_all_kernels(tuner::KernelRegistry& registry);

}  // namespace splitkv::heuristics
