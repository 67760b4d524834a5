// The host halves of the device-side policies, handed to the tuner's policy kernels. Plain C++:
// the CUDA side is tuner/src/gpu_device_policy_kernels.cu, and a build without CUDA registers
// nothing (tuner/src/device_policy_kernels_unavailable.cpp).
#include "splitkv/heuristics/device_policy_kernels.hpp"

#include <vector>

#include "splitkv/heuristics/baseline_policies.hpp"
#include "splitkv/heuristics/measurements.hpp"
#include "splitkv/heuristics/ragged_report.hpp"
#include "splitkv/num_splits.hpp"
#include "splitkv/tuner/gpu_sweep.hpp"

namespace splitkv::heuristics {
namespace {

DecodeShape host_shape(const tuner::SweepPoint& shape, int num_sms) {
  MeasuredShape measured;
  measured.point = shape;
  return decode_shape(measured, num_sms);
}

}  // namespace

tuner::DevicePolicies device_policies() {
  tuner::DevicePolicies policies;
  policies.auto_splits = [](const tuner::SweepPoint& shape, const std::string& device_name, int num_sms) {
    AutoSplitsTable table;
    NumSplitsPolicy::for_device(device_name, num_sms, num_splits_kv_dtype(kv_dtype_class_of(shape)))
        .fill_auto_splits(num_splits_shape(shape, false), table);
    return table;
  };
  policies.fa3_dynamic = [](const tuner::SweepPoint& shape, int num_sms) {
    return fa3_dynamic_inputs(host_shape(shape, num_sms));
  };
  policies.flashinfer_plan = [](const tuner::SweepPoint& shape, const std::vector<std::int32_t>& lengths, int num_sms) {
    return flashinfer_splits_per_sequence(host_shape(shape, num_sms), std::vector<int>(lengths.begin(), lengths.end()));
  };
  return policies;
}

void register_device_policy_kernels(tuner::KernelRegistry& registry) {
  tuner::register_device_policy_kernels(registry, device_policies());
}

void register_all_kernels(tuner::KernelRegistry& registry) {
  tuner::register_gpu_kernels(registry);
  register_device_policy_kernels(registry);
}

}  // namespace splitkv::heuristics
