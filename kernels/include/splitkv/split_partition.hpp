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

// floor(log2(x)) for x >= 1, one instruction on either side.
SPLITKV_HOST_DEVICE int floor_log2(unsigned x) {
#if defined(__CUDA_ARCH__)
  return 31 - __clz(x);
#else
  return 31 - __builtin_clz(x);
#endif
}

// Work items of one sequence in the persistent schedule: its live splits x kv heads, and one
// split for an empty sequence (its split 0 writes zeros and LSE = -inf).
SPLITKV_HOST_DEVICE int work_items_of_sequence(int seqlen, int num_splits, int num_kv_heads) {
  const int live = active_splits(seqlen, num_splits);
  return (live > 1 ? live : 1) * num_kv_heads;
}

// Log-scale bucket of a length: the i whose 2^i is nearest to `length` (boundaries at the
// geometric midpoints 2^(i+1/2)), clamped to [0, kLengthBuckets). Shared by the device lookup and
// the host code that fills AutoSplitsTable, so both agree on every boundary.
SPLITKV_HOST_DEVICE int length_bucket(int length) {
  if (length <= 1) return 0;
  const int floor = floor_log2(static_cast<unsigned>(length));
  // length >= 2^(floor + 1/2)  <=>  length^2 >= 2^(2 floor + 1)
  const long long squared = static_cast<long long>(length) * length;
  const int bucket = squared >= (1ll << (2 * floor + 1)) ? floor + 1 : floor;
  return bucket < AutoSplitsTable::kLengthBuckets ? bucket : AutoSplitsTable::kLengthBuckets - 1;
}

// The batch that stands for effective-batch class r: 1..8 exactly (small batches differ most),
// then round(8 * 2^(k/4)) for k = r - 7, quarter octaves like the fitted table's CTA buckets
// (10, 11, 13, 16, 19, 23, 27, 32, ..., 2048).
SPLITKV_HOST_DEVICE int auto_batch_class_batch(int batch_class) {
  if (batch_class < 8) return batch_class + 1;
  const int k = batch_class - 7;
  // A conditional, not a 4-entry array: an indexed local array lives in local memory on the
  // device, and this sits on every CTA's critical path (kernels/NOTES.md, v7).
  const int step = k % 4;
  const float quarter_octave = step == 0 ? 1.f : step == 1 ? 1.18920712f : step == 2 ? 1.41421356f : 1.68179283f;
  return static_cast<int>(static_cast<float>(8 << (k / 4)) * quarter_octave + 0.5f);
}

// Class of an effective batch: the nearest representative on a log scale (boundaries at the
// geometric midpoints), clamped to the last class. At most five steps: a batch in [2^f, 2^(f+1))
// with f >= 3 falls in classes 4f - 5 .. 4f - 1.
SPLITKV_HOST_DEVICE int auto_batch_class(int effective_batch) {
  if (effective_batch <= 8) return effective_batch < 1 ? 0 : effective_batch - 1;
  const long long squared = static_cast<long long>(effective_batch) * effective_batch;
  int batch_class = 4 * floor_log2(static_cast<unsigned>(effective_batch)) - 6;
  if (batch_class > AutoSplitsTable::kBatchClasses - 1) batch_class = AutoSplitsTable::kBatchClasses - 1;
  while (batch_class + 1 < AutoSplitsTable::kBatchClasses &&
         squared >= static_cast<long long>(auto_batch_class_batch(batch_class)) *
                        auto_batch_class_batch(batch_class + 1))
    ++batch_class;
  return batch_class;
}

// Sequences of the max length that do the batch's work: total / max, rounded to nearest, in
// [1, batch]. The host's NumSplitsShape lookup (heuristics/num_splits.hpp) rounds the same way.
SPLITKV_HOST_DEVICE int rounded_effective_batch(long long total_length, int max_length, int batch) {
  if (max_length <= 0 || total_length <= 0) return batch < 1 ? 1 : batch;
  const long long rounded = (2 * total_length + max_length) / (2LL * max_length);
  return rounded < 1 ? 1 : (rounded > batch ? batch : static_cast<int>(rounded));
}

// num_splits = auto: the table's count for this batch, clamped to [1, the grid's bound].
SPLITKV_HOST_DEVICE int auto_split_count(const AutoSplitsTable& table, long long total_length, int max_length,
                                         int batch, int grid_splits) {
  const int row = auto_batch_class(rounded_effective_batch(total_length, max_length, batch));
  const int chosen = table.splits[row][length_bucket(max_length)];
  return chosen < 1 ? 1 : (chosen > grid_splits ? grid_splits : chosen);
}

// The smallest grid bound (splits dimension) that serves every batch of `batch` sequences with
// lengths up to `capacity` under `table`: the largest entry over the classes an effective batch in
// [1, batch] and the buckets a length in [1, capacity] can fall in. Known on the host without
// reading any length, so it sizes a CUDA graph's grid and the partials' stride.
SPLITKV_HOST_DEVICE int auto_grid_bound(const AutoSplitsTable& table, int batch, int capacity) {
  const int last_row = auto_batch_class(batch < 1 ? 1 : batch);
  const int last_bucket = length_bucket(capacity < 1 ? 1 : capacity);
  int bound = 1;
  for (int r = 0; r <= last_row; ++r)
    for (int i = 0; i <= last_bucket; ++i) bound = table.splits[r][i] > bound ? table.splits[r][i] : bound;
  return bound;
}

}  // namespace splitkv
