#include "splitkv/c_api.h"

#include <cstring>

#include "splitkv/decode_attention.hpp"
#include "splitkv/split_partition.hpp"

namespace {

splitkv::DecodeParams make_params(int layout, int dtype, int batch, int num_heads, int num_kv_heads,
                                  int head_dim, int num_splits) {
  splitkv::DecodeParams params;
  params.layout = static_cast<splitkv::KvLayout>(layout);
  params.dtype = static_cast<splitkv::DType>(dtype);
  params.batch = batch;
  params.num_heads = num_heads;
  params.num_kv_heads = num_kv_heads;
  params.head_dim = head_dim;
  params.num_splits = num_splits;
  return params;
}

}  // namespace

extern "C" {

int splitkv_max_splits(void) { return splitkv::kMaxSplits; }

size_t splitkv_workspace_bytes(int batch, int num_heads, int head_dim, int num_splits) {
  if (batch < 1 || num_heads < 1 || head_dim < 1 || num_splits < 1) return 0;
  return splitkv::decode_workspace_bytes(
      make_params(SPLITKV_LAYOUT_CONTIGUOUS, SPLITKV_DTYPE_BF16, batch, num_heads, 1, head_dim, num_splits));
}

int splitkv_decode_attention_kv_dtype(int layout, int dtype, int kv_dtype, int batch, int num_heads, int num_kv_heads,
                                      int head_dim, int cache_capacity, int page_size, int max_pages_per_seq,
                                      int num_pages, int num_splits, float softmax_scale, const void* q,
                                      const void* k, const void* v, const float* k_descale, const float* v_descale,
                                      const int32_t* cache_seqlens, const int32_t* block_table, void* out,
                                      float* lse, void* workspace, const unsigned char* auto_splits_table,
                                      const int32_t* splits_per_sequence, void* stream) {
  splitkv::DecodeParams params = make_params(layout, dtype, batch, num_heads, num_kv_heads, head_dim, num_splits);
  params.kv_dtype = static_cast<splitkv::KvDtype>(kv_dtype);
  params.cache_capacity = cache_capacity;
  params.page_size = page_size;
  params.max_pages_per_seq = max_pages_per_seq;
  params.num_pages = num_pages;
  params.softmax_scale = softmax_scale;
  params.q = q;
  params.k = k;
  params.v = v;
  params.k_descale = k_descale;
  params.v_descale = v_descale;
  params.cache_seqlens = cache_seqlens;
  params.block_table = block_table;
  params.out = out;
  params.lse = lse;
  params.workspace = workspace;
  params.splits_per_sequence = splits_per_sequence;
  params.per_sequence_splits = auto_splits_table != nullptr || splits_per_sequence != nullptr;
  params.auto_splits = reinterpret_cast<const splitkv::AutoSplitsTable*>(auto_splits_table);
  return static_cast<int>(splitkv::decode_attention(params, static_cast<cudaStream_t>(stream)));
}

int splitkv_decode_attention_per_sequence(int layout, int dtype, int batch, int num_heads, int num_kv_heads,
                                          int head_dim, int cache_capacity, int page_size, int max_pages_per_seq,
                                          int num_pages, int num_splits, float softmax_scale, const void* q,
                                          const void* k, const void* v, const int32_t* cache_seqlens,
                                          const int32_t* block_table, void* out, float* lse, void* workspace,
                                          const unsigned char* auto_splits_table,
                                          const int32_t* splits_per_sequence, void* stream) {
  return splitkv_decode_attention_kv_dtype(layout, dtype, SPLITKV_KV_DTYPE_SAME_AS_Q, batch, num_heads, num_kv_heads,
                                           head_dim, cache_capacity, page_size, max_pages_per_seq, num_pages,
                                           num_splits, softmax_scale, q, k, v, nullptr, nullptr, cache_seqlens,
                                           block_table, out, lse, workspace, auto_splits_table, splits_per_sequence,
                                           stream);
}

int splitkv_decode_attention(int layout, int dtype, int batch, int num_heads, int num_kv_heads, int head_dim,
                             int cache_capacity, int page_size, int max_pages_per_seq, int num_pages,
                             int num_splits, float softmax_scale, const void* q, const void* k, const void* v,
                             const int32_t* cache_seqlens, const int32_t* block_table, void* out, float* lse,
                             void* workspace, void* stream) {
  return splitkv_decode_attention_per_sequence(layout, dtype, batch, num_heads, num_kv_heads, head_dim,
                                               cache_capacity, page_size, max_pages_per_seq, num_pages, num_splits,
                                               softmax_scale, q, k, v, cache_seqlens, block_table, out, lse,
                                               workspace, nullptr, nullptr, stream);
}

int splitkv_auto_table_bytes(void) { return static_cast<int>(sizeof(splitkv::AutoSplitsTable{}.splits)); }

int splitkv_auto_grid_bound(const unsigned char* auto_splits_table, int batch, int cache_capacity) {
  if (auto_splits_table == nullptr) return 1;
  splitkv::AutoSplitsTable table;
  std::memcpy(table.splits, auto_splits_table, sizeof(table.splits));
  return splitkv::auto_grid_bound(table, batch, cache_capacity);
}

const char* splitkv_last_error(void) { return splitkv::last_error_message(); }

}  // extern "C"
