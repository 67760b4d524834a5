// How a sequence's real length is cut into splits. Shared verbatim by the CUDA kernels,
// the combine kernel and the CPU reference, so they can never disagree on which split
// owns which tokens or how many splits hold work.
#pragma once

#include "splitkv/auto_splits_layout.hpp"
#include "splitkv/decode_params.hpp"

namespace splitkv {

static_assert(AutoSplitsTable::kLengthBuckets == kAutoLengthBuckets &&
                  AutoSplitsTable::kBatchClasses == kAutoBatchClasses,
              "AutoSplitsTable (decode_params.hpp) must have the extent auto_splits_layout.hpp indexes");

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

// Work items of one sequence in the persistent schedule: its live splits x kv heads, and one
// split for an empty sequence (its split 0 writes zeros and LSE = -inf).
SPLITKV_HOST_DEVICE int work_items_of_sequence(int seqlen, int num_splits, int num_kv_heads) {
  const int live = active_splits(seqlen, num_splits);
  return (live > 1 ? live : 1) * num_kv_heads;
}

// Batch classes, length buckets and the effective batch that index the table below are in
// auto_splits_layout.hpp.

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
