// The tuner's view of splitkv's own kernels: KernelUnderTest adapters that allocate rotating
// buffer sets for a sweep point and enqueue one decode step. The tuner sees only this
// interface, so a user's kernel registers the same way.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "splitkv/decode_attention.hpp"
#include "splitkv/split_partition.hpp"
#include "splitkv/tuner/device_random.cuh"
#include "splitkv/tuner/flashinfer_kernel.hpp"
#include "splitkv/tuner/gpu_sweep.hpp"
#include "splitkv/tuner/graph_timer.hpp"
#include "splitkv/tuner/splitkv_kernel.hpp"

namespace splitkv::tuner {

KernelOutcome cuda_outcome(int error) {
  if (error == cudaSuccess) return KernelOutcome::success();
  return KernelOutcome::failure(PointStatus::launch_failed, describe_cuda_error(static_cast<cudaError_t>(error)));
}

namespace {

KernelOutcome check(cudaError_t error) { return cuda_outcome(error); }

KernelOutcome allocate(void** pointer, std::size_t bytes) {
  const cudaError_t error = cudaMalloc(pointer, bytes);
  if (error == cudaSuccess) return KernelOutcome::success();
  *pointer = nullptr;
  cudaGetLastError();  // allocation failures are not sticky; clear them so the sweep goes on
  return KernelOutcome::failure(error == cudaErrorMemoryAllocation ? PointStatus::oom : PointStatus::launch_failed,
                                "cudaMalloc(" + std::to_string(bytes) + " bytes): " + describe_cuda_error(error));
}

}  // namespace

KernelOutcome device_upload(void** pointer, const std::vector<int32_t>& host) {
  if (KernelOutcome o = allocate(pointer, host.size() * sizeof(int32_t)); !o.ok()) return o;
  return check(cudaMemcpy(*pointer, host.data(), host.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
}

namespace {

// One sweep shape's device memory: `copies` independent K/V caches (what rotates), plus q,
// out, lengths, block table and workspace shared by all copies (small, as in a real step).
// The real lengths are the shape's generated batch (tuner/length_distribution.hpp); the
// longest is context_len, so copy c of a contiguous slot still ends inside its capacity.
class SplitkvKernel final : public KernelUnderTest {
 public:
  SplitkvKernel(std::string name, DecodeKernel kernel, std::unique_ptr<LaunchCustomizer> customizer = nullptr)
      : name_(std::move(name)), kernel_(kernel), customizer_(std::move(customizer)) {}
  ~SplitkvKernel() override { release(); }

  std::string name() const override { return name_; }

  bool supports(const SweepPoint& shape, std::string* reason) const override {
    DecodeParams params = shape.to_decode_params();
    // Shape-only check: stand-in aligned pointers, since nothing is allocated yet.
    params.q = params.k = params.v = reinterpret_cast<const void*>(256);
    if (params.kv_dtype == KvDtype::fp8_e4m3) params.k_descale = params.v_descale = reinterpret_cast<const float*>(256);
    params.out = params.workspace = reinterpret_cast<void*>(256);
    params.cache_seqlens = params.block_table = reinterpret_cast<const int32_t*>(256);
    std::string message;
    if (validate(params, &message) == Status::ok) return true;
    if (reason) *reason = message;
    return false;
  }

  KernelOutcome prepare(const SweepPoint& shape, int copies) override {
    release();
    shape_ = shape;
    base_ = shape.to_decode_params();
    const std::size_t kv_row = static_cast<std::size_t>(shape.num_kv_heads) * shape.head_dim;
    const std::size_t kv_elements =
        shape.layout == KvLayout::paged
            ? static_cast<std::size_t>(base_.num_pages) * shape.page_size * kv_row
            : static_cast<std::size_t>(shape.batch) * shape.cache_capacity * kv_row;
    const std::size_t q_elements = static_cast<std::size_t>(shape.batch) * shape.num_heads * shape.head_dim;
    const std::size_t element_bytes = 2;  // q and out
    kv_element_bytes_ = static_cast<std::size_t>(shape.kv_element_bytes());
    const bool fp8 = shape.kv_dtype == KvDtype::fp8_e4m3;

    copies_per_allocation_ = copies_per_allocation(shape);
    copy_offset_elements_ = static_cast<std::size_t>(shape.context_len) * kv_row;
    const int allocations = (copies + copies_per_allocation_ - 1) / copies_per_allocation_;
    for (int a = 0; a < allocations; ++a) {
      void* k = nullptr;
      void* v = nullptr;
      if (KernelOutcome o = allocate(&k, kv_elements * kv_element_bytes_); !o.ok()) return o;
      k_.push_back(k);
      if (KernelOutcome o = allocate(&v, kv_elements * kv_element_bytes_); !o.ok()) return o;
      v_.push_back(v);
      if (fp8) {
        if (KernelOutcome o = check(fill_e4m3_codes(k, kv_elements, 2 * a + 1, nullptr)); !o.ok()) return o;
        if (KernelOutcome o = check(fill_e4m3_codes(v, kv_elements, 2 * a + 2, nullptr)); !o.ok()) return o;
      } else {
        if (KernelOutcome o = check(fill_uniform(k, kv_elements, shape.dtype, 2 * a + 1, nullptr)); !o.ok()) return o;
        if (KernelOutcome o = check(fill_uniform(v, kv_elements, shape.dtype, 2 * a + 2, nullptr)); !o.ok()) return o;
      }
    }
    if (fp8) {
      // Shared by every copy, like q: [batch, num_kv_heads] each, a few KB.
      const std::size_t descales = static_cast<std::size_t>(shape.batch) * shape.num_kv_heads;
      if (KernelOutcome o = allocate(&descales_, 2 * descales * sizeof(float)); !o.ok()) return o;
      if (KernelOutcome o = check(fill_range(static_cast<float*>(descales_), 2 * descales, 0.25f, 4.f, 11, nullptr));
          !o.ok())
        return o;
      descale_count_ = descales;
    }
    if (KernelOutcome o = allocate(&q_, q_elements * element_bytes); !o.ok()) return o;
    if (KernelOutcome o = allocate(&out_, q_elements * element_bytes); !o.ok()) return o;
    if (KernelOutcome o = check(fill_uniform(q_, q_elements, shape.dtype, 7, nullptr)); !o.ok()) return o;

    const std::vector<int32_t> lengths = shape.real_lengths();
    if (KernelOutcome o = device_upload(&seqlens_, lengths); !o.ok()) return o;
    if (shape.layout == KvLayout::paged) {
      // Each sequence gets the pages of its own length from the shape's shuffled pool; table
      // slots past the real length are never read.
      const std::vector<int32_t> pool = shuffled_page_pool(shape);
      std::vector<int32_t> table(static_cast<std::size_t>(shape.batch) * base_.max_pages_per_seq, 0);
      std::size_t next = 0;
      for (int b = 0; b < shape.batch; ++b) {
        const int used = ceil_div(lengths[b], shape.page_size);
        for (int p = 0; p < used; ++p) table[static_cast<std::size_t>(b) * base_.max_pages_per_seq + p] = pool.at(next++);
      }
      if (KernelOutcome o = device_upload(&block_table_, table); !o.ok()) return o;
    }
    const std::size_t workspace_bytes = decode_workspace_bytes(base_);  // base_ holds the widest split count
    if (workspace_bytes > 0) {
      if (KernelOutcome o = allocate(&workspace_, workspace_bytes); !o.ok()) return o;
    }
    if (customizer_) {
      if (KernelOutcome o = customizer_->prepare(shape, lengths, bound_params(0)); !o.ok()) return o;
    }
    return check(cudaDeviceSynchronize());
  }

  KernelOutcome launch(int copy_index, int num_splits, void* stream) override {
    DecodeParams params = bound_params(copy_index);
    params.num_splits = num_splits;
    if (customizer_) {
      if (KernelOutcome o = customizer_->before_launch(params, stream); !o.ok()) return o;
    }
    const Status status = decode_attention(params, kernel_, static_cast<cudaStream_t>(stream));
    if (status == Status::ok) return KernelOutcome::success();
    return KernelOutcome::failure(status == Status::cuda_error ? PointStatus::launch_failed : PointStatus::invalid,
                                  last_error_message());
  }

  void release() override {
    if (customizer_) customizer_->release();
    for (void* p : k_) cudaFree(p);
    for (void* p : v_) cudaFree(p);
    k_.clear();
    v_.clear();
    for (void** p : {&q_, &out_, &seqlens_, &block_table_, &workspace_, &descales_}) {
      cudaFree(*p);
      *p = nullptr;
    }
  }

 private:
  // The shape's params bound to buffer set `copy_index`.
  DecodeParams bound_params(int copy_index) const {
    DecodeParams params = base_;
    params.q = q_;
    const std::size_t offset_bytes =
        (copy_index % copies_per_allocation_) * copy_offset_elements_ * kv_element_bytes_;
    params.k = static_cast<const char*>(k_.at(copy_index / copies_per_allocation_)) + offset_bytes;
    params.v = static_cast<const char*>(v_.at(copy_index / copies_per_allocation_)) + offset_bytes;
    params.out = out_;
    params.cache_seqlens = static_cast<const int32_t*>(seqlens_);
    params.block_table = static_cast<const int32_t*>(block_table_);
    params.workspace = workspace_;
    if (descales_ != nullptr) {
      params.k_descale = static_cast<const float*>(descales_);
      params.v_descale = static_cast<const float*>(descales_) + descale_count_;
    }
    return params;
  }

  std::string name_;
  DecodeKernel kernel_;
  std::unique_ptr<LaunchCustomizer> customizer_;
  SweepPoint shape_;
  DecodeParams base_;
  std::vector<void*> k_, v_;  // one entry per allocation, each holding copies_per_allocation_ copies
  int copies_per_allocation_ = 1;
  std::size_t copy_offset_elements_ = 0;
  void* q_ = nullptr;
  void* out_ = nullptr;
  void* seqlens_ = nullptr;
  void* block_table_ = nullptr;
  void* workspace_ = nullptr;
  void* descales_ = nullptr;  // fp8: k_descale then v_descale
  std::size_t descale_count_ = 0;
  std::size_t kv_element_bytes_ = 2;
};

}  // namespace

std::unique_ptr<KernelUnderTest> make_splitkv_kernel(std::string name, DecodeKernel kernel,
                                                     std::unique_ptr<LaunchCustomizer> customizer) {
  return std::make_unique<SplitkvKernel>(std::move(name), kernel, std::move(customizer));
}

void register_gpu_kernels(KernelRegistry& registry) {
  registry.add(kDefaultKernelName,
               "splitkv packed-GQA split-KV kernel (tensor cores, whole query group per CTA) + combine",
               [] { return std::make_unique<SplitkvKernel>(kDefaultKernelName, DecodeKernel::packed_gqa); });
  registry.add("unpacked_gqa",
               "baseline: one CTA per query head on CUDA cores, K/V re-read per head of a group",
               [] { return std::make_unique<SplitkvKernel>("unpacked_gqa", DecodeKernel::unpacked_gqa); });
  register_flashinfer_kernels(registry);
  register_fault_kernel_if_enabled(registry);
}

}  // namespace splitkv::tuner
