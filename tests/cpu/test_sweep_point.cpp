#include "splitkv/tuner/sweep_point.hpp"

#include <gtest/gtest.h>

namespace splitkv::tuner {
namespace {

SweepPoint gqa_point() {
  SweepPoint p;
  p.layout = KvLayout::contiguous;
  p.dtype = DType::bf16;
  p.batch = 8;
  p.num_heads = 32;
  p.num_kv_heads = 8;
  p.head_dim = 128;
  p.context_len = 8192;
  p.cache_capacity = 131072;
  p.num_splits = 4;
  return p;
}

TEST(SweepPoint, KeysAreStableAndReadable) {
  SweepPoint p = gqa_point();
  EXPECT_EQ(p.key(), "contiguous bf16 b8 h32/8 d128 L8192 C131072 fixed s4");
  EXPECT_EQ(p.shape_key(), "contiguous bf16 b8 h32/8 d128 L8192 C131072 fixed");
  p.layout = KvLayout::paged;
  p.page_size = 16;
  p.dtype = DType::fp16;
  EXPECT_EQ(p.key(), "paged16 fp16 b8 h32/8 d128 L8192 C131072 fixed s4");
}

TEST(SweepPoint, EqualityCoversEveryField) {
  const SweepPoint a = gqa_point();
  SweepPoint b = a;
  EXPECT_EQ(a, b);
  b.cache_capacity = 8192;
  EXPECT_NE(a, b);
  b = a;
  b.num_splits = 8;
  EXPECT_NE(a, b);
}

TEST(SweepPoint, KvBytesCountRealLengthKAndV) {
  const SweepPoint p = gqa_point();
  EXPECT_EQ(p.kv_bytes(), 2ll * 8 * 8192 * 8 * 128 * 2);  // 268435456
  EXPECT_EQ(p.kv_tiles(), 128);
  SweepPoint short_point = p;
  short_point.context_len = 65;
  EXPECT_EQ(short_point.kv_tiles(), 2);
}

TEST(SweepPoint, ContiguousFootprintAllocatesCapacity) {
  SweepPoint p = gqa_point();
  p.num_splits = 1;
  const std::int64_t cache = 8ll * 131072 * 2 * 8 * 128 * 2;
  const std::int64_t q_out = 2ll * 8 * 32 * 128 * 2;
  const std::int64_t lse_and_lengths = 8ll * 32 * 4 + 8 * 4;
  EXPECT_EQ(p.workspace_bytes(), 0);
  EXPECT_EQ(p.footprint_bytes(), cache + q_out + lse_and_lengths);
  p.num_splits = 4;
  EXPECT_EQ(p.workspace_bytes(), 8ll * 32 * 4 * (128 + 1) * 4);
  EXPECT_EQ(p.footprint_bytes(), cache + q_out + lse_and_lengths + p.workspace_bytes());
}

TEST(SweepPoint, PagedFootprintHoldsRealPagesAndACapacityWideBlockTable) {
  SweepPoint p = gqa_point();
  p.layout = KvLayout::paged;
  p.page_size = 16;
  p.context_len = 1000;  // 63 pages, the last one partly used
  p.num_splits = 1;
  EXPECT_EQ(p.pages_per_sequence(), 63);
  EXPECT_EQ(p.block_table_width(), 131072 / 16);
  const std::int64_t pages = 8ll * 63 * 16 * 2 * 8 * 128 * 2;
  const std::int64_t table = 8ll * 8192 * 4;
  const std::int64_t q_out = 2ll * 8 * 32 * 128 * 2 + 8ll * 32 * 4 + 8 * 4;
  EXPECT_EQ(p.footprint_bytes(), pages + table + q_out);

  const DecodeParams params = p.to_decode_params();
  EXPECT_EQ(params.layout, KvLayout::paged);
  EXPECT_EQ(params.page_size, 16);
  EXPECT_EQ(params.max_pages_per_seq, 8192);
  EXPECT_EQ(params.num_pages, 8 * 63);
  EXPECT_EQ(params.capacity_tokens(), 131072);
  EXPECT_EQ(params.group_size(), 4);
}

TEST(SweepPoint, RotatingCopiesReachTheL2MultipleWithinTheBudget) {
  SweepPoint p = gqa_point();
  p.context_len = 1024;
  p.cache_capacity = 1024;
  p.num_splits = 1;
  const std::int64_t l2 = 60ll << 20;
  const std::int64_t per_launch = p.working_set_bytes();
  const int copies = rotating_copies(p, l2, 3.0, 100'000'000'000);
  EXPECT_GE(double(copies) * double(per_launch), 3.0 * double(l2));
  EXPECT_LT(double(copies - 1) * double(per_launch), 3.0 * double(l2));
  // The budget caps it: only two buffer sets fit.
  EXPECT_EQ(rotating_copies(p, l2, 3.0, 2 * p.footprint_bytes() + 1), 2);
  EXPECT_EQ(rotating_copies(p, l2, 3.0, 100'000'000'000, 5), 5);
  // No L2 known, or a working set far beyond it: one set.
  EXPECT_EQ(rotating_copies(p, 0, 3.0, 100'000'000'000), 1);
  p.context_len = p.cache_capacity = 131072;
  EXPECT_EQ(rotating_copies(p, l2, 3.0, 100'000'000'000), 1);
}

TEST(SweepPoint, NamesRoundTrip) {
  for (KvLayout layout : {KvLayout::contiguous, KvLayout::paged}) {
    EXPECT_EQ(parse_layout(to_string(layout)), layout);
  }
  for (DType dtype : {DType::bf16, DType::fp16}) EXPECT_EQ(parse_dtype(to_string(dtype)), dtype);
  EXPECT_EQ(parse_length_distribution("fixed"), LengthDistribution{});
  EXPECT_FALSE(parse_layout("Paged").has_value());
  EXPECT_FALSE(parse_dtype("fp8").has_value());
}

}  // namespace
}  // namespace splitkv::tuner
