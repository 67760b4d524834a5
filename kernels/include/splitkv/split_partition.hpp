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

}  // namespace splitkv
