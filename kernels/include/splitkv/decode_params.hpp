// Plain description of one decode-attention call. No CUDA types here, so host
// planning code (tuner, heuristics, the C ABI) can include it without nvcc.
#pragma once

#include <cstdint>

namespace splitkv {

enum class KvLayout : int { contiguous = 0, paged = 1 };
enum class DType : int { bf16 = 0, fp16 = 1 };
// Element type of the K/V cache. same_as_q: K and V are `dtype` like q and out. fp8_e4m3: K and V
// are OCP e4m3 codes (1 sign, 4 exponent bits of bias 7, 3 mantissa bits, no infinity, 0x7F/0xFF
// NaN) whose real values are code * descale, one fp32 descale per (sequence, kv head) for K and
// one for V (FlashAttention 3's k_descale / v_descale); q and out stay `dtype`.
enum class KvDtype : int { same_as_q = 0, fp8_e4m3 = 1 };

enum class Status : int {
  ok = 0,
  invalid_argument = 1,  // shape or pointer the kernels cannot serve
  unsupported = 2,       // valid request this build has no kernel for
  cuda_error = 3,        // a CUDA call failed; see the message
};

// Upper bound on num_splits: the combine kernel and workspace are sized for it, so one
// captured CUDA graph serves every split count up to here.
inline constexpr int kMaxSplits = 256;
// Largest batch the persistent schedule of per-sequence split counts serves: its work-item
// offsets ([batch + 1] ints) sit in shared memory beside the pipelines of its warp groups, and
// 8 KB more still fits two groups at head_dim 128 (three at 64) in one CTA on sm_90. Larger
// batches run one CTA per possible work item.
inline constexpr int kMaxPersistentBatch = 2047;
// Tokens one CTA consumes per pipeline step; splits are aligned to it.
inline constexpr int kTokensPerTile = 64;

// Split counts chosen on the device ("num_splits = auto"). Every CTA reads the batch's
// cache_seqlens and asks this table about the batch's effective batch (total real length / max real
// length, rounded: the batch of max-length sequences doing the same work, as the host's
// NumSplitsShape::total_seqlen lookup does) and its max real length. No length travels to the host,
// so one captured CUDA graph serves every length. The host fills it once per model shape from a
// tuned table (NumSplitsPolicy::fill_auto_splits, or the C ABI's splitkv_auto_splits_table) and
// copies it to device memory once: a kernel argument this size made every launch slower
// (~15 ns per CTA).
// Row r: effective batches nearest auto_batch_class_batch(r) on a log scale (auto_batch_class);
// column i: lengths nearest 2^i (length_bucket). Both in split_partition.hpp.
struct AutoSplitsTable {
  static constexpr int kLengthBuckets = 24;  // lengths up to 2^23 tokens
  static constexpr int kBatchClasses = 40;   // 1..8 exactly, then quarter octaves up to 2048
  unsigned char splits[kBatchClasses][kLengthBuckets] = {};
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
  DType dtype = DType::bf16;  // q and out; also K and V unless kv_dtype says otherwise
  KvDtype kv_dtype = KvDtype::same_as_q;

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
  bool per_sequence_splits = false;  // num_splits = auto: the device picks from auto_splits
  // Device memory, 4-byte aligned, filled before the call and left in place while a captured graph
  // may replay it. Entries are clamped to [1, num_splits].
  const AutoSplitsTable* auto_splits = nullptr;
  // Optional device array [batch] of explicit per-sequence split counts, for schedules computed on
  // the device by someone else (FA3's prepare kernel, say). Clamped to [1, num_splits]; takes
  // precedence over auto_splits.
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
  // fp8_e4m3 only, and then required: device arrays [batch, num_kv_heads] of fp32 factors that
  // turn the stored codes into K and V values (a per-tensor scale is every entry equal). Read
  // after the grid dependency wait, so the previous kernel may write them.
  const float* k_descale = nullptr;
  const float* v_descale = nullptr;

  // Bytes of one K (or V) element in the cache.
  int kv_element_bytes() const { return kv_dtype == KvDtype::fp8_e4m3 ? 1 : 2; }
  int group_size() const { return num_kv_heads > 0 ? num_heads / num_kv_heads : 0; }
  // Tokens addressable per sequence: what FA2's heuristic calls seqlen_k.
  int capacity_tokens() const {
    return layout == KvLayout::paged ? max_pages_per_seq * page_size : cache_capacity;
  }
};

}  // namespace splitkv
