/* C ABI of the split-count heuristics, for ctypes and engines that cannot include C++ headers.
 * The table is picked at each call from the device name, SM count and KV cache dtype, as
 * NumSplitsPolicy does (heuristics/include/splitkv/num_splits.hpp): a generated table when they
 * match, for an fp8 cache without its own table the GPU's 16-bit one, else the documented
 * fallback rule. The calls without a kv_dtype are those of a bf16/fp16 cache.
 *
 * kv_dtype takes the values of the kernels' C ABI (splitkv/c_api.h), which this header does not
 * include so that it stands alone:
 *   0  SPLITKV_KV_DTYPE_SAME_AS_Q  bf16/fp16 cache, as q
 *   1  SPLITKV_KV_DTYPE_FP8_E4M3   e4m3 cache
 * Any other value is refused: the call returns -1. */
#ifndef SPLITKV_NUM_SPLITS_C_API_H
#define SPLITKV_NUM_SPLITS_C_API_H

#ifdef __cplusplus
extern "C" {
#endif

/* Host-side choice. max_seqlen 0 means unknown: the capacity-only table is used. page_size 0
 * means a contiguous cache. */
int splitkv_num_splits(const char* device_name, int sm_count, int batch, int num_heads, int num_kv_heads,
                       int head_dim, int max_seqlen, int cache_capacity, int page_size);

/* The same for a KV cache of `kv_dtype` (0 or 1, above; -1 for any other value). */
int splitkv_num_splits_kv_dtype(const char* device_name, int sm_count, int kv_dtype, int batch, int num_heads,
                                int num_kv_heads, int head_dim, int max_seqlen, int cache_capacity, int page_size);

/* The same for a ragged batch whose real lengths sum to total_seqlen (with max_seqlen > 0): the
 * table is asked about the batch of max-length sequences doing that work (effective_batch in
 * splitkv/num_splits.hpp). total_seqlen 0 gives splitkv_num_splits. */
int splitkv_num_splits_ragged(const char* device_name, int sm_count, int batch, int num_heads, int num_kv_heads,
                              int head_dim, int max_seqlen, long long total_seqlen, int cache_capacity,
                              int page_size);

/* Fills a num_splits = auto table (splitkv_auto_table_bytes() bytes: effective-batch classes x
 * length buckets, splitkv::AutoSplitsTable) for a model shape, from this GPU's tuned table.
 * Returns 0, or -1 on bad arguments (null table, or `bytes` not the table's size). */
int splitkv_auto_splits_table(const char* device_name, int sm_count, int num_heads, int num_kv_heads, int head_dim,
                              int page_size, unsigned char* table, int bytes);

/* The same for a KV cache of `kv_dtype` (0 or 1, above). Returns 0, or -1 on bad arguments (those
 * above, or another kv_dtype; nothing is written then). */
int splitkv_auto_splits_table_kv_dtype(const char* device_name, int sm_count, int kv_dtype, int num_heads,
                                       int num_kv_heads, int head_dim, int page_size, unsigned char* table,
                                       int bytes);

/* FlashAttention 2's own choice for a decode step whose seqlen_k is `seqlen_k` (pass the
 * capacity to reproduce its KV-cache path), and the splits that then hold work on a cache whose
 * real length is context_len (FA2 cuts the capacity, not the real length). */
int splitkv_fa2_num_splits(int batch, int num_heads, int num_kv_heads, int head_dim, int seqlen_k, int sm_count);
int splitkv_fa2_splits_with_work(int cache_capacity, int context_len, int num_splits);

#ifdef __cplusplus
}
#endif

#endif /* SPLITKV_NUM_SPLITS_C_API_H */
