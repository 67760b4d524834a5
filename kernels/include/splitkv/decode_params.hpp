// Plain description of one decode-attention call. No CUDA types here, so host
// planning code (tuner, heuristics, the C ABI) can include it without nvcc.
#pragma once

#include <cstdint>

namespace splitkv {

enum class KvLayout : int { contiguous = 0, paged = 1 };
enum class DType : int { bf16 = 0, fp16 = 1 };

enum class Status : int {
  ok = 0,
  invalid_argument = 1,  // shape or pointer the kernels cannot serve
  unsupported = 2,       // valid request this build has no kernel for
  cuda_error = 3,        // a CUDA call failed; see the message
};

// Upper bound on num_splits: the combine kernel and workspace are sized for it, so one
// captured CUDA graph serves every split count up to here.
inline constexpr int kMaxSplits = 256;
// Tokens one CTA consumes per pipeline step; splits are aligned to it.
inline constexpr int kTokensPerTile = 64;

// Per-sequence split counts chosen on the device ("num_splits = auto"). The host fills one split
// count per length bucket for the batch's shape (from a tuned table, see heuristics/); each CTA
// looks up its sequence's real length in it, so no length ever travels to the host and one
// captured graph serves every length. Bucket i holds lengths nearest to 2^i on a log scale
// (length_bucket in split_partition.hpp).
struct SplitsByLength {
  static constexpr int kBuckets = 24;  // lengths up to 2^23 tokens
  unsigned char splits[kBuckets] = {};
};

// Layout of every tensor follows FlashAttention's decode API:
//   q, out        [batch, num_heads, head_dim]                 (dense)
//   contiguous k,v [batch, cache_capacity, num_kv_heads, head_dim]
//   paged k,v      [num_pages, page_size, num_kv_heads, head_dim]
//   block_table    [batch, max_pages_per_seq] int32            (paged only)
//   cache_seqlens  [batch] int32, the real lengths, device memory, never read on the host
//   lse            [batch, num_heads] float32, natural log of the softmax denominator
// Query head h attends with kv head h / (num_heads / num_kv_heads).
struct DecodeParams {
  KvLayout layout = KvLayout::contiguous;
  DType dtype = DType::bf16;

  int batch = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int cache_capacity = 0;      // contiguous: tokens allocated per sequence
  int page_size = 0;           // paged only
  int max_pages_per_seq = 0;   // paged only: block_table row length
  int num_pages = 0;           // paged only: pages in the pool (bounds-checked on host)
  int num_splits = 1;          // 1..kMaxSplits; splits past a sequence's real work exit early.
                               // With per_sequence_splits: the grid's upper bound (CUDA-graph cap).
  bool per_sequence_splits = false;  // num_splits = auto: each sequence takes splits_by_length
  SplitsByLength splits_by_length;   // entries in [1, 255], clamped to num_splits
  // Optional device array [batch] of explicit per-sequence split counts, for schedules computed on
  // the device by someone else (FA3's prepare kernel, say). Clamped to [1, num_splits]; takes
  // precedence over splits_by_length.
  const int32_t* splits_per_sequence = nullptr;
  float softmax_scale = 0.f;   // 0 means 1/sqrt(head_dim)

  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const int32_t* cache_seqlens = nullptr;
  const int32_t* block_table = nullptr;
  // Optional host copy of cache_seqlens. When given, validate() checks every length against
  // the capacity; the kernels never read it (they clamp device lengths to the capacity).
  const int32_t* host_cache_seqlens = nullptr;
  void* out = nullptr;
  float* lse = nullptr;        // optional
  void* workspace = nullptr;   // required when num_splits > 1; see decode_workspace_bytes

  int group_size() const { return num_kv_heads > 0 ? num_heads / num_kv_heads : 0; }
  // Tokens addressable per sequence: what FA2's heuristic calls seqlen_k.
  int capacity_tokens() const {
    return layout == KvLayout::paged ? max_pages_per_seq * page_size : cache_capacity;
  }
};

}  // namespace splitkv
