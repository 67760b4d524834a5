// Each baseline against cases computed by hand from its published algorithm (DESIGN §1).
#include "splitkv/heuristics/baseline_policies.hpp"

#include <gtest/gtest.h>

namespace splitkv::heuristics {
namespace {

DecodeShape shape(int batch, int num_heads, int num_kv_heads, int head_dim, int context_len, int capacity,
                  int page_size = 0) {
  DecodeShape d;
  d.batch = batch;
  d.num_heads = num_heads;
  d.num_kv_heads = num_kv_heads;
  d.head_dim = head_dim;
  d.context_len = context_len;
  d.capacity_tokens = capacity;
  d.page_size = page_size;
  d.num_sms = 132;
  return d;
}

TEST(Fa2, SmallBatchLongSequence) {
  // batch 1 x 8 kv heads = 8 work items (group 4 folds into one M block); FA2 passes
  // 2 x 132 = 264 "SMs"; 8 < 0.8 x 264. block_n = 128 at d=128, so n_blocks = 8192/128 = 64
  // and max_splits = min(128, 264, 64) = 64. Eligible s (ceil(64/s) changes): 1..8, 10, 11,
  // 13, 16, 22, 32, 64. eff(s) = (8s/264) / ceil(8s/264) = s/33 for s <= 33: the best
  // eligible are 32 (0.9697) and 64 (1.939 waves -> 0.9697). 0.85 x 0.9697 = 0.824 needs
  // s >= 27.2: the first eligible such s is 32.
  EXPECT_EQ(fa2_num_splits_heuristic(8, 264, 64, 128), 32);
  EXPECT_EQ(fa2_num_splits(shape(1, 32, 8, 128, 8192, 8192), 8192), 32);
}

TEST(Fa2, TwoSequences) {
  // 16 work items: eff(s) = s/16.5. 0.85 x 0.9697 = 0.824 needs s >= 13.6; 14 and 15 are not
  // eligible (ceil(64/14) = ceil(64/13) = 5, ceil(64/15) = ceil(64/14) = 5); 16 is.
  EXPECT_EQ(fa2_num_splits(shape(2, 32, 8, 128, 8192, 8192), 8192), 16);
}

TEST(Fa2, CapacityInsteadOfRealLength) {
  // seqlen_k = 131072: n_blocks = 1024, max_splits = 128. Best eff 0.9697 (s = 32, 64, 128);
  // s >= 27.2 again, and 28 is eligible (ceil(1024/28) = 37 != ceil(1024/27) = 38): 28.
  const DecodeShape d = shape(1, 32, 8, 128, 8192, 131072);
  EXPECT_EQ(fa2_num_splits(d, d.capacity_tokens), 28);
  // Its kernel cuts the capacity: 2048 tiles / 28 = 74 tiles per split; the 128 real tiles
  // span ceil(128 / 74) = 2 of them. That is what it really runs with.
  EXPECT_EQ(capacity_chunks_with_work(131072, 8192, 28), 2);
  EXPECT_EQ(capacity_chunks_with_work(8192, 8192, 32), 32);  // capacity = length: all work
  EXPECT_EQ(capacity_chunks_with_work(131072, 100, 28), 1);
}

TEST(Fa2, EnoughWorkMeansOneSplit) {
  // 32 x 8 = 256 >= 0.8 x 264 = 211.2.
  EXPECT_EQ(fa2_num_splits(shape(32, 32, 8, 128, 8192, 8192), 8192), 1);
  // 26 x 8 = 208 < 211.2 still splits.
  EXPECT_GT(fa2_num_splits(shape(26, 32, 8, 128, 8192, 8192), 8192), 1);
}

TEST(Fa2, BlockSizes) {
  EXPECT_EQ(fa2_block_n(64), 256);
  EXPECT_EQ(fa2_block_n(128), 128);
  EXPECT_EQ(fa2_block_n(256), 64);
  // d = 256: n_blocks = 128; s >= 27.2, but 28..31 all give ceil(128/s) = 5: not eligible; 32.
  EXPECT_EQ(fa2_num_splits(shape(1, 32, 8, 256, 8192, 8192), 8192), 32);
}

TEST(Fa3, DynamicSplitsFromRealLengths) {
  // d=128 contiguous: kBlockN 176. Static bound (batch pretended 1): 8 m-blocks,
  // n_blocks = ceil(8192/176) = 47, max_splits 47, eff(s) = 8s/132 / ceil(.); s = 33 gives
  // exactly 2 waves (eff 1.0); 0.85 needs s >= 14.03: static = 15.
  const DecodeShape d = shape(4, 32, 8, 128, 8192, 8192);
  EXPECT_EQ(fa3_static_num_splits(d), 15);
  // Prepare kernel: total_blocks = 4 x 47 = 188; blocks_per_sm = ceil(188 x 1.1 x 8 / 132)
  // = ceil(12.53) = 13; splits = ceil(47 / 13) = 4.
  EXPECT_EQ(fa3_dynamic_num_splits(d), 4);
}

TEST(Fa3, CapacityOnlyMovesTheStaticBound) {
  // Capacity 131072: n_blocks = 745, max_splits = 128, still 15; the per-sequence rule reads
  // the real lengths, so the answer stays 4.
  const DecodeShape d = shape(4, 32, 8, 128, 8192, 131072);
  EXPECT_EQ(fa3_static_num_splits(d), 15);
  EXPECT_EQ(fa3_dynamic_num_splits(d), 4);
}

TEST(Fa3, ShortSequencesAndPagedTiles) {
  // 512 tokens: n_blocks = ceil(512/176) = 3 <= 4: one split.
  EXPECT_EQ(fa3_dynamic_num_splits(shape(1, 32, 8, 128, 512, 512)), 1);
  // Paged decode uses kBlockN 128 at d=128: n_blocks = 512 at 65536 tokens; static 15;
  // blocks_per_sm = ceil(512 x 1.1 x 8 / 132) = 35; ceil(512/35) = 15.
  EXPECT_EQ(fa3_tile_size_sm90(128, true).block_n, 128);
  EXPECT_EQ(fa3_tile_size_sm90(128, false).block_n, 176);
  EXPECT_EQ(fa3_tile_size_sm90(64, false).block_n, 192);
  EXPECT_EQ(fa3_tile_size_sm90(256, false).block_n, 80);
  EXPECT_EQ(fa3_dynamic_num_splits(shape(1, 32, 8, 128, 65536, 65536, 16)), 15);
}

TEST(Fa3, L2RuleOnlyForManyQueryBlocks) {
  // >= 0.8 x SMs work: 1 split, unless one KV head exceeds 50 MiB and there are >= 2 x SMs
  // query blocks (prefill), then ceil(size / 50 MiB).
  EXPECT_EQ(fa3_num_splits_heuristic(200, 132, 1000, 1, std::int64_t(200) << 20, false, 128), 1);
  EXPECT_EQ(fa3_num_splits_heuristic(300, 132, 1000, 300, std::int64_t(120) << 20, false, 128), 3);
  EXPECT_EQ(fa3_num_splits_heuristic(300, 132, 1000, 300, std::int64_t(120) << 20, true, 128), 1);
}

TEST(FlashInfer, OneResidentWave) {
  // d=128: 2 CTAs/SM x 132 = 264 slots; 4 x 8 = 32 < 264. Page 16: 512 pages per sequence,
  // min chunk 128/16 = 8 pages. Smallest chunk c with 4 x ceil(512/c) x 8 <= 264, i.e.
  // ceil(512/c) <= 8: c = 64 pages, so 512/64 = 8 splits.
  EXPECT_EQ(flashinfer_chunk_pages(264, 8, {512, 512, 512, 512}, 8), std::make_pair(64, 32));
  EXPECT_EQ(flashinfer_num_splits(shape(4, 32, 8, 128, 8192, 8192, 16)), 8);
  // d=256: 1 CTA/SM, 132 slots: ceil(512/c) <= 4 -> c = 128 pages -> 4 splits.
  EXPECT_EQ(flashinfer_ctas_per_sm(256), 1);
  EXPECT_EQ(flashinfer_num_splits(shape(4, 32, 8, 256, 8192, 8192, 16)), 4);
}

TEST(FlashInfer, FullGridOrShortSequencesDoNotSplit) {
  EXPECT_EQ(flashinfer_num_splits(shape(40, 32, 8, 128, 8192, 8192, 16)), 1);  // 320 >= 264
  // Contiguous is planned in 1-token pages: 100 tokens < the 128-token minimum chunk.
  EXPECT_EQ(flashinfer_num_splits(shape(1, 32, 8, 128, 100, 100)), 1);
  // Contiguous 8192: c >= 128 tokens with ceil(8192/c) x 8 <= 264 -> ceil(8192/c) <= 33 ->
  // c = 249 (ceil(8192/249) = 33; 248 gives 34): 33 splits.
  EXPECT_EQ(flashinfer_num_splits(shape(1, 32, 8, 128, 8192, 8192)), 33);
}

TEST(Vllm, V1OrV2) {
  // 4096 tokens: 8 partitions; 8 seqs x 32 heads = 256 <= 512 -> V2 with 8 partitions.
  EXPECT_FALSE(vllm_uses_v1(4096, 8, 32));
  EXPECT_EQ(vllm_num_splits(shape(8, 32, 8, 128, 4096, 4096)), 8);
  // 32 x 32 = 1024 > 512 -> V1.
  EXPECT_TRUE(vllm_uses_v1(4096, 32, 32));
  EXPECT_EQ(vllm_num_splits(shape(32, 32, 8, 128, 4096, 4096)), 1);
  // One partition -> V1 whatever the batch.
  EXPECT_EQ(vllm_num_splits(shape(1, 32, 8, 128, 512, 512)), 1);
  // Past 8192 tokens always V2: 16384 / 512 = 32 partitions, even with a large batch.
  EXPECT_EQ(vllm_num_splits(shape(64, 32, 8, 128, 16384, 16384)), 32);
  EXPECT_EQ(vllm_num_splits(shape(1, 32, 8, 128, 131072, 131072)), 256);
  // Real length, not capacity: a 131072-slot cache with 1000 tokens is 2 partitions.
  EXPECT_EQ(vllm_num_splits(shape(1, 32, 8, 128, 1000, 131072)), 2);
}

}  // namespace
}  // namespace splitkv::heuristics
