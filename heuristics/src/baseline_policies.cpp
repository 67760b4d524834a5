#include "splitkv/heuristics/baseline_policies.hpp"
#include "splitkv/heuristics/fa3_dynamic_rule.hpp"
#include "splitkv/heuristics/table_fit.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace splitkv::heuristics {
namespace {

int ceil_div(std::int64_t a, std::int64_t b) { return int((a + b - 1) / b); }

}  // namespace

DecodeShape decode_shape(const MeasuredShape& shape, int num_sms) {
  DecodeShape d;
  d.batch = shape.point.batch;
  d.num_heads = shape.point.num_heads;
  d.num_kv_heads = shape.point.num_kv_heads;
  d.head_dim = shape.point.head_dim;
  d.context_len = shape.point.context_len;
  d.capacity_tokens = shape.capacity_tokens();
  d.page_size = shape.point.layout == KvLayout::paged ? shape.point.page_size : 0;
  d.num_sms = num_sms;
  return d;
}

// ---- FlashAttention 2 ---------------------------------------------------------------------

int fa2_num_splits_heuristic(int batch_nheads_mblocks, int num_sms, int num_n_blocks, int max_splits) {
  if (batch_nheads_mblocks >= 0.8f * num_sms) return 1;
  max_splits = std::min({max_splits, num_sms, num_n_blocks});
  const auto eligible = [&](int s) {
    return s == 1 || ceil_div(num_n_blocks, s) != ceil_div(num_n_blocks, s - 1);
  };
  // FA2 computes in float; keep float so borderline cases round the same way.
  std::vector<float> efficiency(std::size_t(std::max(max_splits, 0)), 0.f);
  float max_efficiency = 0.f;
  for (int s = 1; s <= max_splits; ++s) {
    if (!eligible(s)) continue;
    const float waves = float(batch_nheads_mblocks * s) / float(num_sms);
    const float eff = waves / std::ceil(waves);
    max_efficiency = std::max(max_efficiency, eff);
    efficiency[std::size_t(s - 1)] = eff;
  }
  for (int s = 1; s <= max_splits; ++s) {
    if (eligible(s) && efficiency[std::size_t(s - 1)] >= 0.85 * max_efficiency) return s;
  }
  return 1;
}

int fa2_block_n(int head_dim) { return head_dim <= 64 ? 256 : (head_dim <= 128 ? 128 : 64); }

int fa2_num_splits(const DecodeShape& shape, int seqlen_k) {
  const int group = std::max(1, shape.num_heads / std::max(1, shape.num_kv_heads));
  const int m_blocks = ceil_div(group, 64);  // the single-query path puts the group in M
  const int work = shape.batch * shape.num_kv_heads * m_blocks;
  const int n_blocks = ceil_div(std::max(seqlen_k, 1), fa2_block_n(shape.head_dim));
  return fa2_num_splits_heuristic(work, 2 * shape.num_sms, n_blocks, 128);
}

int capacity_chunks_with_work(int capacity_tokens, int context_len, int num_splits) {
  const int capacity_tiles = std::max(1, ceil_div(capacity_tokens, 64));
  const int real_tiles = std::max(1, ceil_div(context_len, 64));
  const int tiles_per_chunk = ceil_div(capacity_tiles, std::max(1, num_splits));
  return std::max(1, std::min(num_splits, ceil_div(real_tiles, tiles_per_chunk)));
}

// ---- FlashAttention 3 ---------------------------------------------------------------------

int fa3_num_splits_heuristic(int total_mblocks, int num_sms, int num_n_blocks, int num_m_blocks,
                             std::int64_t size_one_kv_head, bool is_causal_or_local, int max_splits) {
  if (total_mblocks >= 0.8f * num_sms) {
    const std::int64_t size_l2 = 50 * 1024 * 1024;
    if (size_one_kv_head > size_l2 && num_m_blocks >= num_sms * 2 && !is_causal_or_local) {
      return int(std::min<std::int64_t>((size_one_kv_head + size_l2 - 1) / size_l2, max_splits));
    }
    return 1;
  }
  if (num_n_blocks <= 4) return 1;
  max_splits = std::min({max_splits, num_sms, num_n_blocks});
  std::vector<float> efficiency;
  float max_efficiency = 0.f;
  for (int s = 1; s <= max_splits; ++s) {
    const float waves = float(total_mblocks * s) / float(num_sms);
    const float eff = waves / std::ceil(waves);
    max_efficiency = std::max(max_efficiency, eff);
    efficiency.push_back(eff);
  }
  for (int s = 1; s <= max_splits; ++s) {
    if (efficiency[std::size_t(s - 1)] >= 0.85 * max_efficiency) return s;
  }
  return 1;
}

Fa3Tile fa3_tile_size_sm90(int head_dim, bool paged) {
  if (head_dim <= 64) return {192, paged ? 128 : 192};
  if (head_dim <= 96) return {192, paged ? 128 : 144};
  if (head_dim <= 128) return {128, paged ? 128 : 176};
  if (head_dim <= 192) return {128, paged ? 96 : 128};
  return {128, 80};
}

namespace {

struct Fa3Plan {
  Fa3Tile tile;
  int m_blocks;
  bool dynamic;
};

Fa3Plan fa3_plan(const DecodeShape& shape) {
  const Fa3Tile tile = fa3_tile_size_sm90(shape.head_dim, shape.page_size > 0);
  const int group = std::max(1, shape.num_heads / std::max(1, shape.num_kv_heads));
  // PackGQA is always on with splits: one query row per head of the group.
  return {tile, ceil_div(group, tile.block_m), shape.batch <= 992};
}

}  // namespace

int fa3_static_num_splits(const DecodeShape& shape) {
  const Fa3Plan plan = fa3_plan(shape);
  const int seqlen_k = std::max(1, shape.capacity_tokens);
  const int n_blocks = ceil_div(seqlen_k, plan.tile.block_n);
  const std::int64_t size_one_kv_head = std::int64_t(seqlen_k) * (2 * shape.head_dim) * 2;
  const int total_mblocks = (plan.dynamic ? 1 : shape.batch) * shape.num_kv_heads * plan.m_blocks;
  return fa3_num_splits_heuristic(total_mblocks, shape.num_sms, n_blocks, plan.m_blocks,
                                  size_one_kv_head, false, 128);
}

Fa3DynamicInputs fa3_dynamic_inputs(const DecodeShape& shape) {
  const Fa3Plan plan = fa3_plan(shape);
  return {plan.tile.block_n, plan.m_blocks, fa3_static_num_splits(shape), plan.dynamic};
}

std::vector<int> fa3_dynamic_splits_per_sequence(const DecodeShape& shape, const std::vector<int>& lengths) {
  const Fa3DynamicInputs in = fa3_dynamic_inputs(shape);
  std::vector<int> splits(lengths.size(), in.static_splits);
  if (!in.dynamic) return splits;
  long long total_blocks = 0;
  for (int length : lengths) total_blocks += (long long)in.m_blocks * ceil_div(std::max(1, length), in.block_n);
  const int blocks_per_sm = fa3_blocks_per_sm(total_blocks, shape.num_kv_heads, shape.num_sms);
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    splits[b] = fa3_sequence_splits(ceil_div(std::max(1, lengths[b]), in.block_n), blocks_per_sm, in.static_splits);
  }
  return splits;
}

int fa3_dynamic_num_splits(const DecodeShape& shape) {
  // Every sequence alike: the rule for the first of batch equal lengths.
  return fa3_dynamic_splits_per_sequence(shape, std::vector<int>(std::size_t(std::max(1, shape.batch)),
                                                                  shape.context_len))
      .front();
}

// ---- FlashInfer ---------------------------------------------------------------------------

std::pair<int, int> flashinfer_chunk_pages(int max_grid_size, int num_kv_heads,
                                           const std::vector<int>& num_pages, int min_pages) {
  std::int64_t low = min_pages, high = 0;
  for (int pages : num_pages) high = std::max<std::int64_t>(high, pages);
  while (low < high) {
    const std::int64_t mid = (low + high) / 2;
    std::int64_t new_batch = 0;
    for (int pages : num_pages) new_batch += ceil_div(pages, mid);
    if (new_batch * num_kv_heads > max_grid_size) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  std::int64_t new_batch = 0;
  for (int pages : num_pages) new_batch += ceil_div(std::max(pages, 1), low);
  return {int(low), int(new_batch)};
}

int flashinfer_ctas_per_sm(int head_dim) { return resident_ctas_per_sm(head_dim); }

std::vector<int> flashinfer_splits_per_sequence(const DecodeShape& shape, const std::vector<int>& lengths) {
  const int max_grid_size = flashinfer_ctas_per_sm(shape.head_dim) * shape.num_sms;
  std::vector<int> splits(lengths.size(), 1);
  if (std::int64_t(lengths.size()) * shape.num_kv_heads >= max_grid_size) return splits;
  const int page_size = shape.page_size > 0 ? shape.page_size : 1;
  std::vector<int> num_pages;
  for (int length : lengths) num_pages.push_back(ceil_div(std::max(1, length), page_size));
  const int min_pages = std::max(128 / page_size, 1);
  const int chunk = flashinfer_chunk_pages(max_grid_size, shape.num_kv_heads, num_pages, min_pages).first;
  for (std::size_t b = 0; b < lengths.size(); ++b) splits[b] = std::max(1, ceil_div(num_pages[b], chunk));
  return splits;
}

int flashinfer_num_splits(const DecodeShape& shape) {
  return flashinfer_splits_per_sequence(shape, std::vector<int>(std::size_t(std::max(1, shape.batch)),
                                                                 shape.context_len))
      .front();
}

// ---- vLLM ---------------------------------------------------------------------------------

bool vllm_uses_v1(int max_seq_len, int num_seqs, int num_heads) {
  const int partitions = ceil_div(max_seq_len, kVllmPartitionTokens);
  return max_seq_len <= 8192 && (partitions == 1 || std::int64_t(num_seqs) * num_heads > 512);
}

int vllm_num_splits(const DecodeShape& shape) {
  if (vllm_uses_v1(shape.context_len, shape.batch, shape.num_heads)) return 1;
  return ceil_div(std::max(1, shape.context_len), kVllmPartitionTokens);
}

}  // namespace splitkv::heuristics
