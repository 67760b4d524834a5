/* C ABI of the splitkv decode kernels, for ctypes and engines that cannot take C++ types.
 * Tensor layouts are those of splitkv/decode_params.hpp. Every call returns 0 on success or a
 * splitkv::Status code (1 invalid argument, 2 unsupported, 3 CUDA error); splitkv_last_error()
 * then describes the failure. */
#ifndef SPLITKV_C_API_H
#define SPLITKV_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { SPLITKV_LAYOUT_CONTIGUOUS = 0, SPLITKV_LAYOUT_PAGED = 1 };
enum { SPLITKV_DTYPE_BF16 = 0, SPLITKV_DTYPE_FP16 = 1 };
/* Element type of the K/V cache (splitkv::KvDtype). */
enum { SPLITKV_KV_DTYPE_SAME_AS_Q = 0, SPLITKV_KV_DTYPE_FP8_E4M3 = 1 };

/* Largest num_splits the kernels accept. */
int splitkv_max_splits(void);

/* Bytes of scratch memory a call with these sizes needs (0 when num_splits == 1). */
size_t splitkv_workspace_bytes(int batch, int num_heads, int head_dim, int num_splits);

/* Enqueues the split kernel and, for num_splits > 1, the combine on `stream` (a cudaStream_t,
 * NULL for the default stream). Paged-only arguments are ignored for the contiguous layout and
 * cache_capacity is ignored for the paged one. lse may be NULL. softmax_scale 0 selects
 * 1/sqrt(head_dim). */
int splitkv_decode_attention(int layout, int dtype, int batch, int num_heads, int num_kv_heads, int head_dim,
                             int cache_capacity, int page_size, int max_pages_per_seq, int num_pages,
                             int num_splits, float softmax_scale, const void* q, const void* k, const void* v,
                             const int32_t* cache_seqlens, const int32_t* block_table, void* out, float* lse,
                             void* workspace, void* stream);

/* Bytes of a num_splits = auto table (splitkv::AutoSplitsTable: effective-batch classes x length
 * buckets, row-major). Fill one with splitkv_auto_splits_table (libsplitkv_heuristics_c). */
int splitkv_auto_table_bytes(void);

/* The same call with per-sequence split counts ("num_splits = auto"). num_splits is then the grid's
 * upper bound. splits_per_sequence (device memory, [batch], may be NULL) gives explicit counts;
 * otherwise auto_splits_table (DEVICE memory, 4-byte aligned, splitkv_auto_table_bytes() entries, kept
 * alive while a captured graph may replay the call) is what the device asks about the batch's
 * effective batch and max real length, read from cache_seqlens. */
int splitkv_decode_attention_per_sequence(int layout, int dtype, int batch, int num_heads, int num_kv_heads,
                                          int head_dim, int cache_capacity, int page_size, int max_pages_per_seq,
                                          int num_pages, int num_splits, float softmax_scale, const void* q,
                                          const void* k, const void* v, const int32_t* cache_seqlens,
                                          const int32_t* block_table, void* out, float* lse, void* workspace,
                                          const unsigned char* auto_splits_table,
                                          const int32_t* splits_per_sequence, void* stream);

/* The per-sequence call with the cache's element type. kv_dtype SPLITKV_KV_DTYPE_FP8_E4M3: k and v
 * hold e4m3 codes (one byte per element, same layouts), q and out stay `dtype`, and k_descale /
 * v_descale (DEVICE memory, fp32 [batch, num_kv_heads], both required) turn codes into values: K =
 * code * k_descale[b * num_kv_heads + h]. SPLITKV_KV_DTYPE_SAME_AS_Q: both descales must be NULL and
 * the call is splitkv_decode_attention_per_sequence. auto_splits_table and splits_per_sequence both
 * NULL: the fixed num_splits. */
int splitkv_decode_attention_kv_dtype(int layout, int dtype, int kv_dtype, int batch, int num_heads, int num_kv_heads,
                                      int head_dim, int cache_capacity, int page_size, int max_pages_per_seq,
                                      int num_pages, int num_splits, float softmax_scale, const void* q,
                                      const void* k, const void* v, const float* k_descale, const float* v_descale,
                                      const int32_t* cache_seqlens, const int32_t* block_table, void* out,
                                      float* lse, void* workspace, const unsigned char* auto_splits_table,
                                      const int32_t* splits_per_sequence, void* stream);

/* Smallest num_splits bound that serves every batch of `batch` sequences with lengths up to
 * cache_capacity under an auto table (HOST memory: the copy it was uploaded from): the bound to
 * launch, or capture, for "auto", and what the workspace is sized for. */
int splitkv_auto_grid_bound(const unsigned char* auto_splits_table, int batch, int cache_capacity);

/* Message of the last failed call on this thread ("" if none). */
const char* splitkv_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* SPLITKV_C_API_H */
