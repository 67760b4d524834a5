// Device-side split policies as sweepable kernels. Each is splitkv's packed-GQA kernel on the
// tuner's buffers (make_splitkv_kernel) with a per-sequence schedule; the sweep's num_splits is
// the CUDA-graph cap (the grid's upper bound), not a split count:
//   splitkv_auto     num_splits = auto with the AutoSplitsTable that DevicePolicies::auto_splits
//                    gives for the shape, bound min(cap, auto_grid_bound)
//   fa3_dynamic      FlashAttention 3's dynamic rule computed on the device by a prepare kernel
//                    (fa3_dynamic_rule.hpp) into splits_per_sequence, on the inputs
//                    DevicePolicies::fa3_dynamic gives; grid = FA3's static bound, capped
//   flashinfer_plan  the per-sequence plan DevicePolicies::flashinfer_plan makes on the host from
//                    the exact lengths, uploaded once into splits_per_sequence; grid = its
//                    largest count, capped
// The tuner runs the schedules on the device; what they are on the host is the heuristics'
// business, and comes in through DevicePolicies so that this layer knows none of them.
// None is in the default kernel list; `splitkv sweep --kernel splitkv_auto,...` selects them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "splitkv/decode_params.hpp"
#include "splitkv/tuner/fa3_dynamic_rule.hpp"
#include "splitkv/tuner/kernel_under_test.hpp"
#include "splitkv/tuner/sweep_point.hpp"

namespace splitkv::tuner {

// The host half of each policy. A policy left empty registers no kernel.
struct DevicePolicies {
  // The num_splits = auto table for `shape` on the device of that name and SM count.
  std::function<AutoSplitsTable(const SweepPoint& shape, const std::string& device_name, int num_sms)> auto_splits;
  // FA3's prepare-kernel inputs for `shape` on `num_sms` SMs.
  std::function<Fa3DynamicInputs(const SweepPoint& shape, int num_sms)> fa3_dynamic;
  // FlashInfer's split count for each sequence of `lengths` (the batch's real lengths).
  std::function<std::vector<int>(const SweepPoint& shape, const std::vector<std::int32_t>& lengths, int num_sms)>
      flashinfer_plan;
};

// Adds the kernels of the policies given; nothing in a build without CUDA.
void register_device_policy_kernels(KernelRegistry& registry, const DevicePolicies& policies);

// Enqueues fa3_dynamic's prepare kernel on `stream` (a cudaStream_t): per-sequence split
// counts from device lengths into `device_splits` [batch], by fa3_dynamic_rule.hpp. Returns the
// launch's cudaError_t as an int (cudaErrorNotSupported, 801, in a build without CUDA). What
// fa3_dynamic enqueues before every decode launch; public so a GPU test can compare it with
// the host rule.
int enqueue_fa3_dynamic_prepare(const std::int32_t* device_lengths, int batch, const Fa3DynamicInputs& inputs,
                                int num_kv_heads, int num_sms, std::int32_t* device_splits, void* stream);

}  // namespace splitkv::tuner
