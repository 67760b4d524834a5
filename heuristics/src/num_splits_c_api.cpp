#include "splitkv/num_splits_c_api.h"

#include <cstring>
#include <string_view>

#include "splitkv/c_api.h"
#include "splitkv/heuristics/baseline_policies.hpp"
#include "splitkv/num_splits.hpp"
#include "splitkv/split_partition.hpp"

// num_splits_c_api.h documents these values without including the kernels' header.
static_assert(SPLITKV_KV_DTYPE_SAME_AS_Q == static_cast<int>(splitkv::NumSplitsKvDtype::sixteen_bit) &&
                  SPLITKV_KV_DTYPE_FP8_E4M3 == static_cast<int>(splitkv::NumSplitsKvDtype::fp8_e4m3),
              "kv_dtype of the heuristics' C ABI is the kernels' SPLITKV_KV_DTYPE_*");

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

// The policy for a C kv_dtype; false for a value the C ABI does not define.
bool policy_for(const char* device_name, int sm_count, int kv_dtype, splitkv::NumSplitsPolicy& policy) {
  if (kv_dtype != SPLITKV_KV_DTYPE_SAME_AS_Q && kv_dtype != SPLITKV_KV_DTYPE_FP8_E4M3) return false;
  policy = splitkv::NumSplitsPolicy::for_device(device_name ? device_name : "", sm_count,
                                                static_cast<splitkv::NumSplitsKvDtype>(kv_dtype));
  return true;
}

}  // namespace

extern "C" {

int splitkv_num_splits(const char* device_name, int sm_count, int batch, int num_heads, int num_kv_heads,
                       int head_dim, int max_seqlen, int cache_capacity, int page_size) {
  return splitkv_num_splits_kv_dtype(device_name, sm_count, SPLITKV_KV_DTYPE_SAME_AS_Q, batch, num_heads,
                                     num_kv_heads, head_dim, max_seqlen, cache_capacity, page_size);
}

int splitkv_num_splits_kv_dtype(const char* device_name, int sm_count, int kv_dtype, int batch, int num_heads,
                                int num_kv_heads, int head_dim, int max_seqlen, int cache_capacity, int page_size) {
  splitkv::NumSplitsPolicy policy;
  if (!policy_for(device_name, sm_count, kv_dtype, policy)) return -1;
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
  return splitkv_auto_splits_table_kv_dtype(device_name, sm_count, SPLITKV_KV_DTYPE_SAME_AS_Q, num_heads,
                                            num_kv_heads, head_dim, page_size, table, bytes);
}

int splitkv_auto_splits_table_kv_dtype(const char* device_name, int sm_count, int kv_dtype, int num_heads,
                                       int num_kv_heads, int head_dim, int page_size, unsigned char* table,
                                       int bytes) {
  splitkv::AutoSplitsTable filled;
  if (table == nullptr || bytes != static_cast<int>(sizeof(filled.splits))) return -1;
  splitkv::NumSplitsPolicy policy;
  if (!policy_for(device_name, sm_count, kv_dtype, policy)) return -1;
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
