// The device-side split policies (heuristics/device_policy_kernels.hpp) on a GPU: FA3's
// prepare kernel agrees with the host rule on ragged batches, and the three policy kernels
// prepare and launch on ragged contiguous and paged batches without error.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpu_test_support.cuh"
#include "splitkv/heuristics/baseline_policies.hpp"
#include "splitkv/heuristics/device_policy_kernels.hpp"
#include "splitkv/tuner/length_distribution.hpp"

namespace splitkv {
namespace {

TEST(DevicePolicies, Fa3PrepareKernelMatchesTheHostRule) {
  SPLITKV_REQUIRE_GPU();
  std::mt19937 random(7);
  for (int batch : {1, 3, 16, 64, 300, 992}) {  // FA3 plans dynamically up to batch 992
    for (int page : {0, 16}) {
      heuristics::DecodeShape shape;
      shape.batch = batch;
      shape.num_heads = 32;
      shape.num_kv_heads = 8;
      shape.head_dim = 128;
      shape.capacity_tokens = 65536;
      shape.page_size = page;
      shape.num_sms = 132;
      std::vector<int> lengths(std::size_t(batch), 0);
      for (int& length : lengths) length = 1 + int(random() % 65536);
      const std::vector<int> expected = heuristics::fa3_dynamic_splits_per_sequence(shape, lengths);
      const heuristics::Fa3DynamicInputs inputs = heuristics::fa3_dynamic_inputs(shape);

      const std::vector<std::int32_t> host(lengths.begin(), lengths.end());
      std::int32_t* device_lengths = nullptr;
      std::int32_t* device_splits = nullptr;
      SPLITKV_CUDA_OK(cudaMalloc(&device_lengths, host.size() * sizeof(std::int32_t)));
      SPLITKV_CUDA_OK(cudaMalloc(&device_splits, host.size() * sizeof(std::int32_t)));
      SPLITKV_CUDA_OK(cudaMemcpy(device_lengths, host.data(), host.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
      ASSERT_EQ(0, heuristics::enqueue_fa3_dynamic_prepare(device_lengths, batch, inputs, shape.num_kv_heads,
                                                            shape.num_sms, device_splits, nullptr));
      std::vector<std::int32_t> got(host.size(), 0);
      SPLITKV_CUDA_OK(cudaMemcpy(got.data(), device_splits, got.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
      cudaFree(device_lengths);
      cudaFree(device_splits);
      for (int b = 0; b < batch; ++b) {
        ASSERT_EQ(got[std::size_t(b)], expected[std::size_t(b)]) << "batch " << batch << " page " << page << " b " << b;
      }
    }
  }
}

TEST(DevicePolicies, PolicyKernelsRunOnRaggedBatches) {
  SPLITKV_REQUIRE_GPU();
  tuner::KernelRegistry registry;
  heuristics::register_all_kernels(registry);
  cudaStream_t stream = nullptr;
  SPLITKV_CUDA_OK(cudaStreamCreate(&stream));
  for (const char* name : {"splitkv_auto", "fa3_dynamic", "flashinfer_plan"}) {
    for (int page : {0, 16}) {
      for (tuner::LengthKind kind : {tuner::LengthKind::uniform, tuner::LengthKind::long_tail}) {
        tuner::SweepPoint point;
        point.layout = page > 0 ? KvLayout::paged : KvLayout::contiguous;
        point.page_size = page;
        point.batch = 8;
        point.num_heads = 32;
        point.num_kv_heads = 8;
        point.head_dim = 128;
        point.context_len = 4096;
        point.cache_capacity = 16384;
        point.length_distribution = {kind, {}};
        point.num_splits = 64;  // the graph's cap
        point.lengths = std::make_shared<const std::vector<std::int32_t>>(tuner::sequence_lengths(point, {}));
        std::unique_ptr<tuner::KernelUnderTest> kernel = registry.create(name);
        const std::string where = std::string(name) + " " + point.shape_key();
        std::string reason;
        ASSERT_TRUE(kernel->supports(point, &reason)) << where << ": " << reason;
        tuner::KernelOutcome outcome = kernel->prepare(point, 2);
        ASSERT_TRUE(outcome.ok()) << where << ": " << outcome.message;
        for (int copy : {0, 1}) {
          outcome = kernel->launch(copy, point.num_splits, stream);
          ASSERT_TRUE(outcome.ok()) << where << ": " << outcome.message;
        }
        SPLITKV_CUDA_OK(cudaStreamSynchronize(stream));
        kernel->release();
      }
    }
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace splitkv
