// How a sequence's real length is cut into splits. Shared verbatim by the CUDA kernels,
// the combine kernel and the CPU reference, so they can never disagree on which split
// owns which tokens or how many splits hold work.
#pragma once

#include "splitkv/decode_params.hpp"

#if defined(__CUDACC__)
#define SPLITKV_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SPLITKV_HOST_DEVICE inline
#endif

namespace splitkv {

struct SplitRange {
  int begin;  // first token, inclusive
  int end;    // last token, exclusive; begin >= end means the split is empty
};

SPLITKV_HOST_DEVICE int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Tiles per split: whole tiles, so every split but the last starts on a tile boundary and
// the per-tile loads stay aligned.
SPLITKV_HOST_DEVICE int tiles_per_split(int seqlen, int num_splits) {
  const int tiles = ceil_div(seqlen, kTokensPerTile);
  return tiles == 0 ? 1 : ceil_div(tiles, num_splits);
}

// Splits that hold at least one token. Splits at or past this index exit at once and the
// combine skips them; it is 0 for an empty sequence.
SPLITKV_HOST_DEVICE int active_splits(int seqlen, int num_splits) {
  const int tiles = ceil_div(seqlen, kTokensPerTile);
  return tiles == 0 ? 0 : ceil_div(tiles, tiles_per_split(seqlen, num_splits));
}

SPLITKV_HOST_DEVICE SplitRange split_range(int seqlen, int num_splits, int split) {
  const int span = tiles_per_split(seqlen, num_splits) * kTokensPerTile;
  int begin = split * span;
  int end = begin + span;
  if (begin > seqlen) begin = seqlen;
  if (end > seqlen) end = seqlen;
  return {begin, end};
}

// Log-scale bucket of a length: the i whose 2^i is nearest to `length` (boundaries at the
// geometric midpoints 2^(i+1/2)), clamped to [0, kBuckets). Shared by the device lookup and the
// host code that fills SplitsByLength, so both agree on every boundary.
SPLITKV_HOST_DEVICE int length_bucket(int length) {
  if (length <= 1) return 0;
  int floor_log2 = 0;
  while ((1ll << (floor_log2 + 1)) <= length) ++floor_log2;
  // length >= 2^(floor + 1/2)  <=>  length^2 >= 2^(2 floor + 1)
  const long long squared = static_cast<long long>(length) * length;
  const int bucket = squared >= (1ll << (2 * floor_log2 + 1)) ? floor_log2 + 1 : floor_log2;
  return bucket < SplitsByLength::kBuckets ? bucket : SplitsByLength::kBuckets - 1;
}

// Split count a sequence runs with: the fixed count, or its bucket's entry under
// per-sequence splits, never above the grid's bound.
SPLITKV_HOST_DEVICE int sequence_splits(int seqlen, int grid_splits, bool per_sequence,
                                        const unsigned char* splits_by_length) {
  if (!per_sequence) return grid_splits;
  const int chosen = splits_by_length[length_bucket(seqlen)];
  return chosen < 1 ? 1 : (chosen > grid_splits ? grid_splits : chosen);
}

// The smallest grid (splits dimension) that serves every length up to `capacity` under a
// per-length table: the largest entry of the buckets a length <= capacity can fall in. It is
// known on the host without reading any length, so it sizes a CUDA graph's grid; CTAs past a
// sequence's own count still launch and exit, so a tighter bound is cheaper (kernels/NOTES.md).
SPLITKV_HOST_DEVICE int per_sequence_grid_bound(const SplitsByLength& table, int capacity) {
  const int last = length_bucket(capacity < 1 ? 1 : capacity);
  int bound = 1;
  for (int i = 0; i <= last; ++i) bound = table.splits[i] > bound ? table.splits[i] : bound;
  return bound;
}

}  // namespace splitkv
