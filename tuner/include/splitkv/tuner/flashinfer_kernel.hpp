// FlashInfer's batch paged decode kernel as two kernels under test (tuner/FLASHINFER.md):
//
//   flashinfer            FlashInfer's CUDA-core BatchDecodeWithPagedKVCache at a fixed split
//                         count s: the page table cut as FlashInfer's scheduler cuts it for a kv
//                         chunk of ceil(max_pages / s) pages, then its VariableLengthMergeStates;
//                         s = 1 runs the kernel unpartitioned, without the merge.
//   flashinfer_heuristic  the same kernel on FlashInfer's own plan (DecodePlan in CUDA-graph
//                         mode: the chunk from its binary search over the resident-CTA count),
//                         whatever num_splits says; timed once per shape, a policy row.
//
// Built only where FlashInfer's headers are (SPLITKV_WITH_FLASHINFER, scripts/fetch_flashinfer.sh):
// tuner/src/gpu_flashinfer_kernel.cu, else tuner/src/flashinfer_kernel_unavailable.cpp, whose
// register_flashinfer_kernels adds nothing and whose make_flashinfer_kernel returns null. This
// header needs neither FlashInfer nor CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "splitkv/tuner/kernel_under_test.hpp"

namespace splitkv::tuner {

inline constexpr const char* kFlashinferKernelName = "flashinfer";
inline constexpr const char* kFlashinferHeuristicKernelName = "flashinfer_heuristic";

// Empty when this build has the FlashInfer kernels; otherwise why it has not.
std::string flashinfer_unavailable_reason();

// Adds both kernels (none in a build without them); register_gpu_kernels calls it.
void register_flashinfer_kernels(KernelRegistry& registry);

// FlashInfer's page table of a batch (its paged_kv_t, NHD layout): sequence b holds the pages
// indices[indptr[b]] .. indices[indptr[b+1] - 1], the last one filled to last_page_len[b] tokens.
struct FlashinferPageTable {
  std::vector<std::int32_t> indptr;         // [batch + 1]
  std::vector<std::int32_t> indices;        // [pages of the real lengths]
  std::vector<std::int32_t> last_page_len;  // [batch]
  int num_pages = 0;                        // pages in each copy's K pool and V pool
};

// What one launch hands FlashInfer's kernel.
struct FlashinferSchedule {
  bool partitioned = false;   // split kernel into partials, then the merge; else one direct pass
  int chunk_pages = 0;        // kv chunk of one work item, in pages
  int work_items = 0;         // (sequence, chunk) items
  int grid_x = 0;             // CTAs along x (work_items, or FlashInfer's padded count under graphs)
  int chunks_of_longest = 0;  // how many chunks the longest sequence is cut into: its split count
  int max_grid_size = 0;      // the resident CTAs FlashInfer's plan budgets for (heuristic only)
};

// Either kernel, with what a correctness test needs to run it on inputs of its own.
class FlashinferDecodeKernel : public KernelUnderTest {
 public:
  struct CopyBuffers {
    void* q = nullptr;        // [batch, num_heads, head_dim] bf16, one for all copies
    void* k_pages = nullptr;  // [num_pages, page_size, num_kv_heads, head_dim] bf16, this copy's
    void* v_pages = nullptr;
    void* out = nullptr;      // [batch, num_heads, head_dim] bf16, one for all copies
  };
  // Valid between prepare() and release(); copy_index in [0, copies).
  virtual CopyBuffers buffers(int copy_index) const = 0;
  virtual const FlashinferPageTable& page_table() const = 0;
  // What launch(copy, num_splits, stream) runs; num_splits in [1, the prepared shape's num_splits].
  virtual FlashinferSchedule schedule(int num_splits) const = 0;
};

// `flashinfer` (own_plan false) or `flashinfer_heuristic` (own_plan true); null in a build
// without FlashInfer.
std::unique_ptr<FlashinferDecodeKernel> make_flashinfer_kernel(bool own_plan);

}  // namespace splitkv::tuner
