// float64 CPU reference of decode attention and of the split/combine math.
//
// Ground truth for the GPU tests and the CI tests: everything is computed in double with
// max-subtraction, one token at a time, so it is slow but exact to ~1e-15. It uses the
// kernels' own tensor layouts (decode_params.hpp) and their own split partition
// (split_partition.hpp), so a mismatch against a kernel points at the kernel, not at a
// different convention.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "splitkv/decode_params.hpp"

namespace splitkv::reference {

// One decode problem held on the host in double. Layouts are DecodeParams' layouts:
//   q              [batch, num_heads, head_dim]
//   contiguous k,v [batch, cache_capacity, num_kv_heads, head_dim]
//   paged k,v      [num_pages, page_size, num_kv_heads, head_dim]
//   block_table    [batch, max_pages_per_seq]   (paged only)
//   seqlens        [batch], the real lengths
struct HostProblem {
  KvLayout layout = KvLayout::contiguous;
  int batch = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int cache_capacity = 0;     // contiguous only
  int page_size = 0;          // paged only
  int max_pages_per_seq = 0;  // paged only
  int num_pages = 0;          // paged only
  double softmax_scale = 0.0; // 0 means 1/sqrt(head_dim), as in DecodeParams
  // fp8_e4m3: k and v hold the exact values of e4m3 codes, and token t of sequence b under kv
  // head h means k * k_descale[b * num_kv_heads + h] (v likewise), as the kernel reads it.
  KvDtype kv_dtype = KvDtype::same_as_q;

  std::vector<double> q, k, v;
  std::vector<double> k_descale, v_descale;  // [batch, num_kv_heads], fp8_e4m3 only
  std::vector<int32_t> seqlens;
  std::vector<int32_t> block_table;

  int group_size() const { return num_kv_heads > 0 ? num_heads / num_kv_heads : 0; }
  double scale() const;
  // Tokens addressable per sequence, the upper bound on seqlens.
  int capacity_tokens() const {
    return layout == KvLayout::paged ? max_pages_per_seq * page_size : cache_capacity;
  }
};

// Throws std::invalid_argument naming the first inconsistency (vector sizes, head
// grouping, lengths over capacity, block-table entries outside the page pool), so a bad
// test setup fails loudly instead of reading out of bounds.
void validate(const HostProblem& p);

// Offset into p.k / p.v of the head_dim values of token t of sequence b under kv head h.
// The one place that knows the two layouts: every reader goes through it.
std::size_t kv_offset(const HostProblem& p, int b, int t, int kv_head);

// Offset into q and out ([B, Hq, D]) of query head h of sequence b.
inline std::size_t q_offset(const HostProblem& p, int b, int h) {
  return (static_cast<std::size_t>(b) * p.num_heads + h) * p.head_dim;
}

// DecodeParams carrying p's shape (layout, sizes, scale), with num_splits = 1 and every
// pointer null, so a GPU test describes the same problem without retyping it.
DecodeParams shape_params(const HostProblem& p);

// Exact attention of the one query token of each (b, head) over seqlens[b] tokens.
// out [B, Hq, D]; lse [B, Hq] is the natural log of sum(exp(scaled scores)).
// A sequence of length 0 gives out = 0 and lse = -infinity.
void attention(const HostProblem& p, std::vector<double>& out, std::vector<double>& lse);

// Per-split results, as the split kernel writes them to the workspace: each split's
// output is normalized by its own softmax denominator, and its lse is the log of that
// denominator. Splits at or past active_splits() hold out = 0 and lse = -infinity.
struct SplitPartials {
  std::vector<double> out;  // [B, Hq, S, D]
  std::vector<double> lse;  // [B, Hq, S]
  int num_splits = 0;
};

// num_splits in [1, kMaxSplits]; tokens of split s are split_range(seqlen, num_splits, s).
SplitPartials split_attention(const HostProblem& p, int num_splits);

// Merges the partials into out [B, Hq, D] and lse [B, Hq], rescaling by the largest
// split lse. Reads only the first active_splits(seqlen, num_splits) splits of each
// sequence, as the combine kernel does, so whatever the empty slots hold is ignored.
void combine(const HostProblem& p, const SplitPartials& partials, std::vector<double>& out,
             std::vector<double>& lse);

// --- Random problems --------------------------------------------------------------

enum class LengthMode {
  full,      // every sequence fills its capacity
  ragged,    // uniform in [1, capacity]
  explicit_  // ProblemShape::seqlens, one per sequence, each in [0, capacity]
};

struct ProblemShape {
  KvLayout layout = KvLayout::contiguous;
  int batch = 1;
  int num_heads = 1;
  int num_kv_heads = 1;
  int head_dim = 64;
  // Tokens per sequence. Paged problems round it up to whole pages.
  int capacity = 64;
  int page_size = 16;  // paged only
  // Pages in the pool beyond batch * max_pages_per_seq, never referenced by the table,
  // so a kernel that ignores the block table reads the wrong data.
  int spare_pages = 3;
  LengthMode lengths = LengthMode::ragged;
  std::vector<int32_t> seqlens;  // explicit_ only
  double softmax_scale = 0.0;
};

// Deterministic for a given (shape, seed). Every value of q, k and v, including cache
// slots past the real length and spare pages, is uniform in [-1, 1]: nothing is zero
// filled, so reading a wrong slot changes the answer. Paged block tables are a random
// permutation of the pool, so consecutive pages of a sequence are not adjacent.
HostProblem random_problem(const ProblemShape& shape, uint64_t seed);

// The same tokens in the other layout (or the same layout with another page size):
// contiguous capacity becomes max_pages_per_seq * page_size; paged pages are placed by a
// fresh random permutation drawn from seed. Slots past the real lengths are random.
// page_size is ignored when converting to contiguous.
HostProblem relayout(const HostProblem& p, KvLayout layout, int page_size, uint64_t seed);

// Turns p's cache into an fp8 one: every k and v value (slots past the real lengths and spare pages
// too) becomes the nearest e4m3 value of value * code_range (saturating), and the descales are
// drawn uniform in [descale_low, descale_high] per (sequence, kv head). Returns the codes, in
// p.k / p.v's order, for the device. Deterministic for a given seed.
struct Fp8Codes {
  std::vector<std::uint8_t> k, v;
};
Fp8Codes make_fp8_cache(HostProblem& p, uint64_t seed, double code_range, double descale_low, double descale_high);

}  // namespace splitkv::reference
