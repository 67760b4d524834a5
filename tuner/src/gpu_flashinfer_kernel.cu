// CUDA side of flashinfer_kernel.hpp: FlashInfer's header-only batch decode (decode.cuh,
// scheduler.cuh) behind KernelUnderTest, instantiated as FlashInfer's own batch-decode JIT module
// instantiates it (csrc/batch_decode*.jinja): bf16 q, KV and output, int32 indices, the default
// attention variant, no positional encoding in the kernel, head_dim 64/128/256, and the GQA group
// sizes its dispatch knows (1, 2, 3, 4, 6, 8, 16).
//
// Like splitkv's adapters (gpu_kernel_adapters.cu): `copies` K/V page pools filled with fresh
// random data rotate; q, out, the page table, the schedules and the workspace are shared by all
// copies, as in a real step. Every host-side decision happens in prepare(): launch() only fills a
// params struct and calls FlashInfer's launcher, so it can be captured in a CUDA graph.
#include "splitkv/tuner/flashinfer_kernel.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <flashinfer/attention/decode.cuh>
#include <flashinfer/attention/default_decode_params.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/attention/variants.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "splitkv/split_partition.hpp"
#include "splitkv/tuner/device_random.cuh"
#include "splitkv/tuner/graph_timer.hpp"
#include "splitkv/tuner/splitkv_kernel.hpp"

namespace splitkv::tuner {
namespace {

using Element = __nv_bfloat16;
using IdType = std::int32_t;
using Params = flashinfer::BatchDecodeParams<Element, Element, Element, IdType>;
// FlashInfer's DefaultAttention as its batch-decode module names it for plain decode: no custom
// mask, no sliding window, no logits soft cap, no ALiBi.
using Variant = flashinfer::DefaultAttention</*custom_mask=*/false, /*sliding_window=*/false,
                                             /*logits_soft_cap=*/false, /*alibi=*/false>;
constexpr flashinfer::PosEncodingMode kNoRope = flashinfer::PosEncodingMode::kNone;

// Serving engines capture FlashInfer's decode in CUDA graphs with use_cuda_graph=True, which
// plans in CUDA-graph mode: the grid padded to FlashInfer's resident-CTA budget, and the split
// kernel plus merge whenever the batch leaves CTAs idle. The sweep times graphs, so the
// heuristic kernel plans that way.
constexpr bool kPlanForCudaGraphs = true;

// DISPATCH_GQA_GROUP_SIZE in flashinfer/utils.cuh; any other group size throws there.
constexpr int kGroupSizes[] = {1, 2, 3, 4, 6, 8, 16};

template <class Body>
cudaError_t with_head_dim(int head_dim, Body&& body) {
  switch (head_dim) {
    case 64: return body(std::integral_constant<std::uint32_t, 64>{});
    case 128: return body(std::integral_constant<std::uint32_t, 128>{});
    case 256: return body(std::integral_constant<std::uint32_t, 256>{});
    default: return cudaErrorInvalidValue;
  }
}

template <class Body>
cudaError_t with_group_size(int group, Body&& body) {
  switch (group) {
    case 1: return body(std::integral_constant<std::uint32_t, 1>{});
    case 2: return body(std::integral_constant<std::uint32_t, 2>{});
    case 3: return body(std::integral_constant<std::uint32_t, 3>{});
    case 4: return body(std::integral_constant<std::uint32_t, 4>{});
    case 6: return body(std::integral_constant<std::uint32_t, 6>{});
    case 8: return body(std::integral_constant<std::uint32_t, 8>{});
    case 16: return body(std::integral_constant<std::uint32_t, 16>{});
    default: return cudaErrorInvalidValue;
  }
}

// FlashInfer's launcher: the split kernel on `params`, then VariableLengthMergeStates over
// params.o_indptr when tmp_v is given (partitioned), else one pass writing params.o directly.
cudaError_t run_batch_decode(int head_dim, const Params& params, Element* tmp_v, float* tmp_s, bool enable_pdl,
                             cudaStream_t stream) {
  return with_head_dim(head_dim, [&](auto dim) {
    return flashinfer::BatchDecodeWithPagedKVCacheDispatched<decltype(dim)::value, kNoRope, Variant>(
        params, tmp_v, tmp_s, enable_pdl, stream);
  });
}

// What FlashInfer's work estimation (the function its DecodePlan calls) says for the batch.
struct WorkEstimate {
  bool split_kv = false;
  std::uint32_t max_grid_size = 0;  // resident CTAs: occupancy of its kernel x SMs
  std::uint32_t chunk_pages = 0;
  std::uint32_t new_batch_size = 0;
  std::uint32_t kv_heads = 0;
};

// FlashInfer's DecodePlan, as its BatchDecodeWithPagedKVCachePlan binding calls it. With
// `int_buffer` null only the workspace sizes and the work estimate are filled.
cudaError_t flashinfer_plan(int head_dim, int group, std::vector<IdType> indptr, int batch, int num_heads,
                            int page_size, WorkEstimate* estimate, std::size_t* float_bytes,
                            std::size_t* int_bytes, void* float_buffer, void* int_buffer, void* host_staging,
                            flashinfer::DecodePlanInfo* info) {
  return with_head_dim(head_dim, [&](auto dim) {
    constexpr std::uint32_t kHeadDim = decltype(dim)::value;
    return with_group_size(group, [&](auto group_size) {
      constexpr std::uint32_t kGroup = decltype(group_size)::value;
      auto work_estimation = flashinfer::BatchDecodeWithPagedKVCacheWorkEstimationDispatched<
          kGroup, kHeadDim, kNoRope, Variant, Params>;
      FLASHINFER_CUDA_CALL(work_estimation(estimate->split_kv, estimate->max_grid_size, estimate->chunk_pages,
                                           estimate->new_batch_size, estimate->kv_heads, batch, indptr.data(),
                                           num_heads, page_size, kPlanForCudaGraphs, nullptr));
      if (int_buffer == nullptr) {
        return flashinfer::DecodePlanWorkspaceSize<kHeadDim, kNoRope, Variant, Params>(
            *float_bytes, *int_bytes, indptr.data(), batch, num_heads, page_size, kPlanForCudaGraphs, nullptr,
            work_estimation);
      }
      return flashinfer::DecodePlan<kHeadDim, kNoRope, Variant, Params>(
          float_buffer, *float_bytes, int_buffer, host_staging, *int_bytes, *info, indptr.data(), batch,
          num_heads, page_size, kPlanForCudaGraphs, nullptr, work_estimation);
    });
  });
}

KernelOutcome allocate_device(void** pointer, std::size_t bytes) {
  const cudaError_t error = cudaMalloc(pointer, std::max<std::size_t>(bytes, 1));
  if (error == cudaSuccess) return KernelOutcome::success();
  *pointer = nullptr;
  cudaGetLastError();  // allocation failures are not sticky; clear them so the sweep goes on
  return KernelOutcome::failure(error == cudaErrorMemoryAllocation ? PointStatus::oom : PointStatus::launch_failed,
                                "cudaMalloc(" + std::to_string(bytes) + " bytes): " + describe_cuda_error(error));
}

// FlashInfer reports what it cannot do by throwing (flashinfer::Error from its dispatch
// macros and allocator); the sweep records that as a rejected point.
KernelOutcome flashinfer_failure(const char* what, const std::exception& error) {
  return KernelOutcome::failure(PointStatus::invalid, std::string("FlashInfer ") + what + ": " + error.what());
}

bool device_has_programmatic_launch() {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    return false;
  }
  return major >= 9;
}

// The CSR page table of the batch over the shape's shuffled pool: sequence b takes the next
// ceil(length_b / page_size) pool entries, exactly the pages splitkv's block table gives it.
FlashinferPageTable page_table_for(const SweepPoint& shape, const std::vector<std::int32_t>& lengths) {
  FlashinferPageTable table;
  const std::vector<std::int32_t> pool = shuffled_page_pool(shape);
  table.num_pages = static_cast<int>(pool.size());
  table.indptr.push_back(0);
  for (std::int32_t length : lengths) {
    const int pages = ceil_div(length, shape.page_size);
    table.indptr.push_back(table.indptr.back() + pages);
    table.last_page_len.push_back(pages == 0 ? 0 : length - (pages - 1) * shape.page_size);
  }
  table.indices.assign(pool.begin(), pool.begin() + table.indptr.back());
  return table;
}

// One schedule on the device: FlashInfer's int workspace (the plan's arrays) and the partials.
struct DeviceSchedule {
  FlashinferSchedule summary;
  IdType* request_indices = nullptr;
  IdType* kv_tile_indices = nullptr;
  IdType* o_indptr = nullptr;
  IdType* kv_chunk_size = nullptr;  // tokens, one word
  bool* block_valid_mask = nullptr;
  Element* tmp_v = nullptr;  // partial outputs, bf16 as FlashInfer keeps them; null unpartitioned
  float* tmp_s = nullptr;    // their LSEs (base 2)
};

class FlashinferKernel final : public FlashinferDecodeKernel {
 public:
  explicit FlashinferKernel(bool own_plan) : own_plan_(own_plan) {}
  ~FlashinferKernel() override { release(); }

  std::string name() const override { return own_plan_ ? kFlashinferHeuristicKernelName : kFlashinferKernelName; }

  bool picks_own_split_count() const override { return own_plan_; }

  bool supports(const SweepPoint& shape, std::string* reason) const override {
    std::string why;
    const int group = shape.num_kv_heads > 0 ? shape.num_heads / shape.num_kv_heads : 0;
    if (shape.layout != KvLayout::paged) {
      why = "FlashInfer's batch decode reads a paged KV cache; contiguous shapes are not swept";
    } else if (shape.dtype != DType::bf16 || shape.kv_dtype != KvDtype::same_as_q) {
      why = "only bf16 (q and cache) is instantiated for FlashInfer's kernel";
    } else if (shape.head_dim != 64 && shape.head_dim != 128 && shape.head_dim != 256) {
      why = "head_dim " + std::to_string(shape.head_dim) + " is not instantiated for FlashInfer's kernel (64, 128, 256)";
    } else if (group * shape.num_kv_heads != shape.num_heads ||
               std::find(std::begin(kGroupSizes), std::end(kGroupSizes), group) == std::end(kGroupSizes)) {
      why = "query group " + std::to_string(shape.num_heads) + "/" + std::to_string(shape.num_kv_heads) +
            " is not one FlashInfer's decode dispatches (1, 2, 3, 4, 6, 8, 16)";
    } else if (shape.page_size < 1) {
      why = "page_size must be at least 1";
    } else if (shape.total_pages() * shape.page_size > std::numeric_limits<IdType>::max()) {
      why = "the page pool holds more tokens than FlashInfer's int32 page arithmetic reaches";
    } else if (shape.num_kv_heads > 65535) {
      why = "more kv heads than a grid's y extent";
    }
    if (why.empty()) return true;
    if (reason) *reason = why;
    return false;
  }

  KernelOutcome prepare(const SweepPoint& shape, int copies) override {
    release();
    shape_ = shape;
    enable_pdl_ = device_has_programmatic_launch();
    const std::vector<std::int32_t> lengths = shape.real_lengths();
    table_ = page_table_for(shape, lengths);
    max_pages_ = 1;
    for (int b = 0; b < shape.batch; ++b) max_pages_ = std::max(max_pages_, table_.indptr[b + 1] - table_.indptr[b]);

    const std::size_t pool_elements =
        static_cast<std::size_t>(table_.num_pages) * shape.page_size * shape.num_kv_heads * shape.head_dim;
    const std::size_t q_elements = static_cast<std::size_t>(shape.batch) * shape.num_heads * shape.head_dim;
    for (int c = 0; c < copies; ++c) {
      void* k = nullptr;
      void* v = nullptr;
      if (KernelOutcome o = allocate_device(&k, pool_elements * sizeof(Element)); !o.ok()) return o;
      k_.push_back(k);
      if (KernelOutcome o = allocate_device(&v, pool_elements * sizeof(Element)); !o.ok()) return o;
      v_.push_back(v);
      // The seeds of splitkv's adapter, so copy c holds the same values for both kernels.
      if (KernelOutcome o = cuda_outcome(fill_uniform(k, pool_elements, shape.dtype, 2 * c + 1, nullptr)); !o.ok())
        return o;
      if (KernelOutcome o = cuda_outcome(fill_uniform(v, pool_elements, shape.dtype, 2 * c + 2, nullptr)); !o.ok())
        return o;
    }
    if (KernelOutcome o = allocate_device(&q_, q_elements * sizeof(Element)); !o.ok()) return o;
    if (KernelOutcome o = allocate_device(&out_, q_elements * sizeof(Element)); !o.ok()) return o;
    if (KernelOutcome o = cuda_outcome(fill_uniform(q_, q_elements, shape.dtype, 7, nullptr)); !o.ok()) return o;
    if (KernelOutcome o = device_upload(&indptr_, table_.indptr); !o.ok()) return o;
    // A batch of empty sequences has no pages; the kernel never reads the (one-word) array then.
    if (KernelOutcome o = device_upload(&indices_, table_.indices.empty() ? std::vector<IdType>{0} : table_.indices);
        !o.ok())
      return o;
    if (KernelOutcome o = device_upload(&last_page_len_, table_.last_page_len); !o.ok()) return o;

    try {
      if (KernelOutcome o = own_plan_ ? plan_with_flashinfer() : partition_every_split_count(); !o.ok()) return o;
    } catch (const std::exception& error) {
      return flashinfer_failure("plan", error);
    }
    return cuda_outcome(cudaDeviceSynchronize());
  }

  KernelOutcome launch(int copy_index, int num_splits, void* stream) override {
    if (copy_index < 0 || copy_index >= static_cast<int>(k_.size())) {
      return KernelOutcome::failure(PointStatus::invalid, "copy " + std::to_string(copy_index) + " was not prepared");
    }
    const DeviceSchedule* schedule = device_schedule(num_splits);
    if (schedule == nullptr) {
      return KernelOutcome::failure(PointStatus::invalid, "num_splits " + std::to_string(num_splits) +
                                                              " outside the prepared 1.." +
                                                              std::to_string(shape_.num_splits));
    }
    Params params;
    params.q = static_cast<Element*>(q_);
    params.paged_kv = flashinfer::paged_kv_t<Element, IdType>(
        shape_.num_kv_heads, shape_.page_size, shape_.head_dim, shape_.batch, flashinfer::QKVLayout::kNHD,
        static_cast<Element*>(k_[copy_index]), static_cast<Element*>(v_[copy_index]), static_cast<IdType*>(indices_),
        static_cast<IdType*>(indptr_), static_cast<IdType*>(last_page_len_));
    params.o = static_cast<Element*>(out_);
    params.lse = nullptr;
    params.padded_batch_size = schedule->summary.grid_x;
    params.num_qo_heads = shape_.num_heads;
    params.q_stride_n = shape_.num_heads * shape_.head_dim;
    params.q_stride_h = shape_.head_dim;
    params.window_left = -1;  // no sliding window, FlashInfer's default
    params.logits_soft_cap = 0.f;
    params.sm_scale = 1.f / std::sqrt(static_cast<float>(shape_.head_dim));
    params.rope_rcp_scale = 1.f;  // RoPE is off in this instantiation; FlashInfer's defaults
    params.rope_rcp_theta = 1.f / 1e4f;
    params.request_indices = schedule->request_indices;
    params.kv_tile_indices = schedule->kv_tile_indices;
    params.o_indptr = schedule->o_indptr;
    params.kv_chunk_size_ptr = schedule->kv_chunk_size;
    params.block_valid_mask = schedule->block_valid_mask;
    cudaError_t error = cudaSuccess;
    try {
      error = run_batch_decode(shape_.head_dim, params, schedule->tmp_v, schedule->tmp_s, enable_pdl_,
                               static_cast<cudaStream_t>(stream));
    } catch (const std::exception& failure) {
      return flashinfer_failure("launch", failure);
    }
    return cuda_outcome(error);
  }

  void release() override {
    for (void* p : k_) cudaFree(p);
    for (void* p : v_) cudaFree(p);
    k_.clear();
    v_.clear();
    for (void** p : {&q_, &out_, &indptr_, &indices_, &last_page_len_, &schedule_words_, &float_workspace_}) {
      cudaFree(*p);
      *p = nullptr;
    }
    schedules_.clear();
    split_schedule_.clear();
    plan_staging_.clear();
  }

  CopyBuffers buffers(int copy_index) const override {
    CopyBuffers copy;
    copy.q = q_;
    copy.out = out_;
    if (copy_index >= 0 && copy_index < static_cast<int>(k_.size())) {
      copy.k_pages = k_[copy_index];
      copy.v_pages = v_[copy_index];
    }
    return copy;
  }

  const FlashinferPageTable& page_table() const override { return table_; }

  FlashinferSchedule schedule(int num_splits) const override {
    const DeviceSchedule* schedule = device_schedule(num_splits);
    return schedule ? schedule->summary : FlashinferSchedule{};
  }

 private:
  const DeviceSchedule* device_schedule(int num_splits) const {
    if (own_plan_) return schedules_.empty() ? nullptr : &schedules_.front();
    if (num_splits < 1 || num_splits >= static_cast<int>(split_schedule_.size())) return nullptr;
    return &schedules_[split_schedule_[num_splits]];
  }

  // `flashinfer`: for every split count s of the shape, the work FlashInfer's DecodePlan builds
  // when its chunk is ceil(max_pages / s) pages: its own DecodeSplitKVIndptr (request_indices,
  // kv_tile_indices, o_indptr) and kv_chunk_size = chunk x page_size tokens, laid out as its int
  // workspace. The grid is the work items themselves (DecodePlan outside CUDA-graph mode, so no
  // padding and no block_valid_mask). s = 1 is the unpartitioned kernel; every s > 1 takes the
  // split kernel and merge, even where each sequence fits one chunk. Split counts that share a
  // chunk share one schedule's arrays.
  KernelOutcome partition_every_split_count() {
    struct HostSchedule {
      std::vector<IdType> request_indices, kv_tile_indices, o_indptr;
    };
    std::map<int, int> schedule_of_chunk;  // chunk pages -> index into host
    std::vector<HostSchedule> host;
    std::vector<int> chunk_of_schedule;
    split_schedule_.assign(static_cast<std::size_t>(shape_.num_splits) + 1, 0);
    for (int s = 1; s <= shape_.num_splits; ++s) {
      const int chunk = ceil_div(max_pages_, s);
      auto found = schedule_of_chunk.find(chunk);
      if (found == schedule_of_chunk.end()) {
        auto [request_indices, kv_tile_indices, o_indptr] =
            flashinfer::DecodeSplitKVIndptr(table_.indptr.data(), static_cast<std::uint32_t>(shape_.batch),
                                            static_cast<std::uint32_t>(chunk));
        host.push_back({std::move(request_indices), std::move(kv_tile_indices), std::move(o_indptr)});
        chunk_of_schedule.push_back(chunk);
        found = schedule_of_chunk.emplace(chunk, static_cast<int>(host.size()) - 1).first;
      }
      split_schedule_[s] = found->second;
    }

    // One device allocation for every schedule's arrays, each array on a 16-byte boundary as
    // FlashInfer's AlignedAllocator places them.
    std::vector<IdType> words;
    auto append = [&words](const std::vector<IdType>& values) {
      const std::size_t offset = words.size();
      words.insert(words.end(), values.begin(), values.end());
      words.resize((words.size() + 3) / 4 * 4, 0);
      return offset;
    };
    struct Offsets {
      std::size_t request_indices, kv_tile_indices, o_indptr, kv_chunk_size;
    };
    std::vector<Offsets> offsets;
    int max_partitioned_items = 0;
    for (std::size_t i = 0; i < host.size(); ++i) {
      Offsets o;
      o.request_indices = append(host[i].request_indices);
      o.kv_tile_indices = append(host[i].kv_tile_indices);
      o.o_indptr = append(host[i].o_indptr);
      o.kv_chunk_size = append({chunk_of_schedule[i] * shape_.page_size});
      offsets.push_back(o);
    }
    if (KernelOutcome o = device_upload(&schedule_words_, words); !o.ok()) return o;

    // Schedules: one per distinct chunk, then one more unpartitioned copy of s = 1's arrays when
    // a larger split count shares its chunk (a one-page longest sequence), so the flag differs.
    auto* base = static_cast<IdType*>(schedule_words_);
    auto device_schedule_of = [&](std::size_t i, bool partitioned) {
      DeviceSchedule schedule;
      schedule.request_indices = base + offsets[i].request_indices;
      schedule.kv_tile_indices = base + offsets[i].kv_tile_indices;
      schedule.o_indptr = base + offsets[i].o_indptr;
      schedule.kv_chunk_size = base + offsets[i].kv_chunk_size;
      FlashinferSchedule& summary = schedule.summary;
      summary.partitioned = partitioned;
      summary.chunk_pages = chunk_of_schedule[i];
      summary.work_items = static_cast<int>(host[i].request_indices.size());
      summary.grid_x = summary.work_items;
      summary.chunks_of_longest = ceil_div(max_pages_, summary.chunk_pages);
      return schedule;
    };
    for (std::size_t i = 0; i < host.size(); ++i) {
      const bool partitioned = chunk_of_schedule[i] != max_pages_;
      schedules_.push_back(device_schedule_of(i, partitioned));
      if (partitioned) max_partitioned_items = std::max(max_partitioned_items, schedules_.back().summary.work_items);
    }
    const int unpartitioned = split_schedule_[1];
    if (shape_.num_splits > 1 && split_schedule_[2] == unpartitioned) {
      schedules_.push_back(device_schedule_of(static_cast<std::size_t>(unpartitioned), true));
      max_partitioned_items = std::max(max_partitioned_items, schedules_.back().summary.work_items);
      const int shared = static_cast<int>(schedules_.size()) - 1;
      for (int s = 2; s <= shape_.num_splits; ++s) {
        if (split_schedule_[s] == unpartitioned) split_schedule_[s] = shared;
      }
    }

    // Partials of the widest partitioned schedule, shared by all: FlashInfer's tmp_v (in the
    // output dtype) and tmp_s, [work item, query head, head_dim] and [work item, query head].
    if (max_partitioned_items > 0) {
      const std::size_t rows = static_cast<std::size_t>(max_partitioned_items) * shape_.num_heads;
      const std::size_t v_bytes = (rows * shape_.head_dim * sizeof(Element) + 255) / 256 * 256;
      if (KernelOutcome o = allocate_device(&float_workspace_, v_bytes + rows * sizeof(float)); !o.ok()) return o;
      for (DeviceSchedule& schedule : schedules_) {
        if (!schedule.summary.partitioned) continue;
        schedule.tmp_v = static_cast<Element*>(float_workspace_);
        schedule.tmp_s = reinterpret_cast<float*>(static_cast<char*>(float_workspace_) + v_bytes);
      }
    }
    return KernelOutcome::success();
  }

  // `flashinfer_heuristic`: FlashInfer's DecodePlan on the batch's page table, into its own
  // float and int workspaces, as BatchDecodeWithPagedKVCachePlan and ...Run use them.
  KernelOutcome plan_with_flashinfer() {
    const int group = shape_.num_heads / shape_.num_kv_heads;
    WorkEstimate estimate;
    std::size_t float_bytes = 0, int_bytes = 0;
    flashinfer::DecodePlanInfo info;
    cudaError_t error = flashinfer_plan(shape_.head_dim, group, table_.indptr, shape_.batch, shape_.num_heads,
                                        shape_.page_size, &estimate, &float_bytes, &int_bytes, nullptr, nullptr,
                                        nullptr, &info);
    if (error != cudaSuccess) return cuda_outcome(error);
    if (KernelOutcome o = allocate_device(&float_workspace_, float_bytes); !o.ok()) return o;
    if (KernelOutcome o = allocate_device(&schedule_words_, int_bytes); !o.ok()) return o;
    // DecodePlan fills this host copy and sends it with cudaMemcpyAsync; it lives until release,
    // past prepare's synchronisation.
    plan_staging_.assign(std::max<std::size_t>(int_bytes, 1), 0);
    error = flashinfer_plan(shape_.head_dim, group, table_.indptr, shape_.batch, shape_.num_heads,
                            shape_.page_size, &estimate, &float_bytes, &int_bytes, float_workspace_,
                            schedule_words_, plan_staging_.data(), &info);
    if (error != cudaSuccess) return cuda_outcome(error);

    DeviceSchedule schedule;
    auto* ints = static_cast<char*>(schedule_words_);
    schedule.request_indices = reinterpret_cast<IdType*>(ints + info.request_indices_offset);
    schedule.kv_tile_indices = reinterpret_cast<IdType*>(ints + info.kv_tile_indices_offset);
    schedule.o_indptr = reinterpret_cast<IdType*>(ints + info.o_indptr_offset);
    schedule.kv_chunk_size = reinterpret_cast<IdType*>(ints + info.kv_chunk_size_ptr_offset);
    if (info.split_kv) {
      schedule.tmp_v = reinterpret_cast<Element*>(static_cast<char*>(float_workspace_) + info.v_offset);
      schedule.tmp_s = reinterpret_cast<float*>(static_cast<char*>(float_workspace_) + info.s_offset);
      if (info.enable_cuda_graph) schedule.block_valid_mask = reinterpret_cast<bool*>(ints + info.block_valid_mask_offset);
    }
    FlashinferSchedule& summary = schedule.summary;
    summary.partitioned = info.split_kv;
    summary.chunk_pages = static_cast<int>(estimate.chunk_pages);
    summary.work_items = static_cast<int>(estimate.new_batch_size);
    summary.grid_x = static_cast<int>(info.padded_batch_size);
    summary.chunks_of_longest = ceil_div(max_pages_, std::max(1, summary.chunk_pages));
    summary.max_grid_size = static_cast<int>(estimate.max_grid_size);
    schedules_.push_back(schedule);
    // The CSV has no column for the count a policy picked, so it goes to the sweep's log.
    std::ostringstream note;
    note << name() << " plan: " << shape_.shape_key() << ": " << summary.chunks_of_longest
         << (summary.chunks_of_longest == 1 ? " split" : " splits") << " for the longest sequence (kv chunk "
         << summary.chunk_pages << " pages = " << summary.chunk_pages * shape_.page_size << " tokens; "
         << summary.work_items << " work items on a " << summary.grid_x << " x " << shape_.num_kv_heads << " grid, "
         << (summary.partitioned ? "split kernel + merge" : "one pass") << "; FlashInfer budgets "
         << summary.max_grid_size << " resident CTAs)\n";
    std::cerr << note.str();
    return KernelOutcome::success();
  }

  bool own_plan_;
  bool enable_pdl_ = false;  // FlashInfer's default: programmatic dependent launch on sm_90 and newer
  SweepPoint shape_;
  FlashinferPageTable table_;
  int max_pages_ = 1;
  std::vector<void*> k_, v_;  // one K and one V page pool per copy
  void* q_ = nullptr;
  void* out_ = nullptr;
  void* indptr_ = nullptr;
  void* indices_ = nullptr;
  void* last_page_len_ = nullptr;
  void* schedule_words_ = nullptr;   // the schedules' index arrays (FlashInfer's int workspace)
  void* float_workspace_ = nullptr;  // partial outputs and LSEs
  std::vector<DeviceSchedule> schedules_;
  std::vector<int> split_schedule_;  // flashinfer: split count -> index into schedules_
  std::vector<char> plan_staging_;   // flashinfer_heuristic: the plan's host copy
};

}  // namespace

std::string flashinfer_unavailable_reason() { return ""; }

std::unique_ptr<FlashinferDecodeKernel> make_flashinfer_kernel(bool own_plan) {
  return std::make_unique<FlashinferKernel>(own_plan);
}

void register_flashinfer_kernels(KernelRegistry& registry) {
  registry.add(kFlashinferKernelName,
               "FlashInfer's CUDA-core batch paged decode at a fixed split count: its scheduler's partition for a "
               "kv chunk of ceil(max_pages / num_splits) pages, then its merge (paged bf16 only)",
               [] { return make_flashinfer_kernel(false); });
  registry.add(kFlashinferHeuristicKernelName,
               "FlashInfer's CUDA-core batch paged decode on FlashInfer's own plan (CUDA-graph mode); timed once per "
               "shape, num_splits is the shape's largest planned count (paged bf16 only)",
               [] { return make_flashinfer_kernel(true); });
}

}  // namespace splitkv::tuner
