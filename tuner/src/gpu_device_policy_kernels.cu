// CUDA side of device_policy_kernels.hpp: three LaunchCustomizers on splitkv's kernel, each
// running the host half of its policy through DevicePolicies.
#include "splitkv/tuner/device_policy_kernels.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "splitkv/split_partition.hpp"
#include "splitkv/tuner/splitkv_kernel.hpp"

namespace splitkv::tuner {
namespace {

constexpr int kPrepareThreads = 256;

// FA3's prepare kernel on our lengths: one CTA sums m_blocks * n_blocks over the batch, then
// every sequence takes fa3_sequence_splits. Enqueued before each decode launch, as FA3 does.
__global__ void fa3_dynamic_prepare(const int32_t* cache_seqlens, int batch, int block_n, int m_blocks,
                                    int static_splits, int num_kv_heads, int num_sms, int32_t* splits_out) {
  __shared__ long long partial[kPrepareThreads];
  long long sum = 0;
  for (int b = threadIdx.x; b < batch; b += blockDim.x) {
    const int length = cache_seqlens[b] > 1 ? cache_seqlens[b] : 1;
    sum += (long long)m_blocks * ceil_div(length, block_n);
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const int blocks_per_sm = fa3_blocks_per_sm(partial[0], num_kv_heads, num_sms);
  for (int b = threadIdx.x; b < batch; b += blockDim.x) {
    const int length = cache_seqlens[b] > 1 ? cache_seqlens[b] : 1;
    splits_out[b] = fa3_sequence_splits(ceil_div(length, block_n), blocks_per_sm, static_splits);
  }
}

int device_sm_count(std::string* name = nullptr) {
  int device = 0;
  cudaDeviceProp properties{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&properties, device) != cudaSuccess) return 0;
  if (name) *name = properties.name;
  return properties.multiProcessorCount;
}

// A customizer that owns one device buffer: uploaded in prepare(), freed in release(); and the
// grid bound it caps the sweep's num_splits with.
class DeviceBufferCustomizer : public LaunchCustomizer {
 public:
  ~DeviceBufferCustomizer() override { release(); }
  void release() override {
    cudaFree(buffer_);
    buffer_ = nullptr;
  }

 protected:
  KernelOutcome upload(const std::vector<int32_t>& words) {
    release();
    return device_upload(&buffer_, words);
  }
  int capped(int cap) const { return std::max(1, std::min(cap, bound_)); }
  void* buffer_ = nullptr;
  int bound_ = 1;
};

// num_splits = auto with the policy's table (filled once per shape, uploaded once), bounded by
// its largest entry.
class AutoCustomizer final : public DeviceBufferCustomizer {
 public:
  explicit AutoCustomizer(const DevicePolicies& policies) : table_for_(policies.auto_splits) {}
  KernelOutcome prepare(const SweepPoint& shape, const std::vector<int32_t>&, const DecodeParams& params) override {
    std::string name;
    const int sms = device_sm_count(&name);
    const AutoSplitsTable table = table_for_(shape, name, sms);
    bound_ = auto_grid_bound(table, shape.batch, params.capacity_tokens());
    std::vector<int32_t> words(sizeof(table) / sizeof(int32_t));
    std::memcpy(words.data(), &table, sizeof(table));
    return upload(words);
  }
  KernelOutcome before_launch(DecodeParams& params, void*) override {
    params.per_sequence_splits = true;
    params.auto_splits = static_cast<const AutoSplitsTable*>(buffer_);
    params.num_splits = capped(params.num_splits);
    return KernelOutcome::success();
  }

 private:
  std::function<AutoSplitsTable(const SweepPoint&, const std::string&, int)> table_for_;
};

// Explicit per-sequence counts in device memory (FA3's prepare kernel writes them on every
// launch; FlashInfer's plan is uploaded once).
class PerSequenceCustomizer : public DeviceBufferCustomizer {
 protected:
  int32_t* splits() const { return static_cast<int32_t*>(buffer_); }
};

class Fa3DynamicCustomizer final : public PerSequenceCustomizer {
 public:
  explicit Fa3DynamicCustomizer(const DevicePolicies& policies) : inputs_for_(policies.fa3_dynamic) {}
  KernelOutcome prepare(const SweepPoint& shape, const std::vector<int32_t>& lengths, const DecodeParams& params) override {
    sms_ = device_sm_count();
    inputs_ = inputs_for_(shape, sms_);
    bound_ = inputs_.static_splits;
    kv_heads_ = shape.num_kv_heads;
    seqlens_ = params.cache_seqlens;
    batch_ = shape.batch;
    return upload(std::vector<int32_t>(lengths.size(), 1));
  }
  KernelOutcome before_launch(DecodeParams& params, void* stream) override {
    if (inputs_.dynamic) {
      const int error = enqueue_fa3_dynamic_prepare(seqlens_, batch_, inputs_, kv_heads_, sms_, splits(), stream);
      if (KernelOutcome o = cuda_outcome(error); !o.ok()) return o;
      params.splits_per_sequence = splits();
    }
    // Not dynamic (batch > 992): every sequence takes the static count, as FA3 launches it.
    params.num_splits = capped(params.num_splits);
    return KernelOutcome::success();
  }

 private:
  std::function<Fa3DynamicInputs(const SweepPoint&, int)> inputs_for_;
  Fa3DynamicInputs inputs_{};
  const int32_t* seqlens_ = nullptr;
  int batch_ = 0, kv_heads_ = 1, sms_ = 1;
};

class FlashinferPlanCustomizer final : public PerSequenceCustomizer {
 public:
  explicit FlashinferPlanCustomizer(const DevicePolicies& policies) : plan_for_(policies.flashinfer_plan) {}
  KernelOutcome prepare(const SweepPoint& shape, const std::vector<int32_t>& lengths, const DecodeParams&) override {
    const std::vector<int> plan = plan_for_(shape, lengths, device_sm_count());
    bound_ = plan.empty() ? 1 : *std::max_element(plan.begin(), plan.end());
    return upload(std::vector<int32_t>(plan.begin(), plan.end()));
  }
  KernelOutcome before_launch(DecodeParams& params, void*) override {
    params.splits_per_sequence = splits();
    params.num_splits = capped(params.num_splits);
    return KernelOutcome::success();
  }

 private:
  std::function<std::vector<int>(const SweepPoint&, const std::vector<int32_t>&, int)> plan_for_;
};

// Registers `name` when its policy was given: each kernel created gets its own customizer, on a
// copy of the policies (the registry outlives the caller's DevicePolicies).
template <class Customizer, class Policy>
void add(KernelRegistry& registry, const Policy& policy, const DevicePolicies& policies, const std::string& name,
         std::string description) {
  if (!policy) return;
  registry.add(name, std::move(description), [name, policies] {
    return make_splitkv_kernel(name, DecodeKernel::packed_gqa, std::make_unique<Customizer>(policies));
  });
}

}  // namespace

int enqueue_fa3_dynamic_prepare(const std::int32_t* device_lengths, int batch, const Fa3DynamicInputs& inputs,
                                int num_kv_heads, int num_sms, std::int32_t* device_splits, void* stream) {
  fa3_dynamic_prepare<<<1, kPrepareThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      device_lengths, batch, inputs.block_n, inputs.m_blocks, inputs.static_splits, num_kv_heads, num_sms,
      device_splits);
  return static_cast<int>(cudaGetLastError());
}

void register_device_policy_kernels(KernelRegistry& registry, const DevicePolicies& policies) {
  add<AutoCustomizer>(registry, policies.auto_splits, policies, "splitkv_auto",
                      "splitkv with num_splits = auto: the split count this GPU's table gives the batch's effective batch "
                      "and max real length, chosen on the device; "
                      "num_splits is the graph's cap");
  add<Fa3DynamicCustomizer>(registry, policies.fa3_dynamic, policies, "fa3_dynamic",
                            "splitkv with FlashAttention 3's dynamic per-sequence rule computed on the device; "
                            "num_splits is the graph's cap");
  add<FlashinferPlanCustomizer>(registry, policies.flashinfer_plan, policies, "flashinfer_plan",
                                "splitkv with FlashInfer's host plan on the exact lengths (per-sequence splits); "
                                "num_splits is the graph's cap");
}

}  // namespace splitkv::tuner
