// The fp8 split kernel's operand permutations and shared-memory pattern (fp8_tile_layout.hpp):
// every query and output head dim lands in exactly one MMA slot, each lane's K words hold the
// slots its B fragment needs, and no shared-memory read of the tile loop has a bank conflict.
#include "splitkv/kernels/fp8_tile_layout.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>
#include <vector>

namespace {

using splitkv::kTokensPerTile;

// Bank-conflict degree of one warp-wide shared-memory read of `width` bytes per lane: the
// hardware serves 128 bytes per wavefront (8 lanes of 16 bytes, 16 of 8, 32 of 4); within one, a
// bank holding two different 4-byte words costs a second pass.
int conflict_degree(const std::vector<int>& lane_offsets, int width) {
  const int lanes_per_phase = 128 / width;
  int worst = 1;
  for (int first = 0; first < 32; first += lanes_per_phase) {
    std::map<int, std::set<int>> words_of_bank;
    for (int lane = first; lane < first + lanes_per_phase; ++lane)
      for (int byte = 0; byte < width; byte += 4) {
        const int word = (lane_offsets[lane] + byte) / 4;
        words_of_bank[word % 32].insert(word);
      }
    for (const auto& [bank, words] : words_of_bank) worst = std::max(worst, static_cast<int>(words.size()));
  }
  return worst;
}

template <int kHeadDim>
void check_layout() {
  using Layout = splitkv::kernels::Fp8TileLayout<kHeadDim>;
  SCOPED_TRACE("head_dim " + std::to_string(kHeadDim));

  std::set<int> positions, dims;
  for (int dim = 0; dim < kHeadDim; ++dim) {
    positions.insert(Layout::query_position(dim));
    dims.insert(Layout::output_dim(dim));
  }
  EXPECT_EQ(positions.size(), static_cast<size_t>(kHeadDim));
  EXPECT_EQ(*positions.rbegin(), kHeadDim - 1);
  EXPECT_EQ(dims.size(), static_cast<size_t>(kHeadDim));
  EXPECT_EQ(*dims.rbegin(), kHeadDim - 1);

  // Q K^T: word w of lane quad-position t's c-th chunk must hold, byte by byte, the head dims at
  // k-step 4c + w and slots 2t, 2t+1, 2t+8, 2t+9 (the m16n8k16 B fragment's two registers).
  for (int t = 0; t < 4; ++t)
    for (int c = 0; c < Layout::kKeyChunksPerLane; ++c)
      for (int w = 0; w < 4; ++w)
        for (int byte = 0; byte < 4; ++byte) {
          const int dim = Layout::key_chunk(t, c) * 16 + 4 * w + byte;
          const int slot = (byte / 2) * 8 + 2 * t + byte % 2;
          EXPECT_EQ(Layout::query_position(dim), (4 * c + w) * 16 + slot) << "t " << t << " c " << c;
        }
  // P V: byte j % 4 of word j / 4 of lane group g is B column g of n-tile j.
  for (int g = 0; g < 8; ++g)
    for (int j = 0; j < kHeadDim / 8; ++j) {
      const int offset = Layout::value_word_offset(0, g, j / 4) + j % 4;
      EXPECT_EQ(offset, Layout::output_dim(8 * j + g)) << "g " << g << " j " << j;
    }

  // Every byte of a tile has one place, inside the tile.
  std::set<int> key_bytes, value_bytes;
  for (int row = 0; row < kTokensPerTile; ++row)
    for (int chunk = 0; chunk < Layout::kChunksPerRow; ++chunk)
      for (int byte = 0; byte < 16; ++byte) {
        key_bytes.insert(Layout::key_chunk_offset(row, chunk) + byte);
        value_bytes.insert(Layout::value_chunk_offset(row, chunk) + byte);
      }
  EXPECT_EQ(key_bytes.size(), static_cast<size_t>(kTokensPerTile * kHeadDim));
  EXPECT_LT(*key_bytes.rbegin(), Layout::kKeyTileBytes);
  EXPECT_EQ(value_bytes.size(), static_cast<size_t>(kTokensPerTile * kHeadDim));
  EXPECT_LT(*value_bytes.rbegin(), Layout::kValueTileBytes);

  // The tile loop's reads, warp by warp: K rows warp*16 + 8*n_tile + g, V rows 2t, 2t+1, 2t+8, 2t+9.
  for (int warp = 0; warp < 4; ++warp) {
    for (int n_tile = 0; n_tile < 2; ++n_tile)
      for (int c = 0; c < Layout::kKeyChunksPerLane; ++c) {
        std::vector<int> offsets(32);
        for (int lane = 0; lane < 32; ++lane)
          offsets[lane] = Layout::key_chunk_offset(warp * 16 + n_tile * 8 + lane / 4, Layout::key_chunk(lane % 4, c));
        EXPECT_EQ(conflict_degree(offsets, 16), 1) << "K read, warp " << warp << " n-tile " << n_tile << " c " << c;
      }
    for (int pick = 0; pick < 4; ++pick) {
      const int width = kHeadDim == 64 ? 8 : 16;
      for (int first_word = 0; first_word < Layout::kValueBytesPerLane / 4; first_word += width / 4) {
        std::vector<int> offsets(32);
        for (int lane = 0; lane < 32; ++lane) {
          const int t = lane % 4;
          const int row = warp * 16 + 2 * t + (pick & 1) + 8 * (pick >> 1);
          offsets[lane] = Layout::value_word_offset(row, lane / 4, first_word);
        }
        EXPECT_EQ(conflict_degree(offsets, width), 1) << "V read, warp " << warp << " row pick " << pick;
      }
    }
  }
}

TEST(Fp8TileLayout, PermutationsAndBankPatternAtHeadDim64) { check_layout<64>(); }
TEST(Fp8TileLayout, PermutationsAndBankPatternAtHeadDim128) { check_layout<128>(); }
TEST(Fp8TileLayout, PermutationsAndBankPatternAtHeadDim256) { check_layout<256>(); }

// The model above finds the conflict it is there to find: 64-byte V rows at head_dim 64.
TEST(Fp8TileLayout, ConflictModelSeesUnpaddedRows) {
  std::vector<int> offsets(32);
  for (int lane = 0; lane < 32; ++lane) offsets[lane] = (2 * (lane % 4)) * 64 + 8 * (lane / 4);
  EXPECT_EQ(conflict_degree(offsets, 8), 4);  // rows 0, 2, 4, 6 on the same 8 banks
}

}  // namespace
