// Where an fp8 (e4m3) K/V tile's codes sit in shared memory and which head dimension each MMA
// operand slot holds, for the split kernel's fp8 path (decode_split_kv.cuh). Host-visible so the
// CPU tests can check the permutations and the bank pattern of every shared-memory read.
//
// The fp8 path feeds the tensor cores straight from registers: each lane reads the codes of its
// own B-fragment slots from shared memory and converts them with cvt.rn.f16x2.e4m3x2, so no
// dequantized tile is ever stored (that tile held the CTA at 2 per SM and 35% of DRAM bandwidth).
// An m16n8k16 B fragment wants, per lane, head dims that are far apart in a token row; the sums
// over head dims (Q K^T) and over tokens (P V) do not care about the order of their terms, so the
// head dims are permuted instead:
//   Q K^T: lane quad-position t (lane % 4) reads 16-byte chunks 4c + t of a K row; word w of its
//          c-th chunk is k-step 4c + w, bytes (2t, 2t+1, 2t+8, 2t+9) of that step's 16 positions.
//          The query is written to shared memory in the same order (query_position).
//   P V:   lane group g (lane / 4) reads, from each of its 4 token rows, the head dims of B column
//          g of every n-tile: 16-byte chunks g + 8i (head_dim >= 128) or the 8 bytes at 8g
//          (head_dim 64). n-tile j of the output then holds head dim output_dim(8j + n).
#pragma once

#include "splitkv/decode_params.hpp"
#include "splitkv/split_partition.hpp"

namespace splitkv::kernels {

template <int kHeadDim>
struct Fp8TileLayout {
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "head_dim 64, 128 or 256");
  static constexpr int kChunksPerRow = kHeadDim / 16;  // 16-byte chunks of one token row of codes
  static constexpr int kKeyRowBytes = kHeadDim;
  // head_dim 64: V rows 80 bytes apart. The 64-bit reads of a half warp touch 4 even rows x 32
  // bytes; 64-byte rows would put all four on the same 8 banks whatever the chunk order.
  static constexpr int kValueRowBytes = kHeadDim == 64 ? 80 : kHeadDim;
  static constexpr int kKeyTileBytes = kTokensPerTile * kKeyRowBytes;
  static constexpr int kValueTileBytes = kTokensPerTile * kValueRowBytes;
  static constexpr int kKeyChunksPerLane = kHeadDim / 64;    // per K row and n-tile
  static constexpr int kValueBytesPerLane = kHeadDim / 8;    // per V row
  static_assert(kKeyTileBytes % 128 == 0 && kValueTileBytes % 128 == 0, "tiles stay 128-byte aligned");

  // Byte offset of chunk `chunk` of K row `row` in a tile. head_dim >= 128: odd rows XOR the chunk
  // with 4, so the two rows one quarter warp reads (chunks t, t+4c of rows 2m, 2m+1) fill all 32 banks.
  SPLITKV_HOST_DEVICE static int key_chunk_offset(int row, int chunk) {
    const int swizzle = kHeadDim >= 128 ? 4 * (row & 1) : 0;
    return row * kKeyRowBytes + 16 * (chunk ^ swizzle);
  }
  // Byte offset of chunk `chunk` of V row `row` in a tile. head_dim >= 128: the four even (or odd)
  // rows a quarter warp reads at chunks g, g + 1 land on distinct bank groups through the XOR.
  SPLITKV_HOST_DEVICE static int value_chunk_offset(int row, int chunk) {
    const int swizzle = kHeadDim >= 128 ? 2 * ((row >> 1) & 3) : 0;
    return row * kValueRowBytes + 16 * (chunk ^ swizzle);
  }
  // The K chunk lane quad-position t reads as its c-th.
  SPLITKV_HOST_DEVICE static int key_chunk(int t, int c) { return 4 * c + t; }
  // Offset of the `word`-th 4-byte word lane group g reads from V row `row`.
  SPLITKV_HOST_DEVICE static int value_word_offset(int row, int g, int word) {
    if constexpr (kHeadDim == 64) {
      return value_chunk_offset(row, g / 2) + 8 * (g % 2) + 4 * word;
    } else {
      return value_chunk_offset(row, g + 8 * (word / 4)) + 4 * (word % 4);
    }
  }

  // Position, in the MMA's k order (k-step * 16 + slot), of head dim `dim` of the query.
  SPLITKV_HOST_DEVICE static int query_position(int dim) {
    const int chunk = dim / 16;
    const int c = chunk / 4, t = chunk % 4;
    const int word = (dim % 16) / 4, byte = dim % 4;
    const int step = 4 * c + word;
    const int slot = (byte / 2) * 8 + 2 * t + (byte % 2);
    return step * 16 + slot;
  }
  // Head dim of column n of output n-tile j (the accumulator's column 8j + n).
  SPLITKV_HOST_DEVICE static int output_dim(int column) {
    const int j = column / 8, n = column % 8;
    if constexpr (kHeadDim == 64) {
      return 8 * n + j;
    } else {
      return (n + 8 * (j / 16)) * 16 + j % 16;
    }
  }
};

}  // namespace splitkv::kernels
