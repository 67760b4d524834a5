#include "splitkv/num_splits_c_api.h"

#include <cstring>
#include <string_view>

#include "splitkv/heuristics/baseline_policies.hpp"
#include "splitkv/num_splits.hpp"
#include "splitkv/split_partition.hpp"

namespace {

splitkv::NumSplitsShape shape_of(int batch, int num_heads, int num_kv_heads, int head_dim, int max_seqlen,
                                 int cache_capacity, int page_size) {
  splitkv::NumSplitsShape shape;
  shape.batch = batch;
  shape.num_heads = num_heads;
  shape.num_kv_heads = num_kv_heads;
  shape.head_dim = head_dim;
  shape.max_seqlen = max_seqlen;
  shape.cache_capacity = cache_capacity;
  shape.page_size = page_size;
  return shape;
}

}  // namespace

extern "C" {

int splitkv_num_splits(const char* device_name, int sm_count, int batch, int num_heads, int num_kv_heads,
                       int head_dim, int max_seqlen, int cache_capacity, int page_size) {
  const auto policy = splitkv::NumSplitsPolicy::for_device(device_name ? device_name : "", sm_count);
  return policy(shape_of(batch, num_heads, num_kv_heads, head_dim, max_seqlen, cache_capacity, page_size));
}

int splitkv_num_splits_ragged(const char* device_name, int sm_count, int batch, int num_heads, int num_kv_heads,
                              int head_dim, int max_seqlen, long long total_seqlen, int cache_capacity,
                              int page_size) {
  const auto policy = splitkv::NumSplitsPolicy::for_device(device_name ? device_name : "", sm_count);
  splitkv::NumSplitsShape shape = shape_of(batch, num_heads, num_kv_heads, head_dim, max_seqlen, cache_capacity, page_size);
  shape.total_seqlen = total_seqlen;
  return policy(shape);
}

int splitkv_auto_splits_table(const char* device_name, int sm_count, int num_heads, int num_kv_heads, int head_dim,
                              int page_size, unsigned char* table, int bytes) {
  splitkv::AutoSplitsTable filled;
  if (table == nullptr || bytes != static_cast<int>(sizeof(filled.splits))) return -1;
  const auto policy = splitkv::NumSplitsPolicy::for_device(device_name ? device_name : "", sm_count);
  policy.fill_auto_splits(shape_of(1, num_heads, num_kv_heads, head_dim, 0, 0, page_size), filled);
  std::memcpy(table, filled.splits, sizeof(filled.splits));
  return 0;
}

int splitkv_fa2_num_splits(int batch, int num_heads, int num_kv_heads, int head_dim, int seqlen_k, int sm_count) {
  splitkv::heuristics::DecodeShape shape;
  shape.batch = batch;
  shape.num_heads = num_heads;
  shape.num_kv_heads = num_kv_heads;
  shape.head_dim = head_dim;
  shape.context_len = seqlen_k;
  shape.capacity_tokens = seqlen_k;
  shape.num_sms = sm_count;
  return splitkv::heuristics::fa2_num_splits(shape, seqlen_k);
}

int splitkv_fa2_splits_with_work(int cache_capacity, int context_len, int num_splits) {
  return splitkv::heuristics::capacity_chunks_with_work(cache_capacity, context_len, num_splits);
}

}  // extern "C"
