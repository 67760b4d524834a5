// The device-side split policies as sweep kernels, with the heuristics' host halves plugged in:
// splitkv_auto takes NumSplitsPolicy's table for the GPU and the point's KV cache, fa3_dynamic
// FA3's inputs and flashinfer_plan FlashInfer's plan (baseline_policies.hpp). The kernels are the
// tuner's (splitkv/tuner/device_policy_kernels.hpp): they need its CUDA adapters, and the tuner may
// not depend on these policies, so they come to it as functions.
#pragma once

#include "splitkv/tuner/device_policy_kernels.hpp"
#include "splitkv/tuner/kernel_under_test.hpp"

namespace splitkv::heuristics {

// The three policies as the tuner takes them.
tuner::DevicePolicies device_policies();

// Adds the three kernels; nothing in a build without CUDA.
void register_device_policy_kernels(tuner::KernelRegistry& registry);

// Every kernel this build can time: the tuner's (register_gpu_kernels) plus the above.
void register_all_kernels(tuner::KernelRegistry& registry);

// The prepare kernel fa3_dynamic enqueues before every launch (a GPU test compares it with
// fa3_dynamic_splits_per_sequence).
using tuner::enqueue_fa3_dynamic_prepare;

}  // namespace splitkv::heuristics
