// Split-KV decode attention: one CTA per (split, batch, kv head), the whole query group of
// that kv head in the CTA, so every K/V byte is read from HBM once.
//
// Per CTA: the group's queries (padded to the 16 MMA rows) sit in shared memory; K/V tiles of
// kTokensPerTile tokens stream through a cp.async ring of kStages buffers; each of the 4 warps
// owns 16 tokens of a tile and keeps its own online-softmax state (S = Q K^T and O += P V on
// tensor cores). The warps merge their states once at the end. A sequence whose work fits in one
// split writes the final output directly; otherwise each split writes a normalized fp32 partial
// and its LSE for the combine kernel.
#pragma once

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "splitkv/kernels/fp8_tile_layout.hpp"
#include "splitkv/kernels/mma_sm80.cuh"
#include "splitkv/split_partition.hpp"

namespace splitkv::kernels {

inline constexpr int kWarpsPerCta = 4;
inline constexpr int kThreadsPerCta = kWarpsPerCta * 32;
inline constexpr int kMmaRows = 16;             // query-group rows, padded to the MMA's M
inline constexpr int kTokensPerWarp = kTokensPerTile / kWarpsPerCta;
static_assert(kTokensPerWarp == 16, "each warp feeds one m16n8k16 k-step of P V per tile");

// Device-side arguments: the host fills them once from DecodeParams.
struct DecodeKernelArgs {
  const void* q;
  const void* k;
  const void* v;
  const int32_t* cache_seqlens;
  const int32_t* block_table;
  void* out;
  float* lse;
  float* partial_out;  // [batch * num_heads, num_splits, head_dim]
  float* partial_lse;  // [batch * num_heads, num_splits]
  int num_heads;
  int num_kv_heads;
  int group_size;
  int cache_capacity;  // contiguous: tokens per sequence; paged: pages * page_size
  int page_shift;      // log2(page_size), paged only
  int max_pages_per_seq;
  int num_splits;      // grid bound and partial-buffer stride
  float scale_log2;    // softmax_scale * log2(e): the kernel works in base 2
  int batch;
  int per_sequence_splits;
  const int32_t* splits_per_sequence;
  // Speculative prefetch (contiguous layout): before its grid dependency wait, a CTA whose linear
  // index is below prefetch_ctas asks L2 for the first prefetch_tiles tiles of its first work item,
  // placed by a length read before the wait. 0 tiles: none.
  int prefetch_tiles;
  int prefetch_ctas;
  // CTAs of the CTA-per-item grid below this linear index are resident at the launch (the first
  // wave), so they can read their length and place their item before the wait.
  int early_ctas;
  // fp8 caches: [batch, num_kv_heads] factors from codes to K / V values (null otherwise).
  const float* k_descale;
  const float* v_descale;
};

// The num_splits = auto table as a kernel argument of its own, so kernels launched without it
// keep the small parameter block of DecodeKernelArgs (a 1080-byte block cost every CTA ~15 ns:
// B1 32/8 L16384 at 128 splits 43.4 -> 60.2 us).
template <bool kAuto>
struct AutoTableArgument {};
template <>
struct AutoTableArgument<true> {
  const AutoSplitsTable* table;  // device memory
  int launch_batch_row;          // auto_batch_class(batch): the host knows it, so no CTA computes it
};

// Row stride, in splits, of the partial outputs. Under num_splits = auto every sequence of the call
// has the batch's own count, so the partials are strided by it and the combine reads a region as
// small as a fixed count's; otherwise by the grid's bound. The split kernel writes and the combine
// reads with it.
template <bool kAuto>
__device__ __forceinline__ int64_t partial_split_stride(const DecodeKernelArgs& args, int splits) {
  return kAuto ? splits : args.num_splits;
}

// A length as the kernels use it: cache_seqlens may hold anything, the cache holds [0, capacity].
__device__ __forceinline__ int clamp_to_capacity(const DecodeKernelArgs& args, int length) {
  return min(max(length, 0), args.cache_capacity);
}

__device__ __forceinline__ int clamped_length(const DecodeKernelArgs& args, int batch_index) {
  return clamp_to_capacity(args, args.cache_seqlens[batch_index]);
}

// num_splits = auto: the table's count for the whole batch, from every sequence's real length
// (effective batch and max length, split_partition.hpp). The same in every CTA, so the split
// kernel and the combine agree. In two halves, so a caller can put work between the loads and
// their use: `issue_loads` asks for the lengths and the table in one memory round trip and uses
// none of them; `finish` (block-wide: every thread of the CTA calls it once) reduces them. Nothing
// consumes a length between the two (folding each length in as it was loaded made a later use wait
// for a second round trip). kThreads is the CTA's size.
template <int kThreads>
struct BatchAutoDecision {
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kTableWords = sizeof(AutoSplitsTable) / 4;
  static constexpr int kWordsPerRow = AutoSplitsTable::kLengthBuckets / 4;
  static_assert(sizeof(AutoSplitsTable) % 4 == 0 && AutoSplitsTable::kLengthBuckets % 4 == 0,
                "the table is copied in 4-byte words");
  static_assert(kTableWords <= 2 * kThreads, "two table words per thread");
  static_assert(kWordsPerRow <= 32, "one table row per warp");

  uint32_t first_word = 0, second_word = 0;  // this thread's share of the table
  uint32_t guess_row_word = 0;               // lanes < kWordsPerRow: the row of the launch's batch
  int own_raw = 0;                           // cache_seqlens[threadIdx.x] when threadIdx.x < batch
  int longest = 0, shortest = 0;
  long long total = 0;

  // After finish():
  int splits = 1;
  bool uniform = false;  // every sequence has the same length (`longest`)

  __device__ __forceinline__ void issue_loads(const DecodeKernelArgs& args, const AutoTableArgument<true>& argument) {
    own_raw = static_cast<int>(threadIdx.x) < args.batch ? args.cache_seqlens[threadIdx.x] : 0;
    const uint32_t* words = reinterpret_cast<const uint32_t*>(argument.table);
    const int lane = threadIdx.x % 32;
    if (lane < kWordsPerRow) guess_row_word = __ldg(words + argument.launch_batch_row * kWordsPerRow + lane);
    // The table's words land in registers and go to shared memory in choose_splits() (non-uniform
    // batches only): storing each word at once would wait for it before the lengths are even
    // asked for.
    first_word = threadIdx.x < kTableWords ? __ldg(words + threadIdx.x) : 0u;
    second_word = threadIdx.x + kThreads < kTableWords ? __ldg(words + threadIdx.x + kThreads) : 0u;
  }

  // The launch batch's row at `length`, clamped to [1, the grid's bound], loaded by this thread
  // alone (no shuffle, no issue_loads): the persistent kernel's guess before its wait, and its count
  // for a uniform batch whose length moved across the wait.
  __device__ __forceinline__ static int table_count(const DecodeKernelArgs& args, const AutoTableArgument<true>& argument,
                                                    int length) {
    const int bucket = length_bucket(length);
    const uint32_t word = __ldg(reinterpret_cast<const uint32_t*>(argument.table) +
                                argument.launch_batch_row * kWordsPerRow + bucket / 4);
    return count_in_word(args, word, bucket);
  }

  // The launch batch's row at `length`, clamped to [1, the grid's bound]. Warp-wide (a shuffle).
  __device__ __forceinline__ int row_count(const DecodeKernelArgs& args, int length) const {
    const int bucket = length_bucket(length);
    return count_in_word(args, __shfl_sync(0xffffffffu, guess_row_word, bucket / 4), bucket);
  }

  // Bucket `bucket`'s count from the row word that holds it (four one-byte counts per word),
  // clamped to [1, the grid's bound].
  __device__ __forceinline__ static int count_in_word(const DecodeKernelArgs& args, uint32_t word, int bucket) {
    const int chosen = static_cast<int>((word >> (8 * (bucket % 4))) & 0xffu);
    return chosen < 1 ? 1 : (chosen > args.num_splits ? args.num_splits : chosen);
  }

  // Block-wide (every thread of the CTA calls it once): the longest, shortest and total length,
  // and whether the batch is uniform. Needs the lengths only, not the table.
  __device__ __forceinline__ void reduce_lengths(const DecodeKernelArgs& args) {
    __shared__ int warp_longest[kWarps], warp_shortest[kWarps];
    __shared__ long long warp_total[kWarps];
    longest = 0;
    shortest = INT_MAX;
    total = 0;
    if (static_cast<int>(threadIdx.x) < args.batch) {
      longest = shortest = clamp_to_capacity(args, own_raw);
      total = longest;
    }
    for (int b = threadIdx.x + kThreads; b < args.batch; b += kThreads) {  // batches past kThreads
      const int length = clamped_length(args, b);
      longest = max(longest, length);
      shortest = min(shortest, length);
      total += length;
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      longest = max(longest, __shfl_xor_sync(0xffffffffu, longest, offset));
      shortest = min(shortest, __shfl_xor_sync(0xffffffffu, shortest, offset));
      total += __shfl_xor_sync(0xffffffffu, total, offset);
    }
    if (threadIdx.x % 32 == 0) {
      warp_longest[threadIdx.x / 32] = longest;
      warp_shortest[threadIdx.x / 32] = shortest;
      warp_total[threadIdx.x / 32] = total;
    }
    // Not __syncthreads(): in the persistent kernel the warp groups reach this barrier from
    // divergent paths (one after draining its guessed item, another at once), which the aligned
    // form does not allow.
    asm volatile("barrier.sync 0;\n" ::: "memory");
    longest = 0;
    shortest = INT_MAX;
    total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      longest = max(longest, warp_longest[w]);
      shortest = min(shortest, warp_shortest[w]);
      total += warp_total[w];
    }
    uniform = shortest == longest;
  }

  // Block-wide, after reduce_lengths: the table's count. A uniform batch's effective batch is the
  // launch batch, so its count is in the row every warp already holds (the guess's row): no
  // shared-memory table, no second barrier, and no wait for the whole table's loads, which a per-CTA
  // trace found arriving late. Other batches copy the table to shared memory.
  __device__ __forceinline__ void choose_splits(const DecodeKernelArgs& args) {
    if (uniform) {
      splits = row_count(args, longest);
      return;
    }
    __shared__ uint32_t table_words[kTableWords];
    if (threadIdx.x < kTableWords) table_words[threadIdx.x] = first_word;
    if (threadIdx.x + kThreads < kTableWords) table_words[threadIdx.x + kThreads] = second_word;
    asm volatile("barrier.sync 0;\n" ::: "memory");
    splits = auto_split_count(*reinterpret_cast<const AutoSplitsTable*>(table_words), total, longest, args.batch,
                              args.num_splits);
  }

  __device__ __forceinline__ void finish(const DecodeKernelArgs& args) {
    reduce_lengths(args);
    choose_splits(args);
  }
};

// Both halves at once, for callers with nothing to overlap; 0 for kernels launched without the
// table. Block-wide.
template <int kThreads, bool kAuto>
__device__ __forceinline__ int batch_auto_split_count(const DecodeKernelArgs& args,
                                                      const AutoTableArgument<kAuto>& auto_table) {
  if constexpr (!kAuto) {
    return 0;
  } else {
    BatchAutoDecision<kThreads> decision;
    decision.issue_loads(args, auto_table);
    decision.finish(args);
    return decision.splits;
  }
}

// The 4 warps that run one work item. A CTA of the persistent schedule holds kGroups of them, each
// with its own pipeline buffers and named barrier, so it walks several work items at once while
// being the only CTA on its SM. Both members derive from threadIdx.x, so
// the compiler can recompute them instead of holding registers; one group is the whole CTA and
// syncs with __syncthreads, barrier 0.
template <int kGroups>
struct WarpGroup {
  static_assert(kGroups >= 1 && kGroups <= 15, "named barriers 1..15");
  __device__ __forceinline__ static int index() { return kGroups == 1 ? 0 : threadIdx.x / kThreadsPerCta; }
  __device__ __forceinline__ static unsigned thread() {
    return kGroups == 1 ? threadIdx.x : threadIdx.x % kThreadsPerCta;
  }
  __device__ __forceinline__ static void sync() {
    if constexpr (kGroups == 1) {
      __syncthreads();
    } else {
      // ptxas then reserves all 16 named barriers for the CTA; immediate ids (3 barriers) measured
      // no faster on the capacity scenario, 1.083 against 1.078.
      asm volatile("bar.sync %0, %1;\n" ::"r"(1 + index()), "n"(kThreadsPerCta) : "memory");
    }
  }
};

// Splits of a sequence: an explicit per-sequence count, the batch's auto count, or the fixed one.
__device__ __forceinline__ int splits_of_sequence(const DecodeKernelArgs& args, int batch_index, int batch_auto_splits) {
  if (args.splits_per_sequence != nullptr)
    return min(max(args.splits_per_sequence[batch_index], 1), args.num_splits);
  return args.per_sequence_splits != 0 ? batch_auto_splits : args.num_splits;
}

template <int kHeadDim>
struct TileGeometry {
  static constexpr int kChunksPerRow = kHeadDim / 8;  // 16-byte chunks of one token row
  static constexpr int kTileElements = kTokensPerTile * kHeadDim;
  static constexpr int kChunksPerThread = kTokensPerTile * kChunksPerRow / kThreadsPerCta;
  // Rows are 128..512 bytes, so ldmatrix's 8 row reads at one column would hit one bank group;
  // XOR-ing the chunk with the row spreads them over all 32 banks.
  __device__ __forceinline__ static int swizzle(int row, int chunk) {
    return row * kChunksPerRow + (chunk ^ (row & 7));
  }
};

template <int kHeadDim>
constexpr int decode_stages() {
  return kHeadDim <= 64 ? 4 : 3;
}

// Row stride (floats) of the buffer the four warps merge their outputs through at an item's end:
// kHeadDim + 8 puts each row 8 banks after the previous one, so the four rows a half-warp's float2
// stores touch cover all 32 banks once (+4 gave a 2-way conflict on every one of the 32 stores per
// thread).
template <int kHeadDim>
constexpr int merge_row_stride() {
  return kHeadDim + 8;
}

// The buffer the four warps merge their states through at an item's end (it reuses the ring).
template <int kHeadDim>
constexpr int merge_shared_bytes() {
  return kWarpsPerCta * kMmaRows * merge_row_stride<kHeadDim>() * 4 + 2 * kWarpsPerCta * kMmaRows * 4;
}

template <int kHeadDim>
constexpr int decode_shared_bytes() {
  constexpr int elements = (2 * decode_stages<kHeadDim>() * kTokensPerTile + kMmaRows) * kHeadDim;
  return elements * 2 > merge_shared_bytes<kHeadDim>() ? elements * 2 : merge_shared_bytes<kHeadDim>();
}

// fp8 caches: a ring of e4m3 K and V tiles (Fp8TileLayout) with the bf16 ring's stage count, then
// the fp16 query. No converted tile: the lanes convert their B fragments in registers. Half the
// bf16 ring's bytes per stage, so at head_dim 128 four CTAs fit an SM where the bf16 kernel fits two.
template <int kHeadDim>
constexpr int fp8_decode_shared_bytes() {
  using Layout = Fp8TileLayout<kHeadDim>;
  constexpr int pipeline =
      decode_stages<kHeadDim>() * (Layout::kKeyTileBytes + Layout::kValueTileBytes) + kMmaRows * kHeadDim * 2;
  return pipeline > merge_shared_bytes<kHeadDim>() ? pipeline : merge_shared_bytes<kHeadDim>();
}
// The persistent kernel gives each warp group the bf16 item's shared memory whatever the cache.
static_assert(fp8_decode_shared_bytes<64>() <= decode_shared_bytes<64>() &&
                  fp8_decode_shared_bytes<128>() <= decode_shared_bytes<128>() &&
                  fp8_decode_shared_bytes<256>() <= decode_shared_bytes<256>(),
              "an fp8 item fits a bf16 item's shared memory");

// The query goes to fp16 for the fp8 path's f16 MMAs scaled by this, folded back into the softmax
// scale: bf16 queries up to 65504 / kFp8QueryScale stay finite, and the smallest normal fp16 then
// stands for |q| = 2^-14 / kFp8QueryScale, below which a query element's share of a score is noise.
inline constexpr float kFp8QueryScale = 1.f / 16.f;

// How far (log2 units) a row's scores may pass its running max before the accumulators are
// rescaled: probabilities stay below 2^8.
inline constexpr float kRescaleSlackLog2 = 8.f;

// Four e4m3 codes as two fp16 pairs, the low two bytes in `low`. Exact: every e4m3 value is an
// fp16 value (cvt.rn.f16x2.e4m3x2, one instruction per pair on sm_89+).
__device__ __forceinline__ void e4m3x4_to_half2x2(uint32_t codes, uint32_t& low, uint32_t& high) {
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(low), "=r"(high)
      : "r"(codes));
}

__device__ __forceinline__ float element_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float element_to_float(__half x) { return __half2float(x); }

template <bool kPaged, int kHeadDim>
__device__ __forceinline__ int64_t token_row_offset(const DecodeKernelArgs& args, int batch_index,
                                                    int kv_head, int token) {
  int64_t row;
  if constexpr (kPaged) {
    const int page = __ldg(args.block_table + static_cast<int64_t>(batch_index) * args.max_pages_per_seq +
                           (token >> args.page_shift));
    row = (static_cast<int64_t>(page) << args.page_shift) + (token & ((1 << args.page_shift) - 1));
  } else {
    row = static_cast<int64_t>(batch_index) * args.cache_capacity + token;
  }
  return (row * args.num_kv_heads + kv_head) * kHeadDim;
}

// Before the grid dependency wait: pulls the first `args.prefetch_tiles` tiles of K and V of one
// work item into L2, so that the item's first loads after the wait hit L2 instead of HBM. The
// previous kernel may still be writing the lengths (and the cache's newest rows), so `length` may
// be stale and the range wrong: a prefetch is only a hint, and L2 holds every SM's writes, so
// nothing read here can be what the item reads after the wait. Contiguous layout only: a paged
// cache's page numbers, read before the wait, could name no page at all. `threads` threads call it.
template <typename Element, int kHeadDim>
__device__ __forceinline__ void prefetch_item_tiles(const DecodeKernelArgs& args, int batch_index, int kv_head,
                                                    int split, int splits, int length, bool whole_split_only,
                                                    int thread, int threads) {
  constexpr int kLineBytes = 128;
  // An fp8 row at head_dim 64 is half a line: one prefetch per row.
  constexpr int kRowBytes = kHeadDim * static_cast<int>(sizeof(Element));
  constexpr int kLinesPerRow = kRowBytes >= kLineBytes ? kRowBytes / kLineBytes : 1;
  const SplitRange range = split_range(length, splits, split);
  if (whole_split_only && range.end - range.begin > args.prefetch_tiles * kTokensPerTile) return;
  const int tokens = min(range.end - range.begin, args.prefetch_tiles * kTokensPerTile);
  const Element* k_cache = static_cast<const Element*>(args.k);
  const Element* v_cache = static_cast<const Element*>(args.v);
  for (int line = thread; line < tokens * kLinesPerRow; line += threads) {
    const int64_t offset = token_row_offset<false, kHeadDim>(args, batch_index, kv_head, range.begin + line / kLinesPerRow) +
                           (line % kLinesPerRow) * (kLineBytes / static_cast<int>(sizeof(Element)));
    prefetch_to_l2(k_cache + offset);
    prefetch_to_l2(v_cache + offset);
  }
}

// Where a work item's tokens are: its split's range and how many splits of the sequence hold
// tokens (the combine merges that many).
struct ItemPlacement {
  int live_splits;
  SplitRange range;
};
__device__ __forceinline__ ItemPlacement item_placement(int seqlen, int splits, int split) {
  return {active_splits(seqlen, splits), split_range(seqlen, splits, split)};
}

// One work item: tokens of split `split` of (sequence, kv head) when the sequence has `seqlen`
// tokens in `splits` splits, through the whole pipeline to its partial or final output. Every
// thread of the warp group calls it; it leaves the group's shared memory in use (the epilogue), so
// a caller that runs another item on it must sync the group first.
// `placement_held()` is asked once, in every thread, as soon as the first tiles' loads are in flight
// (at once for an empty split): whether the length the item was placed by still holds. When it says
// no, nothing is written and the call returns false. `placed`: the split's tokens and the
// sequence's live split count (item_placement), which a caller may compute ahead of time (two
// divisions). kCompactPartials: the partials are strided by `splits` (partial_split_stride).
// kFp8: the cache holds e4m3 codes (DecodeKernelArgs::k_descale / v_descale); the K descale is
// folded into the softmax scale and the V descale into the output's normalization, exact in real
// arithmetic, so the dequantization is a plain conversion.
template <typename Element, int kHeadDim, bool kPaged, bool kCompactPartials, bool kFp8, typename Group, typename Held>
__device__ __forceinline__ bool decode_placed_item(const DecodeKernelArgs& args, unsigned char* shared_bytes,
                                                   Group group, int batch_index, int kv_head, int split,
                                                   int splits, int seqlen, const ItemPlacement placed,
                                                   const Held& placement_held) {
  using Geometry = TileGeometry<kHeadDim>;
  // fp8: f16 MMAs (every e4m3 value is an fp16 value; P keeps 3 more bits than in bf16).
  using MmaElement = std::conditional_t<kFp8, __half, Element>;
  using Mma = TensorCore<MmaElement>;
  using Fp8Layout = Fp8TileLayout<kHeadDim>;
  constexpr int kStages = decode_stages<kHeadDim>();
  constexpr int kChunksPerRow = Geometry::kChunksPerRow;
  constexpr int kKeyStageBytes = kFp8 ? Fp8Layout::kKeyTileBytes : 0;
  constexpr int kValueStageBytes = kFp8 ? Fp8Layout::kValueTileBytes : 0;
  constexpr int kElementTiles = kFp8 ? 0 : kStages;  // the bf16 ring

  const int live_splits = placed.live_splits;
  const SplitRange range = placed.range;
  const bool writes_final_output = live_splits <= 1;
  // Empty splits leave nothing behind; the combine derives the same live count from seqlen.
  // Split 0 of an empty sequence still runs, to write zeros and LSE = -inf.
  if (range.begin >= range.end && !(split == 0 && seqlen == 0)) return placement_held();

  unsigned char* code_k = shared_bytes;
  unsigned char* code_v = code_k + kStages * kKeyStageBytes;
  MmaElement* shared_k = reinterpret_cast<MmaElement*>(code_v + kStages * kValueStageBytes);
  MmaElement* shared_v = shared_k + kElementTiles * Geometry::kTileElements;
  MmaElement* shared_q = shared_v + kElementTiles * Geometry::kTileElements;

  const int lane = group.thread() % 32;
  const int warp = group.thread() / 32;
  const int first_head = kv_head * args.group_size;
  const int64_t q_row0 = static_cast<int64_t>(batch_index) * args.num_heads + first_head;

  // Query group -> shared memory; padding rows are zeros so their scores stay finite. (fp8: below,
  // converted, once the first tiles' loads are out.)
  for (int chunk = static_cast<int>(group.thread()); !kFp8 && chunk < kMmaRows * kChunksPerRow;
       chunk += kThreadsPerCta) {
    const int row = chunk / kChunksPerRow;
    const int column = chunk % kChunksPerRow;
    const Element* source = static_cast<const Element*>(args.q) + (q_row0 + row) * kHeadDim + column * 8;
    copy_async_16(shared_address(shared_q + Geometry::swizzle(row, column) * 8),
                  row < args.group_size ? source : static_cast<const Element*>(args.q),
                  row < args.group_size);
  }

  const int64_t descale_index = static_cast<int64_t>(batch_index) * args.num_kv_heads + kv_head;
  const float scale_log2 =
      kFp8 ? args.scale_log2 * args.k_descale[descale_index] * (1.f / kFp8QueryScale) : args.scale_log2;

  const int num_tiles = ceil_div(range.end - range.begin, kTokensPerTile);
  const Element* k_cache = static_cast<const Element*>(args.k);
  const Element* v_cache = static_cast<const Element*>(args.v);
  auto load_tile = [&](int tile, int stage) {
    const int first_token = range.begin + tile * kTokensPerTile;
    if constexpr (kFp8) {
      const unsigned char* k_codes = static_cast<const unsigned char*>(args.k);
      const unsigned char* v_codes = static_cast<const unsigned char*>(args.v);
#pragma unroll
      for (int i = 0; i < kTokensPerTile * Fp8Layout::kChunksPerRow / kThreadsPerCta; ++i) {
        const int chunk = group.thread() + i * kThreadsPerCta;
        const int row = chunk / Fp8Layout::kChunksPerRow;
        const int column = chunk % Fp8Layout::kChunksPerRow;
        const int token = first_token + row;
        const bool valid = token < range.end;
        const int64_t offset =
            valid ? token_row_offset<kPaged, kHeadDim>(args, batch_index, kv_head, token) + column * 16 : 0;
        copy_async_16(shared_address(code_k + stage * kKeyStageBytes + Fp8Layout::key_chunk_offset(row, column)),
                      k_codes + offset, valid);
        copy_async_16(shared_address(code_v + stage * kValueStageBytes + Fp8Layout::value_chunk_offset(row, column)),
                      v_codes + offset, valid);
      }
    } else {
#pragma unroll
      for (int i = 0; i < Geometry::kChunksPerThread; ++i) {
        const int chunk = group.thread() + i * kThreadsPerCta;
        const int row = chunk / kChunksPerRow;
        const int column = chunk % kChunksPerRow;
        const int token = first_token + row;
        const bool valid = token < range.end;
        const int64_t offset =
            valid ? token_row_offset<kPaged, kHeadDim>(args, batch_index, kv_head, token) + column * 8 : 0;
        const int destination = stage * Geometry::kTileElements + Geometry::swizzle(row, column) * 8;
        copy_async_16(shared_address(shared_k + destination), k_cache + offset, valid);
        copy_async_16(shared_address(shared_v + destination), v_cache + offset, valid);
      }
    }
  };

#pragma unroll
  for (int stage = 0; stage < kStages - 1; ++stage) {
    if (stage < num_tiles) load_tile(stage, stage);
    copy_async_commit();  // the Q copies ride in the first group
  }
  if (!placement_held()) {
    copy_async_wait<0>();
    return false;
  }
  if constexpr (kFp8) {
    // The query group in fp16, times kFp8QueryScale, at the positions of the K permutation
    // (Fp8TileLayout::query_position); the first tile's barrier publishes it.
    for (int chunk = static_cast<int>(group.thread()); chunk < kMmaRows * kChunksPerRow; chunk += kThreadsPerCta) {
      const int row = chunk / kChunksPerRow;
      const int column = chunk % kChunksPerRow;
      uint4 raw = make_uint4(0u, 0u, 0u, 0u);
      if (row < args.group_size)
        raw = *reinterpret_cast<const uint4*>(static_cast<const Element*>(args.q) + (q_row0 + row) * kHeadDim +
                                              column * 8);
      const Element* values = reinterpret_cast<const Element*>(&raw);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int position = Fp8Layout::query_position(column * 8 + e);
        shared_q[Geometry::swizzle(row, position / 8) * 8 + position % 8] =
            __float2half_rn(element_to_float(values[e]) * kFp8QueryScale);
      }
    }
  }

  // Accumulator fragment layout (m16n8): element e of n-tile j sits at row lane/4 (+8 for e>=2),
  // column j*8 + (lane%4)*2 + (e&1).
  float output[kHeadDim / 8][4];
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) output[j][e] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};  // per-thread partial sums; reduced across the quad at the end

  // ldmatrix lane roles: lanes 8m..8m+7 give the row addresses of 8x8 matrix m.
  const int matrix = lane / 8;
  const int matrix_row = lane % 8;
  const int q_row = (matrix & 1) * 8 + matrix_row;                          // A: rows, then k halves
  const int k_row = warp * kTokensPerWarp + (matrix >> 1) * 8 + matrix_row;  // B: n halves, k halves
  const int v_row = warp * kTokensPerWarp + (matrix & 1) * 8 + matrix_row;   // B^T: k halves, n halves

  for (int tile = 0; tile < num_tiles; ++tile) {
    copy_async_wait<kStages - 2>();
    group.sync();  // tile is visible, and every warp is done with the stage refilled below
    if (tile + kStages - 1 < num_tiles) load_tile(tile + kStages - 1, (tile + kStages - 1) % kStages);
    copy_async_commit();

    const int warp_first_token = range.begin + tile * kTokensPerTile + warp * kTokensPerWarp;
    if (warp_first_token >= range.end) continue;
    const int stage_offset = (tile % kStages) * Geometry::kTileElements;
    float scores[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    if constexpr (kFp8) {
      // Chunk c of each of the lane's two K rows holds k-steps 4c..4c+3, one code word each.
      const unsigned char* tile_k = code_k + (tile % kStages) * kKeyStageBytes;
#pragma unroll
      for (int c = 0; c < Fp8Layout::kKeyChunksPerLane; ++c) {
        uint4 key_words[2];
#pragma unroll
        for (int n = 0; n < 2; ++n)
          key_words[n] = *reinterpret_cast<const uint4*>(
              tile_k + Fp8Layout::key_chunk_offset(warp * kTokensPerWarp + n * 8 + lane / 4,
                                                   Fp8Layout::key_chunk(lane % 4, c)));
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          const int kk = 4 * c + w;
          uint32_t q_fragment[4];
          load_matrix_x4(q_fragment, shared_address(shared_q + Geometry::swizzle(q_row, kk * 2 + (matrix >> 1)) * 8));
#pragma unroll
          for (int n = 0; n < 2; ++n) {
            const uint32_t word = w == 0 ? key_words[n].x : w == 1 ? key_words[n].y : w == 2 ? key_words[n].z : key_words[n].w;
            uint32_t b0, b1;
            e4m3x4_to_half2x2(word, b0, b1);
            Mma::mma(scores[n], q_fragment, b0, b1);
          }
        }
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        uint32_t q_fragment[4];
        uint32_t k_fragment[4];
        load_matrix_x4(q_fragment, shared_address(shared_q + Geometry::swizzle(q_row, kk * 2 + (matrix >> 1)) * 8));
        load_matrix_x4(k_fragment, shared_address(shared_k + stage_offset +
                                                  Geometry::swizzle(k_row, kk * 2 + (matrix & 1)) * 8));
        Mma::mma(scores[0], q_fragment, k_fragment[0], k_fragment[1]);
        Mma::mma(scores[1], q_fragment, k_fragment[2], k_fragment[3]);
      }
    }

    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int token = warp_first_token + j * 8 + (lane % 4) * 2 + (e & 1);
        scores[j][e] = token < range.end ? scores[j][e] * scale_log2 : -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], scores[j][e]);
      }
    // The reference max of a row moves only when a tile's scores pass it by more than
    // kRescaleSlackLog2, so most tiles skip rescaling the accumulators (a multiply per output
    // element); probabilities then reach 2^kRescaleSlackLog2, far inside f16's and bf16's range.
    bool moves[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      moves[r] = tile_max[r] > row_max[r] + kRescaleSlackLog2;
    }
    if (__any_sync(0xffffffffu, moves[0] || moves[1])) {
      float rescale[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        rescale[r] = moves[r] ? exp2f(row_max[r] - tile_max[r]) : 1.f;
        row_max[r] = moves[r] ? tile_max[r] : row_max[r];
        row_sum[r] *= rescale[r];
      }
#pragma unroll
      for (int j = 0; j < kHeadDim / 8; ++j) {
        output[j][0] *= rescale[0];
        output[j][1] *= rescale[0];
        output[j][2] *= rescale[1];
        output[j][3] *= rescale[1];
      }
    }
    // A row with no finite score yet keeps max -inf; subtracting 0 keeps exp2 at 0, not NaN.
    const float reference_max[2] = {row_max[0] == -INFINITY ? 0.f : row_max[0],
                                    row_max[1] == -INFINITY ? 0.f : row_max[1]};
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        scores[j][e] = exp2f(scores[j][e] - reference_max[e / 2]);
        row_sum[e / 2] += scores[j][e];
      }

    // The S accumulators of two n-tiles are exactly the A fragment of P for one k16 step.
    const uint32_t p_fragment[4] = {Mma::pack(scores[0][0], scores[0][1]), Mma::pack(scores[0][2], scores[0][3]),
                                    Mma::pack(scores[1][0], scores[1][1]), Mma::pack(scores[1][2], scores[1][3])};
    if constexpr (kFp8) {
      // The lane's 4 token rows (2t, 2t+1, 2t+8, 2t+9 of the warp's 16): byte j % 4 of word j / 4
      // of a row is B column lane / 4 of n-tile j; a byte permute pairs the rows of each k half.
      const unsigned char* tile_v = code_v + (tile % kStages) * kValueStageBytes;
      constexpr int kPassWords = kHeadDim == 64 ? 2 : 4;  // one 8- or 16-byte read per row and pass
#pragma unroll
      for (int pass = 0; pass < Fp8Layout::kValueBytesPerLane / 4 / kPassWords; ++pass) {
        uint32_t value_words[4][kPassWords];
#pragma unroll
        for (int pick = 0; pick < 4; ++pick) {
          const int row = warp * kTokensPerWarp + 2 * (lane % 4) + (pick & 1) + 8 * (pick >> 1);
          const unsigned char* source = tile_v + Fp8Layout::value_word_offset(row, lane / 4, pass * kPassWords);
          if constexpr (kPassWords == 2) {
            const uint2 words = *reinterpret_cast<const uint2*>(source);
            value_words[pick][0] = words.x;
            value_words[pick][1] = words.y;
          } else {
            const uint4 words = *reinterpret_cast<const uint4*>(source);
            value_words[pick][0] = words.x;
            value_words[pick][1] = words.y;
            value_words[pick][2] = words.z;
            value_words[pick][3] = words.w;
          }
        }
#pragma unroll
        for (int w = 0; w < kPassWords; ++w)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int j = 4 * (pass * kPassWords + w) + 2 * half;  // n-tiles j and j + 1
            const uint32_t selector = half == 0 ? 0x5140u : 0x7362u;
            uint32_t low_k_even, low_k_odd, high_k_even, high_k_odd;
            e4m3x4_to_half2x2(__byte_perm(value_words[0][w], value_words[1][w], selector), low_k_even, low_k_odd);
            e4m3x4_to_half2x2(__byte_perm(value_words[2][w], value_words[3][w], selector), high_k_even, high_k_odd);
            Mma::mma(output[j], p_fragment, low_k_even, high_k_even);
            Mma::mma(output[j + 1], p_fragment, low_k_odd, high_k_odd);
          }
      }
    } else {
#pragma unroll
      for (int dn = 0; dn < kHeadDim / 16; ++dn) {
        uint32_t v_fragment[4];
        load_matrix_x4_transposed(v_fragment, shared_address(shared_v + stage_offset +
                                                             Geometry::swizzle(v_row, dn * 2 + (matrix >> 1)) * 8));
        Mma::mma(output[2 * dn], p_fragment, v_fragment[0], v_fragment[1]);
        Mma::mma(output[2 * dn + 1], p_fragment, v_fragment[2], v_fragment[3]);
      }
    }
  }

  // Merge the four warps' softmax states through shared memory (the K/V ring is free now). Each
  // warp stores its rows unscaled with its row maxima and sums, in one phase behind one barrier;
  // the threads that sum a row then form the weights themselves, their loads of the maxima and sums
  // in flight with those of the rows (a second barrier and the weights' round trip before it were
  // on every item's last path: 1.9% on the fixed counts' calls).
  copy_async_wait<0>();
  group.sync();
  constexpr int kReduceStride = merge_row_stride<kHeadDim>();
  float* warp_outputs = reinterpret_cast<float*>(shared_bytes);
  float* warp_max = warp_outputs + kWarpsPerCta * kMmaRows * kReduceStride;
  float* warp_sum = warp_max + kWarpsPerCta * kMmaRows;
  const int quad_row = lane / 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
    if (lane % 4 == 0) {
      warp_max[warp * kMmaRows + quad_row + 8 * r] = row_max[r];
      warp_sum[warp * kMmaRows + quad_row + 8 * r] = row_sum[r];
    }
  }
  // Only the query group's rows are stored; the MMA's padding rows (12 of 16 at 4 query heads per
  // kv head) are not: at a group of 4 that is an eighth of the stores' wavefronts. Not at head_dim
  // 256, where the persistent auto kernel has no register left for the predicates (16 bytes
  // spilled).
  const bool upper_row_real = kHeadDim > 128 || quad_row < args.group_size;
  const bool lower_row_real = kHeadDim > 128 || quad_row + 8 < args.group_size;
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) {
    const int column = j * 8 + (lane % 4) * 2;
    float* row0 = warp_outputs + (warp * kMmaRows + quad_row) * kReduceStride + column;
    if (upper_row_real) *reinterpret_cast<float2*>(row0) = make_float2(output[j][0], output[j][1]);
    if (lower_row_real)
      *reinterpret_cast<float2*>(row0 + 8 * kReduceStride) = make_float2(output[j][2], output[j][3]);
  }
  group.sync();

  // Each thread sums 4 consecutive columns of one row over the warps, each warp's row weighted by
  // exp2(its max - the CTA's max) / the CTA's sum, and stores them; the thread at column 0 also
  // stores the row's LSE (natural log, as FlashAttention returns it; -inf for a row with no tokens).
  const int64_t split_stride = partial_split_stride<kCompactPartials>(args, splits);
  // Loaded here rather than held through the tiles: the persistent kernel at head_dim 64 has no
  // register to spare for it.
  const float output_scale = kFp8 ? args.v_descale[descale_index] : 1.f;
  for (int index = static_cast<int>(group.thread()) * 4; index < args.group_size * kHeadDim; index += kThreadsPerCta * 4) {
    const int row = index / kHeadDim;
    const int column = index % kHeadDim;
    float row_maxima[kWarpsPerCta];
    float row_sums[kWarpsPerCta];
    float4 parts[kWarpsPerCta];
#pragma unroll
    for (int w = 0; w < kWarpsPerCta; ++w) {
      row_maxima[w] = warp_max[w * kMmaRows + row];
      row_sums[w] = warp_sum[w * kMmaRows + row];
      parts[w] = *reinterpret_cast<const float4*>(warp_outputs + (w * kMmaRows + row) * kReduceStride + column);
    }
    float cta_max = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarpsPerCta; ++w) cta_max = fmaxf(cta_max, row_maxima[w]);
    const float safe_max = cta_max == -INFINITY ? 0.f : cta_max;
    float cta_sum = 0.f;
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < kWarpsPerCta; ++w) {
      const float scale = exp2f(row_maxima[w] - safe_max);
      cta_sum += row_sums[w] * scale;
      sum.x += parts[w].x * scale;
      sum.y += parts[w].y * scale;
      sum.z += parts[w].z * scale;
      sum.w += parts[w].w * scale;
    }
    const float inverse = cta_sum > 0.f ? output_scale / cta_sum : 0.f;
    sum.x *= inverse;
    sum.y *= inverse;
    sum.z *= inverse;
    sum.w *= inverse;
    const int64_t head_row = q_row0 + row;
    const float lse = cta_sum > 0.f ? (safe_max + log2f(cta_sum)) * 0.69314718055994531f : -INFINITY;
    // fp8: accumulator column c holds head dim Fp8TileLayout::output_dim(c).
    auto dim_of = [&](int offset) { return kFp8 ? Fp8Layout::output_dim(column + offset) : column + offset; };
    if (writes_final_output) {
      using Output = TensorCore<Element>;
      Element* destination = static_cast<Element*>(args.out) + head_row * kHeadDim;
      destination[dim_of(0)] = Output::from_float(sum.x);
      destination[dim_of(1)] = Output::from_float(sum.y);
      destination[dim_of(2)] = Output::from_float(sum.z);
      destination[dim_of(3)] = Output::from_float(sum.w);
      if (column == 0 && args.lse != nullptr) args.lse[head_row] = lse;
    } else {
      float* destination = args.partial_out + (head_row * split_stride + split) * kHeadDim;
      if constexpr (kFp8) {
        destination[dim_of(0)] = sum.x;
        destination[dim_of(1)] = sum.y;
        destination[dim_of(2)] = sum.z;
        destination[dim_of(3)] = sum.w;
      } else {
        *reinterpret_cast<float4*>(destination + column) = sum;
      }
      if (column == 0) args.partial_lse[head_row * split_stride + split] = lse;
    }
  }
  return true;
}

// For callers whose item was placed by a length read after the wait.
struct PlacementAlwaysHolds {
  __device__ __forceinline__ bool operator()() const { return true; }
};

template <typename Element, int kHeadDim, bool kPaged, bool kCompactPartials, bool kFp8, typename Group>
__device__ __forceinline__ void decode_work_item(const DecodeKernelArgs& args, unsigned char* shared_bytes,
                                                 Group group, int batch_index, int kv_head, int split,
                                                 int splits, int seqlen) {
  decode_placed_item<Element, kHeadDim, kPaged, kCompactPartials, kFp8>(args, shared_bytes, group, batch_index, kv_head,
                                                                  split, splits, seqlen,
                                                                  item_placement(seqlen, splits, split),
                                                                  PlacementAlwaysHolds{});
}

// One CTA per possible work item, grid (batch x kv_heads, num_splits): fixed split counts; explicit
// per-sequence counts past kMaxPersistentBatch; and (kAuto) the table's count for the batch, where
// CTAs past a sequence's live splits exit at once.
// Split is the grid's slow axis: the CTAs of split 0 of every (sequence, kv head) come first,
// then split 1, and so on, so the CTAs that hold work are spread over all SMs.
// kFp8: an e4m3 cache (decode_placed_item); Element is then q's and out's type.
// fp8 at head_dim 128: 4 CTAs per SM, as many as its shared memory allows (128 registers a thread).
template <typename Element, int kHeadDim, bool kPaged, bool kAuto, bool kFp8>
__global__ void __launch_bounds__(kThreadsPerCta, kFp8 && kHeadDim == 128 ? 4 : 1)
    decode_split_kv_kernel(const DecodeKernelArgs args, const AutoTableArgument<kAuto> auto_table) {
  using CacheElement = std::conditional_t<kFp8, unsigned char, Element>;
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  const int batch_index = blockIdx.x / args.num_kv_heads;
  const int kv_head = blockIdx.x % args.num_kv_heads;
  const int linear_cta = blockIdx.x + gridDim.x * blockIdx.y;
  if constexpr (!kPaged && !kAuto) {
    // A fixed count on a contiguous cache, in the first wave: the item is placed at its sequence's
    // length as read before the wait, and its loads go out right after it; the length loaded after
    // the wait checks the placement under them, and a length that moved redoes the item. Later
    // waves start after the previous kernel is gone and would only add a round trip. An explicit
    // per-sequence count is one more input the wait guards, so those calls take the path below.
    if (args.per_sequence_splits == 0 && args.splits_per_sequence == nullptr && linear_cta < args.early_ctas) {
      int length = clamp_to_capacity(args, load_l2_only(args.cache_seqlens + batch_index));
      ItemPlacement placed = item_placement(length, args.num_splits, blockIdx.y);
      if (args.prefetch_tiles > 0 && linear_cta < args.prefetch_ctas)
        prefetch_item_tiles<CacheElement, kHeadDim>(args, batch_index, kv_head, blockIdx.y, args.num_splits, length,
                                               true, threadIdx.x, kThreadsPerCta);
      // The compiler would otherwise recompute these where they are used, after the wait.
      asm volatile("" : "+r"(length), "+r"(placed.live_splits), "+r"(placed.range.begin), "+r"(placed.range.end));
      wait_for_prerequisite_grids();  // q, lengths and the cache may come from the previous kernel
      allow_dependent_grids_to_launch();
      const int loaded = args.cache_seqlens[batch_index];  // asked for now, used once the copies are out
      auto same_length = [&] { return clamp_to_capacity(args, loaded) == length; };
      // One call site in a loop, so the item's code is not duplicated.
      while (!decode_placed_item<Element, kHeadDim, kPaged, false, kFp8>(args, shared_bytes, WarpGroup<1>{}, batch_index,
                                                                   kv_head, blockIdx.y, args.num_splits, length,
                                                                   placed, same_length)) {
        length = clamp_to_capacity(args, loaded);
        placed = item_placement(length, args.num_splits, blockIdx.y);
      }
      return;
    }
  }
  if constexpr (!kPaged && !kAuto) {
    // The whole-split condition: a CTA of this grid can be resident a whole call early, beside the
    // previous call's, and a partial prefetch then competed with that call and was evicted before
    // use (+1.3-2 us on 16-134 MB calls).
    if (args.prefetch_tiles > 0 && args.per_sequence_splits == 0 && linear_cta < args.prefetch_ctas)
      prefetch_item_tiles<CacheElement, kHeadDim>(args, batch_index, kv_head, blockIdx.y, args.num_splits,
                                             clamp_to_capacity(args, load_l2_only(args.cache_seqlens + batch_index)),
                                             true, threadIdx.x, kThreadsPerCta);
  }
  wait_for_prerequisite_grids();  // q, lengths and the cache may come from the previous kernel
  allow_dependent_grids_to_launch();  // the combine only waits, so let it get resident early
  const int batch_auto_splits = batch_auto_split_count<kThreadsPerCta>(args, auto_table);
  decode_work_item<Element, kHeadDim, kPaged, kAuto, kFp8>(args, shared_bytes, WarpGroup<1>{}, batch_index, kv_head,
                                                     blockIdx.y, splits_of_sequence(args, batch_index, batch_auto_splits),
                                                     clamped_length(args, batch_index));
}

// Whether every sequence of the batch has one given length, answered by each warp on its own
// (loads and a vote, no shared memory, no barrier), so every warp of every group gets the same
// answer from the same lengths. `issue` asks for up to kLoadsPerLane lengths per lane right after
// the grid dependency wait; the answer waits for them only when asked, so the round trip runs
// under whatever the warp issues in between (the guessed item's first tiles). Batches past
// 32 x kLoadsPerLane load the rest when asked.
struct UniformBatchVote {
  static constexpr int kLoadsPerLane = 4;
  int raw[kLoadsPerLane];

  __device__ __forceinline__ void issue(const DecodeKernelArgs& args) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int k = 0; k < kLoadsPerLane; ++k) {
      const int b = lane + 32 * k;
      raw[k] = b < args.batch ? args.cache_seqlens[b] : 0;
    }
  }
  // cache_seqlens[0], clamped. Warp-wide (a shuffle).
  __device__ __forceinline__ int first_length(const DecodeKernelArgs& args) const {
    return clamp_to_capacity(args, __shfl_sync(0xffffffffu, raw[0], 0));
  }
  // Every sequence's clamped length is `length`. Warp-wide (a vote).
  __device__ __forceinline__ bool uniform_at(const DecodeKernelArgs& args, int length) const {
    const int lane = threadIdx.x % 32;
    int differs = 0;  // no short-circuit: the loads below go out together
#pragma unroll
    for (int k = 0; k < kLoadsPerLane; ++k)
      differs |= lane + 32 * k < args.batch && clamp_to_capacity(args, raw[k]) != length;
    for (int b = lane + 32 * kLoadsPerLane; b < args.batch; b += 32) differs |= clamped_length(args, b) != length;
    return __all_sync(0xffffffffu, differs == 0);
  }
};

// Warp groups per CTA of the persistent schedule: as many as the bf16 one-item CTAs that fit on an
// SM (2 at 100 KB of pipeline, 3 at 66 KB, 1 at 200 KB), so one CTA per SM keeps the same number of
// items in flight. On an e4m3 cache two items fit at head_dim 256 (104 KB each), which took `auto`
// at B16 32/8 L8192 from 166.9 to 130.1 us (the table's count: 127.9); a third group at head_dim
// 128 was slower: B16 32/32 L4096 130.8 -> 152.0 us, B64 32/8 L4096 131.1 -> 150.6
// (scripts/bench_fp8_peers.py, 2026-12-03).
template <int kHeadDim, bool kFp8 = false>
constexpr int persistent_warp_groups() {
  constexpr int kSharedPerSm = 227 * 1024;  // sm_90's most per CTA, less the work-item offsets
  constexpr int groups = (kSharedPerSm - 4 * (kMaxPersistentBatch + 1)) / decode_shared_bytes<kHeadDim>();
  return kFp8 && kHeadDim == 256 ? 2 : (groups < 1 ? 1 : (groups > 3 ? 3 : groups));
}

// Shared memory of one warp group's pipeline in the persistent CTA: the bf16 item's, which an e4m3
// item fits, except where the e4m3 cache adds a warp group: there the groups hold e4m3 rings.
template <int kHeadDim, bool kFp8>
constexpr int item_shared_bytes() {
  return persistent_warp_groups<kHeadDim, kFp8>() > persistent_warp_groups<kHeadDim>() ? fp8_decode_shared_bytes<kHeadDim>()
                                                                                        : decode_shared_bytes<kHeadDim>();
}

// Registers per thread of the persistent kernel: at most what leaves room on the SM for one CTA
// of the combine kernel (128 threads x 128 registers), so that programmatic dependent launch can
// make the combine resident while the split kernel still runs, as it does beside the fixed-count
// kernels. At 193 registers x 256 threads the register file left no room for it; the cap took the
// capacity-scenario regret from 1.154 to 1.132. 8-register steps, 255 at most.
// Where an e4m3 cache adds a warp group (head_dim 256) its items need the whole register file (at
// the combine's room they spill 36-88 bytes): no room is left there, and the combine becomes
// resident as the split CTA exits.
constexpr int persistent_register_cap(int warp_groups, bool combine_room = true) {
  constexpr int kRegistersPerSm = 65536;
  const int combine_registers = combine_room ? 128 * 128 : 0;
  const int cap = (kRegistersPerSm - combine_registers) / (kThreadsPerCta * warp_groups) / 8 * 8;
  return cap > 255 ? 255 : cap;
}

template <int kHeadDim, bool kFp8 = false>
constexpr int persistent_shared_bytes(int warp_groups, int batch) {
  return warp_groups * item_shared_bytes<kHeadDim, kFp8>() + 4 * (batch + 1);
}

// The measured layout: as many warp groups as one-item CTAs fit on an SM. A pipeline change that
// moves these moves the persistent schedule's occupancy: re-measure.
static_assert(persistent_warp_groups<64>() == 3 && persistent_warp_groups<128>() == 2 &&
                  persistent_warp_groups<256>() == 1,
              "warp groups per persistent CTA");
static_assert(persistent_warp_groups<64, true>() == 3 && persistent_warp_groups<128, true>() == 2 &&
                  persistent_warp_groups<256, true>() == 2,
              "warp groups per persistent CTA, e4m3 cache");

// Per-sequence split counts (kAuto: the table's count for the batch; else explicit counts): a grid
// of at most one CTA per SM, each CTA's warp groups walking the work items as virtual CTAs
// v = blockIdx.x + gridDim.x * group, items v, v + V, ... (V = gridDim.x * groups). The items are
// only the splits that hold work: for each sequence in order, its live splits x kv heads
// (split-major; work_items_of_sequence). Items 0 .. gridDim.x - 1 thus run on distinct SMs whatever
// the hardware's placement: with several one-item CTAs per SM, a grid filling every slot put its
// first 128 CTAs on 120 SMs.
// A uniform batch (every length equal) needs no scan: item -> (split, sequence, head) is a
// division. kAuto on the contiguous layout goes further and guesses, before the grid dependency
// wait, that the batch is uniform at cache_seqlens[0]'s length: the first item's loads go out right
// after the wait, together with the lengths that check the guess (a warp vote, no barrier), and
// only a wrong guess pays (the loads are drained and the item is redone). Paged caches do not
// guess: past a sequence's real length its block-table entries may name no page at all. Nor does
// head_dim 256, whose accumulators leave no registers for the guess's second copy of the item.
template <typename Element, int kHeadDim, bool kPaged, bool kAuto, int kWarpGroups, bool kFp8>
__global__ void __maxnreg__(persistent_register_cap(kWarpGroups, kWarpGroups <= persistent_warp_groups<kHeadDim>()))
    decode_split_kv_persistent_kernel(const DecodeKernelArgs args, const AutoTableArgument<kAuto> auto_table) {
  using CacheElement = std::conditional_t<kFp8, unsigned char, Element>;
  constexpr int kThreads = kThreadsPerCta * kWarpGroups;
  constexpr bool kGuesses = kAuto && !kPaged && kHeadDim <= 128;
  using Group = WarpGroup<kWarpGroups>;
  // The guess, read before the wait: the batch's length if cache_seqlens' first and last entries
  // agree (-1: no guess), and the table's count for the launch batch at that length. With
  // programmatic dependent launch the CTA is resident while the previous call runs, so in a stream
  // of calls this costs nothing; the previous kernel may still be writing the lengths, so the guess
  // is checked against lengths loaded after the wait before the item writes anything.
  // The group's first item under the guess is placed here too (its sequence, head, split and
  // tokens: six divisions), so that after the wait its loads go out at once.
  int guess_length = -1;
  int guess_splits = 1;
  int guess_items = 0;  // work items of the whole batch under the guess
  int guess_batch_index = 0, guess_kv_head = 0, guess_split = 0;
  ItemPlacement guess_placed{0, {0, 0}};
  if constexpr (kGuesses) {
    const int first = load_l2_only(args.cache_seqlens);
    if (first == load_l2_only(args.cache_seqlens + args.batch - 1)) {
      guess_length = clamp_to_capacity(args, first);
      guess_splits = BatchAutoDecision<kThreadsPerCta>::table_count(args, auto_table, guess_length);
      guess_items = work_items_of_sequence(guess_length, guess_splits, args.num_kv_heads) * args.batch;
      const int item = blockIdx.x + gridDim.x * Group::index();
      if (item < guess_items) {
        const int rows = args.batch * args.num_kv_heads;
        guess_batch_index = (item % rows) / args.num_kv_heads;
        guess_kv_head = item % args.num_kv_heads;
        guess_split = item / rows;
        guess_placed = item_placement(guess_length, guess_splits, guess_split);
        if (args.prefetch_tiles > 0)
          prefetch_item_tiles<CacheElement, kHeadDim>(args, guess_batch_index, guess_kv_head, guess_split, guess_splits,
                                                 guess_length, false, Group::thread(), kThreadsPerCta);
      }
    }
    // The compiler would otherwise recompute these where they are used, after the wait.
    asm volatile("" : "+r"(guess_length), "+r"(guess_splits), "+r"(guess_items), "+r"(guess_batch_index),
                 "+r"(guess_kv_head), "+r"(guess_split), "+r"(guess_placed.live_splits),
                 "+r"(guess_placed.range.begin), "+r"(guess_placed.range.end));
  }
  wait_for_prerequisite_grids();
  allow_dependent_grids_to_launch();
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  const Group group{};
  const int group_index = Group::index();
  unsigned char* group_shared = shared_bytes + group_index * item_shared_bytes<kHeadDim, kFp8>();
  int* first_item = reinterpret_cast<int*>(shared_bytes + kWarpGroups * item_shared_bytes<kHeadDim, kFp8>());  // [batch + 1]
  const int virtual_cta = blockIdx.x + gridDim.x * group_index;
  const int virtual_ctas = gridDim.x * kWarpGroups;

  int next_item = virtual_cta;  // the first item this group has not run yet
  // A uniform batch's items go split-major over the (sequence, kv head) rows, as the CTA-per-item
  // grid orders its CTAs: item = split x rows + row.
  const int rows = args.batch * args.num_kv_heads;
  int batch_auto_splits = 0;
  bool uniform = false;
  int uniform_length = 0;
  if constexpr (kAuto) {
    BatchAutoDecision<kThreads> decision;
    if constexpr (kGuesses) {
      // The guessed first item goes out at once; the lengths it is checked against are asked for
      // first, so their round trip runs under its loads. Every group answers from the same lengths
      // loaded after the wait, so the groups of a CTA agree on whether the batch is uniform (and
      // take the block-wide path below together when it is not); each group checks its own guess,
      // and a group whose guess read a length that moved redoes its first item.
      UniformBatchVote vote;
      vote.issue(args);
      // Read as ragged before the wait: the block-wide decision's loads go out now, with the
      // vote's, so a batch still ragged pays one round trip, not two.
      if (guess_length < 0) decision.issue_loads(args, auto_table);
      auto guess_held = [&] { return vote.uniform_at(args, guess_length); };
      bool held = false;
      if (guess_length >= 0) {
        held = virtual_cta < guess_items
                   ? decode_placed_item<Element, kHeadDim, kPaged, true, kFp8>(args, group_shared, group, guess_batch_index,
                                                                         guess_kv_head, guess_split, guess_splits,
                                                                         guess_length, guess_placed, guess_held)
                   : guess_held();
        if (held) {
          next_item += virtual_ctas;
          // A group with no second item ends here. Through the uniform loop below it would first
          // recompute the loop's bound (two divisions, placed far from the item's code: Nsight
          // Compute put 14% of the kernel's warp samples there, mostly instruction-cache misses),
          // which the guess already knows; exiting here took `auto` 0.2 us closer to the fixed
          // kernel.
          if (next_item >= guess_items) return;
          batch_auto_splits = guess_splits;
          uniform = true;
          uniform_length = guess_length;
        }
      }
      if (!held) {  // from here on the decision's loads are out, whichever way the guess went
        if (guess_length >= 0) decision.issue_loads(args, auto_table);
        const int length = vote.first_length(args);
        if (vote.uniform_at(args, length)) {
          batch_auto_splits = decision.row_count(args, length);
          uniform = true;
          uniform_length = length;
        }
      }
    }
    if (!uniform) {
      // The guess's path above has issued the loads already when it leaves a ragged batch here.
      if constexpr (!kGuesses) decision.issue_loads(args, auto_table);
      decision.finish(args);
      batch_auto_splits = decision.splits;
      uniform = decision.uniform;
      uniform_length = decision.longest;
    }
  }

  if (uniform) {
    const int per_sequence = work_items_of_sequence(uniform_length, batch_auto_splits, args.num_kv_heads);
    for (int item = next_item; item < per_sequence * args.batch; item += virtual_ctas) {
      const int row = item % rows;
      group.sync();  // the previous item's epilogue is done with the group's pipeline buffers
      decode_work_item<Element, kHeadDim, kPaged, kAuto, kFp8>(args, group_shared, group, row / args.num_kv_heads,
                                                         row % args.num_kv_heads, item / rows, batch_auto_splits,
                                                         uniform_length);
    }
    return;
  }

  // first_item[b] = items of sequences < b: each thread writes the offsets within its contiguous
  // run of sequences, then adds the run's offset from an exclusive scan over the threads' counts.
  __shared__ int warp_items[kThreads / 32];
  const int per_thread = ceil_div(args.batch, kThreads);
  const int first_sequence = threadIdx.x * per_thread;
  const int end_sequence = min(first_sequence + per_thread, args.batch);
  int items = 0;
  for (int b = first_sequence; b < end_sequence; ++b) {
    first_item[b] = items;
    items += work_items_of_sequence(clamped_length(args, b), splits_of_sequence(args, b, batch_auto_splits),
                                    args.num_kv_heads);
  }
  const int lane = threadIdx.x % 32;
  int inclusive = items;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const int before = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += before;
  }
  if (lane == 31) warp_items[threadIdx.x / 32] = inclusive;
  __syncthreads();
  int offset_of_warp = 0;
  for (int w = 0; w < threadIdx.x / 32; ++w) offset_of_warp += warp_items[w];
  const int run_offset = offset_of_warp + inclusive - items;
  for (int b = first_sequence; b < end_sequence; ++b) first_item[b] += run_offset;
  if (threadIdx.x == kThreads - 1) first_item[args.batch] = offset_of_warp + inclusive;
  __syncthreads();

  const int total_items = first_item[args.batch];
  for (int item = next_item; item < total_items; item += virtual_ctas) {
    int low = 0, high = args.batch - 1;  // the last b with first_item[b] <= item
    while (low < high) {
      const int middle = (low + high + 1) / 2;
      if (first_item[middle] <= item) low = middle;
      else high = middle - 1;
    }
    const int local = item - first_item[low];
    group.sync();
    decode_work_item<Element, kHeadDim, kPaged, kAuto, kFp8>(args, group_shared, group, low, local % args.num_kv_heads,
                                                       local / args.num_kv_heads,
                                                       splits_of_sequence(args, low, batch_auto_splits),
                                                       clamped_length(args, low));
  }
}

}  // namespace splitkv::kernels
