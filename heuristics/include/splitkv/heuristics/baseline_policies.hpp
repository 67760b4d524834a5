// The split-count heuristics of the field, re-implemented from their published algorithms
// (our own code; see DESIGN §1 and heuristics/FIT.md, "Baselines") so that the evaluation
// can run each one on the same measured shapes as ours. Each takes what that library's host
// code sees, and returns the num_splits it would launch with.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "splitkv/heuristics/fa3_dynamic_rule.hpp"
#include "splitkv/heuristics/measurements.hpp"

namespace splitkv::heuristics {

// What a host-side heuristic can know about one decode step.
struct DecodeShape {
  int batch = 1;
  int num_heads = 1;
  int num_kv_heads = 1;
  int head_dim = 128;
  int context_len = 1;      // real tokens per sequence (every sequence the same: fixed lengths)
  int capacity_tokens = 1;  // FA's seqlen_k: the cache capacity, or block-table width x page size
  int page_size = 0;        // 0 = contiguous
  int num_sms = 132;
};
DecodeShape decode_shape(const MeasuredShape& shape, int num_sms);

// ---- FlashAttention 2 (flash_api.cpp: num_splits_heuristic, set_params_splitkv) ----------
// The efficiency loop verbatim: 1 split when the work items fill >= 80% of `num_sms`;
// else, over eligible counts s <= min(max_splits, num_sms, num_n_blocks) (s is skipped when
// ceil(n/s) == ceil(n/(s-1))), eff(s) = waves / ceil(waves) with waves = work * s / num_sms,
// and the smallest s with eff >= 0.85 * max eff.
int fa2_num_splits_heuristic(int batch_nheads_mblocks, int num_sms, int num_n_blocks, int max_splits);
// FA2's kBlockN for the split-KV kernel: 256 for head_dim <= 64, 128 for <= 128, else 64.
int fa2_block_n(int head_dim);
// FA2's call for one decode step with `seqlen_k` keys: work items batch * kv_heads *
// ceil(group / 64) (its single-query GQA path folds the query group into M), 2 x SMs
// (it assumes 2 CTAs per SM), n_blocks = ceil(seqlen_k / kBlockN), at most 128 splits.
int fa2_num_splits(const DecodeShape& shape, int seqlen_k);
// FA2's kernel divides the CAPACITY among its splits, so with a short real length most
// splits find no keys. On our kernel's 64-token tiles: ceil(capacity / 64) tiles cut into
// `num_splits` equal whole-tile chunks, of which those overlapping the first
// ceil(context_len / 64) tiles do work. Returns that count (>= 1).
int capacity_chunks_with_work(int capacity_tokens, int context_len, int num_splits);

// ---- FlashAttention 3 (hopper/heuristics.h, flash_api.cpp, flash_prepare_scheduler.cu) ---
// The FA3 loop: like FA2's without the eligibility skip, 1 split when n_blocks <= 4, and an
// L2 rule for very long single heads (> 50 MiB) with many query blocks.
int fa3_num_splits_heuristic(int total_mblocks, int num_sms, int num_n_blocks, int num_m_blocks,
                             std::int64_t size_one_kv_head, bool is_causal_or_local, int max_splits);
struct Fa3Tile {
  int block_m;
  int block_n;
};
// tile_size_fwd_sm90 for bf16/fp16, non-causal, no softcap. A paged decode never uses the
// TMA page path (that needs more than kBlockM query rows), so paged caches take the
// "paged_kv_non_TMA" tiles.
Fa3Tile fa3_tile_size_sm90(int head_dim, bool paged);
// The host's static bound: with seqused_k (a KV cache) and batch <= 992 FA3 plans
// dynamically and pretends batch = 1 here; seqlen_k is the capacity.
int fa3_static_num_splits(const DecodeShape& shape);
// The prepare kernel's per-sequence choice from the real lengths:
// clamp(ceil(n_blocks_b / blocks_per_sm), 1, static) with
// blocks_per_sm = ceil(1.1 * total_blocks * kv_heads / SMs) (float arithmetic as in FA3).
int fa3_dynamic_num_splits(const DecodeShape& shape);
// The same for a ragged batch (one entry per sequence of `lengths`; shape.batch is ignored),
// the rule of fa3_dynamic_rule.hpp that the device prepare kernel runs.
std::vector<int> fa3_dynamic_splits_per_sequence(const DecodeShape& shape, const std::vector<int>& lengths);
// What that prepare kernel needs from the host (Fa3DynamicInputs, fa3_dynamic_rule.hpp).
Fa3DynamicInputs fa3_dynamic_inputs(const DecodeShape& shape);

// ---- FlashInfer (scheduler.cuh: decode work estimation) --------------------------------
// PartitionPagedKVCacheBinarySearchMinNumPagePerBatch: the smallest chunk (>= min_pages)
// with sum_i ceil(pages_i / chunk) * kv_heads <= max_grid_size. Returns {chunk, new_batch}.
std::pair<int, int> flashinfer_chunk_pages(int max_grid_size, int num_kv_heads,
                                           const std::vector<int>& num_pages, int min_pages);
// Occupancy FlashInfer would measure with cudaOccupancyMaxActiveBlocksPerMultiprocessor;
// we use OUR kernel's resident CTAs per SM (kernels/DESIGN.md: 2 up to head_dim 128, 1 at 256).
int flashinfer_ctas_per_sm(int head_dim);
// Splits per sequence: 1 when batch * kv_heads >= occupancy * SMs, else ceil(pages / chunk)
// with min chunk max(128 / page_size, 1) pages. Contiguous caches are planned as pages of
// one token (FlashInfer has no contiguous batch decode; the engine would page them).
int flashinfer_num_splits(const DecodeShape& shape);
// FlashInfer's plan for a ragged batch with exact lengths: one split count per sequence.
std::vector<int> flashinfer_splits_per_sequence(const DecodeShape& shape, const std::vector<int>& lengths);

// ---- vLLM PagedAttention (paged_attn.py) -------------------------------------------------
inline constexpr int kVllmPartitionTokens = 512;
// use_v1 = max_len <= 8192 and (partitions == 1 or num_seqs * num_heads > 512).
bool vllm_uses_v1(int max_seq_len, int num_seqs, int num_heads);
// V1: one pass (1 split). V2: ceil(max_len / 512) partitions; empty ones exit on the device.
int vllm_num_splits(const DecodeShape& shape);

}  // namespace splitkv::heuristics
